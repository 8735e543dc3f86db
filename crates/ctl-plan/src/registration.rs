//! `origin forget`'s planner: the registration record of an origin deleted (so that
//! `rebalance` no longer drains it when its key vanishes), guarded on the record as read,
//! with an audit record of who forgot it, when and why. It moves no load.

use serde_json::json;

use crate::Error;
use crate::capacity::check_reason;
use crate::drain::check_origin_name;
use crate::keys::Layout;
use crate::model::{Changes, Entry};

/// Who forgets which origin, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgetRequest {
    /// The origin.
    pub origin: String,
    /// Why (`--reason`), kept in the audit record.
    pub reason: Option<String>,
    /// Who.
    pub by: String,
    /// When (RFC 3339).
    pub at: String,
}

/// The audit record's key of `request` under `layout`'s control prefix.
pub fn forget_audit_key(layout: &Layout, request: &ForgetRequest) -> String {
    format!(
        "{}{}-origin-forget-{}",
        layout.audits(),
        request.at,
        request.origin
    )
}

/// Deletes `request.origin`'s registration record (`registration`, as read: `None` when
/// there is none, refused as not found), guarded on its `mod_revision`, and writes the
/// audit record ([`forget_audit_key`]: action, origin, by, at, reason, the record deleted).
pub fn plan_forget(
    layout: &Layout,
    registration: Option<&Entry>,
    request: &ForgetRequest,
) -> Result<Changes, Error> {
    check_origin_name("id", &request.origin)?;
    if let Some(reason) = &request.reason {
        check_reason("reason", reason).map_err(|error| Error::Invalid(vec![error]))?;
    }
    let Some(registration) = registration else {
        return Err(Error::NotFound(format!(
            "no registered origin `{}`",
            request.origin
        )));
    };
    let mut changes = Changes::default();
    changes
        .forget_registrations
        .insert(request.origin.clone(), registration.mod_revision);
    let record = json!({
        "action": "origin-forget",
        "origin": request.origin,
        "by": request.by,
        "at": request.at,
        "reason": request.reason,
        "registration": String::from_utf8_lossy(&registration.raw),
        "registration_mod_revision": registration.mod_revision,
    });
    changes
        .audit
        .insert(forget_audit_key(layout, request), record.to_string());
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(origin: &str) -> ForgetRequest {
        ForgetRequest {
            origin: origin.into(),
            reason: Some("decommissioned".into()),
            by: "alice".into(),
            at: "2026-12-06T00:00:00Z".into(),
        }
    }

    #[test]
    fn a_registration_is_deleted_on_its_revision_and_audited() {
        let layout = Layout::new("/dw/routing/", "/dw/control/").unwrap();
        let entry = Entry {
            raw: b"{\"lease\":42}".to_vec(),
            mod_revision: 9,
        };
        let changes = plan_forget(&layout, Some(&entry), &request("fra-a")).unwrap();
        assert!(!changes.is_empty());
        assert_eq!(changes.forget_registrations["fra-a"], 9);
        let key = "/dw/control/audit/2026-12-06T00:00:00Z-origin-forget-fra-a";
        let record: serde_json::Value = serde_json::from_str(&changes.audit[key]).unwrap();
        assert_eq!(record["action"], "origin-forget");
        assert_eq!(record["reason"], "decommissioned");
        assert_eq!(record["by"], "alice");
        assert_eq!(record["registration"], "{\"lease\":42}");
        // Routing, drains, capacities: untouched.
        assert!(changes.regions.is_empty() && changes.drains.is_empty());
        assert!(changes.capacities.is_empty() && changes.policy.is_none());
    }

    #[test]
    fn an_origin_never_registered_is_not_found_and_bad_input_is_invalid() {
        let layout = Layout::new("/dw/routing/", "/dw/control/").unwrap();
        assert!(matches!(
            plan_forget(&layout, None, &request("fra-a")),
            Err(Error::NotFound(_))
        ));
        let entry = Entry {
            raw: Vec::new(),
            mod_revision: 1,
        };
        assert!(matches!(
            plan_forget(&layout, Some(&entry), &request("a/b")),
            Err(Error::Invalid(_))
        ));
        let long = ForgetRequest {
            reason: Some("x".repeat(crate::capacity::MAX_REASON_BYTES + 1)),
            ..request("fra-a")
        };
        assert!(matches!(
            plan_forget(&layout, Some(&entry), &long),
            Err(Error::Invalid(_))
        ));
    }
}

//! `drain --repair`: a malformed drain record removed in one transaction guarded on the
//! record read, with an audit record of what was removed.

use serde_json::{Value, json};

use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::{RecordWrite, write};
use crate::ops::key::read_entry;
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain_record::DrainRecord;

/// How much of the removed value the audit record keeps (the whole value stays in etcd's
/// history until compaction).
pub const AUDIT_VALUE_BYTES: usize = 64 * 1024;

/// A malformed drain record removed.
pub struct Repaired {
    /// The revision of the transaction.
    pub revision: i64,
    /// The drain record's key.
    pub key: String,
    /// Why the record does not parse.
    pub malformed: String,
    /// Where the audit record was written.
    pub audit_key: String,
    /// The audit record.
    pub audit: Value,
}

/// Removes the drain record of `origin` if (and only if) it does not parse, writing an
/// audit record with `reason`; not found without one, failed for a valid one, a conflict
/// when it changed since it was read.
pub async fn repair(context: &Context, origin: &str, reason: &str) -> Result<Repaired, Error> {
    let key = context.layout.drain(origin);
    let mut client = context.etcd.connect().await?;
    let Some(current) = read_entry(&mut client, &key).await? else {
        return Err(Error::NotFound(format!(
            "drain record of `{origin}` ({key})"
        )));
    };
    let malformed = match DrainRecord::parse(origin, &current.raw) {
        Ok(_) => {
            return Err(Error::Failed(format!(
                "the drain record of {origin} is valid: nothing to repair (`dwctl restore \
                 {origin}` gives its regions back)"
            )));
        }
        Err(error) => error.to_string(),
    };
    let at = now_rfc3339();
    let kept = current.raw.len().min(AUDIT_VALUE_BYTES);
    let audit = json!({
        "action": "drain-repair",
        "origin": origin,
        "key": key,
        "by": operator(),
        "at": at,
        "reason": reason,
        "malformed": malformed,
        "removed": {
            "mod_revision": current.mod_revision,
            "bytes": current.raw.len(),
            "value": String::from_utf8_lossy(&current.raw[..kept]),
            "truncated": kept < current.raw.len(),
        },
    });
    let audit_key = format!(
        "{}{}-drain-repair-{origin}-{}",
        context.layout.audits(),
        at,
        current.mod_revision
    );
    let repair = RecordWrite::new()
        .guard(&key, current.mod_revision)
        .guard(&audit_key, 0)
        .delete(&key)
        .put(&audit_key, audit.to_string());
    let Some(revision) = write(&mut client, repair).await? else {
        return Err(Error::Conflict { attempts: 1 });
    };
    Ok(Repaired {
        revision,
        key,
        malformed,
        audit_key,
        audit,
    })
}

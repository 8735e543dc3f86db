//! `drain --repair`: remove a malformed drain record, leaving an audit record of it.

use serde_json::json;

use crate::cli::DrainArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::{RecordWrite, write};
use crate::output::{Outcome, Shown};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain_record::DrainRecord;

/// How much of the removed value the audit record keeps (the whole value stays in etcd's
/// history until compaction).
const AUDIT_VALUE_BYTES: usize = 64 * 1024;

/// Runs `dwctl drain --repair ORIGIN`.
pub async fn run(context: &Context, args: &DrainArgs) -> Result<Outcome, Error> {
    let origin = args.origin.as_str();
    crate::plan::drain::check_origin_name("origin", origin)?;
    let key = context.layout.drain(origin);
    let mut client = context.etcd.connect().await?;
    let current = client.get(key.as_str(), None).await?;
    let Some(kv) = current.kvs().first() else {
        return Err(Error::NotFound(format!(
            "drain record of `{origin}` ({key})"
        )));
    };
    let why = match DrainRecord::parse(origin, kv.value()) {
        Ok(_) => {
            return Err(Error::Failed(format!(
                "the drain record of {origin} is valid: nothing to repair (`dwctl restore \
                 {origin}` gives its regions back)"
            )));
        }
        Err(error) => error.to_string(),
    };
    let at = now_rfc3339();
    let kept = kv.value().len().min(AUDIT_VALUE_BYTES);
    let audit = json!({
        "action": "drain-repair",
        "origin": origin,
        "key": key,
        "by": operator(),
        "at": at,
        "reason": args.reason,
        "malformed": why,
        "removed": {
            "mod_revision": kv.mod_revision(),
            "bytes": kv.value().len(),
            "value": String::from_utf8_lossy(&kv.value()[..kept]),
            "truncated": kept < kv.value().len(),
        },
    });
    let audit_key = format!(
        "{}{}-drain-repair-{origin}-{}",
        context.layout.audits(),
        at,
        kv.mod_revision()
    );
    let repair = RecordWrite::new()
        .guard(&key, kv.mod_revision())
        .guard(&audit_key, 0)
        .delete(&key)
        .put(&audit_key, audit.to_string());
    let Some(revision) = write(&mut client, repair).await? else {
        return Err(Error::Conflict { attempts: 1 });
    };
    Ok(Outcome {
        text: format!(
            "drain --repair {}: committed at revision {revision}\n- drain record {} ({})\n+ audit record {}\nnote: no region was changed; check them with `dwctl region list`",
            Shown(origin),
            Shown(origin),
            Shown(&why),
            Shown(&audit_key)
        ),
        json: json!({
            "dry_run": false,
            "revision": revision,
            "removed": key,
            "audit_key": audit_key,
            "audit": audit,
        }),
    })
}

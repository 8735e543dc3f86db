//! `history` (a key's past values, from etcd's MVCC history until compaction) and
//! `rollback` (put a key back to its value at a past revision, guarded). The reads are
//! `ops::history`'s, the plan `crate::plan::rollback`'s.

use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use crate::ops::run::WriteGuard;
use crate::output::{Outcome, Shown};
use crate::plan::drain_record::DrainRecord;
use crate::plan::rollback::RollbackKey;

/// Runs `dwctl history KEY`: the key's changes still in etcd's history, oldest first.
pub async fn history(context: &Context, key: &str) -> Result<Outcome, Error> {
    let key = context.layout.resolve(key);
    let (entries, compacted) = crate::ops::history::history(context, &key).await?;
    // A drain record that does not parse is named as such: it blocks its origin's
    // commands until `dwctl drain --repair`.
    let drain_origin = key.strip_prefix(&context.layout.drains());
    let malformed = |value: &str| {
        drain_origin
            .and_then(|origin| DrainRecord::parse(origin, value.as_bytes()).err())
            .map(|error| {
                format!(
                    "\n          MALFORMED DRAIN RECORD: {}",
                    Shown(&error.to_string())
                )
            })
            .unwrap_or_default()
    };
    let mut lines: Vec<String> = entries
        .iter()
        .map(|entry| match &entry.value {
            Some(value) => format!(
                "{:>8}  put     {}{}",
                entry.revision,
                Shown(value),
                malformed(value)
            ),
            None => format!("{:>8}  delete", entry.revision),
        })
        .collect();
    if entries.is_empty() {
        lines.push(format!("no history for {}", Shown(&key)));
    }
    if let Some(revision) = compacted {
        lines.insert(
            0,
            format!("(history before revision {revision} was compacted)"),
        );
    }
    Ok(Outcome {
        text: lines.join("\n"),
        json: json!({"key": key, "compacted": compacted, "history": entries}),
    })
}

/// Runs `dwctl rollback KEY --to-revision N` (keys and plan: `crate::plan::rollback`).
pub async fn rollback(
    context: &Context,
    key: &str,
    revision: i64,
    dry_run: bool,
    guard: &WriteGuard,
) -> Result<Outcome, Error> {
    if revision <= 0 {
        return Err(Error::Usage(
            "--to-revision must be a positive revision".into(),
        ));
    }
    let key = context.layout.resolve(key);
    let target = RollbackKey::of(&context.layout, &key).map_err(Error::Usage)?;
    crate::ops::history::rollback(context, &key, target, revision, dry_run, guard).await
}

//! `drain --repair`: remove a malformed drain record, leaving an audit record of it (the
//! read and the transaction are `ops::repair`'s).

use serde_json::json;

use crate::cli::DrainArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::repair::{Repaired, repair};
use crate::output::{Outcome, Shown};

/// Runs `dwctl drain --repair ORIGIN`.
pub async fn run(context: &Context, args: &DrainArgs) -> Result<Outcome, Error> {
    let origin = args.origin.as_str();
    crate::plan::drain::check_origin_name("origin", origin)?;
    let Repaired {
        revision,
        key,
        malformed,
        audit_key,
        audit,
    } = repair(context, origin, &args.reason).await?;
    Ok(Outcome {
        text: format!(
            "drain --repair {}: committed at revision {revision}\n- drain record {} ({})\n+ audit record {}\nnote: no region was changed; check them with `dwctl region list`",
            Shown(origin),
            Shown(origin),
            Shown(&malformed),
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

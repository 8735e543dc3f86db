//! `policy get|set`.

use serde_json::{Value, json};

use crate::cli::PolicyCommand;
use crate::context::Context;
use crate::error::Error;
use crate::input::read_input;
use crate::ops::commit::Changes;
use crate::ops::one_shot::{read_state, run_plan};
use crate::output::{Outcome, Shown};
use crate::plan::policy_geos::unkeyed_policy_geos_note;
use crate::plan::value::PolicyValue;

/// Runs `dwctl policy get|set`.
pub async fn run(context: &Context, command: PolicyCommand) -> Result<Outcome, Error> {
    let set_raw = match &command {
        PolicyCommand::Set { value, file, .. } => Some(read_input(
            value.as_deref(),
            file.as_deref(),
            "policy value",
        )?),
        PolicyCommand::Get => None,
    };
    match command {
        PolicyCommand::Get => {
            let state = read_state(context).await?;
            Ok(match &state.policy {
                None => Outcome {
                    text: "no policy: the defaults apply (default US, no failover, legacy pick)"
                        .into(),
                    json: json!({"exists": false}),
                },
                Some(entry) => {
                    let raw = String::from_utf8_lossy(&entry.raw).into_owned();
                    let error = PolicyValue::from_stored(&entry.raw)
                        .err()
                        .map(|error| error.to_string());
                    Outcome {
                        text: format!(
                            "{}\nmod_revision {}{}",
                            Shown(&raw),
                            entry.mod_revision,
                            error
                                .as_ref()
                                .map(|error| {
                                    format!("\nINVALID (the defaults apply): {}", Shown(error))
                                })
                                .unwrap_or_default()
                        ),
                        json: json!({
                            "exists": true, "valid": error.is_none(), "error": error,
                            "value": serde_json::from_slice::<Value>(&entry.raw).unwrap_or(Value::from(raw)),
                            "mod_revision": entry.mod_revision,
                        }),
                    }
                }
            })
        }
        PolicyCommand::Set { predict, .. } => {
            let raw = set_raw.unwrap_or_default();
            let policy = PolicyValue::for_write(&raw).map_err(Error::Invalid)?;
            let guard = predict.to_guard();
            run_plan(context, "policy set", false, &guard, |state| {
                let mut changes = Changes {
                    policy: Some(policy.clone()),
                    ..Changes::default()
                };
                changes
                    .notes
                    .extend(unkeyed_policy_geos_note(state, &changes));
                Ok(changes)
            })
            .await
        }
    }
}

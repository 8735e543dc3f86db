//! `dwctl auth`: prints the roles of every component and, with `--apply`, makes etcd's
//! roles and users match them (the roles themselves, as data, are `crate::plan::roles`;
//! reading and changing them, and the new users' password files, `ops::auth`).

use serde_json::{Value, json};

use crate::cli::AuthArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::auth::{Applied, apply};
use crate::output::{Outcome, Shown};
use crate::plan::roles::{Grant, RoleSpec, Step, wanted_roles};

/// Runs `dwctl auth`.
pub async fn run(context: &Context, args: AuthArgs) -> Result<Outcome, Error> {
    let wanted = wanted_roles(&context.layout, &args.nodes, &args.origins)?;
    if !args.apply {
        return Ok(print_roles(&wanted));
    }
    let Applied { steps, files } =
        apply(context, &wanted, args.password_dir.as_deref(), args.dry_run).await?;
    let lines: Vec<String> = steps
        .iter()
        .map(|step| Shown(&step.describe()).to_string())
        .collect();
    let json_steps: Vec<Value> = steps.iter().map(step_json).collect();
    if args.dry_run {
        let text = if steps.is_empty() {
            "nothing to change".to_owned()
        } else {
            format!("would change (dry run):\n  {}", lines.join("\n  "))
        };
        return Ok(Outcome {
            text,
            json: json!({"dry_run": true, "steps": json_steps, "changed": false}),
        });
    }
    let mut text = if steps.is_empty() {
        "nothing to change: every role, grant and user is in place".to_owned()
    } else {
        format!("changed:\n  {}", lines.join("\n  "))
    };
    for (user, path) in &files {
        text.push_str(&format!(
            "\npassword of {} is in {}",
            Shown(user),
            Shown(&path.display().to_string())
        ));
    }
    Ok(Outcome {
        text,
        json: json!({
            "dry_run": false,
            "changed": !steps.is_empty(),
            "steps": json_steps,
            "password_files": files.iter().map(|(user, path)| json!({"user": user, "path": path})).collect::<Vec<_>>(),
        }),
    })
}

/// The roles, for the terminal and as JSON.
fn print_roles(wanted: &[RoleSpec]) -> Outcome {
    let mut text = String::new();
    let mut rows = Vec::new();
    for role in wanted {
        text.push_str(&format!(
            "{} (user {0}; {})\n",
            Shown(&role.name),
            Shown(&role.runs)
        ));
        for grant in &role.grants {
            text.push_str(&format!("  {}\n", Shown(&grant.describe())));
        }
        rows.push(json!({
            "role": role.name,
            "user": role.name,
            "runs": role.runs,
            "grants": role.grants.iter().map(grant_json).collect::<Vec<_>>(),
        }));
    }
    text.push_str("(printed only: --apply makes them)");
    Outcome {
        text,
        json: json!({"roles": rows}),
    }
}

fn grant_json(grant: &Grant) -> Value {
    json!({
        "access": grant.access.name(),
        "key": String::from_utf8_lossy(&grant.key),
        "range_end": String::from_utf8_lossy(&grant.range_end),
        "text": grant.describe(),
    })
}

fn step_json(step: &Step) -> Value {
    let (action, fields) = match step {
        Step::AddRole(role) => ("add-role", json!({"role": role})),
        Step::Grant(role, grant) => ("grant", json!({"role": role, "grant": grant_json(grant)})),
        Step::Revoke(role, grant, why) => (
            "revoke",
            json!({"role": role, "grant": grant_json(grant), "why": why}),
        ),
        Step::AddUser(user) => ("add-user", json!({"user": user})),
        Step::GrantRole(user, role) => ("grant-role", json!({"user": user, "role": role})),
        Step::RevokeRole(user, role) => ("revoke-role", json!({"user": user, "role": role})),
    };
    let mut fields = fields;
    fields["action"] = Value::from(action);
    fields["text"] = Value::from(step.describe());
    fields
}

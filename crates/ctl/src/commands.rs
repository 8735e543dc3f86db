//! The one-shot commands: read etcd, plan, write one guarded transaction, report.

use std::io::Read;

use serde_json::{Value, json};

use crate::apply::{FileFormat, parse_desired, plan_apply};
use crate::cli::{
    ApplyArgs, Cli, Command, DrainArgs, GlobalArgs, OutputFormat, PolicyCommand, RegionCommand,
    RegionSetArgs, RestoreArgs,
};
use crate::clock::{now_rfc3339, operator};
use crate::drain::{DrainRequest, plan_drain, plan_restore};
use crate::error::Error;
use crate::etcd::Layout;
use crate::output::{Outcome, Reporter, render_changes};
use crate::record::SOURCE_CLI;
use crate::shutdown::Shutdown;
use crate::state::{Changes, Committed, RetryPolicy, State, preview, read_state, transact};
use crate::value::{PolicyValue, RegionValue};

/// What every command needs: how to reach etcd, where the keys are, how to retry.
#[derive(Debug, Clone)]
pub struct Context {
    pub etcd: dw_etcd::EtcdOptions,
    pub layout: Layout,
    pub retry: RetryPolicy,
    pub output: OutputFormat,
}

impl Context {
    pub fn from_args(global: &GlobalArgs) -> Result<Context, Error> {
        Ok(Context {
            etcd: global.etcd.clone().into_options()?,
            layout: Layout::new(&global.prefix, &global.control_prefix)?
                .with_nodes(&global.nodes_prefix)?,
            retry: RetryPolicy {
                attempts: global.retries,
                ..RetryPolicy::default()
            },
            output: global.output,
        })
    }

    pub fn reporter(&self) -> Reporter {
        Reporter {
            format: self.output,
        }
    }
}

/// Runs one parsed command line to its outcome.
pub async fn run_command(cli: Cli, shutdown: Shutdown) -> Result<Outcome, Error> {
    let context = Context::from_args(&cli.global)?;
    let wait = cli.command.wait();
    let outcome = run_one(&context, cli.command, shutdown).await?;
    match (wait, outcome.json["revision"].as_i64()) {
        // Only a write that committed has something to wait for (not a dry run, not
        // "nothing to change").
        (Some(wait), Some(revision)) if outcome.json["dry_run"] != Value::Bool(true) => {
            crate::fleet::wait_after(&context, outcome, revision, wait).await
        }
        _ => Ok(outcome),
    }
}

async fn run_one(
    context: &Context,
    command: Command,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    match command {
        Command::Status(args) => {
            let selector = crate::fleet::parse_selector(&args.labels)?;
            crate::fleet::status(context, &selector).await
        }
        Command::Region(command) => region(context, command).await,
        Command::Policy(command) => policy(context, command).await,
        Command::Apply(args) => apply(context, args).await,
        Command::Drain(args) => drain(context, args).await,
        Command::Restore(args) => restore(context, args).await,
        Command::Origin(command) => crate::origin::command(context, command, shutdown).await,
        Command::Rebalance => crate::rebalance::command(context, shutdown).await,
        Command::Health(args) => crate::health::command(context, args, shutdown).await,
        Command::History(args) => crate::history::history(context, &args.etcd_key).await,
        Command::Rollback(args) => {
            crate::history::rollback(context, &args.etcd_key, args.to_revision, args.dry_run).await
        }
    }
}

async fn region(context: &Context, command: RegionCommand) -> Result<Outcome, Error> {
    // Arguments are checked before etcd is contacted: a usage error is exit 2 whether or
    // not etcd is reachable.
    let set_value = match &command {
        RegionCommand::Set(args) => {
            check_geo(&args.geo)?;
            Some(region_input(args)?)
        }
        _ => None,
    };
    let mut client = context.etcd.connect().await?;
    match command {
        RegionCommand::Get { geo } => {
            let state = read_state(&mut client, &context.layout).await?;
            let entry = state.regions.get(&geo).ok_or_else(|| {
                Error::NotFound(format!("region `{geo}` ({})", context.layout.region(&geo)))
            })?;
            let row = region_row(&geo, &entry.raw, entry.mod_revision);
            let text = format!(
                "{}\nmod_revision {}{}",
                String::from_utf8_lossy(&entry.raw),
                entry.mod_revision,
                row["error"]
                    .as_str()
                    .map(|error| format!("\nINVALID: {error}"))
                    .unwrap_or_default()
            );
            Ok(Outcome { text, json: row })
        }
        RegionCommand::List => {
            let state = read_state(&mut client, &context.layout).await?;
            let rows: Vec<Value> = state
                .regions
                .iter()
                .map(|(geo, entry)| region_row(geo, &entry.raw, entry.mod_revision))
                .collect();
            let text = rows
                .iter()
                .map(|row| {
                    let geo = row["geo"].as_str().unwrap_or_default();
                    match row["error"].as_str() {
                        Some(error) => format!("{geo:<6} INVALID: {error}"),
                        None => {
                            let value = &row["value"];
                            let weights: Vec<String> = value["origins"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(Value::as_str)
                                .map(|origin| {
                                    format!(
                                        "{origin}:{}",
                                        value["weight"][origin].as_u64().unwrap_or(0)
                                    )
                                })
                                .collect();
                            format!(
                                "{geo:<6} {:<8} {}  (updated {})",
                                value["shard"].as_str().unwrap_or_default(),
                                weights.join(" "),
                                row["updated"].as_str().unwrap_or("-")
                            )
                        }
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            Ok(Outcome {
                text: if rows.is_empty() {
                    "no regions".into()
                } else {
                    text
                },
                json: json!({"revision": state.revision, "regions": rows}),
            })
        }
        RegionCommand::Set(args) => {
            let geo = args.geo.clone();
            let Some(value) = set_value else {
                return Err(Error::Failed("region set: no value was prepared".into()));
            };
            let updated = now_rfc3339();
            let committed = transact(
                &mut client,
                &context.layout,
                &context.retry,
                &updated,
                |_| {
                    Ok(Changes {
                        regions: [(geo.clone(), Some(value.clone()))].into(),
                        ..Changes::default()
                    })
                },
            )
            .await?;
            Ok(committed_outcome(
                &format!("region {geo} set"),
                &committed,
                false,
            ))
        }
        RegionCommand::Delete { geo, .. } => {
            check_geo(&geo)?;
            let updated = now_rfc3339();
            let committed = transact(
                &mut client,
                &context.layout,
                &context.retry,
                &updated,
                |state| {
                    if !state.regions.contains_key(&geo) {
                        return Err(Error::NotFound(format!("region `{geo}`")));
                    }
                    Ok(Changes {
                        regions: [(geo.clone(), None)].into(),
                        ..Changes::default()
                    })
                },
            )
            .await?;
            Ok(committed_outcome(
                &format!("region {geo} deleted"),
                &committed,
                false,
            ))
        }
    }
}

/// One region for `get` and `list`: the value parsed when valid, the reason when not.
fn region_row(geo: &str, raw: &[u8], mod_revision: i64) -> Value {
    let updated = serde_json::from_slice::<Value>(raw)
        .ok()
        .and_then(|value| value.get("updated").cloned())
        .unwrap_or(Value::Null);
    match RegionValue::from_stored(raw) {
        Ok(value) => {
            json!({"geo": geo, "valid": true, "value": value.to_json(), "updated": updated, "mod_revision": mod_revision})
        }
        Err(error) => json!({
            "geo": geo, "valid": false, "error": error.to_string(),
            "raw": String::from_utf8_lossy(raw), "mod_revision": mod_revision,
        }),
    }
}

fn check_geo(geo: &str) -> Result<(), Error> {
    if geo.is_empty() {
        return Err(Error::invalid("geo", "must not be empty"));
    }
    Ok(())
}

/// The value `region set` was given: JSON text, a file, or --shard/--origin flags.
fn region_input(args: &RegionSetArgs) -> Result<RegionValue, Error> {
    let raw = if let Some(shard) = &args.shard {
        let mut origins = Vec::new();
        let mut weight = serde_json::Map::new();
        for entry in &args.origin {
            let Some((name, text)) = entry.split_once('=') else {
                return Err(Error::Usage(format!(
                    "--origin {entry}: expected NAME=WEIGHT"
                )));
            };
            let parsed = serde_json::from_str::<Value>(text.trim()).map_err(|_| {
                Error::Usage(format!(
                    "--origin {entry}: the weight `{text}` is not a number"
                ))
            })?;
            origins.push(Value::from(name));
            weight.insert(name.to_string(), parsed);
        }
        json!({"shard": shard, "origins": origins, "weight": weight})
            .to_string()
            .into_bytes()
    } else {
        read_input(args.value.as_deref(), args.file.as_deref(), "region value")?
    };
    RegionValue::for_write(&raw).map_err(Error::Invalid)
}

/// A value given inline, or read from a file or stdin.
fn read_input(inline: Option<&str>, file: Option<&str>, what: &str) -> Result<Vec<u8>, Error> {
    match (inline, file) {
        (Some(text), _) => Ok(text.as_bytes().to_vec()),
        (None, Some(path)) => read_file(path),
        (None, None) => Err(Error::Usage(format!(
            "give the {what} as an argument or with --file"
        ))),
    }
}

/// The largest file (or stdin) `apply`, `region set --file` and `policy set --file` read:
/// 1 MiB, well under etcd's default request limit of 1.5 MiB, so that a file that is read
/// can also be written in one transaction.
pub const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// Reads a regular file, or stdin for `-`, up to [`MAX_INPUT_BYTES`]. Anything else (a
/// FIFO, a device such as `/dev/zero`, a directory) is refused without being opened, so
/// that nothing can block the command or grow it without bound.
pub fn read_file(path: &str) -> Result<Vec<u8>, Error> {
    let io_error = |source| Error::Io {
        path: path.to_string(),
        source,
    };
    let too_large = || Error::Io {
        path: path.to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than the input limit of {MAX_INPUT_BYTES} bytes (1 MiB); \
                 split the change into several files"
            ),
        ),
    };
    let not_regular = |kind: &str| Error::Io {
        path: path.to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is {kind}, not a regular file (use `-` to read stdin)"),
        ),
    };
    let mut bytes = Vec::new();
    if path == "-" {
        std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
    } else {
        check_regular(std::fs::metadata(path).map_err(io_error)?.file_type())
            .map_err(not_regular)?;
        // Opened without blocking (a FIFO swapped in after the check must not hang us),
        // and checked again on the descriptor itself.
        use std::os::unix::fs::OpenOptionsExt as _;
        const O_NONBLOCK: i32 = 0o4000;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open(path)
            .map_err(io_error)?;
        check_regular(file.metadata().map_err(io_error)?.file_type()).map_err(not_regular)?;
        file.take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
    }
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

fn check_regular(kind: std::fs::FileType) -> Result<(), &'static str> {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_file() {
        Ok(())
    } else if kind.is_dir() {
        Err("a directory")
    } else if kind.is_fifo() {
        Err("a FIFO")
    } else if kind.is_char_device() || kind.is_block_device() {
        Err("a device")
    } else if kind.is_socket() {
        Err("a socket")
    } else {
        Err("a special file")
    }
}

/// [`read_file`] on a blocking thread, so that a signal can stop the command while it
/// waits for stdin.
async fn read_file_async(path: &str) -> Result<Vec<u8>, Error> {
    let owned = path.to_string();
    tokio::task::spawn_blocking(move || read_file(&owned))
        .await
        .map_err(|error| Error::Failed(format!("reading {path}: {error}")))?
}

async fn policy(context: &Context, command: PolicyCommand) -> Result<Outcome, Error> {
    let set_raw = match &command {
        PolicyCommand::Set { value, file, .. } => Some(read_input(
            value.as_deref(),
            file.as_deref(),
            "policy value",
        )?),
        PolicyCommand::Get => None,
    };
    let mut client = context.etcd.connect().await?;
    match command {
        PolicyCommand::Get => {
            let state = read_state(&mut client, &context.layout).await?;
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
                            "{raw}\nmod_revision {}{}",
                            entry.mod_revision,
                            error
                                .as_ref()
                                .map(|error| format!("\nINVALID (the defaults apply): {error}"))
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
        PolicyCommand::Set { .. } => {
            let raw = set_raw.unwrap_or_default();
            let policy = PolicyValue::for_write(&raw).map_err(Error::Invalid)?;
            let updated = now_rfc3339();
            let committed = transact(
                &mut client,
                &context.layout,
                &context.retry,
                &updated,
                |_| {
                    Ok(Changes {
                        policy: Some(policy.clone()),
                        ..Changes::default()
                    })
                },
            )
            .await?;
            Ok(committed_outcome("policy set", &committed, false))
        }
    }
}

async fn apply(context: &Context, args: ApplyArgs) -> Result<Outcome, Error> {
    let bytes = read_file_async(&args.file).await?;
    let text = String::from_utf8(bytes).map_err(|_| Error::invalid("file", "is not UTF-8"))?;
    let desired = parse_desired(&text, FileFormat::from_path(&args.file))?;
    let mut client = context.etcd.connect().await?;
    let mut diff = Vec::new();
    let mut plan = |state: &State| {
        let (changes, lines) = plan_apply(state, &desired, args.prune);
        diff = lines;
        Ok(changes)
    };
    let (revision, changes, attempts) = if args.dry_run {
        let (_, changes) = preview(&mut client, &context.layout, &mut plan).await?;
        (None, changes, 0)
    } else {
        let updated = now_rfc3339();
        let committed = transact(
            &mut client,
            &context.layout,
            &context.retry,
            &updated,
            &mut plan,
        )
        .await?;
        (committed.revision, committed.changes, committed.attempts)
    };
    let mut lines: Vec<String> = diff
        .iter()
        .map(|line| format!("{} {} {}", line.op, line.key, line.detail))
        .collect();
    if diff.is_empty() {
        lines.push("no changes: etcd already matches the file".into());
    }
    lines.extend(changes.notes.iter().map(|note| format!("note: {note}")));
    match (args.dry_run, revision) {
        (true, _) if !diff.is_empty() => lines.push("dry run: nothing written".into()),
        (false, Some(revision)) => lines.push(format!("applied at revision {revision}")),
        _ => {}
    }
    Ok(Outcome {
        text: lines.join("\n"),
        json: json!({
            "dry_run": args.dry_run,
            "revision": revision,
            "attempts": attempts,
            "diff": diff.iter().map(|line| json!({"op": line.op.to_string(), "key": line.key, "detail": line.detail})).collect::<Vec<_>>(),
            "notes": changes.notes,
        }),
    })
}

async fn drain(context: &Context, args: DrainArgs) -> Result<Outcome, Error> {
    let request = DrainRequest {
        origin: args.origin.clone(),
        regions: args.regions.clone(),
        reason: args.reason.clone(),
        source: SOURCE_CLI.into(),
        by: operator(),
        at: now_rfc3339(),
        force: args.force,
        skip_emptying: false,
        fleet_limit: None,
    };
    let mut client = context.etcd.connect().await?;
    let plan = |state: &State| plan_drain(state, &request);
    run_plan(
        context,
        &mut client,
        &format!("drain {}", args.origin),
        args.dry_run,
        plan,
    )
    .await
}

async fn restore(context: &Context, args: RestoreArgs) -> Result<Outcome, Error> {
    let mut client = context.etcd.connect().await?;
    let origin = args.origin.clone();
    let plan = |state: &State| plan_restore(state, &origin, None);
    run_plan(
        context,
        &mut client,
        &format!("restore {}", args.origin),
        args.dry_run,
        plan,
    )
    .await
}

/// Previews or commits a plan and reports it.
async fn run_plan<F>(
    context: &Context,
    client: &mut etcd_client::Client,
    title: &str,
    dry_run: bool,
    mut plan: F,
) -> Result<Outcome, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    if dry_run {
        let (state, changes) = preview(client, &context.layout, &mut plan).await?;
        let committed = Committed {
            revision: None,
            state,
            changes,
            attempts: 0,
        };
        return Ok(committed_outcome(title, &committed, true));
    }
    let updated = now_rfc3339();
    let committed = transact(client, &context.layout, &context.retry, &updated, plan).await?;
    Ok(committed_outcome(title, &committed, false))
}

/// The report of a (possibly dry-run) plan.
pub fn committed_outcome(title: &str, committed: &Committed, dry_run: bool) -> Outcome {
    let (mut lines, mut json) = render_changes(&committed.state, &committed.changes);
    lines.extend(
        committed
            .changes
            .notes
            .iter()
            .map(|note| format!("note: {note}")),
    );
    let headline = match (dry_run, committed.revision) {
        (true, _) => format!("{title}: dry run, nothing written"),
        (false, Some(revision)) => format!("{title}: committed at revision {revision}"),
        (false, None) => format!("{title}: nothing to change"),
    };
    lines.insert(0, headline);
    if let Value::Object(object) = &mut json {
        object.insert("dry_run".into(), Value::from(dry_run));
        object.insert(
            "revision".into(),
            committed.revision.map_or(Value::Null, Value::from),
        );
        object.insert(
            "read_revision".into(),
            Value::from(committed.state.revision),
        );
        object.insert("attempts".into(), Value::from(committed.attempts));
        object.insert("notes".into(), Value::from(committed.changes.notes.clone()));
    }
    Outcome {
        text: lines.join("\n"),
        json,
    }
}

/// A JSON object given on the command line (`--meta`); a usage error (exit 2) naming the
/// flag otherwise.
pub fn json_object_arg(field: &str, text: &str) -> Result<serde_json::Map<String, Value>, Error> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(Error::Usage(format!("--{field} must be a JSON object"))),
        Err(error) => Err(Error::Usage(format!(
            "--{field} is not valid JSON: {error}"
        ))),
    }
}

//! Staged rollouts' step machine, without etcd: the plan (`--steps`, `--bake` and the
//! gates) and the progress record kept under `<control>rollouts/<id>`; the judgments each
//! poll makes (does the cohort serve the stage, is a probed origin unhealthy) are
//! `rollout_gate`'s.
//! dwctl's `daemons/rollout.rs` drives it against etcd; docs/dwctl.md ("Rollouts") is the
//! operator's side.
//!
//! The rules:
//! - A step widens the stage's cohort to its percentage, then **waits** until every live
//!   node of the cohort reports the stage applied at the stage key's current revision. A
//!   node whose report cannot be believed (`untrusted`, `missing`, `conflict`: any node the
//!   fleet view does not call current) or that is `stale` blocks the step, whatever it
//!   claims. A cohort of fewer than `min_nodes` live nodes aborts the rollout: it is never
//!   passed on no evidence. The wait is bounded by the step time-out.
//! - Then it **bakes** for the bake time: the probed origins are probed every probe
//!   interval (the health checker's rules: a GET answered 2xx or 3xx in time; an origin
//!   is unhealthy after `fail_after` failures in a row), and the check command runs every
//!   check interval and must exit 0. A node leaving the cohort's "serving" set sends the
//!   step back to waiting, and its bake starts over. The bake ends with one more round of
//!   probes and check, and only passes when every probed origin's last probe succeeded.
//! - Any node reporting a staged key (or the stage key) rejected, an unhealthy origin or a
//!   failed check aborts the stage. After the last step, the stage is promoted.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use dw_routing::stage::Stage;

use crate::probe_target::ProbeTarget;
use crate::stage::parse_percent;
use crate::{Error, FieldError};

/// The progress record's schema version; a reader refuses any other.
pub const ROLLOUT_SCHEMA: u64 = 1;
/// The most steps a rollout may have.
pub const MAX_STEPS: usize = 20;
/// The most `--probe` origins a rollout may have.
pub const MAX_PROBES: usize = 100;
/// The longest `--check` command, in bytes.
pub const MAX_CHECK_BYTES: usize = 4096;
/// The most of a failed check's output kept for the abort reason, in bytes.
pub const MAX_CHECK_OUTPUT: usize = 400;

/// What a rollout does and what gates each step: kept in the progress record, so that
/// `rollout resume` continues with the same plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The cohort of each step, in points (percent × 100), strictly increasing.
    pub steps: Vec<u16>,
    /// How long each step bakes once its cohort serves the stage.
    pub bake_ms: u64,
    /// origin → the http:// URL probed during the bake.
    pub probes: BTreeMap<String, String>,
    /// Time between probe rounds, and the deadline of one probe.
    pub probe_interval_ms: u64,
    /// The deadline of one probe.
    pub probe_timeout_ms: u64,
    /// Consecutive failed probes that make an origin unhealthy.
    pub fail_after: u32,
    /// The shell command run during the bake (it must exit 0). `rollout resume` never runs
    /// it from this record: it must be given again (see [`check_matches`]).
    pub check: Option<String>,
    /// Time between check runs.
    pub check_interval_ms: u64,
    /// The deadline of one check run.
    pub check_timeout_ms: u64,
    /// The fewest live cohort nodes a step accepts.
    pub min_nodes: usize,
    /// The longest a step waits for its cohort to serve the stage.
    pub step_timeout_ms: u64,
}

impl Plan {
    /// The bake time.
    pub fn bake(&self) -> Duration {
        Duration::from_millis(self.bake_ms)
    }
    /// The step time-out.
    pub fn step_timeout(&self) -> Duration {
        Duration::from_millis(self.step_timeout_ms)
    }
}

/// Where a rollout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RolloutState {
    /// A dwctl is driving it (or died doing so).
    Running,
    /// Stopped by SIGINT or SIGTERM; the stage stays as it was.
    Interrupted,
    /// A step's cohort did not serve the stage within the step time-out.
    TimedOut,
    /// Stopped by an error (etcd, promote conflict); the stage stays as it was.
    Stopped,
    /// A gate failed: the stage was aborted.
    Aborted,
    /// Done: the stage was promoted.
    Promoted,
}

impl RolloutState {
    /// Whether `rollout resume` may continue it.
    pub fn is_resumable(self) -> bool {
        !matches!(self, RolloutState::Aborted | RolloutState::Promoted)
    }

    /// The name used in the record and the output.
    pub fn name(self) -> &'static str {
        match self {
            RolloutState::Running => "running",
            RolloutState::Interrupted => "interrupted",
            RolloutState::TimedOut => "timed-out",
            RolloutState::Stopped => "stopped",
            RolloutState::Aborted => "aborted",
            RolloutState::Promoted => "promoted",
        }
    }
}

/// The progress record, `<control>rollouts/<id>`: outside the routing prefix, so writing it
/// makes no node republish. Every write is guarded on the record's last revision, so two
/// dwctl driving one rollout cannot both go on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// [`ROLLOUT_SCHEMA`].
    pub schema: u64,
    /// The rollout's id, which is its stage's id.
    pub id: String,
    /// What it does.
    pub plan: Plan,
    /// The step being worked on (0-based); `plan.steps.len()`: every step passed, promote.
    pub step: usize,
    /// When the current step's bake started (RFC 3339), if it has.
    pub bake_started_at: Option<String>,
    /// Where it is.
    pub state: RolloutState,
    /// Why it ended or stopped, when it did.
    pub outcome: Option<String>,
    /// The operator's `--reason`.
    pub reason: String,
    /// Who started it.
    pub created_by: String,
    /// When it started.
    pub created_at: String,
    /// When the record was last written.
    pub updated_at: String,
}

impl Record {
    /// Reads a record; an error names what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<Record, String> {
        let record: Record = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if record.schema != ROLLOUT_SCHEMA {
            return Err(format!(
                "schema {} (this dwctl reads {ROLLOUT_SCHEMA})",
                record.schema
            ));
        }
        if record.plan.steps.is_empty() || record.step > record.plan.steps.len() {
            return Err(format!(
                "step {} of {}",
                record.step,
                record.plan.steps.len()
            ));
        }
        Ok(record)
    }
}

/// `1%,10%,50%,100%` → points; each above 0, strictly increasing, 1 to [`MAX_STEPS`].
pub fn parse_steps(text: &str) -> Result<Vec<u16>, Error> {
    let mut steps = Vec::new();
    for part in text.split(',') {
        let points = parse_percent(part).map_err(|_| {
            Error::invalid(
                "steps",
                format!(
                    "{:?} is not a percentage above 0 and at most 100 with at most two decimals",
                    part.trim()
                ),
            )
        })?;
        if points == 0 {
            return Err(Error::invalid("steps", "a step of 0 % serves no node"));
        }
        if steps.last().is_some_and(|last| *last >= points) {
            return Err(Error::invalid(
                "steps",
                "each step must be larger than the one before (1%,10%,50%,100%)",
            ));
        }
        steps.push(points);
    }
    if steps.len() > MAX_STEPS {
        return Err(Error::invalid(
            "steps",
            format!("{} steps: at most {MAX_STEPS}", steps.len()),
        ));
    }
    Ok(steps)
}

/// `--probe ORIGIN=URL` flags → origin → URL; a usage error (exit 2) names every bad one.
pub fn parse_probes(flags: &[String]) -> Result<BTreeMap<String, String>, Error> {
    let mut errors = Vec::new();
    let mut probes = BTreeMap::new();
    if flags.len() > MAX_PROBES {
        errors.push(format!("{} probes: at most {MAX_PROBES}", flags.len()));
    }
    for entry in flags {
        let Some((origin, url)) = entry.split_once('=') else {
            errors.push(format!("`{entry}`: expected ORIGIN=URL"));
            continue;
        };
        if origin.is_empty() || origin.contains('/') {
            errors.push(format!("`{entry}`: the origin must be a name without `/`"));
        } else if let Err(reason) = ProbeTarget::parse(url) {
            errors.push(reason);
        } else if probes.insert(origin.to_owned(), url.to_owned()).is_some() {
            errors.push(format!("`{origin}` is probed twice"));
        }
    }
    if errors.is_empty() {
        Ok(probes)
    } else {
        Err(Error::Usage(format!("--probe: {}", errors.join("; "))))
    }
}

/// Checks `--check`: at most [`MAX_CHECK_BYTES`], not blank.
pub fn check_command(check: &str) -> Result<(), Error> {
    if check.trim().is_empty() {
        return Err(Error::invalid("check", "is empty"));
    }
    if check.len() > MAX_CHECK_BYTES {
        return Err(Error::invalid(
            "check",
            format!("{} bytes: at most {MAX_CHECK_BYTES}", check.len()),
        ));
    }
    Ok(())
}

/// `rollout resume` runs a check only when the operator gives it again, the same as
/// recorded: a command read from etcd is never run on the operator's machine.
pub fn check_matches(recorded: Option<&str>, given: Option<&str>) -> Result<(), Error> {
    match (recorded, given) {
        (None, None) => Ok(()),
        (Some(recorded), Some(given)) if recorded == given => Ok(()),
        (Some(recorded), _) => Err(Error::Usage(format!(
            "this rollout runs the check {:?}: give it again with --check (dwctl never runs a \
             command read from etcd)",
            crate::shown::escape(recorded)
        ))),
        (None, Some(_)) => Err(Error::Usage(
            "this rollout has no --check; resume it without one".into(),
        )),
    }
}

/// The origins the staged region values route to.
pub fn staged_origins(stage: &Stage) -> Vec<String> {
    let mut origins: Vec<String> = stage
        .kvs
        .iter()
        .filter(|(key, _)| key.starts_with("region/"))
        .filter_map(|(_, value)| value.as_ref())
        .filter_map(|raw| serde_json::from_str::<serde_json::Value>(raw).ok())
        .flat_map(|value| {
            value["origins"]
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter_map(|o| o.as_str().map(str::to_owned))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect();
    origins.sort();
    origins.dedup();
    origins
}

/// Probes must be of origins the change routes to: a probe of another origin says
/// nothing about the change (and is usually a typo). Exit 4, naming them.
pub fn check_probed_origins(stage: &Stage, probes: &BTreeMap<String, String>) -> Result<(), Error> {
    let routed = staged_origins(stage);
    let errors: Vec<FieldError> = probes
        .keys()
        .filter(|origin| !routed.contains(origin))
        .map(|origin| {
            FieldError::new(
                format!("probe.{origin}"),
                format!(
                    "the staged values do not route to {origin} (they route to: {})",
                    routed.join(", ")
                ),
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(errors))
    }
}

/// `12.50%`.
pub fn percent_text(points: u16) -> String {
    format!("{}.{:02}%", points / 100, points % 100)
}

/// `1m05s`, `42s`, `0.4s`.
pub fn duration_text(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds < 10.0 {
        format!("{seconds:.1}s")
    } else if seconds < 60.0 {
        format!("{}s", seconds.round() as u64)
    } else {
        let whole = seconds.round() as u64;
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steps_parse_strictly_increasing_and_bounded() {
        assert_eq!(
            parse_steps("1%,10%,50%,100%").unwrap(),
            [100, 1000, 5000, 10_000]
        );
        assert_eq!(parse_steps("0.5%").unwrap(), [50]);
        for bad in ["", "0%", "10%,5%", "10%,10%", "101%", "x", "5%,,10%"] {
            assert!(parse_steps(bad).is_err(), "{bad}");
        }
        let twenty: Vec<String> = (1..=20).map(|i| format!("{}%", i * 5)).collect();
        assert_eq!(parse_steps(&twenty.join(",")).unwrap().len(), MAX_STEPS);
        let twenty_one: Vec<String> = (1..=21).map(|i| format!("{i}%")).collect();
        assert!(parse_steps(&twenty_one.join(",")).is_err());
    }

    #[test]
    fn probes_and_checks_are_checked_at_their_limits() {
        assert!(parse_probes(&["fra-a=http://127.0.0.1:1/h".into()]).is_ok());
        for bad in ["fra-a", "=http://a/", "a/b=http://a/", "fra-a=https://a/"] {
            assert!(parse_probes(&[bad.into()]).is_err(), "{bad}");
        }
        let twice = ["a=http://x/".to_string(), "a=http://y/".to_string()];
        assert!(parse_probes(&twice).is_err());
        let many =
            |n: usize| -> Vec<String> { (0..n).map(|i| format!("o{i}=http://h/")).collect() };
        assert!(parse_probes(&many(MAX_PROBES)).is_ok());
        assert!(parse_probes(&many(MAX_PROBES + 1)).is_err());
        assert!(check_command(&"x".repeat(MAX_CHECK_BYTES)).is_ok());
        assert!(check_command(&"x".repeat(MAX_CHECK_BYTES + 1)).is_err());
        assert!(check_command("  ").is_err());
        assert!(check_matches(Some("true"), Some("true")).is_ok());
        assert!(check_matches(Some("true"), None).is_err());
        assert!(check_matches(Some("true"), Some("false")).is_err());
        assert!(check_matches(None, Some("true")).is_err());
    }

    fn stage(points: u16) -> Stage {
        crate::rollout_gate::sample_stage(points)
    }

    #[test]
    fn probes_must_be_of_origins_the_change_routes_to() {
        let staged = stage(100);
        assert_eq!(staged_origins(&staged), ["ams-a", "fra-a"]);
        let probes = BTreeMap::from([("fra-a".to_string(), "http://h/".to_string())]);
        assert!(check_probed_origins(&staged, &probes).is_ok());
        let probes = BTreeMap::from([("par-a".to_string(), "http://h/".to_string())]);
        assert!(matches!(
            check_probed_origins(&staged, &probes),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn records_round_trip_and_refuse_other_schemas() {
        let record = Record {
            schema: ROLLOUT_SCHEMA,
            id: "r".into(),
            plan: Plan {
                steps: vec![100, 10_000],
                bake_ms: 1000,
                probes: BTreeMap::new(),
                probe_interval_ms: 2000,
                probe_timeout_ms: 2000,
                fail_after: 3,
                check: None,
                check_interval_ms: 5000,
                check_timeout_ms: 30_000,
                min_nodes: 1,
                step_timeout_ms: 600_000,
            },
            step: 1,
            bake_started_at: None,
            state: RolloutState::Interrupted,
            outcome: None,
            reason: String::new(),
            created_by: "t".into(),
            created_at: String::new(),
            updated_at: String::new(),
        };
        let text = serde_json::to_vec(&record).unwrap();
        assert_eq!(Record::parse(&text).unwrap(), record);
        assert!(String::from_utf8_lossy(&text).contains("\"state\":\"interrupted\""));
        let mut other = serde_json::to_value(&record).unwrap();
        other["schema"] = json!(2);
        assert!(Record::parse(other.to_string().as_bytes()).is_err());
        other["schema"] = json!(1);
        other["step"] = json!(3);
        assert!(Record::parse(other.to_string().as_bytes()).is_err());
    }
}

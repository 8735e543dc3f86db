//! The crate's one error type, and the exit code each kind of failure maps to.

use std::fmt;
use std::process::ExitCode;

pub use dw_ctl_plan::FieldError;

mod exit_status;

pub use exit_status::{
    EXIT_STATUSES, ExitStatus, documented_codes, exit_codes_help, exit_codes_summary,
};

/// Exit code 6: the write committed, but `--wait` could not follow the fleet (no read
/// permission on the nodes prefix, etcd unreachable after the commit, ...).
pub const EXIT_WAIT_FAILED: u8 = 6;
/// Exit code 3 is also staged rollouts' "promote conflict" (issue 22): a staged key changed
/// outside dwctl; nothing written.
pub const EXIT_PROMOTE_CONFLICT: u8 = 3;
/// Exit code 7: `rollout` aborted its stage (a gate failed).
pub const EXIT_ROLLOUT_ABORTED: u8 = 7;
/// Exit code 8: a `rollout` step's cohort did not serve the stage within --step-timeout.
pub const EXIT_STEP_TIMED_OUT: u8 = 8;

/// Exit code 9: the capacity guard refused the change (the prediction puts an origin above
/// `headroom` × its capacity); nothing written. `--allow-overload` overrides it.
pub const EXIT_OVERLOAD: u8 = 9;

/// Everything a dwctl command can fail with.
#[derive(Debug)]
pub enum Error {
    /// The input is invalid; nothing was written. Exit code 4.
    Invalid(Vec<FieldError>),
    /// The command line is inconsistent in a way clap cannot express. Exit code 2.
    Usage(String),
    /// Every attempt of a guarded transaction lost to a concurrent writer. Exit code 3.
    Conflict {
        /// How many attempts were made (`--retries`).
        attempts: u32,
    },
    /// `stage promote`: staged keys were changed outside dwctl since the stage was made;
    /// nothing written. Exit code 3.
    Diverged(String),
    /// A key or record the command needs does not exist. Exit code 1.
    NotFound(String),
    /// etcd refused or could not be reached. Exit code 1.
    Etcd(etcd_client::Error),
    /// etcd stayed unavailable (unreachable, no leader, timing out) through every attempt
    /// of a guarded write, reconnecting between them; nothing is known to be written. Exit
    /// code 1, kind `etcd`, as any etcd failure.
    EtcdUnavailable {
        /// How many failures were counted.
        attempts: u32,
        /// The member the last failure came from, when known.
        member: Option<String>,
        /// The last failure, as it was reported.
        last: String,
    },
    /// A write was sent, its answer was lost, and reading its keys back could not tell
    /// whether it landed (`dwctl history` can). Exit code 1, kind `etcd`.
    OutcomeUnknown {
        /// Why the read-back could not settle it.
        why: String,
    },
    /// A local file could not be read. Exit code 1.
    Io {
        /// The file (`-` for stdin).
        path: String,
        /// What reading it failed with.
        source: std::io::Error,
    },
    /// The write committed (or `status` ran), but live nodes lag behind it: the outcome
    /// is printed as usual, then the exit code is 5.
    Lagging(Box<crate::output::Outcome>),
    /// The write committed at `revision`, then `--wait` failed (not a time-out: it could
    /// not read the fleet). The outcome is printed as usual, then exit code 6.
    WaitFailed {
        /// The revision the write committed at.
        revision: i64,
        /// Why the wait failed.
        reason: String,
        /// The committed write's outcome.
        outcome: Box<crate::output::Outcome>,
    },
    /// Anything else that stops the command (a malformed drain record, a compacted
    /// revision, ...). Exit code 1.
    Failed(String),
    /// `rollout` stopped before promoting: it aborted its stage (exit 7, kind
    /// `rollout-aborted`), a step timed out (exit 8, `step-timed-out`), or a signal stopped it
    /// (exit 130, `interrupted`). The message says what the stage is left as and what next.
    Rollout {
        /// The exit code.
        code: u8,
        /// The kind, for `--output json`.
        kind: &'static str,
        /// What happened and how to go on.
        message: String,
    },
    /// The capacity guard refused the change: the message names each origin, its predicted
    /// load, capacity and guard, and the largest part that would fit. Exit code 9.
    Overload(String),
    /// A fence the caller put on its write ([`crate::ops::commit::Fence`]: a leader key)
    /// no longer holds: nothing was written, and retrying cannot help. Exit code 1.
    Fenced(String),
    /// A one-shot command was stopped by a signal. Exit code 128 + the signal's number
    /// (130 for SIGINT, 143 for SIGTERM).
    Interrupted {
        /// `SIGINT` or `SIGTERM`.
        signal: &'static str,
        /// The exit code: 128 + the signal's number.
        code: u8,
        /// The revision the command's write committed at, when the signal came after the
        /// commit (during `--wait`).
        committed: Option<i64>,
    },
}

impl Error {
    /// A validation failure on one field.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid(vec![FieldError::new(field, reason)])
    }

    /// The process exit code documented in docs/dwctl.md.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Invalid(_) => 4,
            Error::Usage(_) => 2,
            Error::Conflict { .. } | Error::Diverged(_) => 3,
            Error::Lagging(_) => 5,
            Error::WaitFailed { .. } => EXIT_WAIT_FAILED,
            Error::Overload(_) => EXIT_OVERLOAD,
            Error::NotFound(_) | Error::Io { .. } | Error::Failed(_) | Error::Fenced(_) => 1,
            Error::Etcd(_) | Error::EtcdUnavailable { .. } | Error::OutcomeUnknown { .. } => 1,
            Error::Interrupted { code, .. } | Error::Rollout { code, .. } => *code,
        }
    }

    /// A short machine-readable name of the kind, used in `--output json`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Invalid(_) => "validation",
            Error::Usage(_) => "usage",
            Error::Conflict { .. } => "conflict",
            Error::Diverged(_) => "stage-conflict",
            Error::Lagging(_) => "lagging",
            Error::WaitFailed { .. } => "wait-failed",
            Error::Overload(_) => "overload",
            Error::NotFound(_) => "not-found",
            Error::Etcd(_) | Error::EtcdUnavailable { .. } | Error::OutcomeUnknown { .. } => "etcd",
            Error::Io { .. } => "io",
            Error::Failed(_) => "failed",
            Error::Fenced(_) => "fenced",
            Error::Interrupted { .. } => "interrupted",
            Error::Rollout { kind, .. } => kind,
        }
    }

    /// Whether etcd could not be reached (or stayed unavailable), as opposed to answering
    /// with a refusal: the error after which dwctl names the endpoints it tried.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::EtcdUnavailable { .. } => true,
            Error::Etcd(source) => dw_etcd::is_retryable(source),
            _ => false,
        }
    }

    /// Whether etcd failed (kind `etcd`): a daemon connects again before its next round.
    pub fn is_etcd(&self) -> bool {
        self.kind() == "etcd"
    }

    /// [`Error::exit_code`] as the process exit code.
    pub fn to_exit_code(&self) -> ExitCode {
        ExitCode::from(self.exit_code())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The kinds the plan crate has too are worded there, once (an error is printed
            // once: the clone costs nothing that matters).
            Error::Invalid(fields) => dw_ctl_plan::Error::Invalid(fields.clone()).fmt(f),
            Error::Usage(message) => dw_ctl_plan::Error::Usage(message.clone()).fmt(f),
            Error::Conflict { attempts } => write!(
                f,
                "gave up after {attempts} attempts: the keys kept changing concurrently \
                 (nothing written by this command); re-run it"
            ),
            Error::Diverged(message) => f.write_str(message),
            Error::NotFound(what) => dw_ctl_plan::Error::NotFound(what.clone()).fmt(f),
            Error::Etcd(source) if is_nospace(source) => {
                write!(f, "etcd: {source}\n{NOSPACE_RECOVERY}")
            }
            Error::Etcd(source) => write!(f, "etcd: {source}"),
            // Worded as when these were the client's `InvalidArgs` (scripts and the chaos
            // writer read them).
            Error::EtcdUnavailable {
                attempts,
                member,
                last,
            } => {
                write!(
                    f,
                    "etcd: invalid arguments: etcd unavailable after {attempts} attempts"
                )?;
                if let Some(member) = member {
                    write!(f, " (last member tried: {member})")?;
                }
                write!(f, ": {last}")
            }
            Error::OutcomeUnknown { why } => write!(
                f,
                "etcd: invalid arguments: the write was sent but its outcome is unknown \
                 ({why}); `dwctl history` shows whether it landed"
            ),
            Error::Lagging(outcome) => f.write_str(&outcome.text),
            Error::Io { path, source } => write!(f, "{path}: {source}"),
            Error::Failed(message)
            | Error::Rollout { message, .. }
            | Error::Overload(message)
            | Error::Fenced(message) => f.write_str(message),
            Error::WaitFailed {
                revision, reason, ..
            } => write!(
                f,
                "the write committed at revision {revision}, but waiting for the fleet failed: \
                 {reason}; see `dwctl status`"
            ),
            Error::Interrupted {
                signal,
                committed: Some(revision),
                ..
            } => write!(
                f,
                "stopped by {signal} while waiting for the fleet: the write committed at \
                 revision {revision}; see `dwctl status` for the fleet"
            ),
            Error::Interrupted { signal, .. } => write!(
                f,
                "stopped by {signal}; no transaction was sent unless one was already in flight"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<dw_etcd::Error> for Error {
    fn from(error: dw_etcd::Error) -> Self {
        match error {
            dw_etcd::Error::Usage(message) => Error::Usage(message),
            dw_etcd::Error::File { message, .. } => Error::Failed(message),
            dw_etcd::Error::Etcd { source, .. } => Error::Etcd(source),
            // Still an etcd failure (exit 1, kind "etcd"), as when the client said so.
            other => Error::Etcd(etcd_client::Error::InvalidArgs(other.to_string())),
        }
    }
}

/// A plan's refusal is dwctl's error of the same kind: same message, same exit code.
impl From<dw_ctl_plan::Error> for Error {
    fn from(error: dw_ctl_plan::Error) -> Self {
        match error {
            dw_ctl_plan::Error::Invalid(fields) => Error::Invalid(fields),
            dw_ctl_plan::Error::Usage(message) => Error::Usage(message),
            dw_ctl_plan::Error::NotFound(what) => Error::NotFound(what),
            dw_ctl_plan::Error::Failed(message) => Error::Failed(message),
            dw_ctl_plan::Error::Diverged(message) => Error::Diverged(message),
        }
    }
}

impl From<etcd_client::Error> for Error {
    fn from(source: etcd_client::Error) -> Self {
        Error::Etcd(source)
    }
}

/// What etcd answers every write with once its backend reached `--quota-backend-bytes`.
const NOSPACE: &str = "database space exceeded";

/// The steps that bring a cluster out of NOSPACE, printed instead of the bare gRPC error.
pub(crate) const NOSPACE_RECOVERY: &str = "\
etcd is out of space (NOSPACE alarm): it refuses every write until an operator frees space.
Recover (docs/dwctl.md, \"etcd's quota\"):
  1. rev=$(etcdctl endpoint status --write-out=json | grep -o '\"revision\":[0-9]*' | head -1 | cut -d: -f2)
  2. etcdctl compact \"$rev\"                      # drop the history before it
  3. etcdctl defrag --cluster                     # give the space back, member by member
  4. etcdctl alarm disarm                         # writes are accepted again
  5. etcdctl alarm list                           # empty: done; find the writer that filled it";

/// Whether etcd refused the request because its space quota is exhausted.
pub(crate) fn is_nospace(error: &etcd_client::Error) -> bool {
    error.to_string().contains(NOSPACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan's refusal reaches the user as it did when the planner lived in dwctl: the
    /// same kind, exit code and message (docs/dwctl.md and the integration tests assert
    /// them).
    #[test]
    fn a_plan_error_keeps_its_kind_exit_code_and_message() {
        let cases = [
            (
                dw_ctl_plan::Error::invalid("weight.fra-a", "must be an integer"),
                "validation",
                4,
            ),
            (
                dw_ctl_plan::Error::Usage("--labels \"x\": expected key=value".into()),
                "usage",
                2,
            ),
            (
                dw_ctl_plan::Error::NotFound("stage s1".into()),
                "not-found",
                1,
            ),
            (
                dw_ctl_plan::Error::Failed("malformed drain record".into()),
                "failed",
                1,
            ),
            (
                dw_ctl_plan::Error::Diverged("not promoting stage s1: ...".into()),
                "stage-conflict",
                3,
            ),
        ];
        for (planned, kind, code) in cases {
            let message = planned.to_string();
            let error = Error::from(planned);
            assert_eq!((error.kind(), error.exit_code()), (kind, code), "{message}");
            assert_eq!(error.to_string(), message);
        }
        let Error::Invalid(fields) = Error::from(dw_ctl_plan::Error::invalid("meta", "bad")) else {
            panic!("not a validation error");
        };
        assert_eq!(fields, [FieldError::new("meta", "bad")]);
    }

    /// etcd's unavailability and a write of unknown outcome have variants of their own but
    /// reach the user as when they were the client's `InvalidArgs`: kind `etcd`, exit 1,
    /// the same words (docs/dwctl.md, the chaos writer and the integration tests read them).
    #[test]
    fn unavailable_and_unknown_outcome_say_what_they_said() {
        let as_before =
            |text: &str| Error::Etcd(etcd_client::Error::InvalidArgs(text.to_owned())).to_string();
        let unavailable = Error::EtcdUnavailable {
            attempts: 5,
            member: Some("http://127.0.0.1:2379".into()),
            last: "etcd: transport error".into(),
        };
        let text = "etcd unavailable after 5 attempts (last member tried: \
                    http://127.0.0.1:2379): etcd: transport error";
        assert_eq!(unavailable.to_string(), as_before(text));
        assert_eq!(
            unavailable.to_string(),
            format!("etcd: invalid arguments: {text}")
        );
        let no_member = Error::EtcdUnavailable {
            attempts: 10,
            member: None,
            last: "no answer".into(),
        };
        assert_eq!(
            no_member.to_string(),
            as_before("etcd unavailable after 10 attempts: no answer")
        );
        let unknown = Error::OutcomeUnknown {
            why: "\"/dw/routing/region/DE\" was changed by another writer".into(),
        };
        assert_eq!(
            unknown.to_string(),
            as_before(
                "the write was sent but its outcome is unknown (\"/dw/routing/region/DE\" \
                 was changed by another writer); `dwctl history` shows whether it landed"
            )
        );
        for error in [unavailable, no_member, unknown] {
            assert_eq!((error.kind(), error.exit_code()), ("etcd", 1), "{error}");
            assert!(error.is_etcd());
            assert_eq!(error.to_exit_code(), ExitCode::from(1));
        }
        assert!(!Error::Failed("x".into()).is_etcd());
    }
}

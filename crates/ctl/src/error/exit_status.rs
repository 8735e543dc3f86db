//! dwctl's exit codes, listed once: `dwctl --help` prints them from here, the man pages
//! (xtask) are generated from here, and a test holds README.md and docs/dwctl.md to them
//! (crates/ctl/tests/it/first_install.rs). [`super::Error::exit_code`] maps each failure
//! to one of them; a unit test below checks that every code it can return is listed.

/// One documented exit status (or a pair that shares a line).
#[derive(Debug, Clone, Copy)]
pub struct ExitStatus {
    /// The codes of this line.
    pub codes: &'static [u8],
    /// Its short name, as the README and the subcommands' man pages list it.
    pub name: &'static str,
    /// What it means, as `dwctl --help` prints it: the first line follows the code, each
    /// further line is a continuation.
    pub help: &'static [&'static str],
}

/// Every exit code dwctl documents, in order. New codes are assigned here (and described in
/// docs/dwctl.md, "Exit codes"), once.
pub const EXIT_STATUSES: &[ExitStatus] = &[
    ExitStatus {
        codes: &[0],
        name: "ok",
        help: &["ok"],
    },
    ExitStatus {
        codes: &[1],
        name: "error",
        help: &["error (etcd unreachable, key not found, ...)"],
    },
    ExitStatus {
        codes: &[2],
        name: "usage",
        help: &["usage (bad flags or arguments)"],
    },
    ExitStatus {
        codes: &[3],
        name: "conflict (nothing written)",
        help: &[
            "conflict: every retry lost to a concurrent writer, nothing written; re-run",
            "(`stage promote`: a staged key was changed outside dwctl; see --rebase)",
        ],
    },
    ExitStatus {
        codes: &[4],
        name: "validation failed (nothing written)",
        help: &["validation failed: the message names the field, nothing written"],
    },
    ExitStatus {
        codes: &[5],
        name: "lagging (the write committed)",
        help: &[
            "lagging: `status` found a live node behind the routing revision, or `--wait` timed",
            "out before the quorum of live nodes reported the change (the write itself committed)",
        ],
    },
    ExitStatus {
        codes: &[super::EXIT_WAIT_FAILED],
        name: "the write committed, then --wait failed",
        help: &[
            "the write committed (its revision is printed first), then `--wait` failed: it could",
            "not read the fleet (permissions, etcd unreachable); see `dwctl status`",
        ],
    },
    ExitStatus {
        codes: &[super::EXIT_ROLLOUT_ABORTED, super::EXIT_STEP_TIMED_OUT],
        name: "rollout aborted / step timed out",
        help: &["rollout: a gate failed and the stage was aborted / a step timed out (stage kept)"],
    },
    ExitStatus {
        codes: &[super::EXIT_OVERLOAD],
        name: "the capacity guard refused the change (nothing written)",
        help: &[
            "the capacity guard refused the change: its predicted load puts an origin above",
            "headroom x capacity (the origins, loads and the part that fits are named), or,",
            "where capacities are set, the traffic source answered data that cannot be used;",
            "nothing written; --allow-overload commits it anyway, audited (rollout: stopped at",
            "that step, resumable)",
        ],
    },
    ExitStatus {
        codes: &[130, 143],
        name: "stopped by SIGINT / SIGTERM",
        help: &["stopped by SIGINT / SIGTERM (one-shot commands; input is at most 1 MiB)"],
    },
];

impl ExitStatus {
    /// The codes as written: `0`, `7, 8`.
    pub fn codes_text(&self) -> String {
        let codes: Vec<String> = self.codes.iter().map(u8::to_string).collect();
        codes.join(", ")
    }
}

/// The "Exit codes:" block of `dwctl --help`.
pub fn exit_codes_help() -> String {
    let mut text = String::from("Exit codes:\n");
    for status in EXIT_STATUSES {
        for (i, line) in status.help.iter().enumerate() {
            if i == 0 {
                text += &format!("  {}  {line}\n", status.codes_text());
            } else {
                text += &format!("     {line}\n");
            }
        }
    }
    text
}

/// Every code with its short name on one line (`0 ok, 1 error, ...`): the README's list
/// and the subcommands' man pages.
pub fn exit_codes_summary() -> String {
    let items: Vec<String> = EXIT_STATUSES
        .iter()
        .map(|status| {
            let codes: Vec<String> = status.codes.iter().map(u8::to_string).collect();
            format!("{} {}", codes.join("/"), status.name)
        })
        .collect();
    items.join(", ")
}

/// Every documented code, in order.
pub fn documented_codes() -> Vec<u8> {
    EXIT_STATUSES
        .iter()
        .flat_map(|status| status.codes.iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Every code `Error::exit_code` can give is listed, and no code twice.
    #[test]
    fn every_exit_code_an_error_maps_to_is_documented() {
        let outcome = || Box::new(crate::output::Outcome::default());
        let errors = [
            Error::invalid("f", "r"),
            Error::Usage("u".into()),
            Error::Conflict { attempts: 1 },
            Error::Diverged("d".into()),
            Error::NotFound("n".into()),
            Error::Failed("f".into()),
            Error::Overload("o".into()),
            Error::Lagging(outcome()),
            Error::WaitFailed {
                revision: 1,
                reason: "r".into(),
                outcome: outcome(),
            },
            Error::EtcdUnavailable {
                attempts: 10,
                member: None,
                last: "l".into(),
            },
            Error::OutcomeUnknown { why: "w".into() },
            Error::Interrupted {
                signal: "SIGINT",
                code: 130,
                committed: None,
            },
            Error::Interrupted {
                signal: "SIGTERM",
                code: 143,
                committed: None,
            },
            Error::Rollout {
                kind: "rollout-aborted",
                code: super::super::EXIT_ROLLOUT_ABORTED,
                message: "m".into(),
            },
            Error::Rollout {
                kind: "step-timed-out",
                code: super::super::EXIT_STEP_TIMED_OUT,
                message: "m".into(),
            },
        ];
        let documented = documented_codes();
        for error in &errors {
            assert!(
                documented.contains(&error.exit_code()),
                "exit code {} of {error:?} is not in EXIT_STATUSES",
                error.exit_code()
            );
        }
        let mut sorted = documented.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), documented.len(), "a code listed twice");
        assert_eq!(documented, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 130, 143]);
    }

    /// The help block keeps the layout `dwctl --help` always had: code, two spaces, text;
    /// continuation lines under the text.
    #[test]
    fn the_help_block_lists_every_code_once_in_order() {
        let help = exit_codes_help();
        assert!(help.starts_with("Exit codes:\n  0  ok\n  1  error"));
        assert!(help.contains("\n  7, 8  rollout: "));
        assert!(help.contains("\n  9  the capacity guard refused the change: "));
        assert!(help.ends_with(
            "  130, 143  stopped by SIGINT / SIGTERM (one-shot commands; input is at most 1 MiB)\n"
        ));
        assert!(
            exit_codes_summary().starts_with("0 ok, 1 error, 2 usage, 3 conflict"),
            "{}",
            exit_codes_summary()
        );
        assert!(exit_codes_summary().ends_with(", 130/143 stopped by SIGINT / SIGTERM"));
    }
}

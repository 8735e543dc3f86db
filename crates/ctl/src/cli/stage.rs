//! `dwctl stage`'s subcommands and the cohort flags.

use clap::{Args, Subcommand};

use super::WaitArgs;

/// The cohort flags of `stage create` and `stage widen`.
#[derive(Debug, Clone, Args)]
pub struct CohortArgs {
    /// A share of the fleet, 0 to 100 % with two decimals (5%, 0.5%).
    #[arg(long, value_name = "PERCENT")]
    pub cohort: Option<String>,
    /// Nodes named by id (comma-separated or repeated).
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// Nodes carrying every one of these labels (k=v,k2=v2).
    #[arg(long, default_value = "")]
    pub labels: String,
}

#[derive(Debug, Subcommand)]
pub enum StageCommand {
    /// Stage the keys of FILE that differ from current routing.
    #[command(after_help = "\
FILE is apply's format (JSON, or TOML by extension) and is validated the same way (exit 4, \
nothing written). Refused: a file that changes nothing, a key another open stage touches, \
an empty cohort. --dry-run prints the diff, the nodes (from their reports) that would be in \
the cohort, and the load the cohort's nodes would put on each origin (--traffic or \
--prometheus; refused with exit 9 above the capacity guard unless --allow-overload).

Example:
  dwctl stage create eu-map.toml --cohort 5% --labels site=fra --reason 'CHG-42'")]
    Create {
        /// The desired state (JSON, or TOML by extension; `-` reads JSON from stdin).
        file: String,
        #[command(flatten)]
        cohort: CohortArgs,
        /// Why, for the stage and its audit record.
        #[arg(long, default_value = "")]
        reason: String,
        /// The stage id (default: stage-<UTC time>).
        #[arg(long)]
        id: Option<String>,
        /// Print the diff and the cohort, write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        wait: WaitArgs,
        /// The cohort's predicted load and the capacity guard.
        #[command(flatten)]
        predict: Box<super::PredictArgs>,
    },
    /// Every open stage.
    List,
    /// One stage: cohort, diff against current routing, which cohort nodes serve it.
    Show {
        /// The stage id.
        id: String,
    },
    /// Widen a stage's cohort (earlier members always stay in).
    Widen {
        /// The stage id.
        id: String,
        #[command(flatten)]
        cohort: CohortArgs,
        /// Why, for the audit record.
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        wait: WaitArgs,
        /// The wider cohort's predicted load and the capacity guard.
        #[command(flatten)]
        predict: Box<super::PredictArgs>,
    },
    /// Make the staged values current for every node and close the stage (one txn).
    #[command(after_help = "\
Guarded on the revisions the stage was made from: a staged key changed meanwhile outside \
dwctl (etcdctl, another tool) makes it exit 3 and write nothing, unless --rebase (the \
staged value then wins over that change).")]
    Promote {
        /// The stage id.
        id: String,
        /// Promote even over keys changed outside dwctl since the stage was made.
        #[arg(long)]
        rebase: bool,
        /// Why, for the audit record.
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        wait: WaitArgs,
        /// The promoted values' predicted load and the capacity guard.
        #[command(flatten)]
        predict: Box<super::PredictArgs>,
    },
    /// Close a stage without promoting it: its cohort returns to current routing.
    Abort {
        /// The stage id.
        id: String,
        /// Why, for the audit record.
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

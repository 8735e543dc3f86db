//! `dwctl`: see the library (crates/ctl/src/lib.rs) and docs/dwctl.md.

use clap::Parser;

fn main() -> std::process::ExitCode {
    dwctl::main_with(dwctl::Cli::parse())
}

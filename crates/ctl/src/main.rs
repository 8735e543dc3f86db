//! `dwctl`: see the library (crates/ctl/src/lib.rs) and docs/dwctl.md.

use clap::{CommandFactory as _, FromArgMatches as _};

fn main() -> std::process::ExitCode {
    // As `Cli::parse()`, asking first where --endpoints came from (taking the values out
    // of the matches forgets it).
    let mut matches = dwctl::Cli::command().get_matches();
    let endpoints_from = dwctl::EndpointsSource::of(&matches);
    let cli = dwctl::Cli::from_arg_matches_mut(&mut matches)
        .map_err(|error| error.format(&mut dwctl::Cli::command()))
        .unwrap_or_else(|error| error.exit());
    dwctl::main_with(cli, endpoints_from)
}

//! `cargo xtask`: build chores that stay out of `cargo build`.
//!
//! `cargo run -p xtask -- dist-assets OUT` writes, from the clap definitions of the two
//! binaries (so that they can never disagree with `--help`):
//!
//! - `OUT/man/man1/dwctl.1` and one page per subcommand, nested ones too
//!   (`dwctl-drain.1`, `dwctl-region-set.1`, ...), the way git names its pages;
//! - `OUT/man/man8/dw-agent.8` (a daemon: section 8);
//! - `OUT/completions/dwctl.bash`, `_dwctl` (zsh) and `dwctl.fish`.
//!
//! `make deb` runs it and gzips the pages; packaging/README.md says where each file goes.
//! Only this crate depends on clap_mangen and clap_complete, and `make build` excludes it,
//! so building the binaries does not compile them.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::CommandFactory as _;
use clap_complete::Shell;

const USAGE: &str = "usage: cargo run -p xtask -- dist-assets OUT_DIR";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [verb, out] if verb == "dist-assets" => dist_assets(Path::new(out)),
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        _ => bail!("{USAGE}"),
    }
}

fn dist_assets(out: &Path) -> anyhow::Result<()> {
    let source = format!("dw-router {}", env!("CARGO_PKG_VERSION"));
    let man1 = out.join("man/man1");
    let man8 = out.join("man/man8");
    let completions = out.join("completions");
    for dir in [&man1, &man8, &completions] {
        // Stale pages of a removed subcommand must not be packaged.
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("cannot empty {}", dir.display()))?;
        }
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }

    let dwctl = dwctl::Cli::command();
    let pages = man_pages(dwctl.clone(), "1", &source, &man1)?;
    let agent = dw_agent::Cli::command();
    let agent_page = man_pages(agent, "8", &source, &man8)?;

    let mut dwctl_for_completions = dwctl;
    for (shell, file) in [
        (Shell::Bash, "dwctl.bash"),
        (Shell::Zsh, "_dwctl"),
        (Shell::Fish, "dwctl.fish"),
    ] {
        let path = completions.join(file);
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut dwctl_for_completions, "dwctl", &mut text);
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!(
        "xtask: {} dwctl pages, {} dw-agent page, 3 completions in {}",
        pages.len(),
        agent_page.len(),
        out.display()
    );
    Ok(())
}

/// Writes the page of `cmd` and of every visible subcommand, recursively, into `dir`.
fn man_pages(
    cmd: clap::Command,
    section: &str,
    source: &str,
    dir: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    // build() names each subcommand for its page (`dwctl-region-set`) and sets bin names.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, section, source, dir, &mut written)?;
    Ok(written)
}

fn write_pages(
    cmd: &clap::Command,
    section: &str,
    source: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, section, source, dir, written)?;
    }
    let page = clap_mangen::Man::new(cmd.clone())
        .section(section)
        .source(source.to_owned())
        .manual("dw-router");
    let path = page
        .generate_to(dir)
        .with_context(|| format!("cannot write a page into {}", dir.display()))?;
    written.push(path);
    Ok(())
}

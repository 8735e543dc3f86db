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
//! The pages get the sections clap has no place for (EXIT STATUS, ENVIRONMENT, FILES, SEE
//! ALSO: [`extra_sections`]), naming installed paths only; a subcommand's page leaves out
//! the global options, which `dwctl(1)` lists once.
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
    for page in pages.iter().chain(&agent_page) {
        let text = fs::read_to_string(page)?;
        if text.contains(" docs/") || text.contains(" examples/") {
            bail!(
                "{} names a source-tree path (docs/ or examples/)",
                page.display()
            );
        }
    }

    let mut dwctl_for_completions = dwctl;
    for (shell, file) in [
        (Shell::Bash, "dwctl.bash"),
        (Shell::Zsh, "_dwctl"),
        (Shell::Fish, "dwctl.fish"),
    ] {
        let path = completions.join(file);
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut dwctl_for_completions, "dwctl", &mut text);
        if shell == Shell::Bash {
            text = bash_completes_files(&String::from_utf8(text)?, "dwctl__subcmd__apply", 2)?
                .into_bytes();
        }
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

/// clap_complete's bash script offers a subcommand's flags for its first word even when
/// the positional argument is a file (`dwctl apply <TAB>`): in the block of `function`
/// (e.g. `dwctl__subcmd__apply`, at word `level`), flags only after a `-`, else file names.
fn bash_completes_files(script: &str, function: &str, level: u32) -> anyhow::Result<String> {
    let start = script
        .find(&format!("{function})"))
        .with_context(|| format!("no {function} block in the bash completion"))?;
    let end = start
        + script[start..]
            .find("\n            ;;")
            .with_context(|| format!("{function} block has no end"))?;
    let block = &script[start..end];
    let flags_first = format!("if [[ ${{cur}} == -* || ${{COMP_CWORD}} -eq {level} ]] ; then");
    let fallback = "COMPREPLY=( $(compgen -W \"${opts}\" -- \"${cur}\") )\n            return 0";
    if !block.contains(&flags_first) || !block.ends_with(fallback) {
        bail!("clap_complete's {function} block changed shape: check bash_completes_files");
    }
    let block = block.replace(&flags_first, "if [[ ${cur} == -* ]] ; then");
    let block = format!(
        "{}compopt -o filenames 2>/dev/null\n            COMPREPLY=( $(compgen -f -- \"${{cur}}\") )\n            return 0",
        &block[..block.len() - fallback.len()]
    );
    Ok(format!("{}{block}{}", &script[..start], &script[end..]))
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
        // The global options are on dwctl(1) once, not on every subcommand's page.
        let sub = sub.clone().mut_args(|arg| {
            if arg.is_global_set() {
                arg.hide(true)
            } else {
                arg
            }
        });
        write_pages(&sub, section, source, dir, written)?;
    }
    let page = clap_mangen::Man::new(cmd.clone())
        .section(section)
        .source(source.to_owned())
        .manual("dw-router");
    let mut roff = Vec::new();
    page.render(&mut roff)?;
    let mut roff = String::from_utf8(roff).context("clap_mangen wrote non-UTF-8")?;
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let extra: String = extra_sections(name)
        .iter()
        .map(|(heading, lines)| {
            let body: Vec<String> = lines.iter().map(|line| roff_line(line)).collect();
            format!(".SH \"{heading}\"\n{}\n", body.join("\n.br\n"))
        })
        .collect();
    // Before VERSION, which clap_mangen writes last.
    match roff.find(".SH VERSION") {
        Some(at) => roff.insert_str(at, &extra),
        None => roff.push_str(&extra),
    }
    let path = dir.join(page.get_filename());
    fs::write(&path, roff).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path);
    Ok(())
}

/// A line of text as roff: backslashes and hyphens escaped, never read as a request.
fn roff_line(line: &str) -> String {
    let escaped = line.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// The sections after the options of the page `name` (`dw-agent`, `dwctl`,
/// `dwctl-drain`, ...): every path named is one the packages install or the units use.
fn extra_sections(name: &str) -> Vec<(&'static str, Vec<String>)> {
    let lines = |lines: &[&str]| -> Vec<String> { lines.iter().map(|&l| l.to_owned()).collect() };
    match name {
        "dw-agent" => vec![
            (
                "EXIT STATUS",
                lines(&[
                    "0  stopped by SIGTERM or SIGINT (SIGHUP is logged and ignored)",
                    "1  cannot start: a file or value a flag names is unusable, the snapshot's directory is missing or not writable, the metrics address cannot be bound",
                    "2  usage: an unknown flag or a bad value (the unit does not restart on it)",
                    "etcd being unreachable is never a reason to exit: the agent retries.",
                ]),
            ),
            (
                "ENVIRONMENT",
                lines(&[
                    "Every option falls back to the DW_AGENT_* variable shown beside it; the unit reads them from /etc/default/dw-agent.",
                    "With none set the agent mirrors a local etcd, http://127.0.0.1:2379.",
                ]),
            ),
            (
                "FILES",
                lines(&[
                    "/etc/default/dw-agent  the unit's environment (a commented conffile)",
                    "/usr/lib/systemd/system/dw-agent.service  the unit, enabled and started on install",
                    "/run/dw-router/routing.json  the snapshot (and routing.json.heartbeat)",
                    "/run/dw-router  the snapshot's directory, owned by dw-agent, 0755: dw-agent.service (RuntimeDirectory=) and /usr/lib/tmpfiles.d/dw-agent.conf make it; without systemd, create it as root before every first start after a boot (/run is emptied): install -d -o dw-agent -g dw-agent -m 0755 /run/dw-router",
                    "/run/dw-router-answers/UID/answers-UID.bin  the answer counters of each --php-users user, read by name; the per-user directories are made by --prepare-dirs (as root: the unit's ExecStartPre) and /usr/lib/tmpfiles.d/dw-agent.conf",
                    "/usr/share/doc/dw-agent/agent.md  the guide; snapshot-format.md, snapshot-trust.md beside it",
                ]),
            ),
            (
                "SEE ALSO",
                lines(&["dwctl(1), systemd.exec(5), /usr/share/doc/dw-agent/agent.md"]),
            ),
        ],
        "dwctl" => vec![
            (
                "EXIT STATUS",
                // dwctl's one list of exit codes (crates/ctl/src/error/exit_status.rs).
                dwctl::EXIT_STATUSES
                    .iter()
                    .map(|status| format!("{}  {}", status.codes_text(), status.help.join(" ")))
                    .collect(),
            ),
            (
                "ENVIRONMENT",
                lines(&[
                    "Every global option falls back to the DWCTL_* variable shown beside it (DWCTL_ENDPOINTS, DWCTL_CACERT, ...); with none set dwctl talks to a local etcd, http://127.0.0.1:2379.",
                    "The units read theirs from /etc/default/dwctl, including DWCTL_REBALANCE_ARGS, DWCTL_HEALTH_ARGS, DWCTL_ORIGIN_TTL, DWCTL_ORIGIN_META and DWCTL_EXPORTER_ARGS.",
                ]),
            ),
            (
                "FILES",
                lines(&[
                    "/etc/default/dwctl  the units' environment (a commented conffile)",
                    "/usr/lib/systemd/system/dwctl-rebalance.service, dwctl-health.service, dwctl-autopilot.service, dwctl-origin@.service, dwctl-fleet-exporter.service  the units, installed disabled",
                    "/usr/share/doc/dwctl/dwctl.md  the guide; routing.md (the format of regions and policy) beside it",
                    "/usr/share/doc/dwctl/examples/  routing.json, routing.toml (for dwctl apply), prometheus.yml",
                    "/usr/share/doc/dwctl/monitoring/  the alerting rules and the Grafana dashboard",
                ]),
            ),
            (
                "SEE ALSO",
                lines(&[
                    "dwctl-apply(1), dwctl-drain(1), dwctl-status(1) and the other dwctl-*(1) pages, dw-agent(8)",
                ]),
            ),
        ],
        _ => vec![
            (
                "EXIT STATUS",
                vec![format!(
                    "dwctl's exit codes, each described in dwctl(1) (not every command gives every one): {}.",
                    dwctl::exit_codes_summary()
                )],
            ),
            (
                "GLOBAL OPTIONS",
                lines(&[
                    "The options of dwctl(1) (etcd connection, prefixes, output, retries) apply to this command too, with their DWCTL_* variables.",
                ]),
            ),
            (
                "SEE ALSO",
                lines(&["dwctl(1), /usr/share/doc/dwctl/dwctl.md"]),
            ),
        ],
    }
}

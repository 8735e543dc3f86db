//! What a first install from the packages met (issue 40, "Also from a first install"):
//! an absent etcd named neither the endpoints tried nor where they came from, the packaged
//! /etc/default/dwctl examples broke a shell that sourced them, and the exit-code lists of
//! the README, docs/dwctl.md and the man pages disagreed with the code.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{Run, run};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// An endpoint nothing listens on: a port the kernel gave out, closed again.
fn refused_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// dwctl with the environment of a fresh shell: no DWCTL_* but what the test sets.
fn dwctl(args: &[&str], endpoints_env: Option<&str>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dwctl"));
    for (name, _) in std::env::vars() {
        if name.starts_with("DWCTL_") {
            command.env_remove(name);
        }
    }
    if let Some(endpoints) = endpoints_env {
        command.env("DWCTL_ENDPOINTS", endpoints);
    }
    command
        .env("USER", "tester")
        .env("DWCTL_DIAL_TIMEOUT", "200ms")
        .env("DWCTL_REQUEST_TIMEOUT", "500ms")
        .args(args);
    run(command)
}

/// An etcd that is not there: the error is followed by the endpoints tried, where they
/// came from (the flag or DWCTL_ENDPOINTS) and where the services take theirs.
#[test]
fn an_absent_etcd_names_the_endpoints_tried_and_where_they_came_from() {
    let absent = refused_endpoint();
    let from_flag = dwctl(&["region", "list", "--endpoints", &absent], None);
    assert_eq!(from_flag.code, 1, "{}", from_flag.stderr);
    let hint = format!("dwctl: etcd endpoints tried: {absent} (from --endpoints); ");
    assert!(from_flag.stderr.contains(&hint), "{}", from_flag.stderr);
    assert!(
        from_flag
            .stderr
            .contains("take DWCTL_ENDPOINTS from /etc/default/dwctl"),
        "{}",
        from_flag.stderr
    );

    let other = refused_endpoint();
    let both = format!("{absent},{other}");
    let from_env = dwctl(&["region", "list"], Some(&both));
    assert_eq!(from_env.code, 1, "{}", from_env.stderr);
    let hint = format!("dwctl: etcd endpoints tried: {both} (from DWCTL_ENDPOINTS); ");
    assert!(from_env.stderr.contains(&hint), "{}", from_env.stderr);

    // A write rides out the unavailability first ("etcd unavailable after N attempts"),
    // then says the same.
    let write = dwctl(
        &[
            "region",
            "set",
            "DE",
            "--shard",
            "eu-1",
            "--origin",
            "fra-a=100",
        ],
        Some(&absent),
    );
    assert_eq!(write.code, 1, "{}", write.stderr);
    assert!(
        write.stderr.contains("etcd unavailable after"),
        "{}",
        write.stderr
    );
    let hint = format!("dwctl: etcd endpoints tried: {absent} (from DWCTL_ENDPOINTS); ");
    assert!(write.stderr.contains(&hint), "{}", write.stderr);

    // A refusal that is not about reaching etcd (a usage error) says nothing of endpoints.
    let usage = dwctl(&["region", "list", "--retries", "0"], Some(&absent));
    assert_eq!(usage.code, 2, "{}", usage.stderr);
    assert!(
        !usage.stderr.contains("endpoints tried"),
        "{}",
        usage.stderr
    );
}

/// The commented examples of the packaged /etc/default files, uncommented, must read in a
/// shell (`set -a; . FILE`) as systemd's EnvironmentFile= reads them: no command run, no
/// word lost, quotes taken off the same way.
#[test]
fn the_packaged_default_files_survive_a_shell_once_uncommented() {
    for file in ["dwctl.default", "dw-agent.default"] {
        let text = std::fs::read_to_string(repo().join("packaging/deb").join(file)).expect(file);
        let mut uncommented = String::new();
        let mut expected = Vec::new();
        for line in text.lines() {
            let assignment = line
                .strip_prefix('#')
                .filter(|rest| is_assignment(rest))
                .unwrap_or(line);
            if is_assignment(assignment) {
                let (name, value) = assignment.split_once('=').expect("an assignment");
                expected.push((name.to_owned(), systemd_value(value)));
            }
            uncommented.push_str(assignment);
            uncommented.push('\n');
        }
        assert!(expected.len() >= 5, "{file}: {expected:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let copy = dir.path().join(file);
        std::fs::write(&copy, uncommented).expect("write");
        let names: Vec<&str> = expected.iter().map(|(name, _)| name.as_str()).collect();
        let output = Command::new("bash")
            .arg("-c")
            .arg(
                r#"set -euo pipefail; set -a; . "$1"; set +a; shift
                   for name in "$@"; do printf '%s=%s\0' "$name" "${!name}"; done"#,
            )
            .arg("bash")
            .arg(&copy)
            .args(&names)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("bash");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stderr.is_empty(),
            "{file}: {stderr}"
        );
        let got: Vec<(String, String)> = String::from_utf8(output.stdout)
            .expect("utf-8")
            .split_terminator('\0')
            .map(|pair| {
                let (name, value) = pair.split_once('=').expect("name=value");
                (name.to_owned(), value.to_owned())
            })
            .collect();
        assert_eq!(
            got, expected,
            "{file}: the shell and systemd read it differently"
        );
    }
    // And what the units do with them: the origin's metadata is JSON, the flags are words.
    let dwctl_default =
        std::fs::read_to_string(repo().join("packaging/deb/dwctl.default")).expect("read");
    let meta = dwctl_default
        .lines()
        .find_map(|line| line.strip_prefix("#DWCTL_ORIGIN_META="))
        .expect("DWCTL_ORIGIN_META");
    let meta: serde_json::Value =
        serde_json::from_str(&systemd_value(meta)).expect("DWCTL_ORIGIN_META is JSON");
    assert!(meta.is_object(), "{meta}");
}

/// `NAME=...` with NAME a shell variable name.
fn is_assignment(line: &str) -> bool {
    line.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.starts_with(|c: char| c.is_ascii_uppercase())
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// A value as systemd's EnvironmentFile= reads it (systemd.exec(5)): whitespace trimmed,
/// one pair of enclosing single or double quotes taken off. The examples use no escapes.
fn systemd_value(value: &str) -> String {
    let value = value.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner.to_owned();
        }
    }
    value.to_owned()
}

/// The README's list and docs/dwctl.md's table name exactly the codes dwctl documents in
/// one place (`dwctl::EXIT_STATUSES`, which --help and the man pages are made from).
#[test]
fn the_docs_list_exactly_the_exit_codes_of_the_code() {
    let normalise = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let summary = dwctl::exit_codes_summary();
    assert!(
        normalise(&readme).contains(&format!("): {summary}.")),
        "README.md does not list the exit codes as dwctl does: {summary}"
    );

    let guide = std::fs::read_to_string(repo().join("docs/dwctl.md")).expect("docs/dwctl.md");
    let section = guide
        .split("\n## Exit codes\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/dwctl.md has an Exit codes section");
    let mut in_table = BTreeSet::new();
    for row in section.lines().filter(|line| line.starts_with("| ")) {
        let first = row.split('|').nth(1).unwrap_or("").trim();
        for code in first.split(',') {
            if let Ok(code) = code.trim().parse::<u8>() {
                in_table.insert(code);
            }
        }
    }
    let documented: BTreeSet<u8> = dwctl::documented_codes().into_iter().collect();
    assert_eq!(in_table, documented, "docs/dwctl.md's exit code table");

    // `dwctl --help` prints the same list.
    let help = dwctl(&["--help"], None);
    assert_eq!(help.code, 0, "{}", help.stderr);
    assert!(
        help.stdout.contains(&dwctl::exit_codes_help()),
        "{}",
        help.stdout
    );
}

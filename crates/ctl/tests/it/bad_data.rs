//! The operator's path under bad data in etcd (issue 21): planted control and bidi
//! characters never reach the terminal, a malformed drain record blocks only its origin,
//! one large value does not break drains, bad numbers in node reports are shown as
//! invalid, and a committed write whose `--wait` fails says it committed.

use std::time::Duration;

use crate::common::{CONTROL, DE, Etcd, drain_key, region_key, seed};
use serde_json::{Value, json};

/// Values an attacker with write access to etcd plants: ESC sequences (clear screen,
/// conceal, OSC 0 window title, OSC 52 clipboard), a bidi override, and a newline that
/// forges a line of dwctl's own.
const PLANTED: [&str; 6] = [
    "\u{1b}[2J",
    "\u{1b}[8m",
    "\u{1b}]0;owned\u{7}",
    "\u{1b}]52;c;ZWNobyBvd25lZA==\u{7}",
    "\u{202e}evil",
    "\nFORGED fleet: 999/999 live nodes",
];

fn planted(tag: &str) -> String {
    format!("{tag}{}", PLANTED.concat())
}

/// No character a terminal acts on (besides dwctl's own newlines), and no forged line.
fn assert_terminal_safe(what: &str, text: &str) {
    for c in text.chars() {
        assert!(
            c == '\n' || !dwctl::is_unsafe_char(c),
            "{what}: raw {:?} reached the terminal:\n{text}",
            c
        );
    }
    assert!(
        !text.lines().any(|line| line.starts_with("FORGED")),
        "{what}: a planted newline forged a line:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_planted_control_or_bidi_character_reaches_the_terminal() {
    let etcd = Etcd::start().await;
    let evil = planted("e");
    let evil_json = |text: &str| Value::from(text).to_string();
    // A region whose shard, origin and unknown field carry the payloads (valid for the
    // readers or not: both paths print), and one whose geo does.
    let region = format!(
        r#"{{"shard":{},"origins":[{},"b"],"weight":{{{}:50,"b":50}},"note":{}}}"#,
        evil_json(&evil),
        evil_json(&evil),
        evil_json(&evil),
        evil_json(&evil)
    );
    etcd.put(&region_key("DE"), &region).await;
    etcd.put(&region_key(&evil), DE).await;
    etcd.put(&region_key("XX"), &format!("not json {evil}"))
        .await;
    etcd.put(
        &format!("{}policy/global", crate::common::PREFIX),
        &json!({"default": evil, "pick": evil}).to_string(),
    )
    .await;
    etcd.put(&format!("{}origin/{evil}", crate::common::PREFIX), &evil)
        .await;
    let record = json!({
        "origin": "fra-b", "reason": evil, "source": evil, "by": evil, "at": evil,
        "regions": {evil.clone(): {"before": {"shard": evil, "origins": ["fra-b", "x"], "weight": {"fra-b": 1, "x": 1}},
                                     "after": {"shard": evil, "origins": ["x"], "weight": {"x": 100}}}},
    });
    etcd.put(&drain_key("fra-b"), &record.to_string()).await;
    etcd.put(&drain_key("lon-a"), &format!("garbage {evil}"))
        .await;
    let report = json!({
        "revision": 1, "state": evil, "reason": evil, "labels": {evil.clone(): evil},
        "published_at_ms": 1, "reported_at_ms": 1,
    });
    etcd.put(&format!("/dw/nodes/{evil}"), &report.to_string())
        .await;

    let dir = tempfile::tempdir().unwrap();
    let desired = dir.path().join("desired.json");
    std::fs::write(
        &desired,
        json!({"regions": {"DE": {"shard": "eu-1", "origins": ["a"], "weight": {"a": 100}}}})
            .to_string(),
    )
    .unwrap();
    let desired = desired.display().to_string();
    let history_key = format!("region/{evil}");
    let drain_history = format!("{CONTROL}drains/lon-a");
    let commands: Vec<Vec<&str>> = vec![
        vec!["region", "list"],
        vec!["region", "get", "DE"],
        vec!["region", "get", "XX"],
        vec!["region", "get", &evil],
        vec!["policy", "get"],
        vec!["status"],
        vec!["history", "region/DE"],
        vec!["history", &history_key],
        vec!["history", &drain_history],
        vec!["origin", "list"],
        vec!["drain", "b", "--dry-run"],
        vec!["drain", "fra-a", "--dry-run"],
        vec!["drain", "lon-a"],
        vec!["restore", "fra-b", "--dry-run"],
        vec!["apply", &desired, "--dry-run"],
        vec!["region", "set", "FR", DE, "--wait=1s"],
        vec!["rollback", "region/DE", "--to-revision", "2", "--dry-run"],
    ];
    let mut escaped_somewhere = false;
    for args in &commands {
        let run = etcd.dwctl(args);
        assert_terminal_safe(&format!("dwctl {args:?} stdout"), &run.stdout);
        assert_terminal_safe(&format!("dwctl {args:?} stderr"), &run.stderr);
        escaped_somewhere |= run.stdout.contains("\\u{1b}") || run.stderr.contains("\\u{1b}");
        // JSON stays exact: the planted value comes back byte for byte.
        let (_, json, _) = etcd.dwctl_json(args);
        if args.len() == 3 && args[..] == ["region", "get", "DE"] {
            assert_eq!(json["value"]["shard"], evil.as_str());
        }
    }
    assert!(escaped_somewhere, "the payloads were shown escaped");
    let list = etcd.dwctl(&["region", "list"]);
    assert!(list.stdout.contains("\\u{1b}[2J"), "{}", list.stdout);
    assert!(list.stdout.contains("\\u{202e}evil"), "{}", list.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_drain_record_blocks_only_its_origin_until_repaired() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let drain = etcd.dwctl(&["drain", "ams-a"]);
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    etcd.put(&drain_key("lon-a"), "garbage").await;

    // Commands about other origins go ahead.
    for args in [
        vec!["drain", "fra-b", "--dry-run"],
        vec!["drain", "fra-b"],
        vec!["restore", "fra-b"],
        vec!["restore", "ams-a"],
        vec!["region", "set", "FR", DE],
        vec!["policy", "set", r#"{"default":"DE"}"#],
    ] {
        let run = etcd.dwctl(&args);
        assert_eq!(run.code, 0, "dwctl {args:?}: {}", run.stderr);
    }
    let dir = tempfile::tempdir().unwrap();
    let desired = dir.path().join("desired.json");
    std::fs::write(
        &desired,
        json!({"regions": {"AT": serde_json::from_str::<Value>(DE).unwrap()}}).to_string(),
    )
    .unwrap();
    let apply = etcd.dwctl(&["apply", desired.to_str().unwrap(), "--dry-run"]);
    assert_eq!(apply.code, 0, "{}", apply.stderr);

    // Commands about lon-a are refused, pointing at the repair.
    for args in [vec!["drain", "lon-a"], vec!["restore", "lon-a"]] {
        let run = etcd.dwctl(&args);
        assert_eq!(run.code, 1, "dwctl {args:?}: {}", run.stdout);
        assert!(
            run.stderr.contains("drain --repair lon-a"),
            "{}",
            run.stderr
        );
    }
    // status, origin list and history name it.
    let status = etcd.dwctl(&["status"]);
    assert!(
        status.stdout.contains("drain record of lon-a is malformed"),
        "{}",
        status.stdout
    );
    let origins = etcd.dwctl(&["origin", "list"]);
    assert!(
        origins.stdout.contains("lon-a") && origins.stdout.contains("MALFORMED"),
        "{}",
        origins.stdout
    );
    let history = etcd.dwctl(&["history", &drain_key("lon-a")]);
    assert!(
        history.stdout.contains("MALFORMED DRAIN RECORD"),
        "{}",
        history.stdout
    );

    // A valid record is not "repaired"; the malformed one is, with an audit record.
    let valid = etcd.dwctl(&["drain", "fra-a", "--force"]);
    assert_eq!(valid.code, 0, "{}", valid.stderr);
    let refused = etcd.dwctl(&["drain", "--repair", "fra-a"]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(etcd.get(&drain_key("fra-a")).await.is_some());
    let (code, repaired, stderr) =
        etcd.dwctl_json(&["drain", "--repair", "lon-a", "--reason", "INC-9"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(etcd.get(&drain_key("lon-a")).await.is_none());
    let audit = etcd
        .get_json(repaired["audit_key"].as_str().unwrap())
        .await
        .expect("an audit record");
    assert_eq!(audit["action"], "drain-repair");
    assert_eq!(audit["removed"]["value"], "garbage");
    assert_eq!(audit["reason"], "INC-9");
    assert_eq!(
        audit["by"].as_str().map(|by| by.starts_with("tester")),
        Some(true)
    );
    let again = etcd.dwctl(&["drain", "--repair", "lon-a"]);
    assert_eq!(again.code, 1, "no record left to repair");
}

/// `drain --repair` keeps at most 64 KiB of the removed value in its audit record (the
/// whole value stays in etcd's history): a record of exactly 64 KiB is kept whole, one byte
/// more is cut at 64 KiB and said to be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_audit_keeps_at_most_64_kib_of_the_removed_record() {
    const KEPT: usize = 64 * 1024;
    let etcd = Etcd::start().await;
    for (origin, bytes) in [("edge-a", KEPT), ("edge-b", KEPT + 1)] {
        etcd.put(&drain_key(origin), &"x".repeat(bytes)).await;
        let (code, repaired, stderr) =
            etcd.dwctl_json(&["drain", "--repair", origin, "--reason", "edge"]);
        assert_eq!(code, 0, "{origin}: {stderr}");
        let audit = etcd
            .get_json(repaired["audit_key"].as_str().unwrap())
            .await
            .expect("an audit record");
        let removed = &audit["removed"];
        assert_eq!(removed["bytes"], bytes, "{origin}");
        assert_eq!(
            removed["value"].as_str().map(str::len),
            Some(KEPT),
            "{origin}"
        );
        assert_eq!(removed["truncated"], bytes > KEPT, "{origin}");
        assert!(etcd.get(&drain_key(origin)).await.is_none(), "{origin}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_records_in_todays_format_still_restore() {
    let etcd = Etcd::start().await;
    // As a drain of fra-a left things with the previous dwctl: DE renormalised, AT
    // deleted (--force), the record holding whole values with unknown fields, no schema.
    etcd.put(
        &region_key("DE"),
        r#"{"shard":"eu-1","origins":["fra-b"],"weight":{"fra-b":100},"note":"x","updated":"t"}"#,
    )
    .await;
    let record = r#"{"origin":"fra-a","reason":"INC-1","source":"cli","by":"ops@host","at":"2026-01-01T00:00:00Z","regions":{"DE":{"before":{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50},"note":"x"},"after":{"shard":"eu-1","origins":["fra-b"],"weight":{"fra-b":100},"note":"x"}},"AT":{"before":{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":100},"keep":true},"after":null}}}"#;
    etcd.put(&drain_key("fra-a"), record).await;
    let restore = etcd.dwctl(&["restore", "fra-a"]);
    assert_eq!(restore.code, 0, "{}", restore.stderr);
    let de = etcd.get_json(&region_key("DE")).await.unwrap();
    assert_eq!(de["weight"], json!({"fra-a": 50, "fra-b": 50}));
    assert_eq!(de["note"], "x");
    let at = etcd.get_json(&region_key("AT")).await.unwrap();
    assert_eq!(at["keep"], true, "a deleted region comes back whole");
    assert!(etcd.get(&drain_key("fra-a")).await.is_none());

    // New records carry their schema.
    let drain = etcd.dwctl(&["drain", "fra-b"]);
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    let written = etcd.get_json(&drain_key("fra-b")).await.unwrap();
    assert_eq!(written["schema"], dwctl::DRAIN_RECORD_SCHEMA);
}

/// A region value of about `bytes` bytes: a large unknown field.
fn large_region(origin: &str, bytes: usize) -> String {
    json!({"shard": "eu-1", "origins": [origin, "b"], "weight": {origin: 50, "b": 50}, "blob": "x".repeat(bytes)}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_large_value_does_not_break_drains_and_too_large_plans_are_refused() {
    let etcd = Etcd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("large.json");
    std::fs::write(&file, large_region("fra-a", 900 * 1024)).unwrap();
    let set = etcd.dwctl(&["region", "set", "DE", "--file", file.to_str().unwrap()]);
    assert_eq!(set.code, 0, "{}", set.stderr);

    // The drain rewrites the 900 KB value once; its record keeps only what restore needs.
    let dry = etcd.dwctl(&["drain", "fra-a", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("bytes, --max-request-bytes 1572864"),
        "{}",
        dry.stdout
    );
    let drain = etcd.dwctl(&["drain", "fra-a"]);
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    let (record, _) = etcd.get(&drain_key("fra-a")).await.unwrap();
    assert!(record.len() < 1024, "the record is {} bytes", record.len());
    let restore = etcd.dwctl(&["restore", "fra-a"]);
    assert_eq!(restore.code, 0, "{}", restore.stderr);
    let de = etcd.get_json(&region_key("DE")).await.unwrap();
    assert_eq!(de["weight"], json!({"fra-a": 50, "b": 50}));
    assert_eq!(de["blob"].as_str().map(str::len), Some(900 * 1024));

    // Two such regions in one drain are more than etcd takes: refused before sending,
    // in the dry run too, naming the setting; nothing written.
    std::fs::write(&file, large_region("fra-a", 900 * 1024)).unwrap();
    let set = etcd.dwctl(&["region", "set", "AT", "--file", file.to_str().unwrap()]);
    assert_eq!(set.code, 0, "{}", set.stderr);
    let before = etcd.revision().await;
    for extra in [vec!["--dry-run"], vec![]] {
        let mut args = vec!["drain", "fra-a"];
        args.extend(extra);
        let run = etcd.dwctl(&args);
        assert_eq!(run.code, 4, "{args:?}: {}", run.stdout);
        assert!(
            run.stderr.contains("--max-request-bytes 1572864"),
            "{}",
            run.stderr
        );
    }
    assert_eq!(etcd.revision().await, before, "nothing was written");
    // Lowering the setting refuses smaller plans; raising it past etcd's own limit lets
    // etcd refuse, and dwctl says why.
    let small = etcd.dwctl(&[
        "--max-request-bytes",
        "4096",
        "drain",
        "fra-a",
        "--region",
        "DE",
    ]);
    assert_eq!(small.code, 4, "{}", small.stderr);
    let raised = etcd.dwctl(&["--max-request-bytes", "4000000", "drain", "fra-a"]);
    assert_eq!(raised.code, 1, "{}", raised.stdout);
    assert!(raised.stderr.contains("lower dwctl's"), "{}", raised.stderr);
    assert_eq!(etcd.revision().await, before, "nothing was written");

    // The value limit holds on every write path: a file of exactly the input limit whose
    // stored value (with `updated`) is past 1 MiB is refused, as is the same in apply.
    let limit = 1024 * 1024;
    let padding = limit - large_region("fra-a", 0).len();
    let value = large_region("fra-a", padding);
    assert_eq!(value.len(), limit);
    std::fs::write(&file, &value).unwrap();
    let set = etcd.dwctl(&["region", "set", "FR", "--file", file.to_str().unwrap()]);
    assert_eq!(set.code, 4, "{}", set.stderr);
    assert!(set.stderr.contains("1048576"), "{}", set.stderr);
    // In apply: a file of exactly the input limit, `{"regions":{"FR":` + value + `}}`.
    let value = large_region("fra-a", padding - 19);
    let desired = dir.path().join("desired.json");
    std::fs::write(&desired, format!(r#"{{"regions":{{"FR":{value}}}}}"#)).unwrap();
    assert_eq!(std::fs::metadata(&desired).unwrap().len(), limit as u64);
    let apply = etcd.dwctl(&["apply", desired.to_str().unwrap()]);
    assert_eq!(apply.code, 4, "{}", apply.stderr);
    assert!(apply.stderr.contains("1048576"), "{}", apply.stderr);
    assert!(etcd.get(&region_key("FR")).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_numbers_in_node_reports_are_shown_as_invalid() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let report = |revision: Value| {
        json!({"revision": revision, "state": "ok", "published_at_ms": 1, "reported_at_ms": 1})
            .to_string()
    };
    etcd.put("/dw/nodes/min", &report(json!(i64::MIN))).await;
    etcd.put("/dw/nodes/text", &report(json!("7"))).await;
    etcd.put("/dw/nodes/float", &report(json!(1.5))).await;
    let status = etcd.dwctl(&["status"]);
    assert_eq!(
        status.code, 5,
        "no invalid node counts as current: {}",
        status.stdout
    );
    for id in ["min", "text", "float"] {
        let line = status
            .stdout
            .lines()
            .find(|line| line.starts_with(id))
            .unwrap_or_else(|| panic!("{id} listed: {}", status.stdout));
        assert!(line.contains("invalid"), "{line}");
        assert!(!line.contains("9223372036854775808"), "{line}");
    }
    assert!(
        status.stdout.contains("0 of 3 live nodes"),
        "{}",
        status.stdout
    );
    let (_, json, _) = etcd.dwctl_json(&["status"]);
    let node = &json["nodes"][0];
    assert_eq!(node["revision"], Value::Null);
    assert_eq!(node["lag_revisions"], Value::Null);
    let wait = etcd.dwctl(&["region", "set", "FR", DE, "--wait=500ms"]);
    assert_eq!(wait.code, 5, "{}", wait.stdout);
    assert!(wait.stdout.contains("0/3 live nodes"), "{}", wait.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_write_whose_wait_fails_says_it_committed() {
    let etcd = Etcd::start().await;
    // An operator who may write routing but not read the node reports.
    for args in [
        vec!["user", "add", "root:rootpw", "--interactive=false"],
        vec!["user", "add", "ops:opspw", "--interactive=false"],
        vec!["role", "add", "ops"],
        vec![
            "role",
            "grant-permission",
            "ops",
            "readwrite",
            "/dw/routing/",
            "--prefix=true",
        ],
        vec![
            "role",
            "grant-permission",
            "ops",
            "readwrite",
            "/dw/control/",
            "--prefix=true",
        ],
        vec!["user", "grant-role", "ops", "ops"],
        vec!["auth", "enable"],
    ] {
        etcd.etcdctl(&args);
    }
    let ops = ["--user", "ops", "--password", "opspw"];
    let mut args: Vec<&str> = ops.to_vec();
    args.extend(["region", "set", "DE", DE, "--wait=2s"]);
    let run = etcd.dwctl(&args);
    assert_eq!(run.code, 6, "stdout {}\nstderr {}", run.stdout, run.stderr);
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(first.contains("committed at revision"), "{}", run.stdout);
    assert!(
        run.stderr.contains("the write committed at revision"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("waiting for the fleet failed"),
        "{}",
        run.stderr
    );

    let mut args: Vec<&str> = vec!["--output", "json"];
    args.extend(ops);
    args.extend(["region", "set", "DE", DE, "--wait=2s"]);
    let run = etcd.dwctl(&args);
    assert_eq!(run.code, 6, "{}", run.stderr);
    let json: Value = serde_json::from_str(run.stdout.trim()).expect("one JSON document");
    assert!(
        json["revision"]
            .as_i64()
            .is_some_and(|revision| revision > 0),
        "{json}"
    );
    assert_eq!(json["error"]["kind"], "wait-failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_during_wait_after_the_commit_says_the_write_committed() {
    let etcd = Etcd::start().await;
    // A live node that never catches up.
    etcd.put(
        "/dw/nodes/n1",
        &json!({"revision": 1, "state": "ok"}).to_string(),
    )
    .await;
    let mut child = etcd
        .tokio_command(&["region", "set", "DE", DE, "--wait=60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn dwctl");
    let pid = child.id().expect("a pid");
    // The commit line comes first, before the wait ends.
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        tokio::io::AsyncBufReadExt::read_line(&mut stdout, &mut first),
    )
    .await
    .expect("the commit line within 20 s")
    .expect("read");
    assert!(first.contains("committed at revision"), "{first}");
    dw_etcd_testkit::signal(pid, libc_sigint());
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("dwctl exits on SIGINT")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("the write committed at revision"),
        "{stderr}"
    );
    assert!(!stderr.contains("no transaction was sent"), "{stderr}");
}

fn libc_sigint() -> i32 {
    2
}

/// The long-running commands print one line per event: an origin id planted in etcd with
/// a newline and an ESC (which `rebalance` names in its events) cannot forge an event line
/// of its own, nor drive the terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_origin_id_cannot_forge_an_event_line() {
    let etcd = Etcd::start().await;
    // The text of an escape too (`\u{7}`): shown with its backslash doubled, it cannot pass
    // for an escaped BEL.
    let id = "x\\u{7}\u{1b}[8m\u{1b}]0;owned\u{7}\u{202e}\nFORGED up: y registered";
    let rebalance = crate::common::daemon::Daemon::start(
        &etcd,
        "rebalance",
        &["rebalance", "--grace", "100ms"],
    );
    crate::common::eventually(Duration::from_secs(10), "rebalance lists", || async {
        rebalance.log().contains(" live, ").then_some(())
    })
    .await;
    let key = format!("{}origin/{id}", crate::common::PREFIX);
    etcd.put(&key, r#"{"addr":"10.0.0.1:443"}"#).await;
    crate::common::eventually(Duration::from_secs(10), "rebalance sees it", || async {
        rebalance.log().contains("y registered").then_some(())
    })
    .await;
    etcd.client()
        .await
        .delete(key.as_str(), None)
        .await
        .unwrap();
    crate::common::eventually(
        Duration::from_secs(10),
        "rebalance sees it vanish",
        || async { rebalance.log().contains("vanished").then_some(()) },
    )
    .await;
    let log = rebalance.log();
    assert_eq!(rebalance.terminate().await, 0);
    assert_terminal_safe("rebalance's events", &log);
    assert!(
        log.contains(
            "up: x\\\\u{7}\\u{1b}[8m\\u{1b}]0;owned\\u{7}\\u{202e}\\u{a}FORGED up: y registered"
        ),
        "{log}"
    );
    assert!(
        log.lines().all(|line| line.contains(": ")),
        "every line is one event:\n{log}"
    );
}

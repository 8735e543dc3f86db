//! The one-shot commands against a real etcd: happy paths, atomic drains and restores,
//! apply, history and rollback (bad input is in `usage.rs`).

use crate::common::{
    CONTROL, DE, Etcd, PREFIX, drain_key, listed_weights, region_key, seed, weight_sum,
};
use serde_json::{Value, json};

fn weights(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs
        .iter()
        .map(|(name, weight)| (name.to_string(), *weight))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn region_set_get_list_delete() {
    let etcd = Etcd::start().await;
    let run = etcd.dwctl(&["region", "set", "DE", DE]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = etcd.dwctl(&[
        "region", "set", "FR", "--shard", "eu-2", "--origin", "par-a=70", "--origin", "par-b=30",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // Compact JSON, known fields first, a real UTC `updated` last.
    let (stored, _) = etcd.get(&region_key("DE")).await.expect("DE written");
    assert!(stored.starts_with(r#"{"shard":"eu-1","origins":["fra-a","fra-b","ams-a"],"weight":{"fra-a":50,"fra-b":30,"ams-a":20},"updated":""#), "{stored}");
    let updated = serde_json::from_str::<Value>(&stored).unwrap()["updated"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(updated.len(), 20, "{updated}");
    assert!(
        updated.ends_with('Z') && updated.as_str() > "2025-01-01T00:00:00Z",
        "{updated}"
    );
    let now = dwctl::now_rfc3339();
    assert!(
        updated.as_str() <= now.as_str(),
        "{updated} is in the future"
    );

    let fr = etcd.get_json(&region_key("FR")).await.expect("FR written");
    assert_eq!(
        listed_weights(&fr),
        weights(&[("par-a", 70), ("par-b", 30)])
    );

    let (code, got, _) = etcd.dwctl_json(&["region", "get", "DE"]);
    assert_eq!(code, 0);
    assert_eq!(got["valid"], true);
    assert_eq!(got["value"]["shard"], "eu-1");

    // An invalid value written behind dwctl's back is shown as such, not hidden.
    etcd.put(&region_key("XX"), r#"{"shard":"x"}"#).await;
    let (code, listed, _) = etcd.dwctl_json(&["region", "list"]);
    assert_eq!(code, 0);
    let rows = listed["regions"].as_array().unwrap();
    assert_eq!(
        rows.iter()
            .map(|row| row["geo"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["DE", "FR", "XX"]
    );
    assert_eq!(rows[2]["valid"], false);
    assert!(rows[2]["error"].as_str().unwrap().contains("origins"));
    let text = etcd.dwctl(&["region", "list"]);
    assert!(text.stdout.contains("XX     INVALID"), "{}", text.stdout);

    assert_eq!(etcd.dwctl(&["region", "delete", "FR"]).code, 0);
    assert!(etcd.get(&region_key("FR")).await.is_none());
    assert_eq!(etcd.dwctl(&["region", "get", "FR"]).code, 1);
    assert_eq!(etcd.dwctl(&["region", "delete", "FR"]).code, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_across_three_regions_is_one_revision_and_restore_gives_everything_back() {
    let etcd = Etcd::start().await;
    seed(
        &etcd,
        &[
            ("DE", DE),
            ("FR", r#"{"shard":"eu-2","origins":["fra-a","par-a","par-b","par-c"],"weight":{"fra-a":1,"par-a":1,"par-b":1,"par-c":1}}"#),
            ("NL", r#"{"shard":"eu-3","origins":["ams-a","fra-a"],"weight":{"ams-a":7,"fra-a":3}}"#),
            ("US", r#"{"shard":"us-1","origins":["iad-a"],"weight":{"iad-a":100}}"#),
        ],
    )
    .await;
    let originals: Vec<Value> = futures_lite_join(&etcd, &["DE", "FR", "NL"]).await;
    let us_revision = etcd.get(&region_key("US")).await.unwrap().1;

    // Dry run: the plan is shown, nothing is written.
    let before = etcd.revision().await;
    let (code, preview, _) = etcd.dwctl_json(&["drain", "fra-a", "--dry-run"]);
    assert_eq!(code, 0);
    assert_eq!(preview["dry_run"], true);
    assert_eq!(preview["regions"].as_object().unwrap().len(), 3);
    assert_eq!(etcd.revision().await, before);

    let (code, drained, stderr) = etcd.dwctl_json(&["drain", "fra-a", "--reason", "INC-1: 502s"]);
    assert_eq!(code, 0, "{stderr}");
    let revision = drained["revision"].as_i64().expect("a commit revision");
    for geo in ["DE", "FR", "NL"] {
        let (value, mod_revision) = etcd.get(&region_key(geo)).await.unwrap();
        assert_eq!(
            mod_revision, revision,
            "{geo} changed in the same transaction"
        );
        let value: Value = serde_json::from_str(&value).unwrap();
        assert_eq!(weight_sum(&value), 100, "{geo}: {value}");
        assert!(
            !value["origins"]
                .as_array()
                .unwrap()
                .contains(&json!("fra-a"))
        );
    }
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("DE")).await.unwrap()),
        weights(&[("fra-b", 60), ("ams-a", 40)])
    );
    // 1:1:1 of 100 by largest remainder: the extra unit goes to the first.
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("FR")).await.unwrap()),
        weights(&[("par-a", 34), ("par-b", 33), ("par-c", 33)])
    );
    assert_eq!(
        etcd.get(&region_key("US")).await.unwrap().1,
        us_revision,
        "US does not list fra-a"
    );

    let (record, record_revision) = etcd.get(&drain_key("fra-a")).await.expect("a drain record");
    assert_eq!(
        record_revision, revision,
        "the drain record lands in the same transaction"
    );
    let record: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["reason"], "INC-1: 502s");
    assert_eq!(record["source"], "cli");
    assert!(record["by"].as_str().unwrap().starts_with("tester@"));
    assert_eq!(
        record["regions"]["NL"]["before"]["weight"],
        json!({"ams-a": 7, "fra-a": 3})
    );

    // `origin list` shows who drained what, registered or not.
    let listed = etcd.dwctl(&["origin", "list"]);
    assert!(
        listed.stdout.contains("fra-a") && listed.stdout.contains("drained by cli: INC-1: 502s"),
        "{}",
        listed.stdout
    );

    // Draining again is a no-op.
    let (code, again, _) = etcd.dwctl_json(&["drain", "fra-a"]);
    assert_eq!(code, 0);
    assert_eq!(again["revision"], Value::Null);

    let (code, restored, stderr) = etcd.dwctl_json(&["restore", "fra-a"]);
    assert_eq!(code, 0, "{stderr}");
    let revision = restored["revision"].as_i64().unwrap();
    for (geo, original) in ["DE", "FR", "NL"].iter().zip(&originals) {
        let (value, mod_revision) = etcd.get(&region_key(geo)).await.unwrap();
        assert_eq!(mod_revision, revision);
        let value: Value = serde_json::from_str(&value).unwrap();
        assert_eq!(listed_weights(&value), listed_weights(original), "{geo}");
        assert_eq!(value["shard"], original["shard"]);
    }
    assert!(
        etcd.get(&drain_key("fra-a")).await.is_none(),
        "the record is gone"
    );
}

async fn futures_lite_join(etcd: &Etcd, geos: &[&str]) -> Vec<Value> {
    let mut values = Vec::new();
    for geo in geos {
        values.push(etcd.get_json(&region_key(geo)).await.unwrap());
    }
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_never_empties_a_region_unless_forced_and_restore_adapts_to_changes() {
    let etcd = Etcd::start().await;
    seed(
        &etcd,
        &[
            ("DE", DE),
            (
                "LU",
                r#"{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":100}}"#,
            ),
        ],
    )
    .await;
    let before = etcd.revision().await;
    let (code, refused, _) = etcd.dwctl_json(&["drain", "fra-a"]);
    assert_eq!(code, 4);
    assert_eq!(refused["error"]["fields"][0]["field"], "region");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`LU`")
    );
    assert_eq!(
        etcd.revision().await,
        before,
        "a refused drain writes nothing"
    );

    // Only DE: allowed.
    let (code, _, stderr) = etcd.dwctl_json(&["drain", "fra-a", "--region", "DE"]);
    assert_eq!(code, 0, "{stderr}");
    // Then LU with --force: its key goes, and the record now covers both.
    let (code, _, stderr) = etcd.dwctl_json(&["drain", "fra-a", "--region", "LU", "--force"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(etcd.get(&region_key("LU")).await.is_none());
    let record = etcd.get_json(&drain_key("fra-a")).await.unwrap();
    assert_eq!(drained_regions(&record), ["DE", "LU"]);

    // DE changes while fra-a is drained.
    seed(&etcd, &[("DE", r#"{"shard":"eu-1","origins":["fra-b","ams-a","ams-b"],"weight":{"fra-b":1,"ams-a":1,"ams-b":2}}"#)]).await;
    let restore = etcd.dwctl(&["restore", "fra-a"]);
    assert_eq!(restore.code, 0, "{}", restore.stderr);
    assert!(
        restore.stdout.contains("region DE changed since the drain"),
        "{}",
        restore.stdout
    );
    let de = etcd.get_json(&region_key("DE")).await.unwrap();
    // fra-a had 50 of 100: it gets 50 back, the rest share the other 50 (1:1:2).
    assert_eq!(
        listed_weights(&de),
        weights(&[("fra-a", 50), ("fra-b", 13), ("ams-a", 12), ("ams-b", 25)])
    );
    let lu = etcd
        .get_json(&region_key("LU"))
        .await
        .expect("LU recreated");
    assert_eq!(listed_weights(&lu), weights(&[("fra-a", 100)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_a_drained_origin_back_updates_its_drain_record() {
    let etcd = Etcd::start().await;
    seed(
        &etcd,
        &[
            ("DE", DE),
            (
                "AT",
                r#"{"shard":"eu-1","origins":["fra-a","vie-a"],"weight":{"fra-a":50,"vie-a":50}}"#,
            ),
        ],
    )
    .await;
    assert_eq!(etcd.dwctl(&["drain", "fra-a"]).code, 0);
    let (code, set, _) = etcd.dwctl_json(&[
        "region",
        "set",
        "AT",
        r#"{"shard":"eu-1","origins":["fra-a","vie-a"],"weight":{"fra-a":10,"vie-a":90}}"#,
    ]);
    assert_eq!(code, 0);
    let revision = set["revision"].as_i64().unwrap();
    let (record, record_revision) = etcd.get(&drain_key("fra-a")).await.unwrap();
    assert_eq!(
        record_revision, revision,
        "the record changes with the region"
    );
    let record: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(drained_regions(&record), ["DE"]);
    // Setting DE back with fra-a closes the record entirely.
    seed(&etcd, &[("DE", DE)]).await;
    assert!(etcd.get(&drain_key("fra-a")).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_prints_the_diff_and_writes_one_transaction() {
    let etcd = Etcd::start().await;
    seed(
        &etcd,
        &[("XX", r#"{"shard":"x","origins":["x"],"weight":{"x":1}}"#)],
    )
    .await;
    let dir = std::env::temp_dir().join(format!("dwctl-apply-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json_path = dir.join("routing.json");
    let desired = json!({
        "policy": {"default": "US", "failover": ["GB", "US"], "pick": "legacy"},
        "regions": {
            "DE": {"shard": "eu-1", "origins": ["fra-a", "fra-b"], "weight": {"fra-a": 50, "fra-b": 50}},
            "GB": {"shard": "eu-2", "origins": ["lhr-a"], "weight": {"lhr-a": 100}},
            "US": {"shard": "us-1", "origins": ["iad-a", "iad-b"], "weight": {"iad-a": 60, "iad-b": 40}},
        }
    });
    std::fs::write(&json_path, desired.to_string()).unwrap();
    let path = json_path.display().to_string();

    let before = etcd.revision().await;
    let dry = etcd.dwctl(&["apply", &path, "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(dry.stdout.contains("+ region/DE"), "{}", dry.stdout);
    assert!(dry.stdout.contains("+ policy/global"), "{}", dry.stdout);
    assert!(
        dry.stdout.contains("--prune"),
        "mentions the kept XX: {}",
        dry.stdout
    );
    assert_eq!(etcd.revision().await, before);

    let (code, applied, stderr) = etcd.dwctl_json(&["apply", &path]);
    assert_eq!(code, 0, "{stderr}");
    let revision = applied["revision"].as_i64().unwrap();
    for key in [
        region_key("DE"),
        region_key("GB"),
        region_key("US"),
        format!("{PREFIX}policy/global"),
    ] {
        assert_eq!(
            etcd.get(&key).await.unwrap().1,
            revision,
            "{key} in the one transaction"
        );
    }
    assert!(
        etcd.get(&region_key("XX")).await.is_some(),
        "kept without --prune"
    );

    let (code, again, _) = etcd.dwctl_json(&["apply", &path]);
    assert_eq!(code, 0);
    assert_eq!(
        again["revision"],
        Value::Null,
        "nothing to do the second time"
    );
    assert_eq!(again["diff"], json!([]));

    // The same state in TOML, one weight changed, with --prune.
    let toml_path = dir.join("routing.toml");
    std::fs::write(
        &toml_path,
        "[policy]\ndefault = \"US\"\nfailover = [\"GB\", \"US\"]\npick = \"legacy\"\n\n\
         [regions.DE]\nshard = \"eu-1\"\norigins = [\"fra-a\", \"fra-b\"]\nweight = { fra-a = 70, fra-b = 30 }\n\n\
         [regions.GB]\nshard = \"eu-2\"\norigins = [\"lhr-a\"]\nweight = { lhr-a = 100 }\n\n\
         [regions.US]\nshard = \"us-1\"\norigins = [\"iad-a\", \"iad-b\"]\nweight = { iad-a = 60, iad-b = 40 }\n",
    )
    .unwrap();
    let pruned = etcd.dwctl(&["apply", &toml_path.display().to_string(), "--prune"]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(
        pruned
            .stdout
            .contains("~ region/DE weight.fra-a: 50 -> 70; weight.fra-b: 50 -> 30"),
        "{}",
        pruned.stdout
    );
    assert!(pruned.stdout.contains("- region/XX"), "{}", pruned.stdout);
    assert!(
        !pruned.stdout.contains("region/GB"),
        "unchanged keys are not in the diff: {}",
        pruned.stdout
    );
    assert!(etcd.get(&region_key("XX")).await.is_none());
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("DE")).await.unwrap()),
        weights(&[("fra-a", 70), ("fra-b", 30)])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_get_and_set() {
    let etcd = Etcd::start().await;
    let (code, missing, _) = etcd.dwctl_json(&["policy", "get"]);
    assert_eq!(code, 0);
    assert_eq!(missing["exists"], false);
    assert_eq!(
        etcd.dwctl(&[
            "policy",
            "set",
            r#"{"default":"DE","pick":"rendezvous","team":"edge"}"#
        ])
        .code,
        0
    );
    let stored = etcd.get(&format!("{PREFIX}policy/global")).await.unwrap().0;
    assert!(
        stored.starts_with(r#"{"default":"DE","pick":"rendezvous","team":"edge","updated":""#),
        "{stored}"
    );
    let (_, got, _) = etcd.dwctl_json(&["policy", "get"]);
    assert_eq!(got["valid"], true);
    assert_eq!(got["value"]["team"], "edge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lists_past_values_and_rollback_puts_one_back() {
    let etcd = Etcd::start().await;
    let first = r#"{"shard":"eu-1","origins":["a"],"weight":{"a":100}}"#;
    let (_, set, _) = etcd.dwctl_json(&["region", "set", "DE", first]);
    let first_revision = set["revision"].as_i64().unwrap();
    seed(
        &etcd,
        &[(
            "DE",
            r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50}}"#,
        )],
    )
    .await;
    assert_eq!(etcd.dwctl(&["region", "delete", "DE"]).code, 0);
    seed(
        &etcd,
        &[("DE", r#"{"shard":"eu-9","origins":["c"],"weight":{"c":1}}"#)],
    )
    .await;
    // Someone writes an invalid value by hand.
    etcd.put(&region_key("DE"), r#"{"shard":"eu-9"}"#).await;
    let invalid_revision = etcd.revision().await;

    let (code, history, stderr) = etcd.dwctl_json(&["history", "region/DE"]);
    assert_eq!(code, 0, "{stderr}");
    let entries = history["history"].as_array().unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|entry| entry["kind"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["put", "put", "delete", "put", "put"]
    );
    assert_eq!(entries[0]["revision"], first_revision);
    assert!(
        entries[0]["value"]
            .as_str()
            .unwrap()
            .contains(r#""origins":["a"]"#)
    );

    let (code, rolled, stderr) = etcd.dwctl_json(&[
        "rollback",
        "region/DE",
        "--to-revision",
        &first_revision.to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let revision = rolled["revision"].as_i64().unwrap();
    let (value, mod_revision) = etcd.get(&region_key("DE")).await.unwrap();
    assert_eq!(mod_revision, revision);
    assert_eq!(
        listed_weights(&serde_json::from_str(&value).unwrap()),
        weights(&[("a", 100)])
    );

    // Rolling back to an invalid value is refused, naming the field.
    let before = etcd.revision().await;
    let (code, refused, _) = etcd.dwctl_json(&[
        "rollback",
        &region_key("DE"),
        "--to-revision",
        &invalid_revision.to_string(),
    ]);
    assert_eq!(code, 4);
    assert!(
        refused["error"]["fields"][0]["field"]
            .as_str()
            .unwrap()
            .ends_with("origins"),
        "{refused}"
    );
    assert_eq!(etcd.revision().await, before);

    // Back to a revision where the key did not exist: it is deleted.
    let (code, _, stderr) = etcd.dwctl_json(&["rollback", "region/DE", "--to-revision", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(etcd.get(&region_key("DE")).await.is_none());

    // Other keys are not rolled back (issue 30: they went around the planners); the
    // refusal says what to use, and nothing is written.
    etcd.put(&format!("{CONTROL}note"), "one").await;
    let note_revision = etcd.revision().await;
    etcd.put(&format!("{CONTROL}note"), "two").await;
    let (code, refused, _) = etcd.dwctl_json(&[
        "rollback",
        &format!("{CONTROL}note"),
        "--to-revision",
        &note_revision.to_string(),
    ]);
    assert_eq!(code, 2, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("rollback writes routing keys")),
        "{refused}"
    );
    assert_eq!(etcd.get(&format!("{CONTROL}note")).await.unwrap().0, "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_desired_state_applies() {
    let etcd = Etcd::start().await;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/routing.json");
    let desired: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (code, applied, stderr) = etcd.dwctl_json(&["apply", path]);
    assert_eq!(code, 0, "{stderr}");
    let revision = applied["revision"].as_i64().unwrap();
    let regions = etcd.dump(&format!("{PREFIX}region/")).await;
    assert_eq!(regions.len(), desired["regions"].as_object().unwrap().len());
    for (key, _) in &regions {
        assert_eq!(etcd.get(key).await.unwrap().1, revision, "{key}");
    }
}

/// A writer that changes a guarded key between every read and its commit: the guard
/// fails each time, the retries are bounded, and the error maps to exit code 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_are_retried_then_reported_with_exit_code_3() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let layout = dwctl::Layout::new(PREFIX, CONTROL).unwrap();
    let retry = dwctl::RetryPolicy {
        attempts: 3,
        ..dwctl::RetryPolicy::default()
    };
    let mut client = etcd.client().await;
    let mut plans = 0;
    let result = dwctl::transact(&mut client, &layout, &retry, "now", |state| {
        plans += 1;
        // The concurrent writer: bump DE after it was read.
        etcd.etcdctl(&["put", &region_key("DE"), DE]);
        dwctl::plan_drain(
            state,
            &dwctl::DrainRequest {
                origin: "fra-a".into(),
                regions: vec![],
                reason: "test".into(),
                source: "cli".into(),
                by: "me".into(),
                at: "now".into(),
                force: false,
                skip_emptying: false,
                fleet_limit: None,
            },
        )
        .map_err(dwctl::Error::from)
    })
    .await;
    assert_eq!(plans, 3, "one plan per attempt");
    let error = result.expect_err("every attempt conflicts");
    assert!(
        matches!(error, dwctl::Error::Conflict { attempts: 3 }),
        "{error}"
    );
    assert_eq!(error.exit_code(), 3);
    assert!(
        etcd.get(&drain_key("fra-a")).await.is_none(),
        "nothing written"
    );
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["origins"],
        json!(["fra-a", "fra-b", "ams-a"])
    );
}

/// A dummy pre-commit check with context of its own: it counts what it judged and refuses
/// deletes with an error kind no plan returns (the capacity guard's, exit 9).
struct RefuseDeletes {
    judged: u32,
}

impl dwctl::PreCommitCheck for RefuseDeletes {
    fn check(
        &mut self,
        _: &dwctl::State,
        changes: &mut dwctl::Changes,
    ) -> Result<(), dwctl::Error> {
        self.judged += 1;
        match changes.regions.values().any(Option::is_none) {
            true => Err(dwctl::Error::Overload(
                "the dummy check refuses deletes".into(),
            )),
            false => {
                changes.notes.push("the dummy check let it through".into());
                Ok(())
            }
        }
    }
}

/// The pre-commit hook (issue 30): a check in the list runs on every plan commit and every
/// dry run, sees the state and the changes, and refuses with its own error, kind, exit code
/// and all; nothing is written. A check that passes lets the commit through, with what it
/// added. `transact` and `preview` run no check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_commit_check_refuses_with_its_own_error() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let layout = dwctl::Layout::new(PREFIX, CONTROL).unwrap();
    let retry = dwctl::RetryPolicy::default();
    let mut client = etcd.client().await;
    let before = etcd.revision().await;
    let mut delete = |_: &dwctl::State| {
        let mut changes = dwctl::Changes::default();
        changes.regions.insert("DE".into(), None);
        Ok(changes)
    };
    let mut dummy = RefuseDeletes { judged: 0 };
    let error = dwctl::transact_checked(
        &mut client,
        &layout,
        &retry,
        "now",
        &mut [&mut dummy],
        &mut delete,
    )
    .await
    .expect_err("the check refuses");
    assert_eq!(
        (error.kind(), error.exit_code()),
        ("overload", 9),
        "{error}"
    );
    assert_eq!(error.to_string(), "the dummy check refuses deletes");
    assert_eq!(dummy.judged, 1);
    assert_eq!(etcd.revision().await, before, "nothing written");
    // A dry run runs the check too, and refuses alike.
    let error = dwctl::preview_checked(&mut client, &layout, &mut [&mut dummy], &mut delete)
        .await
        .expect_err("the dry run refuses too");
    assert_eq!(
        (error.kind(), error.exit_code()),
        ("overload", 9),
        "{error}"
    );
    assert_eq!(dummy.judged, 2);
    // Without checks the same delete previews fine (the refusal was the check's).
    let (_, changes) = dwctl::preview(&mut client, &layout, &mut delete)
        .await
        .unwrap();
    assert_eq!(changes.regions.get("DE"), Some(&None));
    assert_eq!(etcd.revision().await, before, "nothing written");
    // A change the check lets through commits, with the note it added.
    let put = |state: &dwctl::State| {
        let mut changes = dwctl::Changes::default();
        let mut value = state.region("DE").unwrap().unwrap();
        value.shard = "eu-2".into();
        changes.regions.insert("DE".into(), Some(value));
        Ok(changes)
    };
    let committed =
        dwctl::transact_checked(&mut client, &layout, &retry, "now", &mut [&mut dummy], put)
            .await
            .unwrap();
    assert!(committed.revision.is_some());
    assert_eq!(dummy.judged, 3);
    assert!(
        committed
            .changes
            .notes
            .contains(&"the dummy check let it through".to_string()),
        "{:?}",
        committed.changes.notes
    );
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_of_a_key_that_never_existed_is_empty() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let (code, history, stderr) = etcd.dwctl_json(&["history", "region/NOPE"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(history["history"], json!([]));
}

/// The regions a drain record holds, in key order.
fn drained_regions(record: &Value) -> Vec<&String> {
    record["regions"]
        .as_object()
        .expect("a drain record's regions")
        .keys()
        .collect()
}

/// A member that stops answering for a moment (SIGSTOP: a stalled disk, a long GC pause)
/// does not fail a write the cluster can take once it answers again: dwctl retries etcd's
/// unavailability (at least 5 attempts, pauses of 0.25 to 1 s) whatever --retries says.
/// When it never answers, the error names the member and how many attempts were made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_rides_out_a_member_that_stops_answering() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let set = [
        "--output",
        "json",
        "--timeout",
        "1",
        "--retries",
        "1",
        "region",
        "set",
        "DE",
        "--shard",
        "eu-9",
        "--origin",
        "fra-a=100",
    ];

    etcd.pause();
    let child = etcd
        .command(&set)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn dwctl");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    etcd.resume();
    let output = child.wait_with_output().expect("dwctl ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let (stored, _) = etcd.get(&region_key("DE")).await.expect("DE");
    assert!(stored.contains(r#""shard":"eu-9""#), "{stored}");

    // Never answering: exit 1 after the attempts, naming the member.
    etcd.pause();
    let run = etcd.dwctl(&set);
    etcd.resume();
    assert_eq!(run.code, 1, "{} {}", run.stdout, run.stderr);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("etcd unavailable after 5 attempts") && said.contains(&etcd.endpoint()),
        "{said}"
    );
}

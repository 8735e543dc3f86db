//! Origin capacities and the guard's headroom against a real etcd: `origin capacity`
//! (set, clear, dry run, limits), `origin list`, `apply` with and without capacities,
//! history and rollback, and a role made before capacities existed.

use crate::common::{CONTROL, DE, Etcd, seed};
use serde_json::Value;

fn capacity_key(origin: &str) -> String {
    format!("{CONTROL}capacity/{origin}")
}

fn headroom_key() -> String {
    format!("{CONTROL}capacity-headroom")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacities_are_set_cleared_and_listed_under_the_control_prefix() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;

    // A dry run writes nothing and says what it would.
    let (code, preview, stderr) =
        etcd.dwctl_json(&["origin", "capacity", "fra-a", "1200", "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(preview["dry_run"], true);
    assert_eq!(
        preview["capacities"]["fra-a"]["after"]["answers_per_s"],
        1200
    );
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());

    let run = etcd.dwctl(&["origin", "capacity", "fra-a", "1200", "--reason", "CHG-7"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("+ capacity/fra-a 1200 answers/s"),
        "{}",
        run.stdout
    );
    let stored = etcd
        .get_json(&capacity_key("fra-a"))
        .await
        .expect("written");
    assert_eq!(stored["answers_per_s"], 1200);
    assert_eq!(stored["reason"], "CHG-7");
    assert!(
        stored["by"].as_str().unwrap().starts_with("tester@"),
        "{stored}"
    );
    // Nothing under the agents' prefix, nothing in the policy.
    assert!(
        etcd.dump("/dw/routing/")
            .await
            .iter()
            .all(|(key, _)| !key.contains("capacity"))
    );

    // The same value again: nothing to change.
    let run = etcd.dwctl(&["origin", "capacity", "fra-a", "1200"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("nothing to change"), "{}", run.stdout);

    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-b", "85.5"]).code, 0);
    let run = etcd.dwctl(&["origin", "capacity", "--headroom", "0.9"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("~ capacity-headroom 0.8 (the default) -> 0.9"),
        "{}",
        run.stdout
    );
    assert_eq!(
        etcd.get_json(&headroom_key()).await.unwrap()["headroom"],
        0.9
    );

    let (code, listed, _) = etcd.dwctl_json(&["origin", "list"]);
    assert_eq!(code, 0);
    let row = |id: &str| -> Value {
        listed["origins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["origin"] == id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(row("fra-a")["capacity"], 1200);
    assert_eq!(row("fra-b")["capacity"], 85.5);
    assert_eq!(listed["capacity_headroom"], 0.9);
    let text = etcd.dwctl(&["origin", "list"]).stdout;
    assert!(text.contains("capacity 1200 answers/s"), "{text}");
    assert!(text.contains("refuses a change above 90%"), "{text}");

    let run = etcd.dwctl(&["origin", "capacity", "fra-a", "--clear"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());
    let run = etcd.dwctl(&["origin", "capacity", "--clear-headroom"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&headroom_key()).await.is_none());
    let text = etcd.dwctl(&["origin", "list"]).stdout;
    assert!(text.contains("refuses a change above 80%"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_limits_are_checked_at_their_edges_before_anything_is_written() {
    let etcd = Etcd::start().await;
    for bad in ["0", "-1", "NaN", "inf", "1000000000.001", "many"] {
        let run = etcd.dwctl(&["origin", "capacity", "fra-a", "--", bad]);
        assert_eq!(run.code, 4, "{bad}: {}", run.stderr);
        assert!(
            run.stderr.contains("answers_per_s"),
            "{bad}: {}",
            run.stderr
        );
    }
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "fra-a", "1000000000"])
            .code,
        0
    );
    for bad in ["0", "1.0001", "-0.5", "NaN"] {
        let run = etcd.dwctl(&["origin", "capacity", &format!("--headroom={bad}")]);
        assert_eq!(run.code, 4, "{bad}: {}", run.stderr);
    }
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "--headroom", "1"]).code,
        0
    );
    let run = etcd.dwctl(&["origin", "capacity", "a/b", "5"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    let run = etcd.dwctl(&[
        "origin",
        "capacity",
        "fra-a",
        "5",
        "--reason",
        &"x".repeat(1025),
    ]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert_eq!(
        etcd.dwctl(&[
            "origin",
            "capacity",
            "fra-a",
            "5",
            "--reason",
            &"x".repeat(1024)
        ])
        .code,
        0
    );
    // Neither an origin nor a headroom: a usage error.
    assert_eq!(etcd.dwctl(&["origin", "capacity"]).code, 2);
    // A malformed record written behind dwctl's back is named, not used.
    etcd.put(&capacity_key("ams-a"), r#"{"answers_per_s":-3}"#)
        .await;
    let text = etcd.dwctl(&["origin", "list"]).stdout;
    assert!(
        text.contains("ams-a") && text.contains("MALFORMED CAPACITY RECORD"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_keeps_capacities_beside_the_regions_and_prune_clears_only_named_sections() {
    let etcd = Etcd::start().await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "old-a", "50"]).code, 0);
    let file = etcd.data_dir.join("routing.json");
    std::fs::write(
        &file,
        format!(r#"{{"regions":{{"DE":{DE}}},"capacities":{{"fra-a":1200,"fra-b":800}},"capacity_headroom":0.75}}"#),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let run = etcd.dwctl(&["apply", path, "--dry-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("+ capacity/fra-a 1200 answers/s"),
        "{}",
        run.stdout
    );
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());
    let run = etcd.dwctl(&["apply", path]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        etcd.get_json(&capacity_key("fra-b")).await.unwrap()["answers_per_s"],
        800
    );
    assert_eq!(
        etcd.get_json(&headroom_key()).await.unwrap()["headroom"],
        0.75
    );
    // Without --prune a capacity the file does not name is kept.
    assert!(etcd.get(&capacity_key("old-a")).await.is_some());
    // A file without capacities leaves them all alone, also with --prune.
    let regions_only = etcd.data_dir.join("regions.json");
    std::fs::write(&regions_only, format!(r#"{{"regions":{{"DE":{DE}}}}}"#)).unwrap();
    let run = etcd.dwctl(&["apply", regions_only.to_str().unwrap(), "--prune"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&capacity_key("old-a")).await.is_some());
    assert!(etcd.get(&headroom_key()).await.is_some());
    // With a capacities section, --prune clears the capacities it does not name.
    let run = etcd.dwctl(&["apply", path, "--prune"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("- capacity/old-a"), "{}", run.stdout);
    assert!(etcd.get(&capacity_key("old-a")).await.is_none());
    assert!(etcd.get(&capacity_key("fra-a")).await.is_some());
    // A bad capacity in a file names its field; nothing is written.
    std::fs::write(&file, r#"{"capacities":{"fra-a":0}}"#).unwrap();
    let run = etcd.dwctl(&["apply", path]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("capacities.fra-a"), "{}", run.stderr);
    // Capacities are not staged.
    std::fs::write(&file, r#"{"capacities":{"fra-a":10}}"#).unwrap();
    let run = etcd.dwctl(&["stage", "create", path, "--cohort", "5%"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacities_have_history_and_roll_back_like_any_key() {
    let etcd = Etcd::start().await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-a", "1000"]).code, 0);
    let first = etcd.get(&capacity_key("fra-a")).await.unwrap().1;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-a", "400"]).code, 0);
    let (code, history, _) = etcd.dwctl_json(&["history", "capacity/fra-a"]);
    assert_eq!(code, 0);
    assert_eq!(history["key"], capacity_key("fra-a"));
    assert_eq!(history["history"].as_array().unwrap().len(), 2);

    let revision = first.to_string();
    let run = etcd.dwctl(&[
        "rollback",
        "capacity/fra-a",
        "--to-revision",
        &revision,
        "--dry-run",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("~ capacity/fra-a 400 answers/s -> 1000 answers/s"),
        "{}",
        run.stdout
    );
    assert_eq!(
        etcd.get_json(&capacity_key("fra-a")).await.unwrap()["answers_per_s"],
        400
    );
    let run = etcd.dwctl(&["rollback", "capacity/fra-a", "--to-revision", &revision]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stored = etcd.get_json(&capacity_key("fra-a")).await.unwrap();
    assert_eq!(stored["answers_per_s"], 1000);
    assert_eq!(stored["reason"], format!("rollback to revision {first}"));

    // Before the capacity existed: the rollback clears it.
    let run = etcd.dwctl(&["rollback", "capacity/fra-a", "--to-revision", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());

    // The headroom too, by its absolute key.
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "--headroom", "0.5"])
            .code,
        0
    );
    let at = etcd.get(&headroom_key()).await.unwrap().1.to_string();
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "--headroom", "0.6"])
            .code,
        0
    );
    let run = etcd.dwctl(&["rollback", &headroom_key(), "--to-revision", &at]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        etcd.get_json(&headroom_key()).await.unwrap()["headroom"],
        0.5
    );
}

/// A role made before capacities existed cannot read them: routing changes go ahead as
/// before (a drain commits), `origin list` says why no capacity is shown, and writing a
/// capacity fails naming `dwctl auth --apply`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_the_capacity_grant_still_drains() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-a", "10"]).code, 0);
    let mut admin = etcd.client().await;
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("legacy").await.unwrap();
    for (key, access) in [
        ("/dw/routing/", etcd_client::PermissionType::Readwrite),
        (
            "/dw/control/drains/",
            etcd_client::PermissionType::Readwrite,
        ),
        ("/dw/control/registered/", etcd_client::PermissionType::Read),
    ] {
        admin
            .role_grant_permission(
                "legacy",
                etcd_client::Permission::new(access, key).with_prefix(),
            )
            .await
            .unwrap();
    }
    admin.user_add("legacy", "legacy-pw", None).await.unwrap();
    admin.user_grant_role("legacy", "legacy").await.unwrap();
    admin.auth_enable().await.unwrap();
    let password = etcd.data_dir.join("legacy.password");
    std::fs::write(&password, "legacy-pw").unwrap();
    let password_flag = format!("--password-file={}", password.display());
    let as_legacy = |args: &[&str]| {
        let mut all = vec!["--user=legacy", password_flag.as_str()];
        all.extend_from_slice(args);
        etcd.dwctl(&all)
    };
    let run = as_legacy(&["drain", "fra-a", "--reason", "INC-1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = as_legacy(&["origin", "list"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("dwctl auth --apply"), "{}", run.stdout);
    let run = as_legacy(&["origin", "capacity", "fra-a", "20"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("dwctl auth --apply"), "{}", run.stderr);
}

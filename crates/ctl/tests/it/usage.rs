//! Bad input to the one-shot commands against a real etcd: invalid values exit 4 naming
//! the field and writing nothing; bad flags and arguments are usage errors, exit 2.

use crate::common::{DE, Etcd, seed};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_input_exits_4_names_the_field_and_writes_nothing() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let dir = std::env::temp_dir().join(format!("dwctl-invalid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let bad_json = file(
        "bad.json",
        r#"{"regions":{"DE":{"shard":"eu-1","origins":["a"]"#,
    );
    let bad_toml = file("bad.toml", "[regions.DE\nshard = 1");
    let fractional_toml = file(
        "fractional.toml",
        "[regions.DE]\nshard = \"eu-1\"\norigins = [\"a\"]\nweight = { a = 50.5 }\n",
    );
    let unknown_in_file = file(
        "unknown.json",
        r#"{"regions":{"DE":{"shard":"eu-1","origins":["a"],"weight":{"a":1,"b":1}}}}"#,
    );

    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["region", "set", "DE", r#"{"shard":"eu-1","#], "json"),
        (
            vec![
                "region",
                "set",
                "DE",
                r#"{"shard":"","origins":["a"],"weight":{"a":1}}"#,
            ],
            "shard",
        ),
        (
            vec![
                "region",
                "set",
                "DE",
                r#"{"shard":"eu-1","origins":["a","a"],"weight":{"a":1}}"#,
            ],
            "origins",
        ),
        (
            vec![
                "region",
                "set",
                "DE",
                r#"{"shard":"eu-1","origins":["a"],"weight":{"a":-5}}"#,
            ],
            "weight",
        ),
        (
            vec![
                "region",
                "set",
                "DE",
                r#"{"shard":"eu-1","origins":["a"],"weight":{"a":2.5}}"#,
            ],
            "weight",
        ),
        (
            vec![
                "region",
                "set",
                "DE",
                r#"{"shard":"eu-1","origins":["a"],"weight":{"a":1000001}}"#,
            ],
            "weight",
        ),
        (
            vec![
                "region",
                "set",
                "DE",
                r#"{"shard":"eu-1","origins":["a"],"weight":{"a":0}}"#,
            ],
            "weight",
        ),
        (
            vec![
                "region",
                "set",
                "DE",
                r#"{"shard":"eu-1","origins":["a"],"weight":{"a":1,"zz":1}}"#,
            ],
            "weight.zz",
        ),
        (
            vec!["region", "set", "DE", "--shard", "", "--origin", "a=1"],
            "shard",
        ),
        (vec!["policy", "set", r#"{"pick":"fastest"}"#], "pick"),
        (vec!["policy", "set", r#"{"failover":"GB"}"#], "failover"),
        (vec!["policy", "set", "[]"], "json"),
        (vec!["apply", &bad_json], "file"),
        (vec!["apply", &bad_toml], "file"),
        (vec!["apply", &fractional_toml], "regions.DE.weight"),
        (vec!["apply", &unknown_in_file], "regions.DE.weight.b"),
        (vec!["drain", "nope"], "origin"),
        (vec!["drain", "fra-a", "--region", "ZZ"], "region"),
        (vec!["restore", "fra-a"], "origin"),
        (vec!["origin", "register", "a/b"], "id"),
    ];
    let before = etcd.revision().await;
    for (args, field) in cases {
        let (code, output, stderr) = etcd.dwctl_json(&args);
        assert_eq!(code, 4, "{args:?}: {stderr}");
        assert_eq!(output["error"]["kind"], "validation", "{args:?}");
        let fields: Vec<&str> = output["error"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["field"].as_str().unwrap())
            .collect();
        assert_eq!(fields, [field], "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("`{field}`")),
            "{args:?}: the message names the field: {stderr}"
        );
    }
    assert_eq!(
        etcd.revision().await,
        before,
        "a rejected command wrote something"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad flags and arguments are usage errors, exit 2, for every subcommand: unknown flags
/// (clap) and flag values that do not parse (checked by dwctl before etcd is contacted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_flags_exit_2_for_every_subcommand() {
    let etcd = Etcd::start().await;
    let subcommands: &[&[&str]] = &[
        &["region", "list"],
        &["region", "get", "DE"],
        &["region", "set", "DE", "{}"],
        &["region", "delete", "DE"],
        &["policy", "get"],
        &["policy", "set", "{}"],
        &["apply", "x.json"],
        &["drain", "fra-a"],
        &["restore", "fra-a"],
        &["origin", "register", "fra-a"],
        &["origin", "list"],
        &["origin", "forget", "fra-a"],
        &["rebalance"],
        &["health", "--probe", "fra-a=http://127.0.0.1:1/"],
        &["history", "region/DE"],
        &["rollback", "region/DE", "--to-revision", "1"],
        &["traffic", "--prometheus", "http://127.0.0.1:1"],
    ];
    let before = etcd.revision().await;
    for subcommand in subcommands {
        for bad in [
            &["--no-such-flag"][..],
            &["--timeout", "0"],
            &["--timeout", "soon"],
            &["--retries", "0"],
            &["--output", "yaml"],
        ] {
            let mut args = subcommand.to_vec();
            args.extend_from_slice(bad);
            let run = etcd.dwctl(&args);
            assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        }
    }
    let value_cases: &[&[&str]] = &[
        &["region", "set", "DE"],
        &[
            "region", "set", "DE", "--shard", "eu-1", "--origin", "a=lots",
        ],
        &["region", "set", "DE", "--shard", "eu-1", "--origin", "a"],
        &["policy", "set"],
        &["origin", "register", "fra-a", "--meta", "[1]"],
        &["origin", "register", "fra-a", "--meta", "{nope"],
        &["origin", "register", "fra-a", "--ttl", "0"],
        &["health", "--probe", "fra-a=https://x/"],
        &["health", "--probe", "fra-a"],
        &["health", "--probe", "fra-a=http://x/", "--interval", "0"],
        &[
            "health",
            "--probe",
            "fra-a=http://x/",
            "--probe-timeout",
            "-1",
        ],
        &[
            "health",
            "--probe",
            "fra-a=http://x/",
            "--max-drained-fraction",
            "2",
        ],
        &["health", "--probe", "fra-a=http://x/", "--fail-after", "0"],
        &["rollback", "region/DE", "--to-revision", "0"],
        &["rollback", "region/DE"],
        &["history"],
    ];
    for args in value_cases {
        let (code, output, stderr) = etcd.dwctl_json(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        if !output.is_null() {
            assert_eq!(output["error"]["kind"], "usage", "{args:?}");
        }
    }
    // The same with etcd unreachable: still a usage error, not "etcd unreachable".
    for args in value_cases {
        let mut command = etcd.command(args);
        command.env("DWCTL_ENDPOINTS", "http://127.0.0.1:1");
        let run = crate::common::run(command);
        assert_eq!(run.code, 2, "{args:?} without etcd: {}", run.stderr);
    }
    assert_eq!(
        etcd.revision().await,
        before,
        "a usage error wrote something"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_exit_2() {
    let etcd = Etcd::start().await;
    assert_eq!(etcd.dwctl(&["region", "set", "DE"]).code, 2);
    assert_eq!(etcd.dwctl(&["frobnicate"]).code, 2);
    assert_eq!(etcd.dwctl(&["drain"]).code, 2);
    assert_eq!(
        etcd.dwctl(&[
            "--prefix",
            "/dw/",
            "--control-prefix",
            "/dw/control/",
            "region",
            "list"
        ])
        .code,
        2
    );
    let help = etcd.dwctl(&["drain", "--help"]);
    assert_eq!(help.code, 0);
    assert!(
        help.stdout.contains("dwctl drain fra-a"),
        "help shows examples: {}",
        help.stdout
    );
}

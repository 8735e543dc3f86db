//! clap's checks of the command line and the parsing of its shared flags.

use clap::CommandFactory;

/// clap's own consistency checks (clashing ids, such as a global `--key` and a `KEY`).
#[test]
fn the_command_line_is_consistent() {
    super::Cli::command().debug_assert();
}

#[test]
fn wait_takes_an_optional_timeout() {
    use clap::Parser;
    use std::time::Duration;
    let wait = |args: &[&str]| {
        let mut argv = vec!["dwctl", "drain", "fra-a"];
        argv.extend_from_slice(args);
        super::Cli::try_parse_from(argv).map(|cli| cli.command.wait())
    };
    assert_eq!(wait(&[]).unwrap(), None);
    let default = wait(&["--wait"]).unwrap().unwrap();
    assert_eq!(default.timeout, Duration::from_secs(10));
    assert_eq!(default.quorum, 100);
    let given = wait(&["--wait", "2s", "--quorum", "90"]).unwrap().unwrap();
    assert_eq!((given.timeout, given.quorum), (Duration::from_secs(2), 90));
    assert_eq!(
        wait(&["--wait=500ms"]).unwrap().unwrap().timeout,
        Duration::from_millis(500)
    );
    assert!(wait(&["--wait", "--quorum", "0"]).is_err());
    assert!(wait(&["--wait=never"]).is_err());
}

/// The shared connection flags, as dwctl adapts them: its own variables, a local etcd
/// by default, 5 s per request, `--timeout` as the older name, on every subcommand.
#[test]
fn connection_flags_keep_dwctls_names_and_defaults() {
    use clap::Parser;
    use std::time::Duration;
    let command = super::Cli::command();
    for (id, variable) in [
        ("endpoints", "DWCTL_ENDPOINTS"),
        ("user", "DWCTL_USER"),
        ("password", "DWCTL_PASSWORD"),
        ("password_file", "DWCTL_PASSWORD_FILE"),
        ("cacert", "DWCTL_CACERT"),
        ("request_timeout", "DWCTL_REQUEST_TIMEOUT"),
    ] {
        let arg = command.get_arguments().find(|a| a.get_id() == id).unwrap();
        assert_eq!(arg.get_env(), Some(std::ffi::OsStr::new(variable)), "{id}");
        assert!(arg.is_global_set(), "{id} is global");
    }
    let parse = |args: &[&str]| {
        let mut argv = vec!["dwctl", "region", "list"];
        argv.extend_from_slice(args);
        super::Cli::try_parse_from(argv).map(|cli| cli.global.etcd)
    };
    let defaults = parse(&[]).unwrap();
    assert_eq!(defaults.endpoints, ["http://127.0.0.1:2379"]);
    assert_eq!(defaults.request_timeout, Duration::from_secs(5));
    assert_eq!(defaults.dial_timeout, Duration::from_secs(3));
    let older = parse(&["--timeout", "2.5"]).unwrap();
    assert_eq!(older.request_timeout, Duration::from_millis(2500));
    assert!(parse(&["--timeout", "soon"]).is_err());
    assert!(parse(&["--cert", "c.pem"]).is_err(), "--cert needs --key");
}

/// `rebalance --grace`: 3 s by default, at most ten minutes.
#[test]
fn rebalance_grace_is_bounded_at_its_edge() {
    use clap::Parser;
    use std::time::Duration;
    let grace = |args: &[&str]| {
        let mut argv = vec!["dwctl", "rebalance"];
        argv.extend_from_slice(args);
        super::Cli::try_parse_from(argv).map(|cli| match cli.command {
            super::Command::Rebalance(args) => args.grace,
            _ => unreachable!(),
        })
    };
    assert_eq!(grace(&[]).unwrap(), Duration::from_secs(3));
    assert_eq!(grace(&["--grace", "10m"]).unwrap(), super::MAX_GRACE);
    assert!(grace(&["--grace", "601s"]).is_err());
    assert_eq!(grace(&["--grace", "0"]).unwrap(), Duration::ZERO);
}

/// `auth --dry-run` only with `--apply`.
#[test]
fn auth_dry_run_needs_apply() {
    use clap::Parser;
    assert!(super::Cli::try_parse_from(["dwctl", "auth", "--nodes", "a", "--dry-run"]).is_err());
    assert!(
        super::Cli::try_parse_from(["dwctl", "auth", "--nodes", "a,b", "--apply", "--dry-run"])
            .is_ok()
    );
}

/// `dwctl route GEO`: a geo starting with `-` is the geo, not a flag (resolve() takes any
/// bytes; issue 33), before or after the flags, and after `--`; the flags still parse.
#[test]
fn route_takes_a_geo_starting_with_a_hyphen() {
    use clap::Parser;
    let route = |argv: &[&str]| {
        super::Cli::try_parse_from(argv).map(|cli| match cli.command {
            super::Command::Route(args) => (args.geo, args.sticky),
            _ => unreachable!("not route"),
        })
    };
    assert_eq!(
        route(&["dwctl", "route", "-CA"]).unwrap(),
        ("-CA".into(), None)
    );
    assert_eq!(route(&["dwctl", "route", "-"]).unwrap(), ("-".into(), None));
    assert_eq!(
        route(&["dwctl", "route", "--sticky", "k", "-CA"]).unwrap(),
        ("-CA".into(), Some("k".into()))
    );
    assert_eq!(
        route(&["dwctl", "route", "-CA", "--sticky", "k"]).unwrap(),
        ("-CA".into(), Some("k".into()))
    );
    assert_eq!(
        route(&["dwctl", "route", "--", "-CA"]).unwrap(),
        ("-CA".into(), None)
    );
    assert_eq!(
        route(&["dwctl", "route", "DE"]).unwrap(),
        ("DE".into(), None)
    );
    let help = super::Cli::try_parse_from(["dwctl", "route", "--help"]).unwrap_err();
    assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
}

/// `dwctl route GEO --bucket B`: a bucket from 0; a negative or non-number one is a usage
/// error, as resolve()'s ValueError.
#[test]
fn route_takes_a_bucket() {
    use clap::Parser;
    let bucket = |argv: &[&str]| {
        super::Cli::try_parse_from(argv).map(|cli| match cli.command {
            super::Command::Route(args) => (args.geo, args.sticky, args.bucket),
            _ => unreachable!("not route"),
        })
    };
    assert_eq!(
        bucket(&["dwctl", "route", "DE", "--bucket", "3"]).unwrap(),
        ("DE".into(), None, Some(3))
    );
    assert_eq!(
        bucket(&["dwctl", "route", "--bucket", "0", "--sticky", "k", "-CA"]).unwrap(),
        ("-CA".into(), Some("k".into()), Some(0))
    );
    assert_eq!(
        bucket(&["dwctl", "route", "DE", "--bucket", "18446744073709551615"]).unwrap(),
        ("DE".into(), None, Some(u64::MAX))
    );
    for bad in ["-1", "x", "1.5", ""] {
        assert!(
            bucket(&["dwctl", "route", "DE", "--bucket", bad]).is_err(),
            "{bad}"
        );
    }
}

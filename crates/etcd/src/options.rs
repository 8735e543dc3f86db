//! The connection flags ([`EtcdArgs`]) and the checked options they become
//! ([`EtcdOptions`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, Args};

use crate::{Error, read_secret_file};

/// The etcd connection flags, flattened into the command line of both `dw-agent` and
/// `dwctl`. The flags carry no environment variables: each binary names its own
/// (`DW_AGENT_USER`, `DWCTL_USER`, ...) with clap's `mut_arg`.
#[derive(Debug, Clone, Args)]
pub struct EtcdArgs {
    /// etcd endpoints, comma separated (http://host:port, https://host:port or host:port)
    #[arg(long, value_delimiter = ',', required = true)]
    pub endpoints: Vec<String>,

    /// etcd user name (with --password or --password-file)
    #[arg(long)]
    pub user: Option<String>,

    /// etcd password (prefer --password-file or the environment over the command line)
    #[arg(long, hide_env_values = true)]
    pub password: Option<String>,

    /// File holding the etcd password (a trailing newline is ignored)
    #[arg(long, conflicts_with = "password")]
    pub password_file: Option<PathBuf>,

    /// PEM CA bundle for the etcd members' certificates (turns on TLS)
    #[arg(long)]
    pub cacert: Option<PathBuf>,

    /// PEM client certificate for mutual TLS (with --key)
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,

    /// PEM client private key for mutual TLS (with --cert)
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,

    /// TCP/TLS connect timeout per endpoint (e.g. 3s, 500ms)
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub dial_timeout: Duration,

    /// Deadline of one request to etcd (e.g. 10s, 2.5s, 500ms)
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,
}

impl EtcdArgs {
    /// The ids of the connection flags (their long names with `_` for `-`), for a binary
    /// that adjusts them with `Command::mut_arg` or `mut_args`.
    pub const IDS: [&'static str; 9] = [
        "endpoints",
        "user",
        "password",
        "password_file",
        "cacert",
        "cert",
        "key",
        "dial_timeout",
        "request_timeout",
    ];

    /// For `Command::mut_args`: gives each connection flag the environment variable
    /// `<prefix><ID>` (`DWCTL_` and `--password-file` make `DWCTL_PASSWORD_FILE`), so that
    /// each binary keeps its own variables; other arguments are left as they are.
    pub fn env(prefix: &'static str) -> impl FnMut(Arg) -> Arg {
        move |arg| {
            let id = arg.get_id().as_str();
            if EtcdArgs::IDS.contains(&id) {
                let name = format!("{prefix}{}", id.to_ascii_uppercase());
                arg.env(name)
            } else {
                arg
            }
        }
    }

    /// Checks the flags and reads `--password-file`; the TLS files are read when
    /// connecting ([`EtcdOptions::connect_options`]).
    pub fn into_options(self) -> Result<EtcdOptions, Error> {
        let password = match (self.password, &self.password_file) {
            (Some(password), _) => Some(password),
            (None, Some(path)) => Some(read_secret_file("--password-file", path)?),
            (None, None) => None,
        };
        let credentials = match (self.user, password) {
            (Some(user), Some(password)) => Some(Credentials { user, password }),
            (Some(_), None) => {
                return Err(Error::Usage(
                    "--user needs --password or --password-file".into(),
                ));
            }
            (None, Some(_)) => return Err(Error::Usage("a password needs --user".into())),
            (None, None) => None,
        };
        let tls = if self.cacert.is_some() || self.cert.is_some() || self.key.is_some() {
            Some(TlsFiles {
                cacert: self.cacert,
                cert: self.cert,
                key: self.key,
            })
        } else {
            None
        };
        let options = EtcdOptions {
            endpoints: self
                .endpoints
                .into_iter()
                .map(|e| e.trim().to_owned())
                .collect(),
            credentials,
            tls,
            dial_timeout: self.dial_timeout,
            request_timeout: self.request_timeout,
        };
        options.validate()?;
        Ok(options)
    }
}

/// How to reach etcd, checked. Build it with [`EtcdArgs::into_options`] or by hand.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Client URLs (`http://host:port`, `https://host:port`, or `host:port`).
    pub endpoints: Vec<String>,
    /// etcd user name and password.
    pub credentials: Option<Credentials>,
    /// TLS material; when present, endpoints without a scheme use https.
    pub tls: Option<TlsFiles>,
    /// TCP (and TLS) connect timeout per endpoint.
    pub dial_timeout: Duration,
    /// Deadline of one unary request.
    pub request_timeout: Duration,
}

impl EtcdOptions {
    /// Plain-HTTP endpoints, no authentication, the default timeouts (3s, 10s).
    pub fn new(endpoints: Vec<String>) -> EtcdOptions {
        EtcdOptions {
            endpoints,
            credentials: None,
            tls: None,
            dial_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(10),
        }
    }

    /// Checks what can be checked without touching etcd or the file system.
    pub fn validate(&self) -> Result<(), Error> {
        if self.endpoints.is_empty() || self.endpoints.iter().any(|e| e.trim().is_empty()) {
            return Err(Error::Usage(
                "--endpoints needs at least one non-empty endpoint".into(),
            ));
        }
        for (flag, value) in [
            ("--dial-timeout", self.dial_timeout),
            ("--request-timeout", self.request_timeout),
        ] {
            if value.is_zero() {
                return Err(Error::Usage(format!("{flag} must be greater than zero")));
            }
        }
        match &self.tls {
            Some(tls) if tls.cert.is_some() != tls.key.is_some() => Err(Error::Usage(
                "--cert and --key must be given together".into(),
            )),
            // Without a CA every member certificate would be refused: etcd clusters use
            // their own CA, and no system roots are trusted.
            Some(tls) if tls.cacert.is_none() => Err(Error::Usage(
                "TLS needs --cacert (the CA of the etcd members)".into(),
            )),
            Some(_) => Ok(()),
            None => match self.endpoints.iter().find(|e| e.starts_with("https://")) {
                Some(https) => Err(Error::Usage(format!(
                    "endpoint {} uses https: give --cacert",
                    dw_routing::redact_url(https)
                ))),
                None => Ok(()),
            },
        }
    }

    /// Whether connections use TLS.
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The URL shown in logs and metrics for an endpoint (with the scheme it is dialled
    /// with, a password or token in it redacted: [`dw_routing::redact_url`]).
    pub fn display_endpoint(&self, endpoint: &str) -> String {
        let endpoint = dw_routing::redact_url(endpoint);
        if endpoint.contains("://") {
            endpoint
        } else if self.uses_tls() {
            format!("https://{endpoint}")
        } else {
            format!("http://{endpoint}")
        }
    }
}

/// An etcd user and password. `Debug` does not show the password.
#[derive(Clone)]
pub struct Credentials {
    /// The user name.
    pub user: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"…")
            .finish()
    }
}

/// Paths to PEM files for TLS to etcd.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    /// CA bundle that signs the etcd members' certificates.
    pub cacert: Option<PathBuf>,
    /// Client certificate (needs `key`).
    pub cert: Option<PathBuf>,
    /// Client private key (needs `cert`).
    pub key: Option<PathBuf>,
}

/// Parses `250ms`, `3s`, `2m`, a bare number of seconds, or a decimal one (`2.5`, `0.5s`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unknown = || format!("{text:?} is not a duration like 500ms, 3s, 2.5s or 1m");
    let per_unit = match unit.trim() {
        "ms" => Duration::from_millis(1),
        "" | "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        _ => return Err(format!("{text:?} has an unknown unit (use ms, s or m)")),
    };
    if let Ok(whole) = number.parse::<u32>() {
        return Ok(per_unit.saturating_mul(whole));
    }
    if number.starts_with('.') || number.ends_with('.') {
        return Err(unknown());
    }
    let value: f64 = number.parse().map_err(|_| unknown())?;
    Duration::try_from_secs_f64(value * per_unit.as_secs_f64()).map_err(|_| unknown())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    #[command(mut_args(EtcdArgs::env("TEST_ETCD_")))]
    struct Cli {
        #[command(flatten)]
        etcd: EtcdArgs,
    }

    fn parse(args: &[&str]) -> Result<EtcdOptions, String> {
        let mut argv = vec!["test"];
        if !args.contains(&"--endpoints") {
            argv.extend(["--endpoints", "127.0.0.1:2379"]);
        }
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)
            .map_err(|e| e.to_string())
            .and_then(|cli| cli.etcd.into_options().map_err(|e| e.to_string()))
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("1.").is_err());
        assert!(parse_duration("1.2.3").is_err());
    }

    #[test]
    fn flags_become_options() {
        let options = parse(&[
            "--endpoints",
            "http://10.0.0.1:2379, 10.0.0.2:2379",
            "--request-timeout",
            "2.5s",
        ])
        .unwrap();
        assert_eq!(options.endpoints, ["http://10.0.0.1:2379", "10.0.0.2:2379"]);
        assert_eq!(options.request_timeout, Duration::from_millis(2500));
        assert_eq!(options.dial_timeout, Duration::from_secs(3));
        assert!(options.credentials.is_none() && options.tls.is_none());
        assert_eq!(
            options.display_endpoint("10.0.0.2:2379"),
            "http://10.0.0.2:2379"
        );
        // A password in an endpoint is never shown.
        assert_eq!(
            options.display_endpoint("http://root:hunter2@10.0.0.2:2379"),
            "http://root:***@10.0.0.2:2379"
        );
        let error = crate::Error::NoLeader {
            endpoint: "u:hunter2@10.0.0.3:2379".into(),
        };
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }

    #[test]
    fn inconsistent_flags_are_refused() {
        let refused: &[(&[&str], &str)] = &[
            (&["--user", "root"], "--password"),
            (&["--password", "x"], "--user"),
            (&["--cert", "/c.pem"], "--key"),
            (&["--cert", "/c.pem", "--key", "/k.pem"], "--cacert"),
            (&["--request-timeout", "0"], "greater than zero"),
            (&["--dial-timeout", "soon"], "soon"),
            (&["--endpoints", "https://a:2379"], "--cacert"),
            (&["--endpoints", " "], "--endpoints"),
            (&["--password", "x", "--password-file", "/p"], "--password"),
        ];
        for (args, expected) in refused {
            let err = parse(args).unwrap_err();
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }

    #[test]
    fn each_binary_names_its_environment_variables() {
        use clap::CommandFactory;
        let command = Cli::command();
        let env = |id: &str| {
            let arg = command.get_arguments().find(|a| a.get_id() == id).unwrap();
            arg.get_env().map(|e| e.to_string_lossy().into_owned())
        };
        assert_eq!(
            env("password_file").as_deref(),
            Some("TEST_ETCD_PASSWORD_FILE")
        );
        assert_eq!(env("endpoints").as_deref(), Some("TEST_ETCD_ENDPOINTS"));
        assert_eq!(
            env("request_timeout").as_deref(),
            Some("TEST_ETCD_REQUEST_TIMEOUT")
        );
        command.debug_assert();
    }

    #[test]
    fn the_password_file_is_read_without_its_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("password");
        std::fs::write(&path, "s3cret\n").unwrap();
        let options =
            parse(&["--user", "root", "--password-file", path.to_str().unwrap()]).unwrap();
        let credentials = options.credentials.unwrap();
        assert_eq!(
            (credentials.user.as_str(), credentials.password.as_str()),
            ("root", "s3cret")
        );
        assert!(!format!("{credentials:?}").contains("s3cret"));
        let missing = dir.path().join("missing");
        let err = parse(&[
            "--user",
            "root",
            "--password-file",
            missing.to_str().unwrap(),
        ])
        .unwrap_err();
        assert!(err.contains("missing"), "{err}");
    }
}

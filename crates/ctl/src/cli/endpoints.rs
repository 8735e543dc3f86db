//! Where the etcd endpoints came from, so that an unreachable etcd is reported with the
//! endpoints tried, their source, and where the services take theirs (issue 40: a first
//! install only said "etcd unavailable after 10 attempts").

use clap::ArgMatches;
use clap::parser::ValueSource;

/// Where `--endpoints` got its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointsSource {
    /// `--endpoints` on the command line.
    Flag,
    /// The `DWCTL_ENDPOINTS` variable.
    Environment,
    /// Neither: dwctl's default, a local etcd.
    Default,
}

impl EndpointsSource {
    /// The source clap recorded for the parsed command line (global flags are propagated
    /// to the top level, so a flag given after the subcommand counts too).
    pub fn of(matches: &ArgMatches) -> Self {
        match matches.value_source("endpoints") {
            Some(ValueSource::CommandLine) => EndpointsSource::Flag,
            Some(ValueSource::EnvVariable) => EndpointsSource::Environment,
            _ => EndpointsSource::Default,
        }
    }

    /// The line printed after an error that says etcd could not be reached.
    pub fn unreachable_hint(self, endpoints: &[String]) -> String {
        let from = match self {
            EndpointsSource::Flag => "from --endpoints",
            EndpointsSource::Environment => "from DWCTL_ENDPOINTS",
            EndpointsSource::Default => {
                "the default: neither --endpoints nor DWCTL_ENDPOINTS is set"
            }
        };
        format!(
            "etcd endpoints tried: {} ({from}); the dwctl services (dwctl-rebalance, \
             dwctl-health, dwctl-origin@, dwctl-fleet-exporter) take DWCTL_ENDPOINTS from \
             /etc/default/dwctl",
            endpoints.join(",")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_the_endpoints_and_their_source() {
        let endpoints = [
            "http://10.0.0.1:2379".to_owned(),
            "http://10.0.0.2:2379".to_owned(),
        ];
        let flag = EndpointsSource::Flag.unreachable_hint(&endpoints);
        assert!(
            flag.starts_with(
                "etcd endpoints tried: http://10.0.0.1:2379,http://10.0.0.2:2379 (from --endpoints);"
            ),
            "{flag}"
        );
        assert!(
            flag.ends_with("take DWCTL_ENDPOINTS from /etc/default/dwctl"),
            "{flag}"
        );
        let env = EndpointsSource::Environment.unreachable_hint(&endpoints[..1]);
        assert!(
            env.contains("http://10.0.0.1:2379 (from DWCTL_ENDPOINTS)"),
            "{env}"
        );
        let default = EndpointsSource::Default.unreachable_hint(&["http://127.0.0.1:2379".into()]);
        assert!(
            default.contains(
                "http://127.0.0.1:2379 (the default: neither --endpoints nor DWCTL_ENDPOINTS is set)"
            ),
            "{default}"
        );
    }
}

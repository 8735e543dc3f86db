//! Turning [`EtcdOptions`] into clients: the TLS material (read and checked), one endpoint
//! at a time (the agent) or one live member among several (`dwctl`).

use std::error::Error as _;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::describe;
use crate::{Error, EtcdOptions, TlsFiles};

/// How long a member may take to answer the status request that picks it.
const MEMBER_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

impl EtcdOptions {
    /// The client options every connection shares: connect timeout, TLS (files read and
    /// checked now), credentials, and require-leader, so that a member cut off from the
    /// quorum fails a watch instead of serving a silently frozen view of the cluster.
    /// Callers add keepalive and request timeouts to taste.
    ///
    /// With credentials the client re-authenticates when etcd answers `invalid auth
    /// token` and sends the request again at once (etcd-client's token refresh, for unary
    /// calls and stream opens): etcd forgets a simple token unused for `--auth-token-ttl`
    /// (300 s by default), and without this a long-lived session (the agent's reporter,
    /// `origin register`'s revoke at SIGTERM) kept sending the dead token until restarted.
    /// Streams already open (a watch, a lease keep-alive) are not asked again by etcd.
    pub fn connect_options(&self) -> Result<ConnectOptions, Error> {
        let mut options = self.options_without_credentials()?;
        if let Some(credentials) = &self.credentials {
            options = options
                .with_user(credentials.user.clone(), credentials.password.clone())
                .with_auto_token_refresh(true);
        }
        Ok(options)
    }

    fn options_without_credentials(&self) -> Result<ConnectOptions, Error> {
        self.validate()?;
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.dial_timeout)
            .with_require_leader(true);
        if let Some(files) = &self.tls {
            options = options.with_tls(tls_options(files)?);
        }
        Ok(options)
    }

    /// Checks every endpoint and the TLS files without network traffic: a client built
    /// without credentials only parses, so malformed flags fail at startup, not on every
    /// retry.
    pub async fn check_endpoints(&self) -> Result<(), Error> {
        let options = self.options_without_credentials()?;
        for endpoint in &self.endpoints {
            Client::connect([endpoint.as_str()], Some(options.clone()))
                .await
                .map_err(|e| {
                    Error::Usage(format!(
                        "endpoint {:?}: {}",
                        dw_routing::redact_url(endpoint),
                        describe(&e)
                    ))
                })?;
        }
        Ok(())
    }

    /// A client for a short-lived tool: every request gets `request_timeout`.
    ///
    /// With several endpoints the client talks to one member that answers and knows a
    /// leader, tried from a random one on: a channel balanced over every endpoint kept
    /// sending requests to a member that was down or cut off (the chaos soak saw about
    /// half of the writes fail with "tcp connect error" while one of three members was
    /// down). With one endpoint the connection is lazy: an unreachable cluster shows up
    /// as the first request's error.
    pub async fn connect(&self) -> Result<Client, Error> {
        self.connect_member().await.map(|(client, _)| client)
    }

    /// [`EtcdOptions::connect`], also naming the endpoint of the member it talks to (so that
    /// an error later can say which member failed).
    pub async fn connect_member(&self) -> Result<(Client, String), Error> {
        let options = self
            .connect_options()?
            .with_timeout(self.request_timeout)
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(5));
        if let [endpoint] = self.endpoints.as_slice() {
            return Client::connect([endpoint.as_str()], Some(options))
                .await
                .map(|client| (client, endpoint.clone()))
                .map_err(|source| Error::Etcd {
                    endpoint: endpoint.clone(),
                    source,
                });
        }
        let count = self.endpoints.len();
        let start = fastrand::usize(..count);
        let mut last_error = None;
        for i in 0..count {
            let endpoint = &self.endpoints[(start + i) % count];
            match live_member(endpoint, options.clone()).await {
                Ok(client) => return Ok((client, endpoint.clone())),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Usage("no etcd endpoint".into())))
    }
}

/// A client of `endpoint` once it has answered a status request naming a leader.
async fn live_member(endpoint: &str, options: ConnectOptions) -> Result<Client, Error> {
    let failed = |source| Error::Etcd {
        endpoint: endpoint.to_owned(),
        source,
    };
    let mut client = Client::connect([endpoint], Some(options))
        .await
        .map_err(failed)?;
    match tokio::time::timeout(MEMBER_PROBE_TIMEOUT, client.status()).await {
        Ok(Ok(status)) if status.leader() != 0 => Ok(client),
        Ok(Ok(_)) => Err(Error::NoLeader {
            endpoint: endpoint.to_owned(),
        }),
        Ok(Err(source)) => Err(failed(source)),
        Err(_) => Err(Error::Timeout {
            endpoint: endpoint.to_owned(),
            after: MEMBER_PROBE_TIMEOUT,
        }),
    }
}

/// Connects to one endpoint (authenticating when the options carry credentials), within
/// `deadline`.
pub async fn connect_endpoint(
    endpoint: &str,
    options: ConnectOptions,
    deadline: Duration,
) -> Result<Client, Error> {
    match tokio::time::timeout(deadline, Client::connect([endpoint], Some(options))).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(source)) => Err(Error::Etcd {
            endpoint: endpoint.to_owned(),
            source,
        }),
        Err(_) => Err(Error::Timeout {
            endpoint: endpoint.to_owned(),
            after: deadline,
        }),
    }
}

/// Runs an etcd call under a deadline, turning both failure kinds into a message.
pub async fn within<T>(
    deadline: Duration,
    call: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(deadline, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(describe(&e)),
        Err(_) => Err(format!("no answer within {} ms", deadline.as_millis())),
    }
}

/// Whether a failed call never got an answer from etcd: tonic puts the transport error
/// beneath the status; statuses etcd itself sent have no source.
pub fn is_transport(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => status.source().is_some(),
        etcd_client::Error::TransportError(_) => true,
        _ => false,
    }
}

/// Whether a failed call may succeed if made again, on this member or another: etcd could
/// not be reached, had no leader or lost it (`Unavailable`: "no leader", "leader changed"),
/// or the call ran out of time. Not retryable: what etcd refused on the merits (permission,
/// invalid argument, NOSPACE, too large), which the same request meets again.
///
/// A write that failed this way may still have been applied ("leader changed", a timeout,
/// a connection lost after sending): the caller settles its outcome before writing again.
pub fn is_retryable(error: &etcd_client::Error) -> bool {
    use tonic::Code;
    match error {
        etcd_client::Error::GRpcStatus(status) => {
            matches!(
                status.code(),
                Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled
            ) || status.source().is_some()
        }
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        _ => false,
    }
}

/// Whether etcd refused the request for the user's role (gRPC `PERMISSION_DENIED`: auth is
/// on and the role lacks the grant), by the status code etcd sends, not by its words (a
/// message that merely says "permission denied" under another code does not count).
pub fn is_permission_denied(error: &etcd_client::Error) -> bool {
    matches!(
        error,
        etcd_client::Error::GRpcStatus(status) if status.code() == tonic::Code::PermissionDenied
    )
}

/// The end of the key range holding every key that starts with `prefix` (the rule is
/// `dw_routing::keys`', shared with dwctl's pure planner).
pub use dw_routing::keys::prefix_range_end;

/// Reads the PEM files and checks that they hold what their flags say, so that a wrong
/// file is named at startup instead of failing every TLS handshake.
fn tls_options(files: &TlsFiles) -> Result<TlsOptions, Error> {
    let Some(cacert) = &files.cacert else {
        return Err(Error::Usage(
            "TLS needs --cacert (the CA of the etcd members)".into(),
        ));
    };
    let pem = read_certificates("--cacert", cacert)?;
    let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(pem));
    if let (Some(cert), Some(key)) = (&files.cert, &files.key) {
        let cert_pem = read_certificates("--cert", cert)?;
        let key_pem = read("--key", key)?;
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| Error::File {
            flag: "--key",
            message: format!("--key {} is not a PEM private key: {e}", key.display()),
        })?;
        tls = tls.identity(Identity::from_pem(cert_pem, key_pem));
    }
    Ok(tls)
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::File {
        flag,
        message: format!("cannot read {flag} {}: {e}", path.display()),
    })
}

/// The file's bytes, when it holds at least one PEM certificate and nothing malformed.
fn read_certificates(flag: &'static str, path: &Path) -> Result<Vec<u8>, Error> {
    let pem = read(flag, path)?;
    let parsed: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
    let message = match parsed {
        Ok(certs) if !certs.is_empty() => return Ok(pem),
        Ok(_) => format!("{flag} {} holds no PEM certificate", path.display()),
        Err(e) => format!(
            "{flag} {} is not a valid PEM certificate file: {e}",
            path.display()
        ),
    };
    Err(Error::File { flag, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_files_are_checked_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").unwrap();
        let err = tls_options(&TlsFiles {
            cacert: Some(garbage.clone()),
            ..TlsFiles::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("garbage.pem") && err.contains("no PEM certificate"),
            "{err}"
        );

        let missing = dir.path().join("missing.pem");
        let err = tls_options(&TlsFiles {
            cacert: Some(missing),
            ..TlsFiles::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("missing.pem"), "{err}");

        let err = tls_options(&TlsFiles::default()).unwrap_err();
        assert!(err.to_string().contains("--cacert"), "{err}");
    }

    #[test]
    fn retryable_is_unavailability_not_refusal() {
        let status =
            |code, message: &str| etcd_client::Error::GRpcStatus(tonic::Status::new(code, message));
        assert!(is_retryable(&status(
            tonic::Code::Unavailable,
            "etcdserver: leader changed"
        )));
        assert!(is_retryable(&status(
            tonic::Code::Unavailable,
            "etcdserver: no leader"
        )));
        assert!(is_retryable(&status(
            tonic::Code::DeadlineExceeded,
            "context deadline exceeded"
        )));
        assert!(!is_retryable(&status(
            tonic::Code::PermissionDenied,
            "etcdserver: permission denied"
        )));
        assert!(!is_retryable(&status(
            tonic::Code::ResourceExhausted,
            "etcdserver: mvcc: database space exceeded"
        )));
        assert!(!is_retryable(&status(
            tonic::Code::InvalidArgument,
            "etcdserver: too many operations in txn request"
        )));
        assert!(!is_retryable(&etcd_client::Error::InvalidArgs("x".into())));
    }

    #[test]
    fn permission_denied_is_told_by_its_code_not_its_words() {
        let status =
            |code, message: &str| etcd_client::Error::GRpcStatus(tonic::Status::new(code, message));
        // What etcd sends a role without the grant (rpctypes.ErrGRPCPermissionDenied).
        assert!(is_permission_denied(&status(
            tonic::Code::PermissionDenied,
            "etcdserver: permission denied"
        )));
        // The code decides, whatever the words.
        assert!(is_permission_denied(&status(
            tonic::Code::PermissionDenied,
            "no"
        )));
        // Lookalikes: the words under another code, or outside any status.
        assert!(!is_permission_denied(&status(
            tonic::Code::Unknown,
            "etcdserver: permission denied"
        )));
        assert!(!is_permission_denied(&status(
            tonic::Code::Unauthenticated,
            "etcdserver: permission denied"
        )));
        assert!(!is_permission_denied(&etcd_client::Error::InvalidArgs(
            "permission denied".into()
        )));
        assert!(!is_permission_denied(&status(
            tonic::Code::Unavailable,
            "etcdserver: no leader"
        )));
    }

    #[tokio::test]
    async fn malformed_endpoints_fail_without_network() {
        let options = EtcdOptions::new(vec!["http://[::1".into()]);
        let err = options.check_endpoints().await.unwrap_err();
        assert!(matches!(err, Error::Usage(_)), "{err}");
        assert!(err.to_string().contains("[::1"), "{err}");
    }
}

//! Talking to etcd: connection options (TLS, auth, keepalive, require-leader), the paged
//! list at one revision, and opening the watch.

use std::error::Error as _;
use std::future::Future;
use std::time::Duration;

use etcd_client::{
    Certificate, Client, ConnectOptions, GetOptions, Identity, TlsOptions, WatchOptions,
    WatchStream,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::Error;
use crate::config::{Config, Timing, TlsFiles};
use crate::mirror::Listing;

/// Responses larger than this are refused by the client. etcd caps one request at
/// 1.5 MiB by default, but a list page or a catch-up watch batch holds many of them.
const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// Opens sessions with etcd members, one endpoint at a time.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    options: ConnectOptions,
    timing: Timing,
    prefix: String,
    range_end: Vec<u8>,
    page_size: i64,
    uses_tls: bool,
}

impl Connector {
    /// Builds the connection options, reading and checking the TLS files.
    pub(crate) async fn new(config: &Config) -> Result<Connector, Error> {
        let timing = config.timing.clone();
        let mut options = ConnectOptions::new()
            .with_connect_timeout(timing.dial_timeout)
            .with_keep_alive(timing.keepalive_interval, timing.keepalive_timeout)
            .with_tcp_keepalive(timing.keepalive_interval)
            // A member cut off from the leader fails the watch instead of serving a
            // silently frozen view of the cluster.
            .with_require_leader(true);
        let uses_tls = match &config.tls {
            Some(files) => {
                options = options.with_tls(tls_options(files)?);
                true
            }
            None => false,
        };
        if !uses_tls
            && let Some(https) = config.endpoints.iter().find(|e| e.starts_with("https://"))
        {
            return Err(Error::Config(format!(
                "endpoint {https} uses https: give --cacert"
            )));
        }
        let connector = Connector {
            options,
            timing,
            prefix: config.prefix.clone(),
            range_end: prefix_range_end(config.prefix.as_bytes()),
            page_size: config.page_size,
            uses_tls,
        };
        // Building a client without credentials parses every endpoint and the TLS setup
        // without any network traffic, so malformed flags fail now, not on every retry.
        for endpoint in &config.endpoints {
            Client::connect([endpoint.as_str()], Some(connector.options.clone()))
                .await
                .map_err(|e| Error::Config(format!("endpoint {endpoint:?}: {}", describe(&e))))?;
        }
        let mut connector = connector;
        if let Some(credentials) = &config.credentials {
            connector.options = connector
                .options
                .with_user(credentials.user.clone(), credentials.password.clone());
        }
        Ok(connector)
    }

    /// The URL shown in logs and metrics for an endpoint.
    pub(crate) fn display_endpoint(&self, endpoint: &str) -> String {
        if endpoint.contains("://") {
            endpoint.to_owned()
        } else if self.uses_tls {
            format!("https://{endpoint}")
        } else {
            format!("http://{endpoint}")
        }
    }

    /// Connects to one endpoint (authenticating if credentials are set).
    pub(crate) async fn connect(&self, endpoint: &str) -> Result<Client, Error> {
        let connecting = Client::connect([endpoint], Some(self.options.clone()));
        within(self.timing.request_timeout, connecting)
            .await
            .map_err(|message| Error::Connect {
                endpoint: endpoint.to_owned(),
                message,
            })
    }

    /// Lists the whole prefix at one revision: the first page fixes the revision, every
    /// later page is read at it, so the listing is one consistent state even when etcd is
    /// being written meanwhile.
    pub(crate) async fn list(
        &self,
        client: &Client,
        endpoint: &str,
    ) -> Result<(Listing, u32), Error> {
        let failed = |message: String| Error::List {
            endpoint: endpoint.to_owned(),
            message,
        };
        let mut kv = client
            .kv_client()
            .max_decoding_message_size(MAX_MESSAGE_BYTES);
        let mut listing = Listing::default();
        let mut key = self.prefix.as_bytes().to_vec();
        let mut pages = 0u32;
        loop {
            let mut options = GetOptions::new()
                .with_range(self.range_end.clone())
                .with_limit(self.page_size);
            if pages > 0 {
                options = options.with_revision(revision_i64(listing.revision));
            }
            let page = tokio::time::timeout(
                self.timing.request_timeout,
                kv.get(key.clone(), Some(options)),
            );
            let no_answer = || {
                format!(
                    "no answer within {} ms",
                    self.timing.request_timeout.as_millis()
                )
            };
            let connect_failed = |message: String| Error::Connect {
                endpoint: endpoint.to_owned(),
                message,
            };
            let response = match page.await {
                Ok(Ok(response)) => response,
                // The client connects lazily, on the first request: a first page that
                // never reached etcd (no answer, or a transport error beneath the status)
                // is a connection failure.
                Err(_) if pages == 0 => return Err(connect_failed(no_answer())),
                Ok(Err(e @ etcd_client::Error::GRpcStatus(_)))
                    if pages == 0 && is_transport(&e) =>
                {
                    return Err(connect_failed(describe(&e)));
                }
                Ok(Err(e)) => return Err(failed(describe(&e))),
                Err(_) => return Err(failed(no_answer())),
            };
            if pages == 0 {
                let revision = response.header().map_or(0, |h| h.revision());
                listing.cluster_id = response.header().map_or(0, |h| h.cluster_id());
                listing.revision = u64::try_from(revision)
                    .map_err(|_| failed(format!("negative header revision {revision}")))?;
            }
            pages += 1;
            for kv in response.kvs() {
                listing.insert(kv.key(), kv.value());
            }
            match response.kvs().last() {
                Some(last) if response.more() => {
                    // The next page starts right after the last key of this one.
                    key = last.key().to_vec();
                    key.push(0);
                }
                _ => break,
            }
        }
        Ok((listing, pages))
    }

    /// Opens a watch on the prefix from `start_revision` and waits for etcd to confirm it.
    pub(crate) async fn watch(
        &self,
        client: &Client,
        endpoint: &str,
        start_revision: u64,
    ) -> Result<WatchStream, Error> {
        let failed = |message: String| classify(endpoint, message);
        let mut watch_client = client
            .watch_client()
            .max_decoding_message_size(MAX_MESSAGE_BYTES);
        let options = WatchOptions::new()
            .with_range(self.range_end.clone())
            .with_start_revision(revision_i64(start_revision))
            .with_progress_notify();
        let mut stream = within(
            self.timing.request_timeout,
            watch_client.watch(self.prefix.as_bytes().to_vec(), Some(options)),
        )
        .await
        .map_err(failed)?;
        let created = within(self.timing.request_timeout, stream.message())
            .await
            .map_err(failed)?;
        match created {
            Some(response) if response.canceled() && response.compact_revision() > 0 => {
                Err(Error::Compacted {
                    endpoint: endpoint.to_owned(),
                    compact_revision: response.compact_revision(),
                })
            }
            Some(response) if response.canceled() => Err(failed(format!(
                "watch refused: {}",
                response.cancel_reason()
            ))),
            Some(response) if response.created() => Ok(stream),
            Some(_) => Err(failed(
                "the first watch response did not confirm the watch".into(),
            )),
            None => Err(failed(
                "the watch stream closed before it was created".into(),
            )),
        }
    }
}

/// Sorts a failed watch into "no leader" or a general watch error.
pub(crate) fn classify(endpoint: &str, message: String) -> Error {
    if message.contains("no leader") {
        Error::NoLeader {
            endpoint: endpoint.to_owned(),
            message,
        }
    } else {
        Error::Watch {
            endpoint: endpoint.to_owned(),
            message,
        }
    }
}

/// Runs an etcd call under a deadline, turning both failure kinds into a message.
pub(crate) async fn within<T>(
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
fn is_transport(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => status.source().is_some(),
        etcd_client::Error::TransportError(_) => true,
        _ => false,
    }
}

/// An etcd-client error with its whole source chain: the top-level message of a transport
/// error is just "transport error", the useful part ("connection refused") is underneath.
pub(crate) fn describe(error: &etcd_client::Error) -> String {
    let (mut text, mut source) = match error {
        etcd_client::Error::GRpcStatus(status) => (
            format!("{:?}: {}", status.code(), status.message()),
            status.source(),
        ),
        etcd_client::Error::TransportError(e) => (e.to_string(), e.source()),
        other => (other.to_string(), None),
    };
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The end of the key range holding every key that starts with `prefix` (etcd's rule:
/// increment the last byte that is not 0xff and cut after it; all 0xff means "to the end").
pub(crate) fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn revision_i64(revision: u64) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

fn tls_options(files: &TlsFiles) -> Result<TlsOptions, Error> {
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| Error::Config(format!("cannot read {flag} {}: {e}", path.display())))
    };
    let certificates = |flag: &str, path: &std::path::Path, pem: &[u8]| {
        let parsed: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
        match parsed {
            Ok(certs) if !certs.is_empty() => Ok(()),
            Ok(_) => Err(Error::Config(format!(
                "{flag} {} holds no PEM certificate",
                path.display()
            ))),
            Err(e) => Err(Error::Config(format!(
                "{flag} {} is not a valid PEM certificate file: {e}",
                path.display()
            ))),
        }
    };
    let Some(cacert) = &files.cacert else {
        // Without it every member certificate would be refused: the agent trusts no
        // system roots, since etcd clusters use their own CA.
        return Err(Error::Config(
            "TLS needs --cacert (the CA of the etcd members)".into(),
        ));
    };
    let pem = read("--cacert", cacert)?;
    certificates("--cacert", cacert, &pem)?;
    let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(pem));
    if let (Some(cert), Some(key)) = (&files.cert, &files.key) {
        let cert_pem = read("--cert", cert)?;
        certificates("--cert", cert, &cert_pem)?;
        let key_pem = read("--key", key)?;
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            Error::Config(format!(
                "--key {} is not a PEM private key: {e}",
                key.display()
            ))
        })?;
        tls = tls.identity(Identity::from_pem(cert_pem, key_pem));
    }
    Ok(tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_range_end_follows_etcd() {
        assert_eq!(prefix_range_end(b"/dw/routing/"), b"/dw/routing0");
        assert_eq!(prefix_range_end(b"a\xff"), b"b");
        assert_eq!(prefix_range_end(b"\xff\xff"), b"\0");
    }

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

        let err = tls_options(&TlsFiles {
            cacert: None,
            ..TlsFiles::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("--cacert"), "{err}");
    }
}

//! A small client of Prometheus' HTTP API: instant queries (`/api/v1/query`) over plain
//! HTTP or TLS, with the protections Prometheus servers usually sit behind (basic auth, a
//! bearer token, a private CA, client certificates). `dwctl traffic` reads the answer
//! counters through it; the load prediction reuses it (the flags of `cli::PrometheusArgs`,
//! `DWCTL_PROMETHEUS_URL` among them, as [`PrometheusSettings`]).
//!
//! Built on hyper's HTTP/1 client connection and tokio-rustls (ring), the crates already
//! in the lockfile. One connection per query; no redirects followed; no proxy.
//!
//! Limits, each checked and tested at its edge: an answer body of at most
//! [`MAX_RESPONSE_BYTES`], at most [`MAX_SAMPLES`] samples in one answer, a whole query
//! (connect, TLS, request, body) within the configured time-out. Everything that fails
//! is an [`Error::Failed`] (exit 1) whose message names the URL and what went wrong;
//! the message holds what the server said, which the caller escapes before printing
//! ([`crate::output::terminal_safe`] does for every error). Its secret files (a password,
//! a bearer token) are read by `dw_etcd::read_secret_file`, like `--password-file`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;

use dw_routing::redact_url;

use crate::error::Error;

/// The largest answer body read (larger answers fail: narrow the query).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// The most samples one instant-vector answer may hold.
pub const MAX_SAMPLES: usize = 100_000;
/// Where the system's CA bundle is looked for when `https://` is used without a CA file
/// (Debian's, then Red Hat's).
pub const SYSTEM_CA_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// What `dwctl traffic` says when no URL is given (exit 2).
pub const NO_URL: &str = "no Prometheus to ask: give its base URL with --prometheus URL or \
the environment variable DWCTL_PROMETHEUS_URL (e.g. export \
DWCTL_PROMETHEUS_URL=http://prometheus:9090); it must scrape every dw-agent's /metrics \
(/usr/share/doc/dwctl/traffic-ops.md)";

/// How to reach Prometheus as configured (the `--prometheus*` flags, plain values), its
/// secrets named by file and read only when asked ([`PrometheusSettings::options`]): a
/// long-running command reads a rotated token file again at its next query.
#[derive(Debug, Clone, Default)]
pub struct PrometheusSettings {
    /// The base URL, as given (`None` or blank: none given).
    pub url: Option<String>,
    /// Basic auth user.
    pub user: Option<String>,
    /// A file holding the basic auth password (else `DWCTL_PROMETHEUS_PASSWORD`).
    pub password_file: Option<PathBuf>,
    /// A file holding a bearer token.
    pub bearer_token_file: Option<PathBuf>,
    /// A PEM CA bundle.
    pub cacert: Option<PathBuf>,
    /// A PEM client certificate.
    pub cert: Option<PathBuf>,
    /// Its private key.
    pub key: Option<PathBuf>,
    /// Do not verify the server's certificate.
    pub insecure: bool,
    /// How long one query may take.
    pub timeout: Duration,
}

impl PrometheusSettings {
    /// The client options, secrets read now; a usage error (exit 2) without a URL.
    pub fn options(&self) -> Result<PrometheusOptions, Error> {
        let url = match self.url.as_deref().map(str::trim) {
            Some(url) if !url.is_empty() => url.to_string(),
            _ => return Err(Error::Usage(NO_URL.into())),
        };
        let password = match (
            &self.password_file,
            std::env::var("DWCTL_PROMETHEUS_PASSWORD"),
        ) {
            (Some(path), _) => Some(dw_etcd::read_secret_file(
                "--prometheus-password-file",
                path,
            )?),
            (None, Ok(password)) => Some(password),
            (None, Err(_)) => None,
        };
        let bearer_token = match &self.bearer_token_file {
            Some(path) => Some(dw_etcd::read_secret_file(
                "--prometheus-bearer-token-file",
                path,
            )?),
            None => None,
        };
        Ok(PrometheusOptions {
            url,
            user: self.user.clone(),
            password,
            bearer_token,
            cacert: self.cacert.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
            insecure: self.insecure,
            timeout: self.timeout,
        })
    }
}

/// How to reach one Prometheus server.
#[derive(Debug, Clone, Default)]
pub struct PrometheusOptions {
    /// The server's base URL (`http://host:9090`, `https://host/prometheus`).
    pub url: String,
    /// Basic auth user; its password from `password`.
    pub user: Option<String>,
    /// Basic auth password.
    pub password: Option<String>,
    /// A bearer token (sent as `Authorization: Bearer ...`).
    pub bearer_token: Option<String>,
    /// A PEM CA bundle that signs the server's certificate (default: the system's).
    pub cacert: Option<PathBuf>,
    /// A PEM client certificate (with `key`), for servers that ask for one.
    pub cert: Option<PathBuf>,
    /// The client certificate's PEM private key.
    pub key: Option<PathBuf>,
    /// Do not verify the server's certificate (test setups only).
    pub insecure: bool,
    /// How long one query may take, end to end.
    pub timeout: Duration,
}

/// One series of an instant vector (the plan crate's type: `dwctl traffic`'s report is
/// pure).
pub use crate::plan::traffic_report::Sample;

/// A client of one Prometheus server.
#[derive(Clone)]
pub struct Prometheus {
    base: String,
    scheme_https: bool,
    host: String,
    port: u16,
    authorization: Option<String>,
    tls: Option<TlsConnector>,
    timeout: Duration,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the authorization header.
        f.debug_struct("Prometheus")
            .field("base", &redact_url(&self.base))
            .finish_non_exhaustive()
    }
}

impl Prometheus {
    /// A client for `options`: the URL checked, the TLS configuration and the credentials
    /// read. A bad URL or flag combination is a usage error (exit 2); an unreadable file
    /// is exit 1.
    pub fn new(options: &PrometheusOptions) -> Result<Prometheus, Error> {
        let text = options.url.trim_end_matches('/');
        let uri: Uri = text.parse().map_err(|_| {
            Error::Usage(format!(
                "--prometheus `{}`: not a URL such as http://prometheus:9090",
                redact_url(&options.url).escape_default()
            ))
        })?;
        let scheme_https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(Error::Usage(format!(
                    "--prometheus `{}`: the URL must start with http:// or https://",
                    redact_url(&options.url).escape_default()
                )));
            }
        };
        let authority = uri.authority().ok_or_else(|| {
            Error::Usage(format!(
                "--prometheus `{}`: no host",
                redact_url(&options.url).escape_default()
            ))
        })?;
        if authority.as_str().contains('@') {
            return Err(Error::Usage(
                "--prometheus: give credentials with --prometheus-user and \
                 DWCTL_PROMETHEUS_PASSWORD or --prometheus-password-file, not in the URL"
                    .into(),
            ));
        }
        if uri.query().is_some() {
            return Err(Error::Usage(format!(
                "--prometheus `{}`: the base URL takes no query",
                redact_url(&options.url).escape_default()
            )));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = authority
            .port_u16()
            .unwrap_or(if scheme_https { 443 } else { 80 });
        let authorization = match (&options.user, &options.password, &options.bearer_token) {
            (Some(_), _, Some(_)) => {
                return Err(Error::Usage(
                    "give either basic auth (--prometheus-user) or a bearer token, not both".into(),
                ));
            }
            (Some(user), password, None) => {
                let pair = format!("{user}:{}", password.as_deref().unwrap_or(""));
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                ))
            }
            (None, Some(_), _) => {
                return Err(Error::Usage(
                    "a Prometheus password without --prometheus-user".into(),
                ));
            }
            (None, None, Some(token)) => Some(format!("Bearer {token}")),
            (None, None, None) => None,
        };
        if authorization
            .as_deref()
            .is_some_and(|value| hyper::header::HeaderValue::from_str(value).is_err())
        {
            return Err(Error::Usage(
                "the Prometheus credentials hold characters an HTTP header cannot carry".into(),
            ));
        }
        let tls = if scheme_https {
            Some(tls_connector(options)?)
        } else {
            if options.cacert.is_some() || options.cert.is_some() || options.insecure {
                return Err(Error::Usage(
                    "TLS options (--prometheus-cacert, --prometheus-cert, --prometheus-insecure) \
                     need an https:// URL"
                        .into(),
                ));
            }
            None
        };
        Ok(Prometheus {
            base: text.to_string(),
            scheme_https,
            host: host.to_string(),
            port,
            authorization,
            tls,
            timeout: options.timeout,
        })
    }

    /// The base URL queried, as messages show it ([`redact_url`]: the base URL holds no
    /// credentials, but a path may).
    pub fn url(&self) -> String {
        redact_url(&self.base)
    }

    /// Evaluates `promql` now (`/api/v1/query`) and returns its instant vector. A scalar
    /// answer is one sample without labels.
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>, Error> {
        let body = format!("query={}", utf8_percent_encode(promql, NON_ALPHANUMERIC));
        let (status, bytes) =
            match tokio::time::timeout(self.timeout, self.post("/api/v1/query", body)).await {
                Ok(answer) => answer?,
                Err(_) => {
                    return Err(self.failed(format!(
                        "no answer within {:?} (--prometheus-timeout)",
                        self.timeout
                    )));
                }
            };
        parse_answer(status, &bytes).map_err(|why| self.failed(why))
    }

    fn failed(&self, why: String) -> Error {
        Error::Failed(format!("Prometheus at {}: {why}", redact_url(&self.base)))
    }

    /// POSTs a form to `path` below the base URL; the status and the body.
    async fn post(&self, path: &str, form: String) -> Result<(StatusCode, Bytes), Error> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|error| self.failed(format!("cannot connect: {error}")))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            Some(tls) => {
                let name = ServerName::try_from(self.host.clone())
                    .map_err(|_| self.failed("not a host name TLS can verify".into()))?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|error| self.failed(format!("TLS handshake failed: {error}")))?;
                self.exchange(stream, path, form).await
            }
            None => self.exchange(tcp, path, form).await,
        }
    }

    async fn exchange<S>(
        &self,
        stream: S,
        path: &str,
        form: String,
    ) -> Result<(StatusCode, Bytes), Error>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| self.failed(format!("HTTP handshake failed: {error}")))?;
        let driver = tokio::spawn(connection);
        let host =
            if (self.scheme_https && self.port == 443) || (!self.scheme_https && self.port == 80) {
                self.host.clone()
            } else if self.host.contains(':') {
                format!("[{}]:{}", self.host, self.port)
            } else {
                format!("{}:{}", self.host, self.port)
            };
        let target: Uri = self
            .base
            .parse()
            .map_err(|_| self.failed("bad URL".into()))?;
        let path_and_query = format!("{}{path}", target.path().trim_end_matches('/'));
        let mut request = Request::post(path_and_query)
            .header(hyper::header::HOST, host)
            .header(
                hyper::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(hyper::header::ACCEPT, "application/json")
            .header(
                hyper::header::USER_AGENT,
                concat!("dwctl/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(value) = &self.authorization {
            request = request.header(hyper::header::AUTHORIZATION, value);
        }
        let request = request
            .body(Full::new(Bytes::from(form)))
            .map_err(|error| self.failed(format!("cannot build the request: {error}")))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|error| self.failed(format!("the request failed: {error}")))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|error| {
                if error.is::<http_body_util::LengthLimitError>() {
                    self.failed(format!(
                        "the answer is larger than {MAX_RESPONSE_BYTES} bytes (narrow the query)"
                    ))
                } else {
                    self.failed(format!("reading the answer failed: {error}"))
                }
            })?
            .to_bytes();
        driver.abort();
        Ok((status, body))
    }
}

/// Reads an API answer: the instant vector of a success, or why not (Prometheus' own
/// error, an HTTP status, or a body that is not an API answer at all).
pub fn parse_answer(status: StatusCode, body: &[u8]) -> Result<Vec<Sample>, String> {
    let short = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
        text.trim().to_string()
    };
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Err(format!(
            "HTTP {status}: credentials missing or refused (--prometheus-user, \
             --prometheus-bearer-token-file)"
        ));
    }
    let json: Value = match serde_json::from_slice(body) {
        Ok(json) => json,
        Err(_) => {
            return Err(format!(
                "HTTP {status}, and the answer is not Prometheus API JSON (is this the \
                 Prometheus base URL?): `{}`",
                short(body)
            ));
        }
    };
    match json.get("status").and_then(Value::as_str) {
        Some("success") => {}
        Some("error") => {
            return Err(format!(
                "HTTP {status}: {}: {}",
                json.get("errorType")
                    .and_then(Value::as_str)
                    .unwrap_or("error"),
                json.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("(no message)")
            ));
        }
        _ => {
            return Err(format!(
                "HTTP {status}: an answer without a Prometheus API `status`: `{}`",
                short(body)
            ));
        }
    }
    let data = json
        .get("data")
        .ok_or_else(|| "an answer without `data`".to_string())?;
    let value_of = |pair: &Value| -> Result<f64, String> {
        let text = pair
            .get(1)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("a sample without a [time, \"value\"] pair: {pair}"))?;
        match text {
            "NaN" => Ok(f64::NAN),
            "+Inf" => Ok(f64::INFINITY),
            "-Inf" => Ok(f64::NEG_INFINITY),
            _ => text
                .parse::<f64>()
                .map_err(|_| format!("a sample value that is not a number: {text:?}")),
        }
    };
    match data.get("resultType").and_then(Value::as_str) {
        Some("vector") => {
            let results = data
                .get("result")
                .and_then(Value::as_array)
                .ok_or_else(|| "a vector answer without a `result` list".to_string())?;
            if results.len() > MAX_SAMPLES {
                return Err(format!(
                    "{} samples in one answer, more than the {MAX_SAMPLES} read",
                    results.len()
                ));
            }
            results
                .iter()
                .map(|result| {
                    let metric = result
                        .get("metric")
                        .and_then(Value::as_object)
                        .ok_or_else(|| "a sample without `metric` labels".to_string())?;
                    let labels = metric
                        .iter()
                        .filter(|(name, _)| name.as_str() != "__name__")
                        .map(|(name, value)| {
                            value
                                .as_str()
                                .map(|value| (name.clone(), value.to_string()))
                                .ok_or_else(|| format!("label {name:?} is not a string"))
                        })
                        .collect::<Result<_, _>>()?;
                    let value = value_of(result.get("value").unwrap_or(&Value::Null))?;
                    Ok(Sample { labels, value })
                })
                .collect()
        }
        Some("scalar") => Ok(vec![Sample {
            labels: BTreeMap::new(),
            value: value_of(data.get("result").unwrap_or(&Value::Null))?,
        }]),
        other => Err(format!(
            "an answer of type {:?}, not an instant vector",
            other.unwrap_or("(none)")
        )),
    }
}

/// A PromQL string literal holding `text` exactly (double-quoted, escaped).
pub fn promql_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn tls_connector(options: &PrometheusOptions) -> Result<TlsConnector, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::Failed(format!("TLS: {error}")))?;
    let builder = if options.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let files: Vec<PathBuf> = match &options.cacert {
            Some(path) => vec![path.clone()],
            None => SYSTEM_CA_BUNDLES
                .iter()
                .map(PathBuf::from)
                .filter(|path| path.exists())
                .take(1)
                .collect(),
        };
        for path in &files {
            for cert in CertificateDer::pem_file_iter(path).map_err(|error| {
                Error::Failed(format!(
                    "{}: cannot read CA certificates: {error}",
                    path.display()
                ))
            })? {
                let cert = cert.map_err(|error| {
                    Error::Failed(format!(
                        "{}: not a PEM certificate: {error}",
                        path.display()
                    ))
                })?;
                roots.add(cert).map_err(|error| {
                    Error::Failed(format!(
                        "{}: a CA certificate rustls refuses: {error}",
                        path.display()
                    ))
                })?;
            }
        }
        if roots.is_empty() {
            return Err(Error::Failed(format!(
                "TLS: no CA certificates (give --prometheus-cacert; looked in {})",
                files
                    .iter()
                    .map(|path| path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        builder.with_root_certificates(roots)
    };
    let config = match (&options.cert, &options.key) {
        (Some(cert), Some(key)) => {
            let certs = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|error| {
                    Error::Failed(format!(
                        "{}: not a PEM certificate: {error}",
                        cert.display()
                    ))
                })?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|error| {
                Error::Failed(format!("{}: not a PEM private key: {error}", key.display()))
            })?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|error| Error::Failed(format!("TLS client certificate: {error}")))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(Error::Usage(
                "--prometheus-cert and --prometheus-key go together".into(),
            ));
        }
    };
    Ok(TlsConnector::from(Arc::new(config)))
}

/// `--prometheus-insecure`: accepts any server certificate (signatures still checked, so
/// the handshake itself is sound; who the server is is not).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> Result<Vec<Sample>, String> {
        parse_answer(StatusCode::OK, body.as_bytes())
    }

    #[test]
    fn reads_a_vector_and_a_scalar() {
        let samples = ok(
            r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"x","origin":"fra-a"},"value":[1.5,"2.25"]},
            {"metric":{},"value":[1.5,"NaN"]}]}}"#,
        )
        .unwrap();
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].label("origin"), "fra-a");
        assert!(!samples[0].labels.contains_key("__name__"));
        assert_eq!(samples[0].value, 2.25);
        assert!(samples[1].value.is_nan());
        let scalar =
            ok(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"7"]}}"#).unwrap();
        assert_eq!(scalar[0].value, 7.0);
    }

    #[test]
    fn says_what_is_wrong_with_an_answer() {
        let error = parse_answer(
            StatusCode::BAD_REQUEST,
            br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
        )
        .unwrap_err();
        assert!(error.contains("bad_data: parse error"), "{error}");
        let error = ok("<html>nginx</html>").unwrap_err();
        assert!(error.contains("not Prometheus API JSON"), "{error}");
        assert!(error.contains("<html>nginx</html>"), "{error}");
        let error = ok(r#"{"hello":1}"#).unwrap_err();
        assert!(
            error.contains("without a Prometheus API `status`"),
            "{error}"
        );
        let error =
            ok(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#).unwrap_err();
        assert!(error.contains("not an instant vector"), "{error}");
        let error = ok(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#)
            .unwrap_err();
        assert!(error.contains("not a number"), "{error}");
        let error = parse_answer(StatusCode::UNAUTHORIZED, b"").unwrap_err();
        assert!(error.contains("credentials"), "{error}");
    }

    #[test]
    fn at_most_max_samples_are_read() {
        let answer = |n: usize| {
            let one = r#"{"metric":{},"value":[1,"1"]}"#;
            format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
                vec![one; n].join(",")
            )
        };
        assert_eq!(ok(&answer(MAX_SAMPLES)).unwrap().len(), MAX_SAMPLES);
        let error = ok(&answer(MAX_SAMPLES + 1)).unwrap_err();
        assert!(error.contains("more than the 100000 read"), "{error}");
    }

    #[test]
    fn promql_strings_hold_any_text() {
        assert_eq!(promql_string("DE"), "\"DE\"");
        assert_eq!(promql_string("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
        assert_eq!(promql_string("\u{1b}"), "\"\\u001b\"");
    }

    #[test]
    fn urls_and_credentials_are_checked() {
        let with = |url: &str| PrometheusOptions {
            url: url.into(),
            timeout: Duration::from_secs(1),
            ..PrometheusOptions::default()
        };
        assert!(Prometheus::new(&with("http://127.0.0.1:9090/")).is_ok());
        assert_eq!(
            Prometheus::new(&with("http://127.0.0.1:9090/"))
                .unwrap()
                .url(),
            "http://127.0.0.1:9090"
        );
        for bad in [
            "ftp://x",
            "127.0.0.1:9090",
            "http://u:p@h:1",
            "http://h/?q=1",
            "",
        ] {
            let error = Prometheus::new(&with(bad)).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{bad}: {error}");
        }
        let mut both = with("http://h:1");
        both.user = Some("u".into());
        both.bearer_token = Some("t".into());
        assert_eq!(Prometheus::new(&both).unwrap_err().exit_code(), 2);
        let mut tls_on_http = with("http://h:1");
        tls_on_http.insecure = true;
        assert_eq!(Prometheus::new(&tls_on_http).unwrap_err().exit_code(), 2);
        let mut insecure = with("https://h:1");
        insecure.insecure = true;
        assert!(Prometheus::new(&insecure).is_ok());
    }

    #[test]
    fn a_bad_url_is_printed_without_its_secrets() {
        for bad in [
            "http://u:hunter2@prom:9090",
            "htp://u:hunter2@prom",
            "http://prom:9090/?token=hunter2",
            "http//u:hunter2@prom:9090",
            "http://u:hunter2@[::1",
        ] {
            let error = Prometheus::new(&PrometheusOptions {
                url: bad.into(),
                timeout: Duration::from_secs(1),
                ..PrometheusOptions::default()
            })
            .unwrap_err();
            assert_eq!(error.exit_code(), 2, "{bad}: {error}");
            assert!(!error.to_string().contains("hunter2"), "{bad}: {error}");
        }
    }

    #[test]
    fn credentials_become_one_authorization_header_never_printed() {
        let options =
            |user: Option<&str>, password: Option<&str>, token: Option<&str>| PrometheusOptions {
                url: "http://h:1".into(),
                user: user.map(Into::into),
                password: password.map(Into::into),
                bearer_token: token.map(Into::into),
                timeout: Duration::from_secs(1),
                ..PrometheusOptions::default()
            };
        let basic = Prometheus::new(&options(Some("user"), Some("pass"), None)).unwrap();
        assert_eq!(basic.authorization.as_deref(), Some("Basic dXNlcjpwYXNz"));
        assert!(!format!("{basic:?}").contains("dXNlcjpwYXNz"));
        let bearer = Prometheus::new(&options(None, None, Some("t0ken"))).unwrap();
        assert_eq!(bearer.authorization.as_deref(), Some("Bearer t0ken"));
        assert!(!format!("{bearer:?}").contains("t0ken"));
        assert!(
            Prometheus::new(&options(None, None, None))
                .unwrap()
                .authorization
                .is_none()
        );
        // A token no header can carry, a password without a user: usage errors.
        let error = Prometheus::new(&options(None, None, Some("a\nb"))).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{error}");
        let error = Prometheus::new(&options(None, Some("p"), None)).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{error}");
    }
}

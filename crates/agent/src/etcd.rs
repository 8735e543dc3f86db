//! Talking to etcd: connection options (TLS, auth, keepalive, require-leader), the paged
//! list at one revision, and opening the watch.

pub(crate) mod listing;

use std::time::Duration;

use dw_etcd::{PrefixHead, is_transport, prefix_range_end, read_prefix_head};
pub(crate) use dw_etcd::{describe, within};
use etcd_client::{Client, ConnectOptions, WatchOptions, WatchStream};

use crate::Error;
use crate::config::Config;
use crate::etcd::listing::Listing;

/// Opens sessions with etcd members, one endpoint at a time.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    options: ConnectOptions,
    etcd: dw_etcd::EtcdOptions,
    prefix: String,
    range_end: Vec<u8>,
    page_size: i64,
}

impl Connector {
    /// Builds the connection options, reading and checking the TLS files and endpoints.
    pub(crate) async fn new(config: &Config) -> Result<Connector, Error> {
        let timing = &config.timing;
        config.etcd.check_endpoints().await?;
        let options = config
            .etcd
            .connect_options()?
            .with_keep_alive(timing.keepalive_interval, timing.keepalive_timeout)
            .with_tcp_keepalive(timing.keepalive_interval);
        Ok(Connector {
            options,
            etcd: config.etcd.clone(),
            prefix: config.prefix.clone(),
            range_end: prefix_range_end(config.prefix.as_bytes()),
            page_size: config.page_size,
        })
    }

    /// The deadline of one unary request.
    fn request_timeout(&self) -> Duration {
        self.etcd.request_timeout
    }

    /// The URL shown in logs and metrics for an endpoint.
    pub(crate) fn display_endpoint(&self, endpoint: &str) -> String {
        self.etcd.display_endpoint(endpoint)
    }

    /// Connects to one endpoint (authenticating if credentials are set).
    pub(crate) async fn connect(&self, endpoint: &str) -> Result<Client, Error> {
        dw_etcd::connect_endpoint(endpoint, self.options.clone(), self.request_timeout())
            .await
            .map_err(Error::from)
    }

    /// Lists the whole prefix at one revision, through `dw_etcd`'s paging (the first page
    /// fixes the revision, every later page is read at it, so the listing is one consistent
    /// state even when etcd is being written meanwhile; a page too large for the client is
    /// read again with half as many keys). Each page goes into the listing as it comes, and
    /// each request has the request timeout. The client connects lazily, on the first
    /// request: a first page that never reached etcd (no answer, or a transport error
    /// beneath the status) is a connection failure, any later failure a list failure.
    pub(crate) async fn list(
        &self,
        client: &Client,
        endpoint: &str,
    ) -> Result<(Listing, u32), Error> {
        let mut kv = dw_etcd::kv_client(client);
        let mut listing = Listing::default();
        let mut first_page = true;
        let read = dw_etcd::visit_range_pages(
            &mut kv,
            self.prefix.as_bytes(),
            &self.range_end,
            None,
            self.page_size,
            Some(self.request_timeout()),
            |page| {
                if first_page {
                    listing.cluster_id = page.header().map_or(0, |h| h.cluster_id());
                    first_page = false;
                }
                for kv in page.kvs() {
                    listing.insert(kv.key(), kv.value(), kv.mod_revision());
                }
            },
        )
        .await
        .map_err(|failure| {
            let message = match &failure.cause {
                dw_etcd::PageCause::Etcd(error) => describe(error),
                dw_etcd::PageCause::Deadline(after) => {
                    format!("no answer within {} ms", after.as_millis())
                }
            };
            let never_reached = failure.pages_read == 0
                && match &failure.cause {
                    dw_etcd::PageCause::Deadline(_) => true,
                    dw_etcd::PageCause::Etcd(error) => is_transport(error),
                };
            if never_reached {
                Error::Connect {
                    endpoint: endpoint.to_owned(),
                    message,
                }
            } else {
                Error::List {
                    endpoint: endpoint.to_owned(),
                    message,
                }
            }
        })?;
        listing.revision = u64::try_from(read.revision).map_err(|_| Error::List {
            endpoint: endpoint.to_owned(),
            message: format!("negative header revision {}", read.revision),
        })?;
        Ok((listing, read.pages))
    }

    /// Opens a watch on the prefix from `start_revision` and waits for etcd to confirm it.
    pub(crate) async fn watch(
        &self,
        client: &Client,
        endpoint: &str,
        start_revision: u64,
    ) -> Result<WatchStream, Error> {
        let failed = |message: String| classify(endpoint, message);
        let mut watch_client = dw_etcd::watch_client(client);
        let options = WatchOptions::new()
            .with_range(self.range_end.clone())
            .with_start_revision(revision_i64(start_revision))
            .with_progress_notify();
        let mut stream = within(
            self.request_timeout(),
            watch_client.watch(self.prefix.as_bytes().to_vec(), Some(options)),
        )
        .await
        .map_err(failed)?;
        let created = within(self.request_timeout(), stream.message())
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

    /// The prefix's key count and newest modification (see [`dw_etcd::read_prefix_head`]):
    /// how a silent watch is checked where progress requests go unanswered.
    pub(crate) async fn prefix_head(&self, client: &Client) -> Result<PrefixHead, String> {
        let mut kv = client.kv_client();
        within(
            self.request_timeout(),
            read_prefix_head(&mut kv, &self.prefix),
        )
        .await
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

fn revision_i64(revision: u64) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

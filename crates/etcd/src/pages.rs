//! Reading a large range in pages at one pinned revision.
//!
//! etcd cannot filter by value, so a client that needs a whole prefix (every region for a
//! drain plan, every node report for `status`) must read all of it; read at once, the
//! answer grows with the fleet and hits the client's response limit (tonic's default is
//! 4 MiB: 50,000 regions or 650 large node reports already exceed it). Here the range is
//! read `page_keys` keys at a time: the first page fixes the revision, every later page is
//! read at it, so the pages are one consistent state, and a guard on "nothing under the
//! prefix changed since that revision" still covers every key that was read. A page that
//! is still larger than the response limit (a few huge values) is read again with half as
//! many keys, down to one.

use etcd_client::{Client, GetOptions, KeyValue, KvClient, WatchClient};

use crate::connect::prefix_range_end;

/// The largest response a client of this crate decodes: 256 MiB. A page holds at most
/// [`DEFAULT_PAGE_KEYS`] keys, each at most etcd's request limit (1.5 MiB by default), and
/// a watch batch replays many writes; tonic's default of 4 MiB is far below both.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// Keys per page unless the caller says otherwise: small enough that a page of ordinary
/// values (region values are about 100 bytes, node reports about 1 KB) stays well under a
/// few MiB, large enough that 100,000 keys take 100 requests.
pub const DEFAULT_PAGE_KEYS: i64 = 1000;

/// A KV client of `client` that accepts responses up to [`MAX_RESPONSE_BYTES`].
pub fn kv_client(client: &Client) -> KvClient {
    client
        .kv_client()
        .max_decoding_message_size(MAX_RESPONSE_BYTES)
}

/// A watch client of `client` that accepts responses up to [`MAX_RESPONSE_BYTES`].
pub fn watch_client(client: &Client) -> WatchClient {
    client
        .watch_client()
        .max_decoding_message_size(MAX_RESPONSE_BYTES)
}

/// Every key of a range, read in pages at one revision.
#[derive(Debug, Clone, Default)]
pub struct Pages {
    /// The revision every page was read at.
    pub revision: i64,
    /// The keys with their values, in key order.
    pub kvs: Vec<KeyValue>,
    /// How many requests it took (a page read again with fewer keys counts).
    pub requests: u32,
}

/// Reads every key that starts with `prefix`, in pages; at `revision` when given (the
/// revision of an earlier read, so that several prefixes form one state), otherwise at the
/// revision of the first page. `page_keys` keys per request ([`DEFAULT_PAGE_KEYS`]); a
/// page the KV client refuses for its size is read again with half as many.
pub async fn read_prefix_pages(
    kv: &mut KvClient,
    prefix: &[u8],
    revision: Option<i64>,
    page_keys: i64,
) -> Result<Pages, etcd_client::Error> {
    read_range_pages(kv, prefix, &prefix_range_end(prefix), revision, page_keys).await
}

/// [`read_prefix_pages`] for the range `[start, end)`.
pub async fn read_range_pages(
    kv: &mut KvClient,
    start: &[u8],
    end: &[u8],
    revision: Option<i64>,
    page_keys: i64,
) -> Result<Pages, etcd_client::Error> {
    let mut pages = Pages {
        revision: revision.unwrap_or(0),
        ..Pages::default()
    };
    let mut key = start.to_vec();
    let configured = page_keys.max(1);
    let mut page_keys = configured;
    loop {
        let mut options = GetOptions::new()
            .with_range(end.to_vec())
            .with_limit(page_keys);
        if pages.revision > 0 {
            options = options.with_revision(pages.revision);
        }
        pages.requests += 1;
        let response = match kv.get(key.clone(), Some(options)).await {
            Ok(response) => response,
            Err(error) if page_keys > 1 && is_too_large(&error) => {
                page_keys = (page_keys / 2).max(1);
                continue;
            }
            Err(error) => return Err(error),
        };
        if pages.revision == 0 {
            pages.revision = response.header().map_or(0, |header| header.revision());
        }
        let more = response.more();
        let mut kvs = response.kvs().to_vec();
        let next = kvs.last().map(|last| {
            // The next page starts right after the last key of this one.
            let mut next = last.key().to_vec();
            next.push(0);
            next
        });
        pages.kvs.append(&mut kvs);
        match next {
            Some(next) if more => key = next,
            _ => return Ok(pages),
        }
        // Pages that fit grow back towards the configured size.
        page_keys = (page_keys * 2).min(configured);
    }
}

/// Whether the client refused a response for its size (tonic: "decoded message length
/// too large").
pub fn is_too_large(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => {
            status.message().contains("message length too large")
        }
        _ => false,
    }
}

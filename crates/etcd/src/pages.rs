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

use std::time::Duration;

use etcd_client::{Client, GetOptions, GetResponse, KeyValue, KvClient, WatchClient};

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
    let mut kvs = Vec::new();
    let read = visit_range_pages(kv, start, end, revision, page_keys, None, |page| {
        kvs.extend_from_slice(page.kvs());
    })
    .await
    .map_err(|failure| match failure.cause {
        PageCause::Etcd(error) => error,
        // No deadline was given, so none can pass.
        PageCause::Deadline(after) => {
            etcd_client::Error::InvalidArgs(format!("no answer within {} ms", after.as_millis()))
        }
    })?;
    Ok(Pages {
        revision: read.revision,
        kvs,
        requests: read.requests,
    })
}

/// What [`visit_range_pages`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PagesRead {
    /// The revision every page was read at.
    pub revision: i64,
    /// How many requests it took (a page read again with fewer keys counts).
    pub requests: u32,
    /// How many pages were handed to the visitor.
    pub pages: u32,
}

/// Why [`visit_range_pages`] stopped, and after how many pages.
#[derive(Debug)]
pub struct PageFailure {
    /// Pages read and visited before the one that failed (0: the first request failed,
    /// which for a lazily connected client usually means it never reached etcd).
    pub pages_read: u32,
    /// What failed.
    pub cause: PageCause,
}

/// What failed a page.
#[derive(Debug)]
pub enum PageCause {
    /// etcd answered with an error, or the request did not reach it.
    Etcd(etcd_client::Error),
    /// No answer within the per-page deadline.
    Deadline(Duration),
}

/// Reads the range `[start, end)` in pages at one revision (as [`read_range_pages`]: the
/// first page fixes it unless `revision` is given; a page refused for its size is read
/// again with half as many keys) and hands each page's response to `visit` as it comes,
/// so that a caller building its own structure never holds every key twice. Each request
/// gets `deadline` when given.
pub async fn visit_range_pages(
    kv: &mut KvClient,
    start: &[u8],
    end: &[u8],
    revision: Option<i64>,
    page_keys: i64,
    deadline: Option<Duration>,
    mut visit: impl FnMut(&GetResponse),
) -> Result<PagesRead, PageFailure> {
    let mut read = PagesRead {
        revision: revision.unwrap_or(0),
        ..PagesRead::default()
    };
    let mut key = start.to_vec();
    let configured = page_keys.max(1);
    let mut page_keys = configured;
    loop {
        let mut options = GetOptions::new()
            .with_range(end.to_vec())
            .with_limit(page_keys);
        if read.revision > 0 {
            options = options.with_revision(read.revision);
        }
        read.requests += 1;
        let failed = |cause| PageFailure {
            pages_read: read.pages,
            cause,
        };
        let request = kv.get(key.clone(), Some(options));
        let answer = match deadline {
            Some(after) => match tokio::time::timeout(after, request).await {
                Ok(answer) => answer,
                Err(_) => return Err(failed(PageCause::Deadline(after))),
            },
            None => request.await,
        };
        let response = match answer {
            Ok(response) => response,
            Err(error) if page_keys > 1 && is_too_large(&error) => {
                page_keys = (page_keys / 2).max(1);
                continue;
            }
            Err(error) => return Err(failed(PageCause::Etcd(error))),
        };
        if read.revision == 0 {
            read.revision = response.header().map_or(0, |header| header.revision());
        }
        read.pages += 1;
        visit(&response);
        let next = response.kvs().last().map(|last| {
            // The next page starts right after the last key of this one.
            let mut next = last.key().to_vec();
            next.push(0);
            next
        });
        match next {
            Some(next) if response.more() => key = next,
            _ => return Ok(read),
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

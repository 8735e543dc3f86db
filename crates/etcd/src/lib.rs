//! dw-etcd: the one etcd layer of `dw-agent` and `dwctl`.
//!
//! Both binaries reach etcd the same way, so they take the same flags and check them the
//! same way:
//!
//! - [`EtcdArgs`]: the connection flags (`--endpoints`, `--user`, `--password`,
//!   `--password-file`, `--cacert`, `--cert`, `--key`, `--dial-timeout`,
//!   `--request-timeout`), a clap `Args` struct each binary flattens into its command line
//!   and gives its own environment variables.
//! - [`EtcdOptions`]: what the flags become once checked; [`EtcdOptions::connect_options`]
//!   reads and checks the TLS files, [`EtcdOptions::connect`] finds one live member among
//!   several endpoints, [`connect_endpoint`] dials exactly one.
//! - [`Backoff`]: capped exponential backoff with full jitter for every retry loop.
//! - [`read_prefix_head`]: a prefix's key count and newest change in one keys-only read.
//! - [`read_prefix_pages`]: a whole prefix in pages at one pinned revision, through a
//!   client ([`kv_client`]) whose response limit ([`MAX_RESPONSE_BYTES`]) is not tonic's
//!   4 MiB.
//! - [`read_secret_file`]: the one reader of a secret file (`--password-file`, dwctl's
//!   Prometheus secrets): bounded ([`MAX_SECRET_BYTES`]), refused in a directory others
//!   can write, line ending dropped.
//! - [`describe`], [`within`], [`is_retryable`], [`is_permission_denied`],
//!   [`prefix_range_end`]: small helpers around `etcd-client`.
//!
//! ```
//! use clap::Parser;
//! use dw_etcd::EtcdArgs;
//!
//! #[derive(Parser)]
//! #[command(mut_arg("user", |arg| arg.env("EXAMPLE_USER")))]
//! struct Cli {
//!     #[command(flatten)]
//!     etcd: EtcdArgs,
//! }
//!
//! let cli = Cli::parse_from(["example", "--endpoints", "10.0.0.1:2379,10.0.0.2:2379"]);
//! let options = cli.etcd.into_options().unwrap();
//! assert_eq!(options.endpoints.len(), 2);
//! assert_eq!(options.display_endpoint("10.0.0.1:2379"), "http://10.0.0.1:2379");
//!
//! let mut backoff = dw_etcd::Backoff::new(
//!     std::time::Duration::from_millis(100),
//!     std::time::Duration::from_secs(5),
//! );
//! assert!(backoff.next_delay() < std::time::Duration::from_millis(100));
//! ```
#![deny(missing_docs)]

mod backoff;
mod connect;
mod error;
mod options;
mod pages;
mod prefix;
mod secret;

pub use crate::{
    backoff::Backoff,
    connect::{
        connect_endpoint, is_permission_denied, is_retryable, is_transport, prefix_range_end,
        within,
    },
    error::{Error, describe},
    options::{Credentials, EtcdArgs, EtcdOptions, TlsFiles, parse_duration},
    pages::{
        DEFAULT_PAGE_KEYS, MAX_RESPONSE_BYTES, PageCause, PageFailure, Pages, PagesRead,
        is_too_large, kv_client, read_prefix_pages, read_range_pages, visit_range_pages,
        watch_client,
    },
    prefix::{PrefixHead, read_prefix_head},
    secret::{MAX_SECRET_BYTES, read_secret_file},
};

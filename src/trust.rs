//! Opening the snapshot without trusting whoever put it there: the rules (the file, its
//! directory and every directory above it; docs/snapshot-trust.md) are dw-snapshot-trust's,
//! shared with dw-agent, which checks what it publishes by them. This module holds the
//! process's setting.

use std::sync::OnceLock;

pub use dw_snapshot_trust::{Refused, TrustedOwner, open};

/// The process's `dw_router.trusted_owner`, resolved on first use (never in MINIT unless
/// the default snapshot is preloaded there; a numeric uid needs no NSS lookup at all).
pub fn trusted_owner() -> &'static TrustedOwner {
    static OWNER: OnceLock<TrustedOwner> = OnceLock::new();
    OWNER.get_or_init(|| TrustedOwner::parse(&crate::ini::trusted_owner()))
}

//! dw-snapshot-trust: who may have written the routing snapshot, decided once for both
//! sides.
//!
//! Whoever can put a file at the snapshot's path routes the node's traffic, so the
//! extension (`dw_router.so`) reads a file only when it passes these rules, and dw-agent,
//! which writes it, checks after each publication that the readers will take what it
//! wrote (docs/snapshot-trust.md). One implementation, so the two cannot disagree:
//!
//! - the file is a regular file, reached without following a symlink in its last
//!   component, opened without blocking (a FIFO there must not hang a worker), and not
//!   writable by group or others;
//! - the file is owned by root or the trusted owner ([`TrustedOwner`]: a set uid, or by
//!   default the owner of the file's directory);
//! - every directory on the way from `/` to the file (symlinks followed and checked where
//!   they sit), as OpenSSH's `StrictModes` checks a key file's: owned by root or the
//!   trusted owner, and not writable by group or others, unless it is sticky and the
//!   component entered in it is owned by root or a set trusted owner (`/dev/shm`, `/tmp`:
//!   whoever pre-creates `dw-router/` there owns it, and is not trusted for that).
//!
//! The walk opens each directory relative to the previous one (`O_PATH | O_NOFOLLOW`) and
//! judges the opened object (`fstat`), and the file is opened relative to the last one, so
//! what is judged is what is read.
//!
//! ```
//! use std::os::unix::fs::PermissionsExt;
//! use dw_snapshot_trust::{TrustedOwner, open, check_directory};
//!
//! let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
//! let path = dir.path().join("routing.json");
//! std::fs::write(&path, b"{}").unwrap();
//! std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
//! let owner = TrustedOwner::parse("");
//! // Whether it is taken depends on who owns the directories above; the answer is a
//! // reason in words either way.
//! match open(&path, &owner) {
//!     Ok((_file, metadata)) => assert!(metadata.is_file()),
//!     Err(refused) => println!("{refused}"),
//! }
//! // Group-writable: refused, whoever owns it.
//! std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
//! assert!(open(&path, &owner).is_err());
//! // Before a file exists, the agent asks what the readers would say of one it writes.
//! let _ = check_directory(dir.path(), &owner, 0);
//! ```
#![deny(missing_docs)]

mod error;
mod names;
mod owner;
mod rules;
mod walk;

pub use crate::{
    error::Refused,
    names::{gid_of_group, uid_of_user},
    owner::TrustedOwner,
    rules::{Node, Step, Way, check},
    walk::{check_directory, open},
};

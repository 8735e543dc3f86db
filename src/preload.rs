//! Warm children: the default snapshot's table, parsed once in MINIT.
//!
//! php-fpm and lsphp run MINIT in a parent that never serves and fork workers from it, and
//! LiteSpeed recycles its children often. Without this, every fresh child parses the
//! snapshot on its first request (milliseconds at thousands of regions). With it, MINIT
//! parses the table of `dw_router.snapshot_path` once, into memory that every child shares
//! copy-on-write. The fork rules hold: no thread is started and no descriptor is kept (the
//! file is opened, mapped, parsed and closed in `Source::refresh`).
//!
//! The parent keeps that table fresh without a thread: the fork `prepare` handler asks the
//! file for news (one `stat`, a reload only when it changed) before every fork, so a child
//! forked after a reload starts from the new table. A child still checks the file on first
//! use (and finds it unchanged), and sets up its own watch after that first request (see
//! `watch::start_watching`).
//!
//! `dw_router.preload` (SYSTEM): `auto` (the default) preloads in every SAPI except the
//! CLI and phpdbg, which serve from the process that ran MINIT and gain nothing; `1`/`on`
//! and `0`/`off` force it.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{fork, ini, registry, watch};

/// Set in the process whose MINIT preloaded; forks inherit it, so it is read together with
/// the fork generation.
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// Called from MINIT, after the ini entries are registered.
pub fn in_minit() {
    if !ini::preload_enabled(sapi_name().as_deref()) {
        return;
    }
    registry::default_source().refresh();
    PRELOADED.store(true, Ordering::Relaxed);
    watch::defer_set_up_in_children();
}

/// From the fork `prepare` handler: in the process that preloaded (never in one of its
/// children), bring the table up to date before the child is made.
pub fn before_fork() {
    if PRELOADED.load(Ordering::Relaxed) && fork::generation() == 0 {
        registry::default_source().refresh();
    }
}

/// The SAPI's name (`cli`, `fpm-fcgi`, `litespeed`, ...), as MINIT sees it.
pub fn sapi_name() -> Option<String> {
    // SAFETY: the engine sets `sapi_module` before it starts modules; `name` is a static
    // NUL-terminated string of the SAPI, or null.
    unsafe {
        let name = ext_php_rs::ffi::sapi_module.name;
        (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
    }
}

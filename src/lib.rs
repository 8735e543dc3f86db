//! dw_router: the `RegionRouter` PHP extension.
//!
//! This crate is only the binding. Routing itself (parsing a snapshot, validating,
//! resolving, picking) is `dw-routing`; this crate maps the snapshot file, keeps one
//! parsed table per path per process fresh (inotify, or a throttled stat), and exposes it
//! to PHP.
//!
//! The lifecycle is all here, kept plain (yaconf style):
//!
//! - MINIT (`startup`) registers the ini entries, sets which engine shortcuts are on,
//!   hooks the router to the watcher's reloads, installs the fork handlers and, outside
//!   the CLI, parses the default snapshot once so that forked workers start warm
//!   (`preload`), and maps the answer counters (`traffic`). It starts no thread; the one
//!   fd it keeps is the counter file's, which workers inherit for their slot locks.
//! - The first RINIT (`request_startup`) installs the object handlers and method handlers
//!   of the per-request fast paths (see `router`).
//! - MINFO prints the state (`info`).
//! - RSHUTDOWN (`request_shutdown`) sets up watches deferred during the request and frees
//!   the route arrays no table holds any more (`route_array`).
//! - MSHUTDOWN is not needed: a watcher thread, if any, ends with its process, and a
//!   child whose MINIT ran in its parent has nothing of its own to tear down.
//!
//! The first router used in a process, or in a forked child, sets up its watcher.

#![deny(missing_docs)]

mod answer_labels;
mod args;
mod engine;
mod fork;
mod info;
mod ini;
mod loaded;
mod objects;
mod preload;
mod registry;
mod route_array;
mod router;
mod sigbus;
mod source;
mod traffic;
mod trust;
mod values;
mod watch;

use ext_php_rs::zend::IniEntryDef;

pub use crate::router::RegionRouter;

fn startup(_ty: i32, module_number: i32) -> i32 {
    IniEntryDef::register(ini::ENTRIES.as_slice(), module_number);
    engine::configure(&ini::engine_shortcuts());
    watch::after_reloads(router::refresh_default_reader);
    // SAFETY: the handlers only take and release this crate's locks and bump a counter
    // (and, in the process that preloaded, check the file). glibc removes them again if
    // the extension is unloaded.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        );
    }
    preload::in_minit();
    // Before any fork: every worker of the tree maps the same counters.
    traffic::in_minit(preload::sapi_name().as_deref());
    0
}

extern "C" fn request_startup(_ty: i32, _module_number: i32) -> i32 {
    static FAST_PATHS: std::sync::Once = std::sync::Once::new();
    FAST_PATHS.call_once(router::install_fast_paths);
    0
}

extern "C" fn request_shutdown(_ty: i32, _module_number: i32) -> i32 {
    watch::after_request();
    // No script holds a route array any more: free those no table holds.
    route_array::after_request();
    0
}

/// The fork `prepare` handler: holds every lock of the crate across `fork`, so that a
/// child never inherits one held by a thread that does not exist in it.
extern "C" fn before_fork() {
    // Before any lock is taken: it reloads under the reload lock itself.
    preload::before_fork();
    // Lock order: the shared default reader (held while a resolve() may set up a watch or
    // reload), the watcher's state and its count of watches being set up, reload, registry.
    router::lock_for_fork();
    watch::lock_for_fork();
    source::lock_for_fork();
    registry::lock_for_fork();
    // Last: a table dropped on the watcher's thread (under the reload lock) takes it.
    route_array::lock_for_fork();
}

extern "C" fn after_fork_parent() {
    release_fork_locks();
}

extern "C" fn after_fork_child() {
    fork::forked();
    traffic::forked();
    release_fork_locks();
}

fn release_fork_locks() {
    // SAFETY: `before_fork` took them all and forgot the guards, in this thread (the
    // child has only the forking thread).
    unsafe {
        route_array::unlock_after_fork();
        registry::unlock_after_fork();
        source::unlock_after_fork();
        watch::unlock_after_fork();
        router::unlock_after_fork();
    }
}

/// The module entry PHP loads: `get_module`, exported by `#[php_module]`. In a module of its
/// own because the function the macro generates carries no doc comment.
mod entry {
    use ext_php_rs::prelude::*;

    use super::{RegionRouter, info, request_shutdown, request_startup, startup};

    #[php_module]
    #[php(startup = startup)]
    pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
        // The crate is dw-router; PHP knows the extension as dw_router.
        module
            .name("dw_router")
            .class::<RegionRouter>()
            .request_startup_function(request_startup)
            .request_shutdown_function(request_shutdown)
            .info_function(info::module_info)
    }
}

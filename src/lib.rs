//! dw_router: the `RegionRouter` PHP extension.
//!
//! This crate is only the binding. Routing itself (parsing a snapshot, validating,
//! resolving, picking) is `dw-routing`; this crate maps the snapshot file, keeps one
//! parsed table per path per process fresh (inotify, or a throttled stat), and exposes it
//! to PHP.
//!
//! Lifecycle, kept plain: MINIT registers ini entries and, outside the CLI, parses the
//! default snapshot once so that forked workers start warm (`preload`; no thread, no fd
//! kept: FPM and lsphp fork after MINIT); the first RINIT installs the object handlers of
//! the per-request fast paths (see `router`); the first router used in a process, or in a
//! forked child, sets up its watcher; MINFO prints the state. MSHUTDOWN is not needed: a
//! watcher thread, if any, ends with its process, and a child whose MINIT ran in its
//! parent has nothing of its own to tear down.

mod engine;
mod fork;
mod info;
mod ini;
mod preload;
mod registry;
mod route_array;
mod router;
mod sigbus;
mod source;
mod trust;
mod values;
mod watch;

use ext_php_rs::prelude::*;
use ext_php_rs::zend::IniEntryDef;

pub use crate::router::RegionRouter;

fn startup(_ty: i32, module_number: i32) -> i32 {
    IniEntryDef::register(ini::ENTRIES.as_slice(), module_number);
    preload::in_minit();
    0
}

extern "C" fn request_startup(_ty: i32, _module_number: i32) -> i32 {
    static FAST_PATHS: std::sync::Once = std::sync::Once::new();
    FAST_PATHS.call_once(router::install_fast_paths);
    0
}

extern "C" fn request_shutdown(_ty: i32, _module_number: i32) -> i32 {
    watch::after_request();
    0
}

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

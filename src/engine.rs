//! What the fast paths assume about the Zend engine, and on which PHP versions that was
//! checked.
//!
//! `objects`, `router` and `route_array` go past the extension API in four places: the
//! bare-`new` shortcut reads the executing frame and its oplines (`ZEND_NEW` followed by
//! `ZEND_DO_FCALL`, the result slot) from `get_constructor`; the lean `create_object` and
//! `free_obj` size and free the object as `zend_object_alloc` does; the raw constructor
//! and `resolve()` handlers read arguments straight from the frame; route arrays are
//! persistent immutable arrays flagged as opcache flags its literals. A fifth shortcut,
//! the memo of `resolve()`'s answers in `loaded`, relies on those arrays being immutable.
//!
//! Numbers, layouts and engine functions come from the headers of the PHP being built
//! against, through ext-php-rs's bindgen (`ext_php_rs::ffi`; `.cargo/config.toml` adds the
//! names it lacks to the bindings); none is written by hand. What no
//! header says is how the engine behaves around them (`ZEND_NEW` saves its opline before
//! it creates the object, asks `get_constructor`, and skips a following `ZEND_DO_FCALL`
//! when there is no constructor and no argument; how `zend_object_alloc` sizes an object;
//! that an immutable array is never refcounted or freed). That was read in each version's
//! `zend_vm_def.h`, `zend_objects_API.h` and `zend_types.h`, and is exercised by the phpt
//! suite (086: every form of `new`) on each version in `TESTED_API_VERSIONS`.
//!
//! Each shortcut can also be turned off alone (`Shortcut`, ini `dw_router.engine_shortcuts`,
//! SYSTEM), so that the benchmark shows what each buys per request.
//!
//! Built against any other PHP API version, every shortcut is off and the ordinary paths
//! run: ext-php-rs's object handlers and constructor, the argument parsing of
//! `resolve()`'s general path, and route arrays built per call. PHP refuses to load an
//! extension built for another API version, so deciding at compile time is exact.

use std::sync::atomic::{AtomicU8, Ordering};

use ext_php_rs::ffi;

/// The PHP API versions (`ZEND_MODULE_API_NO`) the shortcuts were checked on: PHP 8.4
/// and PHP 8.5.
pub const TESTED_API_VERSIONS: [u32; 2] = [20240924, 20250925];

/// The API version of the PHP this build is for.
pub const API_VERSION: u32 = ffi::ZEND_MODULE_API_NO;

/// Whether the engine shortcuts are on in this build: the PHP is one they were checked
/// on, and the `no-engine-shortcuts` feature (which tests the ordinary paths) is off.
pub const SHORTCUTS: bool = tested(API_VERSION) && !cfg!(feature = "no-engine-shortcuts");

const fn tested(api: u32) -> bool {
    let mut i = 0;
    while i < TESTED_API_VERSIONS.len() {
        if TESTED_API_VERSIONS[i] == api {
            return true;
        }
        i += 1;
    }
    false
}

/// One engine shortcut, for turning it off (ini `dw_router.engine_shortcuts`) to measure
/// what it buys: `bench/10-router.sh` counts instructions per request with each one off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Shortcut {
    /// `get_constructor` reads the caller's opline so that a bare `new` skips the
    /// constructor call.
    BareNew = 1,
    /// The lean `create_object` and `free_obj` handlers.
    LeanObjects = 2,
    /// The raw `__construct()` and `resolve()` handlers read arguments from the frame.
    FrameArguments = 4,
    /// Route arrays are persistent immutable arrays, as opcache's literals.
    ImmutableRoutes = 8,
    /// Each table memoises `resolve($country)`'s route array per country and region.
    RouteMemo = 16,
}

impl Shortcut {
    /// Every shortcut, with its name in `dw_router.engine_shortcuts`.
    pub const ALL: [(Shortcut, &'static str); 5] = [
        (Shortcut::BareNew, "bare_new"),
        (Shortcut::LeanObjects, "lean_objects"),
        (Shortcut::FrameArguments, "frame_arguments"),
        (Shortcut::ImmutableRoutes, "immutable_routes"),
        (Shortcut::RouteMemo, "route_memo"),
    ];
}

/// The shortcuts in use, as bits; all of them until MINIT reads the ini entry.
static ENABLED: AtomicU8 = AtomicU8::new(u8::MAX);

/// Sets the shortcuts in use from `dw_router.engine_shortcuts`: `all` (the default), `none`,
/// or a comma-separated list of names, which leaves every other one off. Unknown names
/// are ignored. Called once, from MINIT, before any object or table exists.
pub fn configure(setting: &str) {
    let setting = setting.trim().to_ascii_lowercase();
    let bits = match setting.as_str() {
        "all" | "1" => u8::MAX,
        // PHP's ini parser reads `none`, `off` and `no` as the empty string.
        "" | "none" | "0" => 0,
        list => list
            .split(',')
            .filter_map(|name| {
                Shortcut::ALL
                    .iter()
                    .find(|(_, known)| *known == name.trim())
            })
            .fold(0, |bits, (shortcut, _)| bits | *shortcut as u8),
    };
    ENABLED.store(bits, Ordering::Relaxed);
}

/// Whether `shortcut` is in use: on a tested PHP version (`SHORTCUTS`) and not turned off.
#[inline(always)]
pub fn enabled(shortcut: Shortcut) -> bool {
    SHORTCUTS && ENABLED.load(Ordering::Relaxed) & shortcut as u8 != 0
}

/// For `php --ri dw_router`: whether the shortcuts are on, and for which API version.
pub fn describe() -> String {
    let off: Vec<&str> = Shortcut::ALL
        .iter()
        .filter(|(shortcut, _)| !enabled(*shortcut))
        .map(|(_, name)| *name)
        .collect();
    if SHORTCUTS && off.is_empty() {
        format!("on (PHP API {API_VERSION})")
    } else if SHORTCUTS {
        format!(
            "on (PHP API {API_VERSION}) except {} (dw_router.engine_shortcuts)",
            off.join(", ")
        )
    } else if tested(API_VERSION) {
        format!("off (built with no-engine-shortcuts, PHP API {API_VERSION})")
    } else {
        format!("off (PHP API {API_VERSION} not tested)")
    }
}

//! The ini settings. All are PHP_INI_SYSTEM, as in yaconf: they describe the node, not
//! the request, and fixing them at startup lets the hot path cache what it derives.

use std::ffi::CStr;

use ext_php_rs::ffi::zend_ini_string_ex;

use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::zend::{IniEntryDef, IniEntryDefs};

pub const SNAPSHOT_PATH: &CStr = c"dw_router.snapshot_path";
pub const FALLBACK_SHARD: &CStr = c"dw_router.fallback_shard";
pub const FALLBACK_ORIGIN: &CStr = c"dw_router.fallback_origin";
pub const POLL_INTERVAL_MS: &CStr = c"dw_router.poll_interval_ms";
pub const MAX_SNAPSHOT_BYTES: &CStr = c"dw_router.max_snapshot_bytes";
pub const TRUSTED_OWNER: &CStr = c"dw_router.trusted_owner";
pub const PRELOAD: &CStr = c"dw_router.preload";
pub const ENGINE_SHORTCUTS: &CStr = c"dw_router.engine_shortcuts";
pub const COUNT_ANSWERS: &CStr = c"dw_router.count_answers";
pub const ANSWERS_DIR: &CStr = c"dw_router.answers_dir";

/// Where the answer counters live by default (docs/traffic.md): a directory of the PHP
/// user's, apart from the agent's snapshot directory, which PHP must not be able to write.
pub const DEFAULT_ANSWERS_DIR: &str = "/run/dw-router-answers";

/// dw-agent's default `--snapshot`: a directory of the agent's own (docs/snapshot-trust.md).
pub const DEFAULT_SNAPSHOT_PATH: &str = "/run/dw-router/routing.json";
const DEFAULT_POLL_INTERVAL_MS: u64 = 250;
const DEFAULT_MAX_SNAPSHOT_BYTES: u64 = 64 << 20;

pub static ENTRIES: IniEntryDefs<11> = IniEntryDefs::new([
    IniEntryDef::new(
        SNAPSHOT_PATH,
        c"/run/dw-router/routing.json",
        IniEntryPermission::System,
    ),
    IniEntryDef::new(FALLBACK_SHARD, c"us-1", IniEntryPermission::System),
    IniEntryDef::new(FALLBACK_ORIGIN, c"iad-a", IniEntryPermission::System),
    IniEntryDef::new(POLL_INTERVAL_MS, c"250", IniEntryPermission::System),
    IniEntryDef::new(MAX_SNAPSHOT_BYTES, c"67108864", IniEntryPermission::System),
    // Empty: a snapshot must be owned by root or its directory's owner. A user name or
    // uid: by root or that user, which also admits a sticky shared directory (/dev/shm).
    IniEntryDef::new(TRUSTED_OWNER, c"", IniEntryPermission::System),
    IniEntryDef::new(PRELOAD, c"auto", IniEntryPermission::System),
    // For measuring what each shortcut buys (see `engine`): `all`, `none`, or a list.
    IniEntryDef::new(ENGINE_SHORTCUTS, c"all", IniEntryPermission::System),
    // Counting resolve()'s answers (docs/traffic.md): `auto` is on in every SAPI but the
    // CLI and phpdbg, as `preload`; `1`/`0` force it.
    IniEntryDef::new(COUNT_ANSWERS, c"auto", IniEntryPermission::System),
    IniEntryDef::new(
        ANSWERS_DIR,
        c"/run/dw-router-answers",
        IniEntryPermission::System,
    ),
    IniEntryDef::end(),
]);

/// The current value of a registered ini entry, if it has one.
pub fn string(name: &CStr) -> Option<String> {
    let mut exists = false;
    // SAFETY: `name` is NUL-terminated and its length excludes the NUL; the engine
    // returns a pointer to its own NUL-terminated value, or null.
    let value = unsafe { zend_ini_string_ex(name.as_ptr(), name.to_bytes().len(), 0, &mut exists) };
    if value.is_null() || !exists {
        return None;
    }
    // SAFETY: non-null, NUL-terminated, owned by the engine for the life of the entry.
    Some(
        unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned(),
    )
}

fn number(name: &CStr, default: u64) -> u64 {
    string(name)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

pub fn snapshot_path() -> String {
    string(SNAPSHOT_PATH)
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| DEFAULT_SNAPSHOT_PATH.to_owned())
}

/// `dw_router.engine_shortcuts`, for `engine::configure`.
pub fn engine_shortcuts() -> String {
    string(ENGINE_SHORTCUTS).unwrap_or_default()
}

pub fn trusted_owner() -> String {
    string(TRUSTED_OWNER).unwrap_or_default()
}

/// The longest poll interval honoured: one day. Larger values (up to 1.8e19 parse) would
/// overflow the next poll's deadline in nanoseconds.
pub const MAX_POLL_INTERVAL_MS: u64 = 86_400_000;

/// `dw_router.poll_interval_ms`, clamped to 1 ms .. 1 day.
pub fn poll_interval_ms() -> u64 {
    number(POLL_INTERVAL_MS, DEFAULT_POLL_INTERVAL_MS).clamp(1, MAX_POLL_INTERVAL_MS)
}

/// The effective poll interval as `php --ri` shows it, saying when the setting was clamped.
pub fn describe_poll_interval() -> String {
    let effective = poll_interval_ms();
    let set = string(POLL_INTERVAL_MS).unwrap_or_default();
    match set.trim().parse::<u64>() {
        Ok(value) if value > MAX_POLL_INTERVAL_MS => {
            format!("{effective} ms (dw_router.poll_interval_ms {value} clamped to 1 day)")
        }
        Ok(0) => format!("{effective} ms (dw_router.poll_interval_ms 0 raised to 1 ms)"),
        Ok(_) => format!("{effective} ms"),
        Err(_) => format!(
            "{effective} ms (dw_router.poll_interval_ms {set:?} is not a number: the default)"
        ),
    }
}

pub fn max_snapshot_bytes() -> u64 {
    number(MAX_SNAPSHOT_BYTES, DEFAULT_MAX_SNAPSHOT_BYTES)
}

/// Whether MINIT parses the default snapshot (see `preload`): `auto` in every SAPI but the
/// CLI and phpdbg; `1`/`on`/`yes`/`true` and `0`/`off`/`no`/`false` force it.
pub fn preload_enabled(sapi: Option<&str>) -> bool {
    auto_switch(PRELOAD, sapi)
}

/// Whether `resolve()` counts its answers (see `traffic`), by the rule of `preload`.
pub fn count_answers_enabled(sapi: Option<&str>) -> bool {
    auto_switch(COUNT_ANSWERS, sapi)
}

/// `dw_router.answers_dir`, the default when empty.
pub fn answers_dir() -> String {
    string(ANSWERS_DIR)
        .filter(|dir| !dir.is_empty())
        .unwrap_or_else(|| DEFAULT_ANSWERS_DIR.to_owned())
}

/// An `auto`/on/off switch: `auto` (or anything unknown) on outside the CLI and phpdbg.
fn auto_switch(name: &CStr, sapi: Option<&str>) -> bool {
    let value = string(name).unwrap_or_default();
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => true,
        "0" | "off" | "no" | "false" | "" => false,
        _ => !matches!(sapi, Some("cli" | "phpdbg") | None),
    }
}

/// The fail-open route, read once: the settings are SYSTEM.
pub fn fallback() -> &'static (String, String) {
    static FALLBACK: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();
    FALLBACK.get_or_init(|| {
        (
            string(FALLBACK_SHARD).unwrap_or_else(|| "us-1".into()),
            string(FALLBACK_ORIGIN).unwrap_or_else(|| "iad-a".into()),
        )
    })
}

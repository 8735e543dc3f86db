//! The phpinfo() / `php --ri dw_router` section.

use ext_php_rs::ffi::display_ini_entries;
use ext_php_rs::zend::ModuleEntry;
use ext_php_rs::{info_table_end, info_table_header, info_table_row, info_table_start};

use crate::registry;

pub extern "C" fn module_info(module: *mut ModuleEntry) {
    info_table_start!();
    info_table_header!("dw_router support", "enabled");
    info_table_row!("version", env!("CARGO_PKG_VERSION"));
    // The commit it was built from (build.rs), to tell builds on a fleet apart.
    info_table_row!("build", env!("DW_ROUTER_COMMIT"));
    // Whether the fast paths that read engine internals are on (src/engine.rs).
    info_table_row!("engine shortcuts", crate::engine::describe());
    // Whose snapshot this process reads (dw_router.trusted_owner; docs/snapshot-trust.md).
    info_table_row!(
        "trusted snapshot owner",
        crate::trust::trusted_owner().describe()
    );
    // The country -> continent table compiled in (docs/routing.md, "Country to continent").
    info_table_row!("continent table", dw_routing::CONTINENT_TABLE_SOURCE);
    // The stat interval used when inotify is unavailable, as clamped (src/ini.rs).
    info_table_row!("poll interval", crate::ini::describe_poll_interval());
    // resolve()'s answer counters (dw_router.count_answers; docs/traffic.md).
    info_table_row!("answer counting", crate::traffic::describe());
    crate::watch::settle();
    let sources = registry::all();
    if sources.is_empty() {
        info_table_row!("snapshot", "none used in this process yet");
    }
    for source in sources {
        let loaded = source.table();
        let table = &loaded.table;
        info_table_row!("snapshot path", source.path().to_string_lossy().as_ref());
        info_table_row!("revision", loaded.revision().to_string());
        info_table_row!("regions", table.region_count().to_string());
        info_table_row!("invalid keys", table.invalid_keys().len().to_string());
        let stages: Vec<String> = table
            .stages()
            .iter()
            .map(|stage| format!("{} (revision {})", stage.id, stage.revision))
            .collect();
        info_table_row!(
            "stages applied",
            if stages.is_empty() {
                "none".to_string()
            } else {
                stages.join(", ")
            }
        );
        info_table_row!("reload mechanism", source.mechanism().name());
        info_table_row!("loads", source.loads().to_string());
        info_table_row!("failed loads", source.failed_loads().to_string());
        if let Some(error) = source.last_error() {
            info_table_row!("last error", error);
        }
    }
    info_table_end!();
    // SAFETY: `module` is the entry the engine passed to this MINFO callback.
    unsafe { display_ini_entries(module) };
}

//! Turning Rust values into PHP values: the policy object, stats.

use ext_php_rs::boxed::ZBox;
use ext_php_rs::types::{ZendCallable, ZendHashTable, Zval};

use crate::loaded::{self, Loaded};
use crate::route_array;
use crate::source::Source;
use crate::watch;

/// The policy as a PHP array, decoded by PHP's own `json_decode($text, true)`, so that
/// every number edge (INF, -0, big integers) is exactly what userland would see; [] for
/// the defaults. The core reads JSON as `json_decode` does, so the text always decodes.
pub fn policy_array(policy: &dw_routing::Policy) -> ZBox<ZendHashTable> {
    let text = policy.source();
    if !text.is_empty()
        && let Ok(json_decode) = ZendCallable::try_from_name("json_decode")
        && let Ok(decoded) = json_decode.try_call(vec![&text, &true])
        && let Some(array) = decoded.array()
    {
        return array.to_owned();
    }
    ZendHashTable::new()
}

/// `explain()`'s answer: dw-routing's explanation as a PHP array, decoded by PHP's own
/// `json_decode($text, true)`, with the fail-open route this node's ini gives and the
/// revision as `revision()` reports it.
pub fn explanation_array(
    loaded: &Loaded,
    geo: &[u8],
    sticky_key: Option<&[u8]>,
    bucket: Option<u64>,
) -> ZBox<ZendHashTable> {
    let mut explanation = loaded
        .table
        .explain_bucketed(geo, sticky_key, bucket)
        .to_json();
    if explanation["fail_open"] == serde_json::Value::Bool(true) {
        let (shard, origin) = crate::ini::fallback();
        explanation["shard"] = shard.as_str().into();
        explanation["origin"] = origin.as_str().into();
    }
    explanation["revision"] = i64::try_from(loaded.revision()).unwrap_or(i64::MAX).into();
    let text = explanation.to_string();
    if let Ok(json_decode) = ZendCallable::try_from_name("json_decode")
        && let Ok(decoded) = json_decode.try_call(vec![&text, &true])
        && let Some(array) = decoded.array()
    {
        return array.to_owned();
    }
    ZendHashTable::new()
}

/// Counters and state of `source`, for `stats()`; the table's figures are those of
/// `shown`, the table the router answers from.
pub fn stats_to_array(source: &Source, shown: &Loaded) -> ZBox<ZendHashTable> {
    let table = &shown.table;
    let mut stats = ZendHashTable::with_capacity(13);
    let _ = stats.insert("path", source.path().to_string_lossy().as_ref());
    let _ = stats.insert(
        "revision",
        i64::try_from(shown.revision()).unwrap_or(i64::MAX),
    );
    let _ = stats.insert("regions", table.region_count() as i64);
    let _ = stats.insert("buckets", table.buckets().map_or(0, |n| i64::from(n.get())));
    let _ = stats.insert("invalid_keys", table.invalid_keys().len() as i64);
    let _ = stats.insert("loads", source.loads() as i64);
    let _ = stats.insert("reloads_reused", source.reloads_reused() as i64);
    let _ = stats.insert("failed_loads", source.failed_loads() as i64);
    let last = source.last_load_unix_ms();
    let mut last_load_time = Zval::new();
    if last == 0 {
        last_load_time.set_null();
    } else {
        last_load_time.set_double(last as f64 / 1000.0);
    }
    let _ = stats.insert("last_load_time", last_load_time);
    let _ = stats.insert("reload_mechanism", source.mechanism().name());
    let mut last_error = Zval::new();
    match source.last_error() {
        Some(message) => {
            let _ = last_error.set_string(&message, false);
        }
        None => last_error.set_null(),
    }
    let _ = stats.insert("last_error", last_error);
    let mut inotify_error = Zval::new();
    match watch::unavailable_reason() {
        Some(message) => {
            let _ = inotify_error.set_string(&message, false);
        }
        None => inotify_error.set_null(),
    }
    let _ = stats.insert("inotify_unavailable", inotify_error);
    let _ = stats.insert(
        "tables_in_process",
        i64::try_from(loaded::tables_in_process()).unwrap_or(i64::MAX),
    );
    // The interned route arrays of this process, bounded by route_array::MAX_INTERNED_BYTES.
    let (interned_routes, interned_bytes) = route_array::interned_size();
    let _ = stats.insert(
        "interned_routes",
        i64::try_from(interned_routes).unwrap_or(i64::MAX),
    );
    let _ = stats.insert(
        "interned_bytes",
        i64::try_from(interned_bytes).unwrap_or(i64::MAX),
    );
    let mut invalid = ZendHashTable::with_capacity(table.invalid_keys().len() as u32);
    for key in table.invalid_keys() {
        let _ = invalid.insert(key.key.as_str(), key.error.to_string().as_str());
    }
    let _ = stats.insert("invalid", invalid);
    let _ = stats.insert("stages", stages_array(table.stages()));
    stats
}

/// The stages a table's agent applied, as a PHP list of `['id' => string, 'revision' =>
/// int]`, for `stats()`.
pub fn stages_array(stages: &[dw_routing::stage::AppliedStage]) -> ZBox<ZendHashTable> {
    let mut list = ZendHashTable::with_capacity(stages.len() as u32);
    for stage in stages {
        let mut entry = ZendHashTable::with_capacity(2);
        let _ = entry.insert("id", stage.id.as_str());
        let _ = entry.insert(
            "revision",
            i64::try_from(stage.revision).unwrap_or(i64::MAX),
        );
        let _ = list.push(entry);
    }
    list
}

/// The ids of the stages a table's agent applied, as a PHP list of strings.
pub fn stage_ids(stages: &[dw_routing::stage::AppliedStage]) -> ZBox<ZendHashTable> {
    let mut list = ZendHashTable::with_capacity(stages.len() as u32);
    for stage in stages {
        let _ = list.push(stage.id.as_str());
    }
    list
}

/// `traffic()`'s answer: whether this process counts, the counter file, and the answers
/// counted in it by every worker of every process tree of this user on the node, one row
/// per label set (sorted by labels), with the overflow.
pub fn traffic_array() -> ZBox<ZendHashTable> {
    let mut traffic = ZendHashTable::with_capacity(4);
    let totals = crate::traffic::totals();
    let _ = traffic.insert("counting", totals.is_some());
    let _ = traffic.insert("state", crate::traffic::describe().as_str());
    let mut rows = ZendHashTable::new();
    let mut overflow = 0i64;
    if let Some((file, totals)) = totals {
        let _ = traffic.insert("file", file.as_str());
        overflow = i64::try_from(totals.overflow).unwrap_or(i64::MAX);
        for (labels, answers) in totals.series {
            let mut row = ZendHashTable::with_capacity(8);
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
            let _ = row.insert("geo", text(&labels.geo).as_str());
            let _ = row.insert("step", labels.step.name());
            let _ = row.insert("key", text(&labels.key).as_str());
            let _ = row.insert("origin", text(&labels.origin).as_str());
            let _ = row.insert("shard", text(&labels.shard).as_str());
            let _ = row.insert("kind", labels.kind.name());
            // Kept beside `kind` for callers from before buckets.
            let _ = row.insert("sticky", labels.kind == dw_traffic::AnswerKind::Sticky);
            let _ = row.insert("answers", i64::try_from(answers).unwrap_or(i64::MAX));
            let _ = rows.push(row);
        }
    } else {
        let _ = traffic.insert("file", Zval::new());
    }
    let _ = traffic.insert("answers", rows);
    let _ = traffic.insert("overflow", overflow);
    traffic
}

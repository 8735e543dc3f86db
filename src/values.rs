//! Turning Rust values into PHP values: routes, the policy object, stats.

use ext_php_rs::boxed::ZBox;
use ext_php_rs::types::{ZendHashTable, Zval};

use crate::source::Source;
use crate::watch;

/// Sets `retval` to `['shard' => $shard, 'origin' => $origin]`.
pub fn set_route(retval: &mut Zval, shard: &str, origin: &str) {
    let mut route = ZendHashTable::with_capacity(2);
    let _ = route.insert("shard", shard);
    let _ = route.insert("origin", origin);
    retval.set_hashtable(route);
}

unsafe extern "C" {
    fn php_json_decode_ex(
        retval: *mut ext_php_rs::ffi::zval,
        text: *const std::ffi::c_char,
        length: usize,
        options: i64,
        depth: i64,
    ) -> i32;
}

/// The policy as a PHP array, decoded by PHP's own `json_decode($text, true)`, so that
/// every number edge (INF, -0, big integers) is exactly what userland would see.
pub fn policy_array(policy: &dw_routing::Policy) -> ZBox<ZendHashTable> {
    const PHP_JSON_OBJECT_AS_ARRAY: i64 = 1;
    let text = policy.source();
    if !text.is_empty() {
        // PHP's JSON scanner reads up to a NUL terminator, as every zend_string has one.
        let mut terminated = Vec::with_capacity(text.len() + 1);
        terminated.extend_from_slice(text.as_bytes());
        terminated.push(0);
        let mut decoded = Zval::new();
        // SAFETY: `decoded` is a fresh zval the call fills; `terminated` is NUL-terminated
        // and outlives the call.
        let status = unsafe {
            php_json_decode_ex(
                &mut decoded,
                terminated.as_ptr().cast(),
                text.len(),
                PHP_JSON_OBJECT_AS_ARRAY,
                512,
            )
        };
        if status == 0
            && let Some(array) = decoded.array()
        {
            return array.to_owned();
        }
    }
    object_to_array(&policy.raw)
}

/// A JSON object as a PHP array, as `json_decode($json, true)` would build it.
pub fn object_to_array(object: &serde_json::Map<String, serde_json::Value>) -> ZBox<ZendHashTable> {
    let mut array = ZendHashTable::with_capacity(object.len() as u32);
    for (key, value) in object {
        insert_json_key(&mut array, key, json_to_zval(value));
    }
    array
}

fn json_to_zval(value: &serde_json::Value) -> Zval {
    use serde_json::Value;
    let mut zval = Zval::new();
    match value {
        Value::Null => zval.set_null(),
        Value::Bool(b) => zval.set_bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => zval.set_long(i),
            // Beyond PHP's int range json_decode gives a float, as this does.
            None => zval.set_double(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => {
            let _ = zval.set_string(s, false);
        }
        Value::Array(items) => {
            let mut array = ZendHashTable::with_capacity(items.len() as u32);
            for item in items {
                let _ = array.push(json_to_zval(item));
            }
            zval.set_hashtable(array);
        }
        Value::Object(object) => zval.set_hashtable(object_to_array(object)),
    }
    zval
}

/// Inserts like PHP's symbol tables: a key that is a canonical decimal integer
/// ("7", "-3", not "07" or "-0") becomes an integer key, as `json_decode` makes it.
fn insert_json_key(array: &mut ZendHashTable, key: &str, value: Zval) {
    match canonical_integer(key) {
        Some(index) => {
            let _ = array.insert_at_index(index, value);
        }
        None => {
            let _ = array.insert(key, value);
        }
    }
}

fn canonical_integer(key: &str) -> Option<i64> {
    let digits = key.strip_prefix('-').unwrap_or(key);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && key != "-0";
    if canonical { key.parse().ok() } else { None }
}

pub fn stats_to_array(source: &Source) -> ZBox<ZendHashTable> {
    let table = source.table();
    let mut stats = ZendHashTable::with_capacity(12);
    let _ = stats.insert("path", source.path().to_string_lossy().as_ref());
    let _ = stats.insert(
        "revision",
        i64::try_from(table.revision()).unwrap_or(i64::MAX),
    );
    let _ = stats.insert("regions", table.region_count() as i64);
    let _ = stats.insert("invalid_keys", table.invalid_keys().len() as i64);
    let _ = stats.insert("loads", source.loads() as i64);
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
        i64::try_from(crate::source::tables_in_process()).unwrap_or(i64::MAX),
    );
    let mut invalid = ZendHashTable::with_capacity(table.invalid_keys().len() as u32);
    for key in table.invalid_keys() {
        let _ = invalid.insert(key.key.as_str(), key.error.to_string().as_str());
    }
    let _ = stats.insert("invalid", invalid);
    stats
}

//! Route arrays that cost nothing to return.
//!
//! A userland function returning `['shard' => 'eu-1', 'origin' => 'fra-a']` hands back
//! an immutable array literal: no allocation, no refcount. To match that floor,
//! `resolve()` returns the same kind of array: one persistent, immutable array per
//! distinct (shard, origin) pair, with interned persistent strings, built the way opcache
//! builds its literals. The engine never refcounts or frees such an array; a script that
//! writes to it gets a private copy (copy on write), as with any literal.
//!
//! The arrays live until the process ends, since a script may still hold one after the
//! table that produced it was replaced. Their number is bounded by the distinct pairs a
//! process has seen; past `MAX_INTERNED` pairs, routes are built per call instead, as
//! they are on a PHP version this was not checked on (see `engine`).

use std::collections::HashMap;
use std::mem::offset_of;
use std::sync::OnceLock;

use ext_php_rs::ffi::{
    _zend_hash_init, GC_IMMUTABLE, GC_NOT_COLLECTABLE, GC_PERSISTENT, IS_ARRAY, IS_STRING,
    zend_array, zend_hash_update, zend_string, zend_string_hash_func, zval,
};
use ext_php_rs::types::{ZendHashTable, Zval};
use parking_lot::Mutex;

use crate::engine::{self, Shortcut};

/// Past this many distinct (shard, origin) pairs, stop interning (a hostile config must
/// not grow memory without bound).
const MAX_INTERNED: usize = 1 << 16;

/// A pointer to an immutable array that lives for the rest of the process.
#[derive(Clone, Copy)]
struct RouteArray(*mut zend_array);

// SAFETY: the array is immutable once built and never freed; the engine only reads it.
unsafe impl Send for RouteArray {}

struct Interned {
    shard_key: usize,
    origin_key: usize,
    routes: HashMap<(Box<str>, Box<str>), RouteArray>,
}

static INTERNED: Mutex<Option<Interned>> = Mutex::new(None);

/// A persistent string flagged interned: the engine neither refcounts nor frees it.
unsafe fn persistent_string(text: &str) -> *mut zend_string {
    let size = offset_of!(zend_string, val) + text.len() + 1;
    // SAFETY: `size` covers the header, the bytes and the NUL; the fields are written
    // before the string is used.
    unsafe {
        let s = libc::malloc(size) as *mut zend_string;
        assert!(!s.is_null(), "out of memory interning a route string");
        (*s).gc.refcount = 1;
        (*s).gc.u.type_info = IS_STRING | GC_NOT_COLLECTABLE | GC_IMMUTABLE | GC_PERSISTENT;
        (*s).h = 0;
        (*s).len = text.len();
        let val = (s as *mut u8).add(offset_of!(zend_string, val));
        std::ptr::copy_nonoverlapping(text.as_ptr(), val, text.len());
        *val.add(text.len()) = 0;
        zend_string_hash_func(s);
        s
    }
}

unsafe fn interned_value(s: *mut zend_string) -> zval {
    // SAFETY: an all-zero zval is a valid IS_UNDEF zval; then made an interned string.
    unsafe {
        let mut value: zval = std::mem::zeroed();
        value.value.str_ = s;
        value.u1.type_info = IS_STRING; // IS_INTERNED_STRING_EX: not refcounted
        value
    }
}

fn build(interned: &Interned, shard: &str, origin: &str) -> RouteArray {
    // SAFETY: a zeroed zend_array is initialised by `_zend_hash_init` as a persistent
    // table; the keys and values are persistent interned strings, so the table never
    // refcounts them; the flags then make the table immutable, as opcache does.
    unsafe {
        let ht = libc::calloc(1, std::mem::size_of::<zend_array>()) as *mut zend_array;
        assert!(!ht.is_null(), "out of memory building a route array");
        _zend_hash_init(ht, 2, None, true);
        let mut shard_value = interned_value(persistent_string(shard));
        zend_hash_update(ht, interned.shard_key as *mut zend_string, &mut shard_value);
        let mut origin_value = interned_value(persistent_string(origin));
        zend_hash_update(
            ht,
            interned.origin_key as *mut zend_string,
            &mut origin_value,
        );
        (*ht).gc.refcount = 2;
        (*ht).gc.u.type_info = IS_ARRAY | GC_NOT_COLLECTABLE | GC_IMMUTABLE | GC_PERSISTENT;
        RouteArray(ht)
    }
}

/// The immutable array for (shard, origin), or None past the interning bound, or when
/// the shortcut is off (on a PHP version it was not checked on, see `engine`): routes are
/// then built per call.
fn intern(shard: &str, origin: &str) -> Option<RouteArray> {
    if !engine::enabled(Shortcut::ImmutableRoutes) {
        return None;
    }
    let mut guard = INTERNED.lock();
    let interned = guard.get_or_insert_with(|| Interned {
        // SAFETY: plain ASCII keys, built once.
        shard_key: unsafe { persistent_string("shard") } as usize,
        origin_key: unsafe { persistent_string("origin") } as usize,
        routes: HashMap::new(),
    });
    if let Some(found) = interned.routes.get(&(shard.into(), origin.into())) {
        return Some(*found);
    }
    if interned.routes.len() >= MAX_INTERNED {
        return None;
    }
    let array = build(interned, shard, origin);
    interned.routes.insert((shard.into(), origin.into()), array);
    Some(array)
}

#[inline(always)]
fn set_array(retval: &mut Zval, array: RouteArray) {
    // An immutable array is returned without the refcounted flag (IS_ARRAY, not
    // IS_ARRAY_EX), as ZVAL_ARR on an opcache literal would.
    retval.value.arr = array.0;
    retval.u1.type_info = IS_ARRAY;
}

/// Sets `retval` to the fail-open route from the ini settings; returns the array as
/// [`set_route`] does.
pub fn set_fallback_route(retval: &mut Zval) -> Option<*mut zend_array> {
    static FALLBACK: OnceLock<Option<usize>> = OnceLock::new();
    let array = FALLBACK.get_or_init(|| {
        let (shard, origin) = crate::ini::fallback();
        intern(shard, origin).map(|a| a.0 as usize)
    });
    match array {
        Some(array) => {
            let array = *array as *mut zend_array;
            set_array(retval, RouteArray(array));
            Some(array)
        }
        None => {
            let (shard, origin) = crate::ini::fallback();
            set_built_route(retval, shard, origin);
            None
        }
    }
}

/// Sets `retval` to the route array for (`shard`, `origin`): the immutable one, which is
/// returned for the caller to remember, or one built for this call only (None).
pub fn set_route(retval: &mut Zval, shard: &str, origin: &str) -> Option<*mut zend_array> {
    match intern(shard, origin) {
        Some(array) => {
            set_array(retval, array);
            Some(array.0)
        }
        None => {
            set_built_route(retval, shard, origin);
            None
        }
    }
}

/// Sets `retval` to `array`, an immutable route array [`set_route`] returned before.
#[inline(always)]
pub fn set_immutable_route(retval: &mut Zval, array: *mut zend_array) {
    set_array(retval, RouteArray(array));
}

/// Sets `retval` to a new `['shard' => $shard, 'origin' => $origin]`.
pub fn set_built_route(retval: &mut Zval, shard: &str, origin: &str) {
    let mut route = ZendHashTable::with_capacity(2);
    let _ = route.insert("shard", shard);
    let _ = route.insert("origin", origin);
    retval.set_hashtable(route);
}

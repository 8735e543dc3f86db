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
use std::sync::atomic::{AtomicPtr, Ordering};

use dw_routing::{CountryCode, Table};
use ext_php_rs::ffi::{HashTable, zend_array, zend_string, zval};
use ext_php_rs::types::Zval;
use parking_lot::Mutex;

use crate::engine::{self, GC_IMMUTABLE, GC_NOT_COLLECTABLE, GC_PERSISTENT};
use crate::source::Loaded;

unsafe extern "C" {
    fn _zend_hash_init(
        ht: *mut HashTable,
        size: u32,
        destructor: Option<unsafe extern "C" fn(*mut zval)>,
        persistent: bool,
    );
    fn zend_hash_update(ht: *mut HashTable, key: *mut zend_string, value: *mut zval) -> *mut zval;
    fn zend_string_hash_func(s: *mut zend_string) -> u64;
}

// Zend's type and GC flag values, from the headers (see `engine`).
const IS_STRING: u32 = engine::IS_STRING as u32;
const IS_ARRAY: u32 = engine::IS_ARRAY as u32;

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

/// The immutable array for (shard, origin), or None past the interning bound, or on a
/// PHP version the engine shortcuts were not checked on (`engine::SHORTCUTS`): routes are
/// then built per call.
fn intern(shard: &str, origin: &str) -> Option<RouteArray> {
    if !engine::SHORTCUTS {
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

fn set_array(retval: &mut Zval, array: RouteArray) {
    // An immutable array is returned without the refcounted flag (IS_ARRAY, not
    // IS_ARRAY_EX), as ZVAL_ARR on an opcache literal would.
    retval.value.arr = array.0;
    retval.u1.type_info = IS_ARRAY;
}

/// One slot per (region, origin) of a table: the route array handed out for it, filled
/// on first use. And memos of `resolve($country)` with no sticky key, which is a function
/// of the table and the country alone, so the common call skips the pick after the first
/// time: one per country code (found by direct index, present or not) and one per region
/// (for a country that names its region exactly). Atomic, so threads of a ZTS build can
/// share them.
pub struct RouteSlots {
    first_slot: Box<[u32]>,
    slots: Box<[AtomicPtr<zend_array>]>,
    by_country: Box<[AtomicPtr<zend_array>]>,
    by_region: Box<[AtomicPtr<zend_array>]>,
}

impl RouteSlots {
    pub fn for_table(table: &Table) -> RouteSlots {
        let mut first_slot = Vec::with_capacity(table.region_count());
        let mut total = 0u32;
        for index in 0..table.region_count() as u32 {
            first_slot.push(total);
            let origins = table.region_at(index).map_or(0, |r| r.origins().len());
            total = total.saturating_add(origins as u32);
        }
        RouteSlots {
            first_slot: first_slot.into_boxed_slice(),
            slots: empty_slots(total as usize),
            by_country: empty_slots(CountryCode::COUNT),
            by_region: empty_slots(table.region_count()),
        }
    }

    /// The memo of `resolve(country)` without a sticky key, if `country` has one: a
    /// country code, or the exact geo of a region.
    #[inline(always)]
    pub fn memo(&self, table: &Table, country: &[u8]) -> Option<&AtomicPtr<zend_array>> {
        match CountryCode::of(country) {
            Some(code) => self.by_country.get(code.index()),
            None => self.by_region.get(table.region_index(country)? as usize),
        }
    }

    fn slot(&self, region: u32, origin: u32) -> Option<&AtomicPtr<zend_array>> {
        let first = *self.first_slot.get(region as usize)?;
        self.slots.get(first.checked_add(origin)? as usize)
    }
}

fn empty_slots(count: usize) -> Box<[AtomicPtr<zend_array>]> {
    (0..count)
        .map(|_| AtomicPtr::new(std::ptr::null_mut()))
        .collect()
}

/// Sets `retval` to `array`, a route array this module handed out before (from a memo).
#[inline(always)]
pub fn set_memoized_route(retval: &mut Zval, array: *mut zend_array) {
    set_array(retval, RouteArray(array));
}

/// Sets `retval` to the route for (`region`, `origin`) of `loaded`. Returns the immutable
/// array it used, which lives as long as the process; None when the route was built for
/// this call only (past the interning bound).
#[inline(always)]
pub fn set_table_route(
    retval: &mut Zval,
    loaded: &Loaded,
    region: u32,
    origin: u32,
) -> Option<*mut zend_array> {
    let slot = loaded.routes.slot(region, origin);
    if let Some(slot) = slot {
        let array = slot.load(Ordering::Acquire);
        if !array.is_null() {
            set_array(retval, RouteArray(array));
            return Some(array);
        }
    }
    let (shard, origin_name) = (
        loaded.region_shard(region),
        loaded.region_origin(region, origin),
    );
    match intern(shard, origin_name) {
        Some(array) => {
            if let Some(slot) = slot {
                slot.store(array.0, Ordering::Release);
            }
            set_array(retval, array);
            Some(array.0)
        }
        None => {
            crate::values::set_route(retval, shard, origin_name);
            None
        }
    }
}

/// Sets `retval` to the fail-open route from the ini settings; returns the array as
/// [`set_table_route`] does.
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
            crate::values::set_route(retval, shard, origin);
            None
        }
    }
}

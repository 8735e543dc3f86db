//! Route arrays that cost nothing to return.
//!
//! A userland function returning `['shard' => 'eu-1', 'origin' => 'fra-a']` hands back
//! an immutable array literal: no allocation, no refcount. To match that floor,
//! `resolve()` returns the same kind of array: one persistent, immutable array per
//! distinct (shard, origin) pair, with interned persistent strings, built the way opcache
//! builds its literals. The engine never refcounts or frees such an array; a script that
//! writes to it gets a private copy (copy on write), as with any literal.
//!
//! A script may still hold such an array after the table that produced it was replaced,
//! so an array is never freed while a request runs. Each table counts the arrays its slots
//! hold (`retain`, `release`); an array no table holds any more is freed at the end of the
//! request (`after_request`), when no script can hold it: so a worker keeps what its
//! current tables answer, not every name it ever answered. In a thread-safe (ZTS) build
//! another thread may be inside a request at any time, so nothing is freed there. In every
//! build the interned arrays are bounded twice: `MAX_INTERNED` pairs and
//! [`MAX_INTERNED_BYTES`] bytes; past either, routes are built per call instead, as they
//! are on a PHP version this was not checked on (see `engine`).

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

/// Past this many bytes of interned pairs (their strings twice, as engine strings and as
/// the map's keys, plus [`PAIR_OVERHEAD_BYTES`] each), stop interning: 8 MiB per process.
pub const MAX_INTERNED_BYTES: usize = 8 << 20;

/// What one interned pair costs beyond its strings, counted against
/// [`MAX_INTERNED_BYTES`]: two string headers, the array and its eight buckets, the maps'
/// entries (rounded up).
const PAIR_OVERHEAD_BYTES: usize = 512;

/// A pointer to an immutable array that lives for the rest of the process.
#[derive(Clone, Copy)]
struct RouteArray(*mut zend_array);

// SAFETY: the array is immutable once built and never freed; the engine only reads it.
unsafe impl Send for RouteArray {}

/// One interned pair: its array, the two strings in it, and how many tables hold it.
struct Pair {
    key: (Box<str>, Box<str>),
    strings: [usize; 2],
    bytes: usize,
    /// Slots of live tables holding the array.
    users: u32,
    /// Never freed: the fail-open route, which no table counts.
    pinned: bool,
    /// Its last table let go of it (and none took it since): freed after the request.
    orphan: bool,
}

struct Interned {
    shard_key: usize,
    origin_key: usize,
    routes: HashMap<(Box<str>, Box<str>), RouteArray>,
    /// By array address.
    pairs: HashMap<usize, Pair>,
    bytes: usize,
    /// Pairs whose last table let go of them since the last `after_request`.
    orphaned: usize,
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

fn build(interned: &Interned, shard: &str, origin: &str) -> (RouteArray, [usize; 2]) {
    // SAFETY: a zeroed zend_array is initialised by `_zend_hash_init` as a persistent
    // table; the keys and values are persistent interned strings, so the table never
    // refcounts them; the flags then make the table immutable, as opcache does.
    unsafe {
        let ht = libc::calloc(1, std::mem::size_of::<zend_array>()) as *mut zend_array;
        assert!(!ht.is_null(), "out of memory building a route array");
        _zend_hash_init(ht, 2, None, true);
        let shard_string = persistent_string(shard);
        let origin_string = persistent_string(origin);
        let mut shard_value = interned_value(shard_string);
        zend_hash_update(ht, interned.shard_key as *mut zend_string, &mut shard_value);
        let mut origin_value = interned_value(origin_string);
        zend_hash_update(
            ht,
            interned.origin_key as *mut zend_string,
            &mut origin_value,
        );
        (*ht).gc.refcount = 2;
        (*ht).gc.u.type_info = IS_ARRAY | GC_NOT_COLLECTABLE | GC_IMMUTABLE | GC_PERSISTENT;
        (
            RouteArray(ht),
            [shard_string as usize, origin_string as usize],
        )
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
        pairs: HashMap::new(),
        bytes: 0,
        orphaned: 0,
    });
    let key: (Box<str>, Box<str>) = (shard.into(), origin.into());
    if let Some(found) = interned.routes.get(&key) {
        return Some(*found);
    }
    let bytes = 2 * (shard.len() + origin.len()) + PAIR_OVERHEAD_BYTES;
    if interned.routes.len() >= MAX_INTERNED
        || interned.bytes.saturating_add(bytes) > MAX_INTERNED_BYTES
    {
        return None;
    }
    let (array, strings) = build(interned, shard, origin);
    interned.routes.insert(key.clone(), array);
    interned.pairs.insert(
        array.0 as usize,
        Pair {
            key,
            strings,
            bytes,
            users: 0,
            pinned: false,
            orphan: false,
        },
    );
    interned.bytes += bytes;
    Some(array)
}

/// A table's slot now holds `array` (one [`set_route`] returned).
pub fn retain(array: *mut zend_array) {
    if let Some(pair) = INTERNED
        .lock()
        .as_mut()
        .and_then(|interned| interned.pairs.get_mut(&(array as usize)))
    {
        pair.users = pair.users.saturating_add(1);
        pair.orphan = false;
    }
}

/// A table whose slots held `arrays` is gone. An array no table holds any more is freed
/// at the end of the request ([`after_request`]), never before: a script may hold it.
pub fn release(arrays: impl Iterator<Item = *mut zend_array>) {
    let mut guard = INTERNED.lock();
    let Some(interned) = guard.as_mut() else {
        return;
    };
    for array in arrays {
        if let Some(pair) = interned.pairs.get_mut(&(array as usize)) {
            pair.users = pair.users.saturating_sub(1);
            if pair.users == 0 && !pair.pinned {
                pair.orphan = true;
                interned.orphaned += 1;
            }
        }
    }
}

/// At the end of a request (RSHUTDOWN): frees the arrays no table holds, which no script
/// can hold either once its request is over. Never in a ZTS build, where another thread
/// may be in a request. Costs one lock when nothing was orphaned.
pub fn after_request() {
    if ext_php_rs::PHP_ZTS {
        return;
    }
    let mut guard = INTERNED.lock();
    let Some(interned) = guard.as_mut() else {
        return;
    };
    if interned.orphaned == 0 {
        return;
    }
    interned.orphaned = 0;
    let unused: Vec<usize> = interned
        .pairs
        .iter()
        .filter(|(_, pair)| pair.orphan && pair.users == 0 && !pair.pinned)
        .map(|(&array, _)| array)
        .collect();
    for array in unused {
        let Some(pair) = interned.pairs.remove(&array) else {
            continue;
        };
        interned.routes.remove(&pair.key);
        interned.bytes -= pair.bytes;
        // SAFETY: built by `build`, let go of by every table that held it (an orphan,
        // users 0, not pinned), and the request that could have held it in a variable
        // is over; no other thread runs requests (not ZTS).
        unsafe { free_route(array as *mut zend_array, pair.strings) };
    }
}

/// The interned pairs and their bytes ([`MAX_INTERNED_BYTES`]'s measure), for `stats()`.
pub fn interned_size() -> (usize, usize) {
    INTERNED
        .lock()
        .as_ref()
        .map_or((0, 0), |interned| (interned.pairs.len(), interned.bytes))
}

/// Frees an array [`build`] made and its two strings (the keys are shared, never freed).
///
/// # Safety
/// Nothing may hold `array` or the strings any more.
unsafe fn free_route(array: *mut zend_array, strings: [usize; 2]) {
    // SAFETY: `build` made the table persistent and hashed (string keys), so its data
    // block was malloc'd (pemalloc, persistent) and starts the hash part before arData:
    // HT_GET_DATA_ADDR, `arData - HT_HASH_SIZE(nTableMask)`. The strings were malloc'd by
    // `persistent_string`, the table by calloc.
    unsafe {
        let hash_size = ((*array).nTableMask.wrapping_neg() as usize) * size_of::<u32>();
        let data = ((*array).__bindgen_anon_1.arData as *mut u8).sub(hash_size);
        libc::free(data.cast());
        libc::free(array.cast());
        for string in strings {
            libc::free(string as *mut libc::c_void);
        }
    }
}

/// Takes the interned pairs' lock and keeps it until [`unlock_after_fork`]: from the fork
/// `prepare` handler (a table may be dropped on the watcher's thread, which takes it).
pub fn lock_for_fork() {
    std::mem::forget(INTERNED.lock());
}

/// Releases the lock [`lock_for_fork`] took.
///
/// # Safety
/// Only after [`lock_for_fork`], in the thread that called it.
pub unsafe fn unlock_after_fork() {
    // SAFETY: the caller's contract: the lock is held by this thread.
    unsafe { INTERNED.force_unlock() }
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
        let array = intern(shard, origin)?;
        if let Some(pair) = INTERNED
            .lock()
            .as_mut()
            .and_then(|interned| interned.pairs.get_mut(&(array.0 as usize)))
        {
            pair.pinned = true;
        }
        Some(array.0 as usize)
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

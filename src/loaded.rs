//! A parsed table with the route arrays handed out for it, and `resolve()`'s answer from
//! the two.
//!
//! The answer to `resolve($country)` without a sticky key is a function of the table and
//! the country alone, so each table memoises it (an immutable route array from
//! `route_array`) per country code and per region: after the first time, the common call is
//! one index and one load.
//!
//! A bucketed answer (`resolve($country, null, $bucket)`, the bucket below the table's N)
//! never reads or fills those memos: its route is (the country's answering region, the
//! bucket's origin in that region's assignment), and its array is the one slot of that
//! (region, origin) pair, shared with every other answer of the pair. So the memo of
//! `resolve()` is keyed by (country, bucket) without a memo per bucket: (country, no
//! bucket) is the country memo, (country, b) the pair's slot. A bucket at or past N is
//! no bucket: the country memo answers, as without one.

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use dw_routing::{CountryCode, MemoKey, Route, Table};
use dw_traffic::AnswerKind;
use ext_php_rs::ffi::zend_array;
use ext_php_rs::types::Zval;

use crate::answer_labels::AnswerIds;
use crate::engine::{self, Shortcut};
use crate::{route_array, traffic};

/// A parsed table with the route arrays handed out for it.
pub struct Loaded {
    pub table: Table,
    routes: RouteSlots,
    /// The revision of the last file taken in for this table: the table's own, or a later
    /// file's whose `routing_digest` is this table's (its answers are the same, so the
    /// table is kept, memos and all, and only this moves: `Source::refresh`). Read with
    /// one relaxed load, which costs what reading the table's field did.
    revision: AtomicU64,
    /// The `routing_digest` of the file the table was parsed from, if it had one.
    digest: Option<Box<str>>,
    /// The answer counters' label ids of the calls no memo caches (`answer_labels`).
    answer_ids: AnswerIds,
    /// The label ids of sticky and bucketed answers to a country code, found without a
    /// lock.
    country_ids: StickyCountryIds,
    /// The table's N (0: buckets off): a bucket below it picks by the assignment.
    buckets: u64,
}

/// How many `Loaded` tables exist in this process (see [`tables_in_process`]).
static TABLES_IN_PROCESS: AtomicU64 = AtomicU64::new(0);

/// The parsed tables this process holds: each source's current one, plus any that a
/// router still answers from after a reload replaced it (until its next call).
pub fn tables_in_process() -> u64 {
    TABLES_IN_PROCESS.load(Ordering::Relaxed)
}

impl Loaded {
    pub fn new(table: Table, digest: Option<Box<str>>) -> Loaded {
        let routes = RouteSlots::for_table(&table);
        TABLES_IN_PROCESS.fetch_add(1, Ordering::Relaxed);
        let buckets = table.buckets().map_or(0, |n| u64::from(n.get()));
        Loaded {
            buckets,
            revision: AtomicU64::new(table.revision()),
            table,
            routes,
            digest,
            answer_ids: AnswerIds::default(),
            country_ids: StickyCountryIds::new(),
        }
    }

    /// The etcd revision this table answers for (`revision()`, `answeredRevision()`).
    #[inline(always)]
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::Relaxed)
    }

    /// The digest of what the table was built from (see `Source::refresh`).
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// A file at `revision` with this table's digest was taken in: the table answers for it.
    pub fn advance_to(&self, revision: u64) {
        self.revision.store(revision, Ordering::Relaxed);
    }

    /// Sets `retval` to the route array for `country`: the memo's when there is one, else
    /// the one the core resolves (remembered in the memo when it is immutable). Counts
    /// the answer (`traffic`): on a memo hit, under the label id kept beside the memo.
    #[inline(always)]
    pub fn answer(&self, retval: &mut Zval, country: &[u8], sticky_key: Option<&[u8]>) {
        match sticky_key {
            None => self.answer_unsticky(retval, country),
            Some(sticky_key) => self.answer_sticky(retval, country, sticky_key),
        }
    }

    /// `answer` for a call given a visitor bucket. Precedence: a sticky key wins, then a
    /// bucket below the table's N, then the country (a bucket at or past N, or with
    /// buckets off, is answered and counted as without one).
    #[inline(always)]
    pub fn answer_with_bucket(
        &self,
        retval: &mut Zval,
        country: &[u8],
        sticky_key: Option<&[u8]>,
        bucket: u64,
    ) {
        match sticky_key {
            Some(sticky_key) => self.answer_sticky(retval, country, sticky_key),
            None if bucket < self.buckets => self.answer_bucketed(retval, country, bucket),
            None => self.answer_unsticky(retval, country),
        }
    }

    /// `answer` with a bucket below the table's N: no country memo; the (region, origin)
    /// pair's slot. Counted as sticky answers are, under the bucket kind.
    #[inline(always)]
    fn answer_bucketed(&self, retval: &mut Zval, country: &[u8], bucket: u64) {
        let route = self.table.resolve_bucketed(country, None, Some(bucket));
        self.answer_unmemoized(retval, country, AnswerKind::Bucket, route);
    }

    /// `answer` without a sticky key: a memo hit when there is one.
    #[inline(always)]
    fn answer_unsticky(&self, retval: &mut Zval, country: &[u8]) {
        let memo = self.routes.memo(&self.table, country);
        if let Some(memo) = memo {
            let array = memo.array.load(Ordering::Acquire);
            if !array.is_null() {
                route_array::set_immutable_route(retval, array);
                let id = memo.counted_as.load(Ordering::Relaxed);
                if id != 0 {
                    traffic::count(id);
                } else if traffic::enabled() {
                    self.count_first_memo_hit(country, &memo.counted_as);
                }
                return;
            }
        }
        let route = self.table.resolve(country, None);
        let array = match &route {
            Some(route) => self.set_route(retval, route),
            None => route_array::set_fallback_route(retval),
        };
        if let (Some(memo), Some(array)) = (memo, array) {
            memo.array.store(array, Ordering::Release);
        }
        // Once per memo (with counting off too, so that its hits count into
        // `NOT_COUNTED` without a branch); every call of a geo without a memo.
        if memo.is_some() || traffic::enabled() {
            self.count_answer(
                country,
                AnswerKind::Plain,
                route.map(|route| (route.region_index, route.origin_index)),
                memo.map(|memo| &memo.counted_as),
            );
        }
    }

    /// `answer` with a sticky key: no memo.
    #[inline(always)]
    fn answer_sticky(&self, retval: &mut Zval, country: &[u8], sticky_key: &[u8]) {
        let route = self.table.resolve(country, Some(sticky_key));
        self.answer_unmemoized(retval, country, AnswerKind::Sticky, route);
    }

    /// Sets a sticky or bucketed answer (`kind`, a constant where this is inlined) and
    /// counts it. With counting off this is the path as it was before counting, plus one
    /// branch on a process-wide flag; with counting on, an answer to a two-byte geo finds
    /// its label id in `country_ids` with one relaxed load, inline (no call, nothing kept
    /// of the route but its origin index).
    #[inline(always)]
    fn answer_unmemoized(
        &self,
        retval: &mut Zval,
        country: &[u8],
        kind: AnswerKind,
        route: Option<Route<'_>>,
    ) {
        let Some(route) = route else {
            route_array::set_fallback_route(retval);
            if traffic::enabled() {
                self.count_answer(country, kind, None, None);
            }
            return;
        };
        self.set_route(retval, &route);
        if !traffic::enabled() {
            return;
        }
        match self.country_ids.get(country, kind, route.origin_index) {
            Some(id) => traffic::count(id),
            None => self.count_answer(
                country,
                kind,
                Some((route.region_index, route.origin_index)),
                None,
            ),
        }
    }

    /// Counts an answer that no memo's label id covered, and keeps its id beside the
    /// memo, if it has one, or in `country_ids` for a sticky or bucketed answer to a
    /// two-byte geo.
    #[cold]
    #[inline(never)]
    fn count_answer(
        &self,
        country: &[u8],
        kind: AnswerKind,
        route: Option<(u32, u32)>,
        counted_as: Option<&AtomicU32>,
    ) {
        let id = self
            .answer_ids
            .id_plus_one(&self.table, country, kind, route)
            .unwrap_or(traffic::NOT_COUNTED_ID);
        // A pending label set's id (the registry was busy) is kept nowhere: the next
        // answer asks again and registers it.
        if traffic::is_cacheable(id) {
            if let Some(counted_as) = counted_as {
                counted_as.store(id, Ordering::Relaxed);
            } else if kind != AnswerKind::Plain
                && let Some((_, origin)) = route
            {
                self.country_ids.put(country, kind, origin, id);
            }
        }
        traffic::count(id);
    }

    /// A memo hit whose label id is not known yet in this table.
    #[cold]
    #[inline(never)]
    fn count_first_memo_hit(&self, country: &[u8], counted_as: &AtomicU32) {
        let route = self
            .table
            .resolve(country, None)
            .map(|route| (route.region_index, route.origin_index));
        self.count_answer(country, AnswerKind::Plain, route, Some(counted_as));
    }

    /// Sets `retval` to `route`'s array, from its slot once it has been handed out. Returns
    /// the immutable array it used, which lives as long as the process; None when the
    /// route was built for this call only.
    #[inline(always)]
    fn set_route(&self, retval: &mut Zval, route: &Route<'_>) -> Option<*mut zend_array> {
        let Some(slot) = self.routes.slot(route.region_index, route.origin_index) else {
            // Not this table's pair: built for this call, never remembered.
            route_array::set_built_route(retval, route.shard, route.origin);
            return None;
        };
        let array = slot.load(Ordering::Acquire);
        if !array.is_null() {
            route_array::set_immutable_route(retval, array);
            return Some(array);
        }
        let array = route_array::set_route(retval, route.shard, route.origin)?;
        // The table counts the arrays its slots hold, so that one it no longer holds can
        // be freed after the request (route_array). A thread that lost the race (ZTS)
        // holds nothing more.
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                array,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            route_array::retain(array);
        }
        Some(array)
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        TABLES_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
        route_array::release(
            self.routes
                .slots
                .iter()
                .map(|slot| slot.load(Ordering::Acquire))
                .filter(|array| !array.is_null()),
        );
    }
}

/// One slot per (region, origin) of a table: the route array handed out for it, filled
/// on first use. And memos of `resolve($country)` with no sticky key, which is a function
/// of the table and the country alone, so the common call skips the pick after the first
/// time: one per country code (found by direct index, present or not) and one per region
/// (for a country that names its region exactly). Atomic, so threads of a ZTS build can
/// share them.
struct RouteSlots {
    first_slot: Box<[u32]>,
    slots: Box<[AtomicPtr<zend_array>]>,
    by_country: Box<[Memo]>,
    by_region: Box<[Memo]>,
}

/// A memoised answer: its route array, and the answer counters' label id of that answer
/// plus one (0: not known yet), side by side so that a hit reads one line.
struct Memo {
    array: AtomicPtr<zend_array>,
    counted_as: AtomicU32,
}

impl RouteSlots {
    fn for_table(table: &Table) -> RouteSlots {
        let mut first_slot = Vec::with_capacity(table.region_count());
        let mut total = 0u32;
        for index in 0..table.region_count() as u32 {
            first_slot.push(total);
            let origins = table.region_at(index).map_or(0, |r| r.origins().len());
            total = total.saturating_add(origins as u32);
        }
        // With the memo off, both memos are empty: `memo` then finds nothing, at no cost
        // to the path that checks it.
        let memo = engine::enabled(Shortcut::RouteMemo);
        RouteSlots {
            first_slot: first_slot.into_boxed_slice(),
            slots: empty_slots(total as usize),
            by_country: empty_memos(if memo { CountryCode::COUNT } else { 0 }),
            by_region: empty_memos(if memo { table.region_count() } else { 0 }),
        }
    }

    /// The memo of `resolve(country)` without a sticky key, if `country` has one: a
    /// country code; the exact geo of a region; or a subdivision `CC-SUB` without a
    /// region of its own, which answers exactly as `CC` does (same chain on, same hash
    /// key), so it shares `CC`'s memo.
    #[inline(always)]
    fn memo(&self, table: &Table, country: &[u8]) -> Option<&Memo> {
        match CountryCode::of(country) {
            Some(code) => self.by_country.get(code.index()),
            None => self.memo_of_other(table, country),
        }
    }

    #[inline(never)]
    fn memo_of_other(&self, table: &Table, geo: &[u8]) -> Option<&Memo> {
        match table.memo_key_of_other(geo)? {
            MemoKey::Region(region) => self.by_region.get(region as usize),
            MemoKey::Country(code) => self.by_country.get(code.index()),
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

fn empty_memos(count: usize) -> Box<[Memo]> {
    (0..count)
        .map(|_| Memo {
            array: AtomicPtr::new(std::ptr::null_mut()),
            counted_as: AtomicU32::new(0),
        })
        .collect()
}

/// A direct-mapped cache of the label ids of sticky and bucketed answers to a two-byte
/// geo: 1,024 words, each `(key + 1) << 32 | id` for the key (the geo's two bytes, the
/// kind's bit, origin index below 32,768), which decides the labels of such an answer in
/// a table (the geo decides its class and its answering region). The geo's bytes as they
/// are, not its country code: no classifying on the request path. One relaxed load a
/// call, no lock: a collision, or an origin index past 32,767, only sends a call to
/// `AnswerIds`. One cache for both kinds: no more memory than before buckets.
struct StickyCountryIds {
    /// Inline in the table (no pointer to load, no bounds check: the index is the top ten
    /// bits of a product).
    entries: [AtomicU64; StickyCountryIds::ENTRIES],
}

impl StickyCountryIds {
    const ENTRIES: usize = 1024;

    fn new() -> StickyCountryIds {
        StickyCountryIds {
            entries: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The entry and the tag (`key + 1`, the entry's high half) of a sticky (or, with
    /// `kind` bucket, bucketed) answer to `geo` by origin `origin`.
    #[inline(always)]
    fn slot(&self, geo: &[u8], kind: AnswerKind, origin: u32) -> Option<(&AtomicU64, u64)> {
        let &[first, second] = geo else {
            return None;
        };
        if origin > 0x7fff {
            return None;
        }
        let kind_bit = u64::from(kind == AnswerKind::Bucket) << 15;
        let key =
            u64::from(u16::from_le_bytes([first, second])) << 16 | kind_bit | u64::from(origin);
        // Fibonacci hashing: the product's top ten bits index the 1,024 entries.
        let index = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize;
        Some((&self.entries[index], key + 1))
    }

    #[inline(always)]
    fn get(&self, geo: &[u8], kind: AnswerKind, origin: u32) -> Option<u32> {
        let (entry, tag) = self.slot(geo, kind, origin)?;
        let value = entry.load(Ordering::Relaxed);
        (value >> 32 == tag).then_some(value as u32)
    }

    fn put(&self, geo: &[u8], kind: AnswerKind, origin: u32, id: u32) {
        if let Some((entry, tag)) = self.slot(geo, kind, origin) {
            entry.store(tag << 32 | u64::from(id), Ordering::Relaxed);
        }
    }
}

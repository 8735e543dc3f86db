//! The label set of an answer, and its id, for the calls whose id is not cached beside a
//! memoised route (a sticky key, an opaque geo, the first answer of a memo).
//!
//! The labels (docs/traffic.md): `geo` is the geo asked when it is a code of the built-in
//! country table (`XX` and `T1` included) or a key of the answering table, a `CC-SUB`
//! without a key of its own counts as its `CC`, `empty` for the empty string, `other`
//! for anything else; `step` and `key` are those `explain()` shows for the answer (the
//! key escaped as cache tags are, cut at the label bound); `origin` and `shard` the
//! answer's; `kind` how the origin was picked (plain, sticky, bucket). So a table bounds
//! them, never a client: a bucket is never a label, so the series do not grow with N.
//!
//! Each table keeps, per process, the id of each label key (the geo's class, the
//! answering region and origin, kind): at most [`MAX_CACHED_KEYS`] of them; past that
//! an answer's id is found in the file's index each time (slower, never wrong).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use dw_routing::{CountryCode, Table, builtin_continent, encode_tag_key, subdivision_country};
use dw_traffic::{AnswerKind, LabelSet, Step};
use parking_lot::Mutex;
use rustc_hash::FxHasher;

use crate::{ini, traffic};

/// The most label keys a table caches per process.
pub const MAX_CACHED_KEYS: usize = 16_384;

/// What decides an answer's labels, given the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LabelKey {
    geo: GeoKey,
    /// The answering region, or `u32::MAX` for fail-open.
    region: u32,
    origin: u32,
    kind: AnswerKind,
}

/// The geo's class: what its labels and its chain depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum GeoKey {
    /// A two-character `A-Z0-9` code, or a `CC-SUB` without a key (as its `CC`).
    Code(u16),
    /// A geo with a key of its own (not a code).
    Region(u32),
    Empty,
    Opaque,
}

/// A table's cache of label ids (plus one).
#[derive(Default)]
pub struct AnswerIds {
    ids: Mutex<HashMap<LabelKey, u32, BuildHasherDefault<FxHasher>>>,
}

/// The built-in country table's codes, `XX` and `T1` included.
fn is_builtin_code(code: &[u8]) -> bool {
    builtin_continent(code).is_some() || code == b"XX" || code == b"T1"
}

impl AnswerIds {
    /// The id plus one of the answer to `geo` (of `kind`) that came from `route`
    /// (`(region, origin)` indexes; None for fail-open); None when counting is off.
    pub fn id_plus_one(
        &self,
        table: &Table,
        geo: &[u8],
        kind: AnswerKind,
        route: Option<(u32, u32)>,
    ) -> Option<u32> {
        if !traffic::enabled() {
            return None;
        }
        let (geo_key, chain_geo) = classify(table, geo);
        let (region, origin) = route.unwrap_or((u32::MAX, 0));
        let key = LabelKey {
            geo: geo_key,
            region,
            origin,
            kind,
        };
        // Another thread holding it (ZTS): find the id without the cache.
        let mut ids = self.ids.try_lock();
        if let Some(id) = ids.as_ref().and_then(|ids| ids.get(&key)) {
            return Some(*id);
        }
        let labels = labels(table, geo_key, chain_geo, kind, route);
        let id = traffic::id_plus_one(&labels)?;
        // A pending label set's id (the registry was busy) is not kept: the next answer
        // registers it.
        if let Some(ids) = ids.as_mut()
            && ids.len() < MAX_CACHED_KEYS
            && traffic::is_cacheable(id)
        {
            ids.insert(key, id);
        }
        Some(id)
    }
}

/// The geo's class, and the geo whose chain answers it (`CC` for a `CC-SUB` without a
/// key of its own).
fn classify<'g>(table: &Table, geo: &'g [u8]) -> (GeoKey, &'g [u8]) {
    if let Some(code) = CountryCode::of(geo) {
        return (GeoKey::Code(code.index() as u16), geo);
    }
    if let Some(region) = table.region_index(geo) {
        return (GeoKey::Region(region), geo);
    }
    if let Some(country) = subdivision_country(geo)
        && let Some(code) = CountryCode::of(country)
    {
        return (GeoKey::Code(code.index() as u16), country);
    }
    if geo.is_empty() {
        (GeoKey::Empty, geo)
    } else {
        (GeoKey::Opaque, geo)
    }
}

/// The labels of an answer. Cold: `explain` allocates.
fn labels(
    table: &Table,
    geo_key: GeoKey,
    chain_geo: &[u8],
    kind: AnswerKind,
    route: Option<(u32, u32)>,
) -> LabelSet {
    let geo_label: Vec<u8> = match geo_key {
        GeoKey::Code(_)
            if table.region_index(chain_geo).is_some() || is_builtin_code(chain_geo) =>
        {
            chain_geo.to_vec()
        }
        GeoKey::Code(_) | GeoKey::Opaque => b"other".to_vec(),
        GeoKey::Region(_) => encode_tag_key(chain_geo).into_bytes(),
        GeoKey::Empty => b"empty".to_vec(),
    };
    let explanation = table.explain(chain_geo, None);
    let (step, key) = match (&explanation.route, route) {
        (Some(answer), Some(_)) => {
            let stage = explanation
                .steps
                .last()
                .map_or("default", |step| step.stage.name());
            (
                Step::from_name(stage).unwrap_or(Step::Default),
                encode_tag_key(answer.geo.as_bytes()).into_bytes(),
            )
        }
        _ => (Step::FailOpen, Vec::new()),
    };
    let (shard, origin) = match route {
        Some((region, origin)) => (
            table.region_shard(region).as_bytes().to_vec(),
            table.region_origin(region, origin).as_bytes().to_vec(),
        ),
        None => {
            let (shard, origin) = ini::fallback();
            (shard.as_bytes().to_vec(), origin.as_bytes().to_vec())
        }
    };
    LabelSet::new(&geo_label, step, &key, &origin, &shard, kind)
}

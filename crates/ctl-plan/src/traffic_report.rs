//! `dwctl traffic`'s report: where the answers go, per origin, from the rates Prometheus
//! gave ([`Readings`]), beside what etcd says of each origin (its regions and weights,
//! registered, drained, staged), and why an origin that gets none gets none. A pure
//! function of both readings ([`report`]); dwctl reads them and words the report.

use std::collections::{BTreeMap, BTreeSet};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::answer_shares::{
    BucketShare, PlainRoute, bucket_shares, hashed_elsewhere, plain_routes,
};
use crate::capacity::{number_json, used_share};
use crate::model::State;
use crate::origin_listing::OriginListing;
use crate::shown::Shown;
use crate::stage::{cohort_text, open_stages};
use crate::value::RegionValue;

/// One sample of an instant vector: its labels (without `__name__`) and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels.
    pub labels: BTreeMap<String, String>,
    /// The value (NaN and infinities as Prometheus sent them).
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, `""` when absent.
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

/// What Prometheus said, each as an instant vector of rates (answers per second), every
/// one usable (finite, not below 0: dwctl's `ops::answer_counters::usable_rate`, whose
/// `traffic` command refuses any other before the report is made).
#[derive(Debug, Default, Clone)]
pub struct Readings {
    /// All answers (of `--geo`'s, with `--geo`): one sample, none when no series.
    pub total: Vec<Sample>,
    /// Answers past the nodes' label bounds.
    pub overflow: Vec<Sample>,
    /// By `origin`.
    pub origins: Vec<Sample>,
    /// Top geos by `origin, geo`.
    pub geos: Vec<Sample>,
    /// Top keys by `origin, key`.
    pub keys: Vec<Sample>,
    /// By `origin, step`.
    pub steps: Vec<Sample>,
    /// Top nodes by `origin, node` (with `--by-node`).
    pub nodes: Vec<Sample>,
    /// By `key`, whichever origin answered (for the "why no traffic" line).
    pub regions: Vec<Sample>,
}

/// The report: the totals, then one entry per origin, busiest first. Serialised, it is
/// `dwctl traffic --output json`'s object (before the command adds its source fields).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrafficReport {
    /// All answers per second; `None` when Prometheus has no series.
    pub per_second: Option<f64>,
    /// Answers per second past the nodes' label bounds.
    pub overflow_per_second: Option<f64>,
    /// The etcd revision the state was read at.
    pub revision: i64,
    /// Regions whose value does not parse (not counted for any origin).
    pub unreadable_regions: Vec<String>,
    /// The capacity guard's headroom.
    #[serde(serialize_with = "as_number")]
    pub capacity_headroom: f64,
    /// Why the capacities could not be read, when so.
    pub capacities_unreadable: Option<String>,
    /// One entry per origin, busiest first (then by name).
    pub origins: Vec<OriginTraffic>,
}

/// One origin's answers and what etcd says of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OriginTraffic {
    /// Its capacity and how much of it the answers use, when one is set.
    pub capacity: Option<CapacityUse>,
    /// The origin's id.
    pub origin: String,
    /// Its answers per second.
    pub per_second: f64,
    /// Its share of all answers (`None` when there are none).
    pub share: Option<f64>,
    /// Top geos.
    pub geos: Ranked,
    /// Top region keys.
    pub keys: Ranked,
    /// By chain step.
    pub steps: Ranked,
    /// Top nodes (with `--by-node`).
    pub nodes: Ranked,
    /// What etcd says of it.
    pub etcd: OriginInEtcd,
    /// Why it gets no answers, most likely cause first (`None` when it gets some).
    pub why: Option<Vec<String>>,
}

/// An origin's capacity beside its answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityUse {
    /// The capacity, answers per second.
    #[serde(serialize_with = "as_number")]
    pub answers_per_s: f64,
    /// The share of it the answers use.
    pub used: Option<f64>,
    /// Whether the answers are above the guard (capacity × headroom).
    pub over_guard: bool,
}

/// `(label value, rate)` rows of one origin, largest first; serialised as
/// `[{"<label>": value, "per_second": rate}, ...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The label the rows are by (`geo`, `key`, `step`, `node`).
    pub label: &'static str,
    /// The rows.
    pub rows: Vec<(String, f64)>,
}

impl Serialize for Ranked {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Row<'a>(&'static str, &'a str, f64);
        impl Serialize for Row<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry(self.0, self.1)?;
                map.serialize_entry("per_second", &self.2)?;
                map.end()
            }
        }
        let mut seq = serializer.serialize_seq(Some(self.rows.len()))?;
        for (name, rate) in &self.rows {
            seq.serialize_element(&Row(self.label, name, *rate))?;
        }
        seq.end()
    }
}

/// What etcd says of an origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OriginInEtcd {
    /// The regions that list it, with its weight in each.
    pub regions: BTreeMap<String, u32>,
    /// The regions where its weight is 0.
    pub weight_zero: Vec<String>,
    /// `live`, `down` (registered once, key gone) or `never`.
    pub registered: &'static str,
    /// Its drain record, when it is drained or shed.
    pub drained: Option<Drained>,
    /// Why its drain record does not parse, when so.
    pub malformed_drain: Option<String>,
    /// The open stages that route to it.
    pub stages: Vec<StagedIn>,
    /// The answers per second of the regions where its weight is above 0.
    pub weighted_regions_per_second: f64,
}

/// An origin's drain record, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drained {
    /// Why.
    pub reason: String,
    /// Who.
    pub by: String,
    /// When.
    pub at: String,
    /// `cli`, `health`, `rebalance`.
    pub source: String,
    /// The regions it was taken out of.
    pub regions: Vec<String>,
    /// `drained`, or its shed (`shed 40%`).
    pub state: String,
    /// Each source's part in words, in the order taken
    /// ([`crate::drain_record::DrainRecord::part_labels`]).
    pub parts: Vec<String>,
}

/// An open stage that routes to an origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StagedIn {
    /// The stage's id.
    pub stage: String,
    /// Its cohort, as text.
    pub cohort: String,
    /// Its region keys whose staged value lists the origin.
    pub keys: Vec<String>,
}

fn as_number<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    number_json(*value).serialize(serializer)
}

/// `(label value, rate)` of the samples of `origin`, largest first.
fn ranked(samples: &[Sample], origin: &str, label: &'static str) -> Ranked {
    let mut rows: Vec<(String, f64)> = samples
        .iter()
        .filter(|sample| sample.label("origin") == origin)
        .map(|sample| (sample.label(label).to_string(), sample.value))
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ranked { label, rows }
}

/// The report of `readings` beside `state` and `listing`: one entry per origin (in
/// Prometheus, in etcd, or, when `only` names some, those), busiest first.
pub fn report(
    readings: &Readings,
    state: &State,
    listing: &OriginListing,
    only: &[String],
) -> TrafficReport {
    let total = readings.total.first().map(|sample| sample.value);
    let overflow = readings.overflow.first().map(|sample| sample.value);
    // Regions as etcd holds them; a value that does not parse is listed, not used.
    let mut regions: BTreeMap<&str, RegionValue> = BTreeMap::new();
    let mut unreadable = Vec::new();
    for (name, entry) in &state.regions {
        match RegionValue::from_stored(&entry.raw) {
            Ok(value) => {
                regions.insert(name, value);
            }
            Err(_) => unreadable.push(name.clone()),
        }
    }
    let stages: Vec<(String, dw_routing::stage::Stage)> = open_stages(state)
        .into_iter()
        .filter_map(|(id, stage)| stage.ok().map(|stage| (id, stage)))
        .collect();
    // Answers per region key, whichever origin answered.
    let by_key: BTreeMap<&str, f64> = readings
        .regions
        .iter()
        .map(|sample| (sample.label("key"), sample.value))
        .collect();
    // Where the routing core sends each geo's answers without a sticky key or bucket, and
    // each region's bucketed answers.
    let table = crate::prediction::table(state, dw_routing::DEFAULT_PREFIX, None);
    let plain = plain_routes(&table);
    let buckets = bucket_shares(&table);
    let mut names: BTreeSet<String> = BTreeSet::new();
    if only.is_empty() {
        names.extend(
            readings
                .origins
                .iter()
                .map(|sample| sample.label("origin").to_string()),
        );
        for value in regions.values() {
            names.extend(value.origins.iter().cloned());
        }
        names.extend(listing.live.keys().cloned());
        names.extend(listing.registered.iter().cloned());
        names.extend(listing.drains.keys().cloned());
        names.extend(listing.capacities.keys().cloned());
    } else {
        names.extend(only.iter().cloned());
    }
    let mut origins: Vec<OriginTraffic> = names
        .iter()
        .map(|origin| {
            let context = OriginContext {
                readings,
                total,
                regions: &regions,
                stages: &stages,
                by_key: &by_key,
                listing,
                plain: &plain,
                buckets: &buckets,
            };
            origin_traffic(origin, &context)
        })
        .collect();
    origins.sort_by(|a, b| {
        b.per_second
            .total_cmp(&a.per_second)
            .then_with(|| a.origin.cmp(&b.origin))
    });
    TrafficReport {
        per_second: total,
        overflow_per_second: overflow,
        revision: state.revision,
        unreadable_regions: unreadable,
        capacity_headroom: listing.headroom,
        capacities_unreadable: listing.capacities_unreadable.clone(),
        origins,
    }
}

/// What every origin's entry is made from.
struct OriginContext<'a> {
    readings: &'a Readings,
    total: Option<f64>,
    regions: &'a BTreeMap<&'a str, RegionValue>,
    stages: &'a [(String, dw_routing::stage::Stage)],
    by_key: &'a BTreeMap<&'a str, f64>,
    listing: &'a OriginListing,
    /// Where the routing core sends each geo's plain answers.
    plain: &'a [PlainRoute],
    /// Each region's origins' buckets (empty when the policy has none).
    buckets: &'a [BucketShare],
}

/// One origin's entry of the report.
fn origin_traffic(origin: &str, context: &OriginContext<'_>) -> OriginTraffic {
    let OriginContext {
        readings,
        total,
        regions,
        stages,
        by_key,
        listing,
        plain,
        buckets,
    } = *context;
    let per_second = readings
        .origins
        .iter()
        .find(|sample| sample.label("origin") == origin)
        .map_or(0.0, |sample| sample.value);
    let share = match total {
        Some(total) if total > 0.0 => Some(per_second / total),
        _ => None,
    };
    let in_regions: BTreeMap<String, u32> = regions
        .iter()
        .filter(|(_, value)| value.origins.iter().any(|o| o == origin))
        .map(|(name, value)| {
            let weight = value.weight.get(origin).copied().unwrap_or(0);
            ((*name).to_owned(), weight)
        })
        .collect();
    let weight_zero: Vec<String> = in_regions
        .iter()
        .filter(|(_, weight)| **weight == 0)
        .map(|(name, _)| name.clone())
        .collect();
    let registered = if listing.live.contains_key(origin) {
        "live"
    } else if listing.registered.contains(origin) {
        "down"
    } else {
        "never"
    };
    let drained = listing.drains.get(origin).map(|record| Drained {
        reason: record.reason.clone(),
        by: record.by.clone(),
        at: record.at.clone(),
        source: record.source.clone(),
        regions: record.regions.keys().cloned().collect(),
        state: record.state_label(),
        parts: record.part_labels(),
    });
    let malformed_drain = listing.malformed_drains.get(origin).cloned();
    let in_stages: Vec<StagedIn> = stages
        .iter()
        .filter_map(|(id, stage)| {
            let keys: Vec<String> = stage
                .kvs
                .iter()
                .filter(|(key, value)| {
                    key.starts_with("region/")
                        && value.as_deref().is_some_and(|value| {
                            RegionValue::from_stored(value.as_bytes())
                                .is_ok_and(|region| region.origins.iter().any(|o| o == origin))
                        })
                })
                .map(|(key, _)| key.clone())
                .collect();
            (!keys.is_empty()).then(|| StagedIn {
                stage: id.clone(),
                cohort: cohort_text(&stage.cohort),
                keys,
            })
        })
        .collect();
    let weighted: Vec<&str> = in_regions
        .iter()
        .filter(|(_, weight)| **weight > 0)
        .map(|(name, _)| name.as_str())
        .collect();
    let region_rate = weighted
        .iter()
        .fold(0.0, |sum, name| sum + region_answers(by_key, name));
    let why = (per_second <= 0.0).then(|| {
        why_no_traffic(
            origin,
            total,
            &in_regions,
            &weighted,
            region_rate,
            drained.is_some(),
            registered,
            !in_stages.is_empty(),
            &hashed_elsewhere_text(plain, &weighted, origin),
            &no_bucket_text(buckets, &weighted, origin),
        )
    });
    let capacity = listing.capacities.get(origin).map(|capacity| CapacityUse {
        answers_per_s: *capacity,
        used: used_share(per_second, *capacity),
        over_guard: per_second > capacity * listing.headroom,
    });
    OriginTraffic {
        capacity,
        origin: origin.to_owned(),
        per_second,
        share,
        geos: ranked(&readings.geos, origin, "geo"),
        keys: ranked(&readings.keys, origin, "key"),
        steps: ranked(&readings.steps, origin, "step"),
        nodes: ranked(&readings.nodes, origin, "node"),
        etcd: OriginInEtcd {
            regions: in_regions,
            weight_zero,
            registered,
            drained,
            malformed_drain,
            stages: in_stages,
            weighted_regions_per_second: region_rate,
        },
        why,
    }
}

/// The answers per second of the region `name` (a name under `region/`), however the
/// counters wrote its key (encoded as cache tags are, with or without `region/`).
pub fn region_answers(by_key: &BTreeMap<&str, f64>, name: &str) -> f64 {
    let encoded = dw_routing::encode_tag_key(name.as_bytes());
    by_key
        .iter()
        .filter(|(key, _)| {
            let key: &str = key.strip_prefix("region/").unwrap_or(key);
            key == encoded || key == name
        })
        .fold(0.0, |sum, (_, rate)| sum + rate)
}

/// The most geos named in "the whole geo JP hashes to sjc-a" per origin.
pub const SHOWN_HASHED_GEOS: usize = 3;

/// "the whole geo JP hashes to sjc-a", for the geos of `origin`'s weighted regions, when
/// none of them sends its plain answers to `origin`; empty when one does (or the regions
/// answer no geo).
fn hashed_elsewhere_text(plain: &[PlainRoute], weighted: &[&str], origin: &str) -> Vec<String> {
    let mut routes = Vec::new();
    for region in weighted {
        let elsewhere = hashed_elsewhere(plain, region, origin);
        if elsewhere.is_empty() {
            return Vec::new();
        }
        routes.extend(elsewhere);
    }
    let mut text: Vec<String> = routes
        .iter()
        .take(SHOWN_HASHED_GEOS)
        .map(|route| {
            format!(
                "the whole geo {} hashes to {}",
                Shown(&route.geo),
                Shown(&route.origin)
            )
        })
        .collect();
    if routes.len() > SHOWN_HASHED_GEOS {
        text.push(format!(
            "and {} more geos to other origins",
            routes.len() - SHOWN_HASHED_GEOS
        ));
    }
    text
}

/// "region JP gives it 0 of 2 buckets", for `origin`'s weighted regions, when the
/// policy has buckets and none of those regions' assignments gives `origin` a bucket;
/// empty when one does, or buckets are off (`buckets` empty).
fn no_bucket_text(buckets: &[BucketShare], weighted: &[&str], origin: &str) -> Vec<String> {
    let mut none = Vec::new();
    for region in weighted {
        let Some(share) = buckets
            .iter()
            .find(|share| share.region == *region && share.origin == origin)
        else {
            continue;
        };
        if share.buckets > 0 {
            return Vec::new();
        }
        none.push(share);
    }
    let mut text: Vec<String> = none
        .iter()
        .take(SHOWN_HASHED_GEOS)
        .map(|share| {
            format!(
                "region {} gives it 0 of {} buckets",
                Shown(&share.region),
                share.of
            )
        })
        .collect();
    if none.len() > SHOWN_HASHED_GEOS {
        text.push(format!(
            "and {} more regions none",
            none.len() - SHOWN_HASHED_GEOS
        ));
    }
    text
}

/// Why an origin got no answers, most likely cause first.
#[allow(clippy::too_many_arguments)]
fn why_no_traffic(
    origin: &str,
    total: Option<f64>,
    in_regions: &BTreeMap<String, u32>,
    weighted: &[&str],
    region_rate: f64,
    drained: bool,
    registered: &str,
    staged: bool,
    hashed: &[String],
    no_bucket: &[String],
) -> Vec<String> {
    let shown = Shown(origin);
    let mut why = Vec::new();
    if total.is_none_or(|total| total <= 0.0) {
        why.push(
            "Prometheus has no answers at all in the window: is it scraping every dw-agent's \
             /metrics, and do the nodes count (dw_router.count_answers)?"
                .to_string(),
        );
        return why;
    }
    if drained {
        why.push(format!("drained (`dwctl restore {shown}`)"));
    }
    if in_regions.is_empty() {
        // A drain took it out of its regions: nothing more to say then.
        if staged {
            why.push(
                "in no current region, only in an open stage: only the stage's cohort routes                  to it"
                    .to_string(),
            );
        } else if !drained {
            why.push("in no region (`dwctl region list`, `dwctl apply`)".to_string());
        }
    } else if weighted.is_empty() {
        why.push("weight 0 in every region it is in".to_string());
    } else if region_rate <= 0.0 {
        why.push(format!(
            "its weighted regions ({}) answered no one in the window: no visitors from \
             there, or the nodes answer them elsewhere (`dwctl route GEO`, `dwctl status`)",
            weighted
                .iter()
                .map(|name| Shown(name).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else if !hashed.is_empty() || !no_bucket.is_empty() {
        if !hashed.is_empty() {
            why.push(format!(
                "its weighted regions answer {region_rate:.2}/s, none of it with this origin: \
                 {} (a geo's answers without a sticky key or visitor bucket all go to the one \
                 origin its hash picks, whatever the weights; only sticky and bucketed answers \
                 spread by weight)",
                hashed.join("; ")
            ));
        }
        if !no_bucket.is_empty() {
            why.push(format!(
                "its weighted regions' visitor-bucket assignments give it no bucket, so no \
                 bucketed answer either: {} (each origin gets its weight's apportionment of \
                 policy/global's N buckets, whole buckets: a larger N or a larger weight gives \
                 it some)",
                no_bucket.join("; ")
            ));
        }
    } else {
        why.push(format!(
            "its weighted regions answer {region_rate:.2}/s, none of it with this origin: are \
             the nodes current (`dwctl status`)? is a stage serving them other values?"
        ));
    }
    if registered == "down" {
        why.push("registered once, its lease is gone (rebalance drains such origins)".into());
    }
    why
}

#[cfg(test)]
mod tests;

//! Why a geo routes where it does: [`Table::explain`] walks the chain of
//! [`Table::resolve`] one step at a time and says why each step before the answer was
//! skipped. Off the request path (it allocates); `dwctl route` and the extension's
//! `RegionRouter::explain()` both print it, so they agree by construction. The walk
//! itself ([`Table::walk`]) is also what the cache tags are read from (`tags`).

use std::borrow::Cow;

use serde_json::{Value, json};

use crate::buckets::{AssignmentSource, BucketCount};
use crate::continent::{self, Continent, bucket_of_geo, subdivision_country};
use crate::keys::REGION;
use crate::pick::{legacy_index, rendezvous_index};
use crate::policy::PickMode;
use crate::table::Table;

/// Where in the chain a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainStage {
    /// The visitor's `CC-SUB` subdivision.
    Subdivision,
    /// The visitor's `CC` country.
    Country,
    /// The continent bucket of the country.
    Continent,
    /// A geo of neither shape, looked up as it is.
    Geo,
    /// `policy.default`.
    Default,
    /// `policy.failover[n]`.
    Failover(usize),
}

impl ChainStage {
    /// Its name in an explanation.
    pub fn name(self) -> &'static str {
        match self {
            ChainStage::Subdivision => "subdivision",
            ChainStage::Country => "country",
            ChainStage::Continent => "continent",
            ChainStage::Geo => "geo",
            ChainStage::Default => "default",
            ChainStage::Failover(_) => "failover",
        }
    }
}

/// What a step found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// Its region answers.
    Answered,
    /// No key for it.
    NoKey,
    /// Its key holds a value that is refused, for this reason.
    Invalid(String),
    /// The country has no continent (`XX`, `T1`, an unassigned code).
    NoContinent,
    /// The caller's geo is in the bucket namespace (`continent/...`): a bucket is reached
    /// only through the chain, never by name.
    BucketNamespace,
}

impl StepOutcome {
    /// Its name in an explanation.
    pub fn name(&self) -> &'static str {
        match self {
            StepOutcome::Answered => "answered",
            StepOutcome::NoKey => "no key",
            StepOutcome::Invalid(_) => "invalid",
            StepOutcome::NoContinent => "no continent",
            StepOutcome::BucketNamespace => "bucket namespace",
        }
    }
}

/// One step of the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Where in the chain.
    pub stage: ChainStage,
    /// The geo it looked up (`continent/EU` for a bucket); `None` for a continent step of
    /// a country with no continent.
    pub geo: Option<String>,
    /// What it found.
    pub outcome: StepOutcome,
}

/// The answer at the end of the chain, when a region gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainedRoute {
    /// The answering region's shard.
    pub shard: String,
    /// The origin the pick chose.
    pub origin: String,
    /// The answering region's geo.
    pub geo: String,
    /// The key the pick hashed.
    pub hash_key: String,
    /// Where that key came from: `sticky`, `subdivision`, `country` or `geo`.
    pub hash_key_from: &'static str,
}

/// What a visitor's bucket did in an explanation ([`Table::explain_bucketed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketUse {
    /// The bucket given.
    pub bucket: u64,
    /// The table's N; `None` when buckets are off.
    pub buckets: Option<u16>,
    /// Whether it picked the origin, or why not (the precedence and the fail-safe rules
    /// of docs/routing.md, "Buckets").
    pub outcome: BucketOutcome,
}

/// Whether a bucket picked the origin, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BucketOutcome {
    /// The answering region's assignment gave the bucket's origin; where the assignment
    /// comes from (`stored`, `reassigned`, `default`, or `default, the stored one ignored:
    /// <why>`).
    Picked(String),
    /// A sticky key was given: it wins.
    StickyKeyWins,
    /// `policy/global` has no `buckets`: answered as without a bucket.
    BucketsOff,
    /// The bucket is at or past N: answered as without a bucket.
    PastN,
    /// No region answers (fail-open), or the answering region has no assignment (more
    /// origins than an assignment indexes): answered as without a bucket.
    NoAssignment,
}

impl BucketOutcome {
    /// Its text in an explanation.
    pub fn describe(&self) -> String {
        match self {
            BucketOutcome::Picked(source) => {
                format!("picked by the region's assignment ({source})")
            }
            BucketOutcome::StickyKeyWins => "ignored: a sticky key wins over a bucket".into(),
            BucketOutcome::BucketsOff => {
                "ignored: policy/global has no buckets (answered as without a bucket)".into()
            }
            BucketOutcome::PastN => {
                "ignored: not below the policy's buckets (answered as without a bucket)".into()
            }
            BucketOutcome::NoAssignment => {
                "ignored: the answering region has no assignment (answered as without a bucket)"
                    .into()
            }
        }
    }
}

/// How a geo routes, step by step (see [`Table::explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The geo asked about, as text (invalid UTF-8 replaced).
    pub geo: String,
    /// The sticky key, if any.
    pub sticky_key: Option<String>,
    /// The visitor's bucket, if one was given, and what it did.
    pub bucket: Option<BucketUse>,
    /// The country's continent and whether `policy.continent_of` gave it (true) rather
    /// than the built-in table; `None` for a geo with no country or a country with none.
    pub continent: Option<(Continent, bool)>,
    /// The steps walked, the answering one last.
    pub steps: Vec<Step>,
    /// The answer; `None` means the caller fails open to its configured route.
    pub route: Option<ExplainedRoute>,
    /// The table's revision and prefix.
    pub revision: u64,
    prefix: String,
}

/// What one step of the chain's walk found (see [`Table::walk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The region at this index answers.
    Region(u32),
    /// No valid region for its key (absent or refused).
    Missing,
    /// The country has no continent: no key was looked up.
    NoContinent,
    /// The caller's geo is in the bucket namespace: not looked up.
    BucketNamespace,
}

/// One step of the walk, its geo as raw bytes (`continent/EU` for a bucket).
#[derive(Debug, Clone)]
pub(crate) struct WalkStep<'a> {
    pub stage: ChainStage,
    pub geo: Option<Cow<'a, [u8]>>,
    pub found: Found,
}

/// The chain of [`Table::resolve`] walked step by step: what [`Table::explain`] and
/// [`Table::cache_tags`] both read, so that they cannot disagree about the chain.
#[derive(Debug, Clone)]
pub(crate) struct Walk<'a> {
    /// The steps walked, the answering one last.
    pub steps: Vec<WalkStep<'a>>,
    /// The answering region, the hash key the chain gives and where it came from.
    pub answer: Option<(u32, &'a [u8], &'static str)>,
    /// The country's continent, when the geo has a country that has one.
    pub continent: Option<(Continent, bool)>,
}

impl Table {
    /// Walks the chain of [`Table::resolve`] for `geo`, one step at a time, up to the
    /// step that answers. Allocates: never on the request path.
    pub(crate) fn walk<'a>(&'a self, geo: &'a [u8]) -> Walk<'a> {
        let mut steps = Vec::new();
        let mut continent = None;
        // The chain's own steps, each with its geo and the region its lookup finds.
        let mut answer: Option<(u32, &[u8], &'static str)> = None;
        let looked_up = |stage, geo: &'a [u8], found: Option<u32>| WalkStep {
            stage,
            geo: Some(Cow::Borrowed(geo)),
            found: found.map_or(Found::Missing, Found::Region),
        };
        let country = if continent::is_country(geo) {
            Some(geo)
        } else {
            subdivision_country(geo)
        };
        if let Some(country) = country {
            if country != geo {
                let found = self.region_index(geo);
                steps.push(looked_up(ChainStage::Subdivision, geo, found));
                answer = found.map(|index| (index, geo, "subdivision"));
            }
            if answer.is_none() {
                let found = self.region_index(country);
                steps.push(looked_up(ChainStage::Country, country, found));
                answer = found.map(|index| (index, country, "country"));
            }
            if answer.is_none() {
                continent = self.continent_of(country);
                match continent {
                    Some((of, _)) => {
                        let found = self.bucket(of);
                        steps.push(WalkStep {
                            stage: ChainStage::Continent,
                            geo: Some(Cow::Owned(of.bucket_geo().into_bytes())),
                            found: found.map_or(Found::Missing, Found::Region),
                        });
                        answer = found.map(|index| (index, country, "country"));
                    }
                    None => steps.push(WalkStep {
                        stage: ChainStage::Continent,
                        geo: None,
                        found: Found::NoContinent,
                    }),
                }
            } else {
                continent = self.continent_of(country);
            }
        } else if bucket_of_geo(geo).is_some() {
            steps.push(WalkStep {
                stage: ChainStage::Geo,
                geo: Some(Cow::Borrowed(geo)),
                found: Found::BucketNamespace,
            });
        } else {
            let found = self.region_index(geo);
            steps.push(looked_up(ChainStage::Geo, geo, found));
            answer = found.map(|index| (index, geo, "geo"));
        }
        // The hash key of an answer from the defaults is the one the chain would use.
        let fallback_key: (&[u8], &'static str) = match country {
            Some(country) => (country, "country"),
            None => (geo, "geo"),
        };
        let policy = self.policy();
        let defaults = std::iter::once((ChainStage::Default, &policy.default)).chain(
            policy
                .failover
                .iter()
                .enumerate()
                .map(|(index, geo)| (ChainStage::Failover(index), geo)),
        );
        for (stage, policy_geo) in defaults {
            if answer.is_some() {
                break;
            }
            let found = self.policy_geo_region(policy_geo.as_bytes());
            steps.push(looked_up(stage, policy_geo.as_bytes(), found));
            answer = found.map(|index| (index, fallback_key.0, fallback_key.1));
        }
        Walk {
            steps,
            answer,
            continent,
        }
    }

    /// Walks the chain of [`Table::resolve`] for `geo` and `sticky_key`, step by step,
    /// and says why each step before the answer was skipped. The route is the one
    /// `resolve` gives. Allocates: for debugging, never on the request path.
    pub fn explain(&self, geo: &[u8], sticky_key: Option<&[u8]>) -> Explanation {
        self.explain_bucketed(geo, sticky_key, None)
    }

    /// [`Table::explain`] for a visitor that may carry a bucket: the route is the one
    /// [`Table::resolve_bucketed`] gives, and the explanation says what the bucket did
    /// (picked the origin, by which assignment; or why it was ignored).
    pub fn explain_bucketed(
        &self,
        geo: &[u8],
        sticky_key: Option<&[u8]>,
        bucket: Option<u64>,
    ) -> Explanation {
        let text = String::from_utf8_lossy(geo).into_owned();
        let walk = self.walk(geo);
        let steps: Vec<Step> = walk.steps.iter().map(|step| self.step(step)).collect();
        let policy = self.policy();
        let bucket_use = bucket.map(|bucket| self.bucket_use(bucket, sticky_key, walk.answer));
        let bucket_text = bucket.unwrap_or_default().to_string();
        let route = walk.answer.and_then(|(index, hash_key, from)| {
            let region = self.region_at(index)?;
            let picked = match (&bucket_use, sticky_key) {
                (
                    Some(
                        used @ BucketUse {
                            outcome: BucketOutcome::Picked(_),
                            ..
                        },
                    ),
                    None,
                ) => {
                    let origin = self
                        .assignment(index)?
                        .origin_of(u16::try_from(used.bucket).ok()?)?;
                    Some(usize::from(origin))
                }
                _ => None,
            };
            let (hash_key, from, origin) = match (picked, sticky_key) {
                (Some(origin), _) => (bucket_text.as_bytes(), "bucket", origin),
                (None, key) => {
                    let (hash_key, from) = match key {
                        Some(sticky) => (sticky, "sticky"),
                        None => (hash_key, from),
                    };
                    let origin = match policy.pick {
                        PickMode::Legacy => legacy_index(region, hash_key),
                        PickMode::Rendezvous => rendezvous_index(region, hash_key),
                    };
                    (hash_key, from, origin)
                }
            };
            let answered = steps.last()?.geo.clone()?;
            Some(ExplainedRoute {
                shard: region.shard().to_owned(),
                origin: region.origins().get(origin)?.clone(),
                geo: answered,
                hash_key: String::from_utf8_lossy(hash_key).into_owned(),
                hash_key_from: from,
            })
        });
        Explanation {
            geo: text,
            bucket: bucket_use,
            sticky_key: sticky_key.map(|key| String::from_utf8_lossy(key).into_owned()),
            continent: walk.continent,
            steps,
            route,
            revision: self.revision(),
            prefix: self.prefix().to_owned(),
        }
    }

    /// What `bucket` does for a visitor of the walk's answer (`answer`), and why.
    fn bucket_use(
        &self,
        bucket: u64,
        sticky_key: Option<&[u8]>,
        answer: Option<(u32, &[u8], &'static str)>,
    ) -> BucketUse {
        let buckets = self.buckets().map(BucketCount::get);
        let outcome = match (sticky_key, buckets, answer) {
            (Some(_), _, _) => BucketOutcome::StickyKeyWins,
            (None, None, _) => BucketOutcome::BucketsOff,
            (None, Some(n), _) if bucket >= u64::from(n) => BucketOutcome::PastN,
            (None, Some(_), Some((index, _, _))) if self.assignment(index).is_some() => {
                BucketOutcome::Picked(match self.assignment_source(index) {
                    Some(AssignmentSource::Stored) => "stored".into(),
                    Some(AssignmentSource::Reassigned) => {
                        "stored, reassigned to the current weights".into()
                    }
                    Some(AssignmentSource::DefaultStoredIgnored(error)) => {
                        format!("default, the stored one ignored: {error}")
                    }
                    Some(AssignmentSource::Default) | None => "default".into(),
                })
            }
            (None, Some(_), _) => BucketOutcome::NoAssignment,
        };
        BucketUse {
            bucket,
            buckets,
            outcome,
        }
    }

    /// A walked step as an explanation shows it: when its lookup found nothing, whether
    /// the key is absent or refused.
    fn step(&self, step: &WalkStep<'_>) -> Step {
        let outcome = match step.found {
            Found::Region(_) => StepOutcome::Answered,
            Found::NoContinent => StepOutcome::NoContinent,
            Found::BucketNamespace => StepOutcome::BucketNamespace,
            Found::Missing => {
                let geo = step.geo.as_deref().unwrap_or_default();
                let key = [self.prefix().as_bytes(), REGION.as_bytes(), geo].concat();
                match self
                    .invalid_keys()
                    .iter()
                    .find(|invalid| invalid.key.as_bytes() == key)
                {
                    Some(invalid) => StepOutcome::Invalid(invalid.error.to_string()),
                    None => StepOutcome::NoKey,
                }
            }
        };
        Step {
            stage: step.stage,
            geo: step
                .geo
                .as_deref()
                .map(|geo| String::from_utf8_lossy(geo).into_owned()),
            outcome,
        }
    }
}

impl Explanation {
    /// The explanation as JSON, the shape `dwctl route --output json` prints and
    /// `RegionRouter::explain()` returns (docs/routing.md, "Explaining a route"). A
    /// fail-open answer has `"fail_open": true` and null shard and origin: those come from
    /// each node's ini.
    pub fn to_json(&self) -> Value {
        let key_of = |geo: &str| format!("{}{REGION}{geo}", self.prefix);
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|step| {
                let mut value = json!({
                    "stage": step.stage.name(),
                    "geo": step.geo,
                    "key": step.geo.as_deref().map(key_of),
                    "outcome": step.outcome.name(),
                });
                if let ChainStage::Failover(index) = step.stage {
                    value["index"] = json!(index);
                }
                if let StepOutcome::Invalid(reason) = &step.outcome {
                    value["reason"] = json!(reason);
                }
                value
            })
            .collect();
        let route = self.route.as_ref();
        let mut explained = json!({
            "geo": self.geo,
            "sticky_key": self.sticky_key,
            "revision": self.revision,
            "continent": self.continent.map(|(continent, _)| continent.code()),
            "continent_source": self.continent.map(|(_, overridden)| {
                if overridden { "policy.continent_of" } else { "table" }
            }),
            "continent_table": continent::CONTINENT_TABLE_SOURCE,
            "steps": steps,
            "fail_open": route.is_none(),
            "shard": route.map(|route| route.shard.as_str()),
            "origin": route.map(|route| route.origin.as_str()),
            "answered_by": route.map(|route| key_of(&route.geo)),
            "hash_key": route.map(|route| route.hash_key.as_str()),
            "hash_key_from": route.map(|route| route.hash_key_from),
        });
        // Only when a bucket was given: an explanation without one keeps its shape.
        if let Some(used) = &self.bucket {
            explained["bucket"] = json!(used.bucket);
            explained["buckets"] = json!(used.buckets.unwrap_or(0));
            explained["bucket_outcome"] = json!(used.outcome.describe());
        }
        explained
    }
}

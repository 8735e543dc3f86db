//! `dw_routing_weight{region,origin}`: each region's configured weights, as the fleet
//! exporter (`dwctl status --serve`) serves them beside the fleet's series, so that
//! dashboards and alerts compare weight with the answers the nodes count
//! (`dw_router_answers_total`, docs/traffic-ops.md).
//!
//! Read from etcd's current routing (paged, as `read_state` reads regions) at every
//! reading of the exporter. Every origin a region lists gets a series, weight 0 included
//! (a drained-to-zero origin is visible as 0, not as absent). A region whose value does not
//! parse exports nothing and is counted in `dw_routing_regions_unreadable`. At most
//! [`MAX_WEIGHT_SERIES`] series; the rest are counted in `dw_routing_weights_not_exported`.

use std::sync::atomic::{AtomicI64, AtomicU64};

use dw_routing::{Snapshot, Table};
use etcd_client::{Client, GetOptions};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::error::Error;
use crate::plan::answer_shares::{
    BucketShare, MAX_PLAIN_ROUTES, PlainRoute, StickyShare, bucket_shares, plain_routes,
    sticky_shares,
};
use crate::plan::keys::{Layout, strip};
use crate::plan::value::RegionValue;

/// The most `dw_routing_weight` series one reading exports (2,500 regions of 40 origins).
pub const MAX_WEIGHT_SERIES: usize = 100_000;

/// One region's weights: `(region, [(origin, weight)])`, in the region's origin order.
pub type RegionWeights = (String, Vec<(String, u32)>);

/// Where the routing core sends answers: each geo's plain route and each region's sticky
/// and bucket shares ([`crate::plan::answer_shares`]).
#[derive(Debug, Default, Clone)]
pub struct AnswerShares {
    /// Each geo's origin for answers without a sticky key.
    pub plain: Vec<PlainRoute>,
    /// Each region's origins' shares of its sticky answers.
    pub sticky: Vec<StickyShare>,
    /// Each region's origins' buckets (with `policy/global`'s `buckets`; empty when off).
    pub bucket: Vec<BucketShare>,
}

/// The weights of every region under the routing prefix, how many regions did not
/// parse, and where the routing core (regions and policy read at one revision) sends
/// answers.
pub async fn read_weights(
    client: &mut Client,
    layout: &Layout,
) -> Result<(Vec<RegionWeights>, usize, AnswerShares), Error> {
    let mut kv = dw_etcd::kv_client(client);
    let prefix = layout.regions();
    let pages =
        dw_etcd::read_prefix_pages(&mut kv, prefix.as_bytes(), None, dw_etcd::DEFAULT_PAGE_KEYS)
            .await?;
    let policy = kv
        .get(
            layout.policy(),
            Some(GetOptions::new().with_revision(pages.revision)),
        )
        .await?;
    let mut snapshot = Snapshot::new(u64::try_from(pages.revision).unwrap_or(0), &layout.prefix);
    let mut regions = Vec::new();
    let mut unreadable = 0;
    for kv in &pages.kvs {
        let Some(name) = strip(kv.key(), &prefix).filter(|name| !name.is_empty()) else {
            continue;
        };
        snapshot.kvs.insert(
            format!("{prefix}{name}"),
            String::from_utf8_lossy(kv.value()).into_owned(),
        );
        match RegionValue::from_stored(kv.value()) {
            Ok(value) => regions.push((name.to_string(), weights_of(&value))),
            Err(_) => unreadable += 1,
        }
    }
    if let Some(policy) = policy.kvs().first() {
        snapshot.kvs.insert(
            layout.policy(),
            String::from_utf8_lossy(policy.value()).into_owned(),
        );
    }
    let table = Table::from_snapshot(&snapshot);
    let shares = AnswerShares {
        plain: plain_routes(&table),
        sticky: sticky_shares(&table),
        bucket: bucket_shares(&table),
    };
    Ok((regions, unreadable, shares))
}

/// Every origin of a region with its weight (0 when the weight map leaves it out).
pub fn weights_of(value: &RegionValue) -> Vec<(String, u32)> {
    value
        .origins
        .iter()
        .map(|origin| {
            (
                origin.clone(),
                value.weight.get(origin).copied().unwrap_or(0),
            )
        })
        .collect()
}

/// Registers `dw_routing_plain_route{geo,region,origin}` (1: every answer of the geo
/// without a sticky key goes to that origin) and `dw_routing_sticky_share{region,origin}`
/// (the origin's share of the region's sticky answers, 0 to 1): what the alert
/// `DwOriginWeightedButIdle` expects answers from, instead of weight alone. At most
/// [`MAX_PLAIN_ROUTES`] plain routes and [`MAX_WEIGHT_SERIES`] sticky shares. With
/// `policy/global`'s `buckets`, `dw_routing_bucket_share{region,origin}` too (the origin's
/// buckets / N in the region's assignment, 0 included; at most [`MAX_WEIGHT_SERIES`]: one
/// per listed origin, whatever N).
pub fn register_answer_shares(registry: &mut Registry, shares: &AnswerShares) {
    let plain = Family::<Vec<(String, String)>, Gauge>::default();
    registry.register(
        "dw_routing_plain_route",
        "1 for the origin that every answer of a geo without a sticky key goes to (the routing core's hash of the geo picks one origin of its region, whatever the weights), from etcd's current routing",
        plain.clone(),
    );
    for route in shares.plain.iter().take(MAX_PLAIN_ROUTES) {
        plain
            .get_or_create(&vec![
                ("geo".to_owned(), route.geo.clone()),
                ("region".to_owned(), route.region.clone()),
                ("origin".to_owned(), route.origin.clone()),
            ])
            .set(1);
    }
    let sticky = Family::<Vec<(String, String)>, Gauge<f64, AtomicU64>>::default();
    registry.register(
        "dw_routing_sticky_share",
        "An origin's share (0 to 1) of a region's answers with a sticky key, by the policy's pick mode, from etcd's current routing",
        sticky.clone(),
    );
    for share in shares.sticky.iter().take(MAX_WEIGHT_SERIES) {
        sticky
            .get_or_create(&vec![
                ("region".to_owned(), share.region.clone()),
                ("origin".to_owned(), share.origin.clone()),
            ])
            .set(share.share);
    }
    let bucket = Family::<Vec<(String, String)>, Gauge<f64, AtomicU64>>::default();
    registry.register(
        "dw_routing_bucket_share",
        "An origin's share (0 to 1) of a region's answers with a visitor bucket: its buckets / N in the region's assignment, from etcd's current routing (no series while policy/global has no buckets)",
        bucket.clone(),
    );
    for share in shares.bucket.iter().take(MAX_WEIGHT_SERIES) {
        bucket
            .get_or_create(&vec![
                ("region".to_owned(), share.region.clone()),
                ("origin".to_owned(), share.origin.clone()),
            ])
            .set(share.share());
    }
}

/// Registers `dw_routing_weight`, `dw_routing_weights_not_exported` and
/// `dw_routing_regions_unreadable` for one reading.
pub fn register(registry: &mut Registry, regions: &[RegionWeights], unreadable: usize) {
    let weight = Family::<Vec<(String, String)>, Gauge>::default();
    registry.register(
        "dw_routing_weight",
        "A region's configured weight of an origin (0 to 100; 0 listed but never picked), from etcd's current routing",
        weight.clone(),
    );
    let mut exported = 0usize;
    let mut left_out = 0usize;
    for (region, origins) in regions {
        for (origin, value) in origins {
            if exported == MAX_WEIGHT_SERIES {
                left_out += 1;
                continue;
            }
            exported += 1;
            weight
                .get_or_create(&vec![
                    ("region".to_owned(), region.clone()),
                    ("origin".to_owned(), origin.clone()),
                ])
                .set(i64::from(*value));
        }
    }
    let not_exported = Gauge::<i64, AtomicI64>::default();
    not_exported.set(i64::try_from(left_out).unwrap_or(i64::MAX));
    registry.register(
        "dw_routing_weights_not_exported",
        "dw_routing_weight series left out (over the exporter's limit)",
        not_exported,
    );
    let bad = Gauge::<i64, AtomicI64>::default();
    bad.set(i64::try_from(unreadable).unwrap_or(i64::MAX));
    registry.register(
        "dw_routing_regions_unreadable",
        "Regions whose value does not parse (no dw_routing_weight for them)",
        bad,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    fn rendered(regions: &[RegionWeights], unreadable: usize) -> String {
        let mut registry = Registry::default();
        register(&mut registry, regions, unreadable);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn every_listed_origin_has_its_weight_zero_included() {
        let value = RegionValue::from_stored(
            br#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":100,"fra-b":0}}"#,
        )
        .unwrap();
        let text = rendered(&[("DE".into(), weights_of(&value))], 1);
        assert!(
            text.contains("dw_routing_weight{region=\"DE\",origin=\"fra-a\"} 100\n"),
            "{text}"
        );
        assert!(
            text.contains("dw_routing_weight{region=\"DE\",origin=\"fra-b\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("dw_routing_regions_unreadable 1\n"), "{text}");
        assert!(
            text.contains("dw_routing_weights_not_exported 0\n"),
            "{text}"
        );
    }

    #[test]
    fn at_most_max_weight_series_and_label_values_escaped() {
        let origins: Vec<(String, u32)> = (0..40).map(|i| (format!("o{i}"), 1)).collect();
        let mut regions: Vec<RegionWeights> = (0..MAX_WEIGHT_SERIES / 40)
            .map(|i| (format!("r{i}"), origins.clone()))
            .collect();
        let text = rendered(&regions, 0);
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("dw_routing_weight{"))
                .count(),
            MAX_WEIGHT_SERIES
        );
        assert!(text.contains("dw_routing_weights_not_exported 0\n"));
        regions.push((
            "evil\"}\nx 1".into(),
            vec![("a".into(), 5), ("b".into(), 6)],
        ));
        let text = rendered(&regions, 0);
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("dw_routing_weight{"))
                .count(),
            MAX_WEIGHT_SERIES
        );
        assert!(text.contains("dw_routing_weights_not_exported 2\n"));
        let small = rendered(&[("evil\"}\nx 1".into(), vec![("a".into(), 5)])], 0);
        assert!(
            !small.lines().any(|line| line.starts_with("x 1")),
            "{small}"
        );
    }
}

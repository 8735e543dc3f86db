//! The traffic a prediction starts from: answers per second per geo, split into plain
//! (no sticky key, no bucket), sticky and bucketed (a visitor bucket, no sticky key),
//! optionally per node, and the lines no table can place.
//!
//! Two sources make one: Prometheus rows ([`Traffic::from_rows`], the series of
//! `dw_router_answers_total` summed by geo, kind, node and whether the step was
//! `fail_open`) and a JSON file ([`Traffic::parse`], for planning offline and for tests).
//!
//! The file (docs/capacity.md, "The traffic file"):
//!
//! ```json
//! {"format": 1,
//!  "geos": {"DE": 120.5, "FR": {"plain": 10, "sticky": 5, "bucket": 40}, "": 0.5},
//!  "unplaced": {"other": 3, "overflow": 0, "fail_open": 1}}
//! ```
//!
//! or, per node, `"nodes": {"node-a": {"DE": 60, ...}, "node-b": {...}}` instead of
//! `"geos"` (exactly one of the two). A geo's value is answers per second, all plain, or
//! `{"plain": x, "sticky": y, "bucket": z}` (any may be left out: 0). Geos are the geos `resolve()`
//! receives, as the traffic counters label them (`""` is the empty geo, which the counters
//! label `empty`). `format` is optional (1 is the only one); `unplaced` is optional and its
//! members too. Any other member is refused, so a typo does not silently drop traffic.
//! Limits: [`MAX_TRAFFIC_BYTES`], [`MAX_GEOS`], [`MAX_NODES`], [`MAX_ENTRIES`],
//! [`MAX_NAME_BYTES`]; every rate a finite number in `[0, MAX_RATE]`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{Error, shown};

/// The largest traffic file read, in bytes (32 MiB).
pub const MAX_TRAFFIC_BYTES: usize = 32 << 20;
/// The most distinct geos a traffic holds (over all nodes).
pub const MAX_GEOS: usize = 100_000;
/// The most nodes a traffic holds.
pub const MAX_NODES: usize = 10_000;
/// The most (node, geo) entries a per-node traffic holds.
pub const MAX_ENTRIES: usize = 1_000_000;
/// The longest geo or node name, in bytes.
pub const MAX_NAME_BYTES: usize = 1024;
/// The largest rate accepted, in answers per second (a trillion: far beyond any fleet,
/// small enough that sums of [`MAX_ENTRIES`] of them stay exact to a fraction of a unit).
pub const MAX_RATE: f64 = 1e12;

/// Answers per second of one geo: without a sticky key or a bucket (`plain`), with a
/// sticky key (`sticky`), with a visitor bucket and no sticky key (`bucket`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GeoRate {
    /// Answers per second without a sticky key or bucket: the whole geo lands on one
    /// origin.
    pub plain: f64,
    /// Answers per second with a sticky key: spread by the pick's shares.
    pub sticky: f64,
    /// Answers per second with a visitor bucket (and no sticky key): spread by the
    /// answering region's assignment, each origin its buckets / N (as plain while the
    /// policy has no buckets: the routers then ignore the bucket).
    pub bucket: f64,
}

impl GeoRate {
    /// `plain + sticky + bucket`.
    pub fn total(&self) -> f64 {
        self.plain + self.sticky + self.bucket
    }

    fn add(&mut self, other: GeoRate) {
        self.plain += other.plain;
        self.sticky += other.sticky;
        self.bucket += other.bucket;
    }

    fn check(&self, geo: &str) -> Result<(), Error> {
        check_rate(self.plain, geo)?;
        check_rate(self.sticky, geo)?;
        check_rate(self.bucket, geo)
    }
}

/// What an answer was given with, the counters' `kind` label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AnswerKind {
    /// No sticky key, no bucket (`kind="plain"`).
    #[default]
    Plain,
    /// A sticky key (`kind="sticky"`).
    Sticky,
    /// A visitor bucket, no sticky key (`kind="bucket"`).
    Bucket,
}

impl AnswerKind {
    /// The kind of a `kind` label's value: `sticky`, `bucket`, anything else plain.
    pub fn from_label(label: &str) -> AnswerKind {
        match label {
            "sticky" => AnswerKind::Sticky,
            "bucket" => AnswerKind::Bucket,
            _ => AnswerKind::Plain,
        }
    }
}

/// The traffic no table can place, answers per second, kept apart from the geos.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Unplaced {
    /// Answers counted under the geo label `other` (a geo neither a built-in code nor a
    /// key of the answering table: which region it reaches is unknown).
    pub other: f64,
    /// Answers past the counters' label-set bound (`dw_router_answers_overflow_total`).
    pub overflow: f64,
    /// Answers a node gave fail-open (step `fail_open`): their route is each node's ini.
    pub fail_open: f64,
}

impl Unplaced {
    /// The sum of the three lines.
    pub fn total(&self) -> f64 {
        self.other + self.overflow + self.fail_open
    }
}

/// One Prometheus series of `sum by (geo, kind, node, step)(rate(dw_router_answers_total
/// [5m]))`, reduced to what a prediction needs (a caller may sum away `node` and give
/// `None`, and may send every step or only say whether it was `fail_open`).
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerRow {
    /// The `geo` label: `empty` means the empty geo, `other` is unplaceable.
    pub geo: String,
    /// The `kind` label.
    pub kind: AnswerKind,
    /// The `node` label, if the query kept it.
    pub node: Option<String>,
    /// Whether the `step` label was `fail_open`.
    pub fail_open: bool,
    /// Answers per second.
    pub rate: f64,
}

/// Answers per second by geo (plain and sticky), optionally per node, and the unplaced
/// lines. Built by [`Traffic::parse`], [`Traffic::from_rows`] or [`Traffic::from_geos`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Traffic {
    /// The whole fleet's rate per geo.
    totals: BTreeMap<String, GeoRate>,
    /// Per node, when the source had nodes.
    nodes: Option<BTreeMap<String, BTreeMap<String, GeoRate>>>,
    unplaced: Unplaced,
    /// What the reader says of the traffic's worth (a window still filling).
    notes: Vec<String>,
}

impl Traffic {
    /// A fleet-wide traffic from rates per geo and the unplaced lines.
    pub fn from_geos(
        geos: impl IntoIterator<Item = (String, GeoRate)>,
        unplaced: Unplaced,
    ) -> Result<Traffic, Error> {
        let mut totals = BTreeMap::new();
        for (geo, rate) in geos {
            check_name("geo", &geo)?;
            rate.check(&geo)?;
            totals.entry(geo).or_insert_with(GeoRate::default).add(rate);
            if totals.len() > MAX_GEOS {
                return Err(too_many("geos", MAX_GEOS, totals.len()));
            }
        }
        check_unplaced(&unplaced)?;
        Ok(Traffic {
            totals,
            nodes: None,
            unplaced,
            notes: Vec::new(),
        })
    }

    /// A traffic from Prometheus rows and the overflow rate
    /// (`sum(rate(dw_router_answers_overflow_total[5m]))`). Rows of geo `other` go to
    /// [`Unplaced::other`], fail-open rows to [`Unplaced::fail_open`], `empty` is the
    /// empty geo. Per node when every row has a node; rows with and without a node
    /// together are refused. Rows of one geo, sticky and node add up.
    pub fn from_rows(
        rows: impl IntoIterator<Item = AnswerRow>,
        overflow: f64,
    ) -> Result<Traffic, Error> {
        check_rate(overflow, "overflow")?;
        let mut unplaced = Unplaced {
            overflow,
            ..Unplaced::default()
        };
        let mut by_node: BTreeMap<Option<String>, BTreeMap<String, GeoRate>> = BTreeMap::new();
        let mut entries = 0usize;
        for row in rows {
            check_rate(row.rate, &row.geo)?;
            if row.fail_open {
                unplaced.fail_open += row.rate;
                continue;
            }
            if row.geo == "other" {
                unplaced.other += row.rate;
                continue;
            }
            let geo = if row.geo == "empty" {
                String::new()
            } else {
                row.geo
            };
            check_name("geo", &geo)?;
            if let Some(node) = &row.node {
                check_name("node", node)?;
            }
            let geos = by_node.entry(row.node).or_default();
            if !geos.contains_key(&geo) {
                entries += 1;
            }
            let rate = geos.entry(geo).or_default();
            match row.kind {
                AnswerKind::Plain => rate.plain += row.rate,
                AnswerKind::Sticky => rate.sticky += row.rate,
                AnswerKind::Bucket => rate.bucket += row.rate,
            }
            if entries > MAX_ENTRIES {
                return Err(too_many("(node, geo) entries", MAX_ENTRIES, entries));
            }
        }
        let with_node = by_node.keys().any(Option::is_some);
        if with_node && by_node.contains_key(&None) {
            return Err(Error::Traffic(
                "some rows have a node and some do not: sum by node in every row or in none".into(),
            ));
        }
        if with_node {
            let nodes = by_node
                .into_iter()
                .filter_map(|(node, geos)| Some((node?, geos)))
                .collect();
            Traffic::per_node(nodes, unplaced)
        } else {
            let geos = by_node.remove(&None).unwrap_or_default();
            Traffic::from_geos(geos, unplaced)
        }
    }

    /// A per-node traffic: each node's rate per geo.
    pub fn per_node(
        nodes: BTreeMap<String, BTreeMap<String, GeoRate>>,
        unplaced: Unplaced,
    ) -> Result<Traffic, Error> {
        if nodes.len() > MAX_NODES {
            return Err(too_many("nodes", MAX_NODES, nodes.len()));
        }
        check_unplaced(&unplaced)?;
        let mut totals: BTreeMap<String, GeoRate> = BTreeMap::new();
        let mut entries = 0usize;
        for (node, geos) in &nodes {
            check_name("node", node)?;
            entries += geos.len();
            if entries > MAX_ENTRIES {
                return Err(too_many("(node, geo) entries", MAX_ENTRIES, entries));
            }
            for (geo, rate) in geos {
                check_name("geo", geo)?;
                rate.check(geo)?;
                totals.entry(geo.clone()).or_default().add(*rate);
                if totals.len() > MAX_GEOS {
                    return Err(too_many("geos", MAX_GEOS, totals.len()));
                }
            }
        }
        Ok(Traffic {
            totals,
            nodes: Some(nodes),
            unplaced,
            notes: Vec::new(),
        })
    }

    /// Parses a traffic file (the format of this module's documentation).
    pub fn parse(bytes: &[u8]) -> Result<Traffic, Error> {
        if bytes.len() > MAX_TRAFFIC_BYTES {
            return Err(too_many(
                "bytes in a traffic file",
                MAX_TRAFFIC_BYTES,
                bytes.len(),
            ));
        }
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|error| Error::Traffic(format!("not JSON: {error}")))?;
        let Value::Object(top) = value else {
            return Err(Error::Traffic("the file is not a JSON object".into()));
        };
        for name in top.keys() {
            if !matches!(name.as_str(), "format" | "geos" | "nodes" | "unplaced") {
                return Err(Error::Traffic(format!(
                    "unknown member {} (expected format, geos or nodes, unplaced)",
                    shown(name)
                )));
            }
        }
        match top.get("format") {
            None => {}
            Some(format) if format.as_u64() == Some(1) => {}
            Some(_) => return Err(Error::Traffic("`format` must be 1".into())),
        }
        let unplaced = match top.get("unplaced") {
            None => Unplaced::default(),
            Some(value) => parse_unplaced(value)?,
        };
        match (top.get("geos"), top.get("nodes")) {
            (Some(geos), None) => Traffic::from_geos(parse_geos(geos, "geos")?, unplaced),
            (None, Some(Value::Object(nodes))) => {
                if nodes.len() > MAX_NODES {
                    return Err(too_many("nodes", MAX_NODES, nodes.len()));
                }
                let mut parsed = BTreeMap::new();
                for (node, geos) in nodes {
                    parsed.insert(
                        node.clone(),
                        parse_geos(geos, "a node's geos")?.into_iter().collect(),
                    );
                }
                Traffic::per_node(parsed, unplaced)
            }
            (None, Some(_)) => Err(Error::Traffic("`nodes` must be an object".into())),
            (Some(_), Some(_)) => Err(Error::Traffic(
                "give `geos` (fleet totals) or `nodes` (per node), not both".into(),
            )),
            (None, None) => Err(Error::Traffic("no `geos` and no `nodes`".into())),
        }
    }

    /// The same traffic with every plain answer counted as bucketed: what the answers
    /// become when `policy/global` turns visitor buckets on and the front controller gives
    /// each visitor a bucket (docs/capacity.md, "Visitor buckets"). Sticky answers stay.
    pub fn plain_as_bucketed(&self) -> Traffic {
        let convert = |geos: &BTreeMap<String, GeoRate>| {
            geos.iter()
                .map(|(geo, rate)| {
                    let moved = GeoRate {
                        plain: 0.0,
                        sticky: rate.sticky,
                        bucket: rate.bucket + rate.plain,
                    };
                    (geo.clone(), moved)
                })
                .collect()
        };
        Traffic {
            totals: convert(&self.totals),
            nodes: self.nodes.as_ref().map(|nodes| {
                nodes
                    .iter()
                    .map(|(node, geos)| (node.clone(), convert(geos)))
                    .collect()
            }),
            unplaced: self.unplaced,
            notes: self.notes.clone(),
        }
    }

    /// The whole fleet's rate per geo (per-node traffic summed).
    pub fn geos(&self) -> &BTreeMap<String, GeoRate> {
        &self.totals
    }

    /// Each node's rate per geo, when the source had nodes.
    pub fn nodes(&self) -> Option<&BTreeMap<String, BTreeMap<String, GeoRate>>> {
        self.nodes.as_ref()
    }

    /// The lines no table can place.
    pub fn unplaced(&self) -> &Unplaced {
        &self.unplaced
    }

    /// The traffic with notes on its worth from its reader (a window still filling): a
    /// prediction made from it says them. (The nodes a reading left out as implausible,
    /// [`crate::check_plausibility`], are not in the traffic; its reader names them.)
    pub fn with_notes(mut self, notes: Vec<String>) -> Traffic {
        self.notes = notes;
        self
    }

    /// Notes on the traffic's worth (a window still filling).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Each node's answers per second (every geo, plain and sticky), busiest first; empty
    /// without per-node rates.
    pub fn node_totals(&self) -> Vec<(String, f64)> {
        let mut totals: Vec<(String, f64)> = self
            .nodes
            .iter()
            .flatten()
            .map(|(node, geos)| (node.clone(), geos.values().map(GeoRate::total).sum()))
            .collect();
        totals.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        totals
    }

    /// Every answer per second: the geos and the unplaced lines.
    pub fn total(&self) -> f64 {
        self.totals.values().map(GeoRate::total).sum::<f64>() + self.unplaced.total()
    }
}

fn too_many(what: &'static str, limit: usize, found: usize) -> Error {
    Error::TooLarge { what, limit, found }
}

fn check_name(what: &str, name: &str) -> Result<(), Error> {
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::Traffic(format!(
            "{what} {} is {} bytes long (the limit is {MAX_NAME_BYTES})",
            shown(name),
            name.len()
        )));
    }
    Ok(())
}

fn check_rate(rate: f64, of: &str) -> Result<(), Error> {
    if !rate.is_finite() || !(0.0..=MAX_RATE).contains(&rate) {
        return Err(Error::Traffic(format!(
            "the rate of {} is {rate}: rates are finite numbers from 0 to {MAX_RATE}",
            shown(of)
        )));
    }
    Ok(())
}

fn check_unplaced(unplaced: &Unplaced) -> Result<(), Error> {
    check_rate(unplaced.other, "other")?;
    check_rate(unplaced.overflow, "overflow")?;
    check_rate(unplaced.fail_open, "fail_open")
}

fn number(value: &Value, of: &str) -> Result<f64, Error> {
    let rate = value
        .as_f64()
        .ok_or_else(|| Error::Traffic(format!("the rate of {} is not a number", shown(of))))?;
    check_rate(rate, of)?;
    Ok(rate)
}

fn parse_geos(value: &Value, what: &str) -> Result<Vec<(String, GeoRate)>, Error> {
    let Value::Object(geos) = value else {
        return Err(Error::Traffic(format!("{what} must be an object")));
    };
    if geos.len() > MAX_GEOS {
        return Err(too_many("geos", MAX_GEOS, geos.len()));
    }
    geos.iter()
        .map(|(geo, rate)| Ok((geo.clone(), parse_rate(rate, geo)?)))
        .collect()
}

fn parse_rate(value: &Value, geo: &str) -> Result<GeoRate, Error> {
    match value {
        Value::Object(split) => {
            let field = |name: &str, split: &Map<String, Value>| {
                split.get(name).map_or(Ok(0.0), |value| number(value, geo))
            };
            if let Some(name) = split
                .keys()
                .find(|name| !matches!(name.as_str(), "plain" | "sticky" | "bucket"))
            {
                return Err(Error::Traffic(format!(
                    "geo {}: unknown member {} (expected plain, sticky, bucket)",
                    shown(geo),
                    shown(name)
                )));
            }
            Ok(GeoRate {
                plain: field("plain", split)?,
                sticky: field("sticky", split)?,
                bucket: field("bucket", split)?,
            })
        }
        other => Ok(GeoRate {
            plain: number(other, geo)?,
            ..GeoRate::default()
        }),
    }
}

fn parse_unplaced(value: &Value) -> Result<Unplaced, Error> {
    let Value::Object(lines) = value else {
        return Err(Error::Traffic("`unplaced` must be an object".into()));
    };
    let mut unplaced = Unplaced::default();
    for (name, rate) in lines {
        let rate = number(rate, name)?;
        match name.as_str() {
            "other" => unplaced.other = rate,
            "overflow" => unplaced.overflow = rate,
            "fail_open" => unplaced.fail_open = rate,
            _ => {
                return Err(Error::Traffic(format!(
                    "unplaced: unknown line {} (expected other, overflow, fail_open)",
                    shown(name)
                )));
            }
        }
    }
    Ok(unplaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_totals_splits_and_unplaced_lines() {
        let traffic = Traffic::parse(
            br#"{"format":1,"geos":{"DE":120.5,"FR":{"plain":10,"sticky":5},"GB":{"sticky":2},"":0.5},
                "unplaced":{"other":3,"fail_open":1}}"#,
        )
        .unwrap();
        assert_eq!(
            traffic.geos()["DE"],
            GeoRate {
                plain: 120.5,
                sticky: 0.0,
                bucket: 0.0,
            }
        );
        assert_eq!(
            traffic.geos()["FR"],
            GeoRate {
                plain: 10.0,
                sticky: 5.0,
                bucket: 0.0,
            }
        );
        assert_eq!(
            traffic.geos()["GB"],
            GeoRate {
                plain: 0.0,
                sticky: 2.0,
                bucket: 0.0,
            }
        );
        assert_eq!(traffic.geos()[""].plain, 0.5);
        assert_eq!(
            *traffic.unplaced(),
            Unplaced {
                other: 3.0,
                overflow: 0.0,
                fail_open: 1.0
            }
        );
        assert_eq!(traffic.total(), 120.5 + 15.0 + 2.0 + 0.5 + 4.0);
        assert!(traffic.nodes().is_none());
    }

    #[test]
    fn reads_nodes_and_sums_them() {
        let traffic = Traffic::parse(
            br#"{"nodes":{"n1":{"DE":1,"FR":{"sticky":2}},"n2":{"DE":{"plain":3,"sticky":4}}}}"#,
        )
        .unwrap();
        assert_eq!(
            traffic.geos()["DE"],
            GeoRate {
                plain: 4.0,
                sticky: 4.0,
                bucket: 0.0,
            }
        );
        assert_eq!(traffic.nodes().unwrap().len(), 2);
        assert_eq!(traffic.nodes().unwrap()["n1"]["FR"].sticky, 2.0);
    }

    #[test]
    fn refuses_what_it_does_not_understand() {
        for (file, expected) in [
            (&b"[]"[..], "not a JSON object"),
            (b"{", "not JSON"),
            (br#"{"geo":{}}"#, "unknown member"),
            (br#"{"format":2,"geos":{}}"#, "`format` must be 1"),
            (br#"{"geos":{},"nodes":{}}"#, "not both"),
            (br#"{}"#, "no `geos`"),
            (br#"{"geos":{"DE":-1}}"#, "finite numbers from 0"),
            (br#"{"geos":{"DE":1e13}}"#, "finite numbers from 0"),
            (br#"{"geos":{"DE":"5"}}"#, "not a number"),
            (
                br#"{"geos":{"DE":{"plain":1,"stiky":2}}}"#,
                "unknown member",
            ),
            (br#"{"geos":{"DE":null}}"#, "not a number"),
            (br#"{"geos":[]}"#, "must be an object"),
            (br#"{"nodes":[]}"#, "must be an object"),
            (br#"{"geos":{},"unplaced":{"others":1}}"#, "unknown line"),
            (
                br#"{"geos":{},"unplaced":{"other":-0.5}}"#,
                "finite numbers",
            ),
        ] {
            let error = Traffic::parse(file).unwrap_err().to_string();
            assert!(
                error.contains(expected),
                "{}: {error}",
                String::from_utf8_lossy(file)
            );
        }
        // 1e400 is not finite in a double: serde_json refuses it as out of range.
        assert!(Traffic::parse(br#"{"geos":{"DE":1e400}}"#).is_err());
        assert!(
            Traffic::parse(br#"{"geos":{"DE":1e12}}"#).is_ok(),
            "the bound itself"
        );
    }

    #[test]
    fn names_are_escaped_and_cut_in_messages() {
        let long = format!("{}\u{1b}[31m", "x".repeat(2000));
        let file = format!(
            r#"{{"geos":{{"{}":1}}}}"#,
            long.replace('\u{1b}', "\\u001b")
        );
        let error = Traffic::parse(file.as_bytes()).unwrap_err().to_string();
        assert!(!error.contains('\u{1b}'), "{error}");
        assert!(error.len() < 300, "{error}");
    }

    #[test]
    fn limits_at_their_edges() {
        // Bytes: at the limit the size check passes (and the JSON is judged), one more fails.
        let mut file = br#"{"geos":{}}"#.to_vec();
        file.resize(MAX_TRAFFIC_BYTES, b' ');
        assert!(Traffic::parse(&file).is_ok());
        file.push(b' ');
        assert!(matches!(
            Traffic::parse(&file),
            Err(Error::TooLarge {
                what: "bytes in a traffic file",
                ..
            })
        ));
        // Geos.
        let geos = |count: usize| {
            (0..count).map(|index| {
                (
                    format!("g{index}"),
                    GeoRate {
                        plain: 1.0,
                        sticky: 0.0,
                        bucket: 0.0,
                    },
                )
            })
        };
        assert!(Traffic::from_geos(geos(MAX_GEOS), Unplaced::default()).is_ok());
        assert!(matches!(
            Traffic::from_geos(geos(MAX_GEOS + 1), Unplaced::default()),
            Err(Error::TooLarge { what: "geos", .. })
        ));
        let file = |count: usize| {
            let members: Vec<String> = (0..count).map(|index| format!(r#""g{index}":1"#)).collect();
            format!(r#"{{"geos":{{{}}}}}"#, members.join(","))
        };
        assert!(Traffic::parse(file(MAX_GEOS).as_bytes()).is_ok());
        assert!(Traffic::parse(file(MAX_GEOS + 1).as_bytes()).is_err());
        // Nodes.
        let nodes = |count: usize| -> BTreeMap<String, BTreeMap<String, GeoRate>> {
            (0..count)
                .map(|index| {
                    (
                        format!("n{index}"),
                        BTreeMap::from([("DE".to_owned(), GeoRate::default())]),
                    )
                })
                .collect()
        };
        assert!(Traffic::per_node(nodes(MAX_NODES), Unplaced::default()).is_ok());
        assert!(matches!(
            Traffic::per_node(nodes(MAX_NODES + 1), Unplaced::default()),
            Err(Error::TooLarge { what: "nodes", .. })
        ));
        // Entries: MAX_NODES nodes of 100 geos each is exactly MAX_ENTRIES.
        assert_eq!(MAX_NODES * 100, MAX_ENTRIES);
        let mut wide = nodes(MAX_NODES);
        for geos in wide.values_mut() {
            for index in 0..100 {
                geos.insert(format!("g{index}"), GeoRate::default());
            }
            geos.remove("DE");
        }
        assert!(Traffic::per_node(wide.clone(), Unplaced::default()).is_ok());
        wide.get_mut("n0")
            .unwrap()
            .insert("one-more".into(), GeoRate::default());
        assert!(matches!(
            Traffic::per_node(wide, Unplaced::default()),
            Err(Error::TooLarge {
                what: "(node, geo) entries",
                ..
            })
        ));
        // Name length.
        let name = |len: usize| "g".repeat(len);
        let one =
            |geo: String| Traffic::from_geos([(geo, GeoRate::default())], Unplaced::default());
        assert!(one(name(MAX_NAME_BYTES)).is_ok());
        assert!(one(name(MAX_NAME_BYTES + 1)).is_err());
        let node = |node: String| {
            let geos = BTreeMap::from([("DE".to_owned(), GeoRate::default())]);
            Traffic::per_node(BTreeMap::from([(node, geos)]), Unplaced::default())
        };
        assert!(node(name(MAX_NAME_BYTES)).is_ok());
        assert!(node(name(MAX_NAME_BYTES + 1)).is_err());
    }

    fn row(geo: &str, sticky: bool, node: Option<&str>, fail_open: bool, rate: f64) -> AnswerRow {
        AnswerRow {
            geo: geo.into(),
            kind: if sticky {
                AnswerKind::Sticky
            } else {
                AnswerKind::Plain
            },
            node: node.map(Into::into),
            fail_open,
            rate,
        }
    }

    #[test]
    fn rows_from_prometheus() {
        let traffic = Traffic::from_rows(
            [
                row("DE", false, Some("n1"), false, 2.0),
                row("DE", true, Some("n1"), false, 1.0),
                row("DE", false, Some("n1"), false, 0.5), // another step: adds up
                row("empty", false, Some("n2"), false, 4.0),
                row("other", false, Some("n2"), false, 3.0),
                row("FR", true, Some("n2"), true, 7.0),
                AnswerRow {
                    kind: AnswerKind::Bucket,
                    ..row("DE", false, Some("n1"), false, 8.0)
                },
            ],
            0.25,
        )
        .unwrap();
        assert_eq!(
            traffic.geos()["DE"],
            GeoRate {
                plain: 2.5,
                sticky: 1.0,
                bucket: 8.0
            }
        );
        let bucketed = traffic.plain_as_bucketed();
        assert_eq!(
            bucketed.geos()["DE"],
            GeoRate {
                plain: 0.0,
                sticky: 1.0,
                bucket: 10.5
            }
        );
        assert_eq!(bucketed.nodes().unwrap()["n1"]["DE"].bucket, 10.5);
        assert_eq!(bucketed.unplaced(), traffic.unplaced());
        assert_eq!(AnswerKind::from_label("bucket"), AnswerKind::Bucket);
        assert_eq!(AnswerKind::from_label("sticky"), AnswerKind::Sticky);
        assert_eq!(AnswerKind::from_label("plain"), AnswerKind::Plain);
        assert_eq!(traffic.geos()[""].plain, 4.0);
        assert!(!traffic.geos().contains_key("FR") && !traffic.geos().contains_key("other"));
        assert_eq!(
            *traffic.unplaced(),
            Unplaced {
                other: 3.0,
                overflow: 0.25,
                fail_open: 7.0
            }
        );
        assert_eq!(traffic.nodes().unwrap()["n2"].len(), 1);
        let totals = Traffic::from_rows([row("DE", false, None, false, 2.0)], 0.0).unwrap();
        assert!(totals.nodes().is_none());
        let mixed = Traffic::from_rows(
            [
                row("DE", false, None, false, 2.0),
                row("DE", false, Some("n"), false, 2.0),
            ],
            0.0,
        );
        assert!(matches!(mixed, Err(Error::Traffic(_))));
        assert!(Traffic::from_rows([row("DE", false, None, false, f64::NAN)], 0.0).is_err());
        assert!(Traffic::from_rows([], f64::INFINITY).is_err());
    }
}

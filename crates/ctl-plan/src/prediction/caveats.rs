//! What a prediction says of the traffic it rests on (pure): the nodes its reading left
//! out as implausible ([`dw_capacity::check_plausibility`], the `left_out` of
//! [`crate::guard::TrafficRead::Usable`]), notes on the traffic's worth (a
//! window still filling), and, in a refusal, the nodes whose answers carry the load, so
//! that an operator sees whose counts a refusal rests on.

use dw_capacity::{LeftOut, Traffic};
use serde_json::{Value, json};

use crate::shown::Shown;

/// The most nodes a refusal names (the busiest; JSON output of a prediction lists all).
pub const NAMED_CARRIERS: usize = 10;

fn rate(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}/s")
    } else {
        format!("{value:.1}/s")
    }
}

/// The lines a prediction adds after its table: each node left out and why, then the
/// notes. Empty when there is neither.
pub fn caveat_lines(traffic: &Traffic, left_out: &[LeftOut]) -> Vec<String> {
    let mut lines = Vec::new();
    for left in left_out {
        lines.push(format!(
            "  left out as implausible, not in this prediction: node {}",
            // LeftOut's Display quotes and escapes the node name and any geo.
            left
        ));
    }
    for note in traffic.notes() {
        lines.push(format!("  note: {}", Shown(note)));
    }
    lines
}

/// The refusal's last line: the nodes whose answers the prediction rests on, busiest
/// first (at most [`NAMED_CARRIERS`]), and those left out. `None` without per-node rates.
pub fn carriers_line(traffic: &Traffic, left_out: &[LeftOut]) -> Option<String> {
    let carriers = traffic.node_totals();
    if carriers.is_empty() {
        return None;
    }
    let mut named: Vec<String> = carriers
        .iter()
        .take(NAMED_CARRIERS)
        .map(|(node, per_second)| format!("{} {}", Shown(node), rate(*per_second)))
        .collect();
    if carriers.len() > NAMED_CARRIERS {
        named.push(format!("and {} more", carriers.len() - NAMED_CARRIERS));
    }
    let mut line = format!(
        "the load is predicted from the answers of {} node(s): {}",
        carriers.len(),
        named.join(", ")
    );
    if !left_out.is_empty() {
        line.push_str(&format!(
            "; left out as implausible: {}",
            left_out
                .iter()
                .map(|left| Shown(&left.node).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Some(line)
}

/// The same as JSON members of a prediction: `nodes` (`[{"node", "per_second"}]`, empty
/// without per-node rates), `left_out` (`[{"node", "why"}]`) and `notes`.
pub fn caveats_json(traffic: &Traffic, left_out: &[LeftOut]) -> Value {
    json!({
        "nodes": traffic.node_totals().iter().map(|(node, per_second)| json!({
            "node": node, "per_second": per_second})).collect::<Vec<_>>(),
        "left_out": left_out.iter().map(|left| json!({
            "node": left.node, "why": left.why.to_string()})).collect::<Vec<_>>(),
        "notes": traffic.notes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dw_capacity::{AnswerRow, Implausible};

    fn traffic(nodes: &[(&str, f64)]) -> Traffic {
        let rows = nodes.iter().map(|(node, rate)| AnswerRow {
            geo: "DE".into(),
            kind: dw_capacity::AnswerKind::Plain,
            node: Some((*node).into()),
            fail_open: false,
            rate: *rate,
        });
        Traffic::from_rows(rows, 0.0).unwrap()
    }

    #[test]
    fn a_refusal_names_the_nodes_that_carry_the_load_and_those_left_out() {
        let plain = traffic(&[("a", 400.0), ("b", 600.0)]);
        assert_eq!(
            carriers_line(&plain, &[]).unwrap(),
            "the load is predicted from the answers of 2 node(s): b 600/s, a 400/s"
        );
        assert!(caveat_lines(&plain, &[]).is_empty());
        let left_out = [LeftOut {
            node: "evil\u{1b}".into(),
            why: Implausible::AboveCeiling {
                rate: 3.3e15,
                ceiling: 50_000.0,
            },
        }];
        let with = plain.with_notes(vec!["the 5m window is still filling".into()]);
        let line = carriers_line(&with, &left_out).unwrap();
        assert!(
            line.ends_with("; left out as implausible: evil\\u{1b}"),
            "{line}"
        );
        let lines = caveat_lines(&with, &left_out);
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].contains(
                "node \"evil\\u{1b}\": 3.30e15 answers/s, above the per-node ceiling of 50000"
            ),
            "{}",
            lines[0]
        );
        assert_eq!(lines[1], "  note: the 5m window is still filling");
        let json = caveats_json(&with, &left_out);
        assert_eq!(json["left_out"][0]["node"], "evil\u{1b}");
        assert_eq!(json["nodes"][0]["node"], "b");
        // Fleet totals (a traffic file): nothing to name.
        let totals = Traffic::parse(br#"{"geos":{"DE":1}}"#).unwrap();
        assert!(carriers_line(&totals, &[]).is_none());
    }

    #[test]
    fn at_most_named_carriers_are_named() {
        let many: Vec<(String, f64)> = (0..=NAMED_CARRIERS)
            .map(|index| (format!("n{index:02}"), 1.0 + index as f64))
            .collect();
        let refs: Vec<(&str, f64)> = many.iter().map(|(n, r)| (n.as_str(), *r)).collect();
        let line = carriers_line(&traffic(&refs), &[]).unwrap();
        assert!(line.contains("of 11 node(s)"), "{line}");
        assert!(line.ends_with("and 1 more"), "{line}");
        assert!(!line.contains("n00"), "the least busy is not named: {line}");
        let line = carriers_line(&traffic(&refs[1..]), &[]).unwrap();
        assert!(!line.contains("more"), "{line}");
    }
}

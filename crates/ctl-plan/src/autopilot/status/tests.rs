use std::collections::BTreeMap;

use super::*;
use crate::autopilot::law::{Hold, HoldReason, OriginMemory};

/// Builds the status of an evaluation with `decision` and `memory`, at `now_unix` (the
/// law's clock at 1,000 s, its zero 1,000 s before).
fn built(
    decision: &Decision,
    memory: &Memory,
    now_unix: u64,
    previous: Option<&AutopilotStatus>,
) -> AutopilotStatus {
    let (records, state) = (BTreeMap::new(), State::default());
    status(
        &Observed {
            leader: "ap-1",
            leading_since: "2026-01-01T00:00:00Z",
            clock_origin_unix: now_unix - 1_000,
            now: 1_000,
            min_interval: 30,
            memory,
            decision,
            records: &records,
            state: &state,
        },
        previous,
    )
}

fn held(origin: &str, reason: HoldReason) -> Hold {
    Hold {
        origin: origin.to_owned(),
        reason,
    }
}

const T0: u64 = 1_767_225_600; // 2026-01-01T00:00:00Z

#[test]
fn an_unchanged_evaluation_gives_an_equal_status_and_a_change_a_new_since() {
    let decision = Decision {
        holds: vec![held("a", HoldReason::MinInterval)],
        over_target: vec!["a".into()],
        ..Decision::default()
    };
    let memory = Memory::default();
    let first = built(&decision, &memory, T0, None);
    let a = &first.origins["a"];
    assert_eq!(a.over_target_since.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert_eq!(a.hold_reason.as_deref(), Some("min_interval"));
    assert_eq!(
        a.holding.as_ref().unwrap().since,
        "2026-01-01T00:00:00Z",
        "{first:?}"
    );
    // Ten seconds later, the same state: the same value (nothing to write).
    let again = built(&decision, &memory, T0 + 10, Some(&first));
    assert_eq!(again, first);
    // Another hold: its since is now; the streak's since is kept.
    let other = Decision {
        holds: vec![held("a", HoldReason::RateCap)],
        ..decision.clone()
    };
    let changed = built(&other, &memory, T0 + 20, Some(&again));
    let a = &changed.origins["a"];
    assert_eq!(a.holding.as_ref().unwrap().since, "2026-01-01T00:00:20Z");
    assert_eq!(a.over_target_since.as_deref(), Some("2026-01-01T00:00:00Z"));
    // Back under target, no hold: the origin is no longer listed.
    let quiet = built(&Decision::default(), &memory, T0 + 30, Some(&changed));
    assert!(quiet.origins.is_empty(), "{quiet:?}");
}

#[test]
fn an_unusable_source_is_the_status_blind_line() {
    let decision = Decision {
        holds: vec![held(
            "",
            HoldReason::SourceUnusable("Prometheus does not answer".into()),
        )],
        ..Decision::default()
    };
    let status = built(&decision, &Memory::default(), T0, None);
    let blind = status.blind.as_ref().unwrap();
    assert!(
        blind.why.contains("Prometheus does not answer"),
        "{blind:?}"
    );
    let view = AutopilotView::Leading {
        leader: "ap-1".into(),
        status: Some(status),
        malformed: None,
    };
    let line = header_line(&view);
    assert!(
        line.contains("ap-1 leads since 2026-01-01T00:00:00Z; BLIND since"),
        "{line}"
    );
}

#[test]
fn the_next_action_is_min_interval_after_the_last_and_only_while_ahead() {
    let mut memory = Memory::default();
    memory.origins.insert(
        "a".into(),
        OriginMemory {
            last_action: Some(990),
            ..OriginMemory::default()
        },
    );
    memory.origins.insert(
        "b".into(),
        OriginMemory {
            last_action: Some(970),
            ..OriginMemory::default()
        },
    );
    let status = built(&Decision::default(), &memory, T0, None);
    // a: 990 + 30 = 1,020, 20 s after now (the law's 1,000); b's 1,000 is not ahead.
    assert_eq!(
        status.origins["a"].next_action_at.as_deref(),
        Some("2026-01-01T00:00:20Z")
    );
    assert!(!status.origins.contains_key("b"), "{status:?}");
}

/// `n` origins held, with names of `name_chars` characters.
fn many(n: usize, name_chars: usize) -> Decision {
    Decision {
        holds: (0..n)
            .map(|i| {
                let name = format!("{i:05}{}", "o".repeat(name_chars - 5));
                held(&name, HoldReason::OtherSource("cli".into()))
            })
            .collect(),
        ..Decision::default()
    }
}

#[test]
fn at_most_status_origins_are_listed_and_the_rest_counted() {
    let at_edge = built(&many(STATUS_ORIGINS, 8), &Memory::default(), T0, None);
    assert_eq!(at_edge.origins.len(), STATUS_ORIGINS);
    assert_eq!(at_edge.origins_left_out, 0);
    let past = built(&many(STATUS_ORIGINS + 1, 8), &Memory::default(), T0, None);
    assert_eq!(past.origins.len(), STATUS_ORIGINS);
    assert_eq!(past.origins_left_out, 1);
    // The one left out is the last by name: the order is stable, not the map's whim.
    assert!(
        !past.origins.contains_key("00064ooo"),
        "{:?}",
        past.origins.keys()
    );
    let view = AutopilotView::Leading {
        leader: "ap-1".into(),
        status: Some(past),
        malformed: None,
    };
    assert!(
        header_line(&view).contains("1 origins not listed (at most 64, 16384 bytes)"),
        "{}",
        header_line(&view)
    );
}

#[test]
fn the_value_stays_within_status_bytes_with_the_longest_texts() {
    // The longest names and whys the bounds allow: 64 of them do not fit in the bytes.
    let mut decision = many(STATUS_ORIGINS, STATUS_TEXT_CHARS);
    for hold in &mut decision.holds {
        hold.reason = HoldReason::OtherSource("s".repeat(1_000));
    }
    decision.over_target = decision.holds.iter().map(|h| h.origin.clone()).collect();
    let status = built(&decision, &Memory::default(), T0, None);
    let bytes = status.to_text().len();
    assert!(bytes <= STATUS_BYTES, "{bytes}");
    assert!(
        status.origins.len() < STATUS_ORIGINS && !status.origins.is_empty(),
        "{}",
        status.origins.len()
    );
    assert_eq!(
        status.origins.len() + status.origins_left_out,
        STATUS_ORIGINS
    );
    // One more origin would not have fitted: the value is as full as the bound allows.
    let one_more = status.origins.len() + 1;
    let mut fuller = status.clone();
    let (name, entry) = status.origins.iter().next().unwrap();
    fuller
        .origins
        .insert(format!("{}x", &name[..name.len() - 1]), entry.clone());
    assert_eq!(fuller.origins.len(), one_more);
    assert!(fuller.to_text().len() > STATUS_BYTES);
    // Each why is cut to the text bound, and says so.
    let why = &status
        .origins
        .values()
        .next()
        .unwrap()
        .holding
        .as_ref()
        .unwrap()
        .why;
    assert_eq!(why.chars().count(), STATUS_TEXT_CHARS);
    assert!(why.ends_with('…'));
    // A name one character over the bound is left out, and counted.
    let long = built(
        &many(1, STATUS_TEXT_CHARS + 1),
        &Memory::default(),
        T0,
        None,
    );
    assert!(long.origins.is_empty());
    assert_eq!(long.origins_left_out, 1);
    let edge = built(&many(1, STATUS_TEXT_CHARS), &Memory::default(), T0, None);
    assert_eq!(edge.origins.len(), 1);
}

#[test]
fn what_etcd_holds_is_escaped_before_the_terminal() {
    let raw = AutopilotStatus {
        leader: "ap\u{1b}[31m".into(),
        leading_since: "t".into(),
        origins: BTreeMap::from([(
            "a".to_owned(),
            OriginStatus {
                holding: Some(Since {
                    why: "x\u{1b}]0;owned\u{7}".into(),
                    since: "t\n2".into(),
                }),
                ..OriginStatus::default()
            },
        )]),
        ..AutopilotStatus::default()
    }
    .to_text();
    let view = AutopilotView::from_values(Some("ap\u{1b}"), Some(&raw));
    let header = header_line(&view);
    let line = origin_line(&view, "a").unwrap();
    for text in [&header, &line] {
        assert!(!text.chars().any(crate::shown::is_unsafe_char), "{text:?}");
    }
    assert!(
        line.starts_with("autopilot: holding (x\\u{1b}]0;owned"),
        "{line}"
    );
    assert_eq!(origin_line(&view, "b"), None);
}

#[test]
fn no_leader_and_a_malformed_status_are_said() {
    assert_eq!(
        AutopilotView::from_values(None, Some("{}")),
        AutopilotView::NoLeader
    );
    assert!(header_line(&AutopilotView::NoLeader).contains("no instance leads"));
    let view = AutopilotView::from_values(Some("ap-1"), Some("not json"));
    assert!(
        header_line(&view).contains("ap-1 leads; its status does not parse"),
        "{}",
        header_line(&view)
    );
    let view = AutopilotView::from_values(Some("ap-1"), None);
    assert!(header_line(&view).contains("no status published yet"));
}

#[test]
fn every_view_serializes_for_output_json() {
    let status = AutopilotStatus {
        leader: "ap-1".into(),
        ..AutopilotStatus::default()
    };
    for (view, state) in [
        (AutopilotView::NoLeader, "no_leader"),
        (
            AutopilotView::Unreadable {
                why: "permission denied".into(),
            },
            "unreadable",
        ),
        (
            AutopilotView::from_values(Some("ap-1"), Some(&status.to_text())),
            "leading",
        ),
        (
            AutopilotView::from_values(Some("ap-1"), Some("{")),
            "leading",
        ),
    ] {
        let json = serde_json::to_value(&view).expect("serializes");
        assert_eq!(json["state"], state, "{json}");
    }
    let json = serde_json::to_value(AutopilotView::Unreadable {
        why: "permission denied".into(),
    })
    .unwrap();
    assert_eq!(json["why"], "permission denied");
    assert!(
        header_line(&AutopilotView::Unreadable {
            why: "permission denied".into()
        })
        .contains("could not be read: permission denied")
    );
}

//! Property tests of visitor buckets (dw_routing::buckets, docs/routing.md "Buckets"): the
//! apportionment is exact, and under every kind of change dwctl makes (weights set, an
//! origin drained, restored, shed by a percentage, added, removed, the list reordered) the
//! next assignment has exactly the apportioned counts and moves exactly the sum of the
//! origins' decreases, from falling origins to rising ones only. Case counts are bounded
//! (64 sequences a property) to keep the suite's cost small.

use std::collections::HashMap;

use dw_routing::buckets::{
    Assignment, BucketCount, MAX_BUCKETS, MAX_ENCODED_BYTES, apportion, default_assignment,
    reassign, reassign_by_name,
};
use proptest::prelude::*;

/// A region's listed origins and their weights, in list order.
#[derive(Debug, Clone)]
struct Origins {
    names: Vec<String>,
    weights: Vec<u32>,
}

impl Origins {
    fn has_weight(&self) -> bool {
        self.weights.iter().any(|&w| w > 0)
    }
}

/// One change as dwctl makes it (indices and names are taken modulo what exists).
#[derive(Debug, Clone)]
enum Change {
    SetWeights(Vec<u32>),
    Drain(usize),
    Restore(usize, u32),
    Shed(usize, u32),
    Add(usize, u32),
    Remove(usize),
    Reorder(Vec<usize>),
}

/// The most origins a generated region reaches (6 at the start, then added ones).
const MAX_ORIGINS: usize = 12;

fn weight() -> impl Strategy<Value = u32> {
    prop_oneof![0..=10u32, 0..=1_000_000u32]
}

fn buckets() -> impl Strategy<Value = u16> {
    prop_oneof![
        Just(2u16),
        Just(3u16),
        2..=16u16,
        2..=MAX_BUCKETS,
        Just(MAX_BUCKETS)
    ]
}

fn origins() -> impl Strategy<Value = Origins> {
    proptest::collection::vec(weight(), 1..=6)
        .prop_map(|weights| Origins {
            names: (0..weights.len()).map(|i| format!("o{i}")).collect(),
            weights,
        })
        .prop_filter("a positive weight", Origins::has_weight)
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        proptest::collection::vec(weight(), MAX_ORIGINS).prop_map(Change::SetWeights),
        any::<usize>().prop_map(Change::Drain),
        (any::<usize>(), 1..=1_000u32).prop_map(|(i, w)| Change::Restore(i, w)),
        (any::<usize>(), 1..=99u32).prop_map(|(i, p)| Change::Shed(i, p)),
        (any::<usize>(), weight()).prop_map(|(i, w)| Change::Add(i, w)),
        any::<usize>().prop_map(Change::Remove),
        proptest::collection::vec(any::<usize>(), MAX_ORIGINS).prop_map(Change::Reorder),
    ]
}

/// The origins after `change`, or None when it would leave no positive weight or no
/// origin (dwctl refuses those), or an origin added past [`MAX_ORIGINS`]. `added`
/// numbers new origins' names.
fn apply(origins: &Origins, change: &Change, added: &mut usize) -> Option<Origins> {
    let mut next = origins.clone();
    let len = next.names.len();
    match change {
        Change::SetWeights(weights) => next.weights.copy_from_slice(&weights[..len]),
        Change::Drain(i) => next.weights[i % len] = 0,
        Change::Restore(i, w) => next.weights[i % len] = *w,
        Change::Shed(i, percent) => {
            let w = &mut next.weights[i % len];
            *w = (u64::from(*w) * u64::from(100 - percent) / 100) as u32;
        }
        Change::Add(_, _) if len == MAX_ORIGINS => return None,
        Change::Add(i, w) => {
            *added += 1;
            next.names.insert(i % (len + 1), format!("new{added}"));
            next.weights.insert(i % (len + 1), *w);
        }
        Change::Remove(i) => {
            next.names.remove(i % len);
            next.weights.remove(i % len);
        }
        Change::Reorder(keys) => {
            let mut order: Vec<usize> = (0..len).collect();
            order.sort_by_key(|&i| (keys[i], i));
            next.names = order.iter().map(|&i| origins.names[i].clone()).collect();
            next.weights = order.iter().map(|&i| origins.weights[i]).collect();
        }
    }
    (next.has_weight() && !next.names.is_empty()).then_some(next)
}

fn counts_by_name(assignment: &Assignment, names: &[String]) -> HashMap<String, u32> {
    let mut counts: HashMap<String, u32> = names.iter().map(|n| (n.clone(), 0)).collect();
    for origin in assignment.owners() {
        *counts
            .get_mut(&names[usize::from(origin)])
            .expect("a listed origin") += 1;
    }
    counts
}

/// The checks every step must pass: exact counts, minimal and one-way movement, and a
/// lossless text form.
fn check_step(
    before: &Assignment,
    old: &Origins,
    after: &Assignment,
    new: &Origins,
    n: BucketCount,
) -> Result<(), TestCaseError> {
    let want = apportion(&new.weights, n).expect("a positive weight");
    prop_assert_eq!(after.counts(new.names.len()), want.clone());
    prop_assert_eq!(after.buckets(), n.get());
    let old_counts = counts_by_name(before, &old.names);
    let new_counts = counts_by_name(after, &new.names);
    let count = |counts: &HashMap<String, u32>, name: &str| counts.get(name).copied().unwrap_or(0);
    let decreases: u32 = old_counts
        .iter()
        .map(|(name, &c)| c.saturating_sub(count(&new_counts, name)))
        .sum();
    let mut moved = 0u32;
    for (from, to) in before.owners().into_iter().zip(after.owners()) {
        let (from, to) = (&old.names[usize::from(from)], &new.names[usize::from(to)]);
        if from != to {
            moved += 1;
            prop_assert!(
                count(&new_counts, from) < count(&old_counts, from),
                "{from} did not fall"
            );
            prop_assert!(
                count(&new_counts, to) > count(&old_counts, to),
                "{to} did not rise"
            );
        }
    }
    prop_assert_eq!(
        moved,
        decreases,
        "moved buckets against the sum of the decreases"
    );
    let text = after.encode();
    prop_assert!(text.len() <= MAX_ENCODED_BYTES);
    prop_assert_eq!(
        &Assignment::decode(&text, n, new.names.len()).expect("decodes"),
        after
    );
    // Nothing changes again without a change.
    prop_assert_eq!(&reassign(after, &new.weights).expect("same weights"), after);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn apportion_is_exact_and_within_one_of_each_quota(weights in proptest::collection::vec(weight(), 1..=12), n in buckets()) {
        prop_assume!(weights.iter().any(|&w| w > 0));
        let n = BucketCount::new(i64::from(n)).expect("in range");
        let counts = apportion(&weights, n).expect("a positive weight");
        prop_assert_eq!(counts.iter().map(|&c| u32::from(c)).sum::<u32>(), u32::from(n.get()));
        let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        for (&w, &c) in weights.iter().zip(&counts) {
            let scaled = u64::from(w) * u64::from(n.get());
            let floor = scaled / sum;
            let ceil = floor + u64::from(scaled % sum != 0);
            prop_assert!(u64::from(c) == floor || u64::from(c) == ceil, "{} not within [{}, {}]", c, floor, ceil);
        }
        // The default assignment is those counts as contiguous blocks, one run each.
        let default = default_assignment(&weights, n).expect("a positive weight");
        prop_assert_eq!(default.counts(weights.len()), counts.clone());
        prop_assert_eq!(default.run_count(), counts.iter().filter(|&&c| c > 0).count());
    }

    #[test]
    fn decode_accepts_only_the_one_spelling_and_never_panics(
        text in prop_oneof!["[0-9:,]{0,24}", "(0|1|2|01|10|00|9)(:(0|1|2|3|02|10)(,|,,)?){0,6}", ".{0,24}"],
        n in 2..=6i64,
        origins in 0..=3usize,
    ) {
        let n = BucketCount::new(n).expect("in range");
        if let Ok(assignment) = Assignment::decode(&text, n, origins) {
            // Whatever is accepted is canonical: it encodes back to the same bytes.
            prop_assert_eq!(assignment.encode(), text);
            prop_assert_eq!(assignment.buckets(), n.get());
            prop_assert!(assignment.owners().iter().all(|&o| usize::from(o) < origins));
        }
    }

    #[test]
    fn every_change_moves_exactly_the_sum_of_the_decreases(
        start in origins(),
        n in buckets(),
        changes in proptest::collection::vec(change(), 1..=8),
    ) {
        let n = BucketCount::new(i64::from(n)).expect("in range");
        let mut origins = start;
        let mut assignment = default_assignment(&origins.weights, n).expect("a positive weight");
        let mut added = 0;
        for change in &changes {
            let Some(next) = apply(&origins, change, &mut added) else { continue };
            let after = if next.names == origins.names {
                reassign(&assignment, &next.weights).expect("valid")
            } else {
                reassign_by_name(&assignment, &origins.names, &next.names, &next.weights).expect("valid")
            };
            // By name on an unchanged list is the same function.
            prop_assert_eq!(
                &reassign_by_name(&assignment, &origins.names, &next.names, &next.weights).expect("valid"),
                &after
            );
            check_step(&assignment, &origins, &after, &next, n)?;
            origins = next;
            assignment = after;
        }
    }

    #[test]
    fn a_restore_gives_back_what_its_drain_took(start in origins(), n in buckets(), which in any::<usize>()) {
        let n = BucketCount::new(i64::from(n)).expect("in range");
        let drained_origin = which % start.names.len();
        let mut drained = start.clone();
        drained.weights[drained_origin] = 0;
        prop_assume!(drained.has_weight());
        let before = default_assignment(&start.weights, n).expect("valid");
        let after_drain = reassign(&before, &drained.weights).expect("valid");
        check_step(&before, &start, &after_drain, &drained, n)?;
        // Another origin loses at most one bucket (its quota rises, so its count stays at
        // least the floor of the old quota: largest remainder's population paradox, see
        // `a_drain_can_shrink_another_origin`); when none does, the drain moves only the
        // drained origin's buckets.
        let (old, mid) = (before.counts(start.names.len()), after_drain.counts(start.names.len()));
        for i in (0..old.len()).filter(|&i| i != drained_origin) {
            prop_assert!(mid[i] + 1 >= old[i], "origin {} fell from {} to {}", i, old[i], mid[i]);
        }
        let others_only_grew = (0..old.len()).all(|i| i == drained_origin || mid[i] >= old[i]);
        if others_only_grew {
            for (b, (from, to)) in before.owners().into_iter().zip(after_drain.owners()).enumerate() {
                prop_assert!(from == to || usize::from(from) == drained_origin, "bucket {} moved from {}", b, from);
            }
        }
        let restored = reassign(&after_drain, &start.weights).expect("valid");
        check_step(&after_drain, &drained, &restored, &start, n)?;
        // When the drain shrank no other origin, every bucket comes back to its origin.
        if others_only_grew {
            prop_assert_eq!(restored, before);
        }
    }
}

/// Largest remainder is not population-monotone (Balinski and Young: no method that stays
/// within one of every quota is): weights 3, 1, 1 and N = 2 give quotas 1.2, 0.4, 0.4 and
/// counts 1, 1, 0; draining the third origin, which has no bucket, gives quotas 1.5, 0.5
/// and counts 2, 0. So a drain can move a bucket of an origin that was not drained (at most
/// one per origin). Exact counts win: the move is still the fewest for those counts.
#[test]
fn a_drain_can_shrink_another_origin() {
    let n = BucketCount::new(2).expect("in range");
    let before = default_assignment(&[3, 1, 1], n).expect("valid");
    assert_eq!(before.encode(), "0:1,1:1");
    let after = reassign(&before, &[3, 1, 0]).expect("valid");
    assert_eq!(after.encode(), "0:2");
}

/// N = 2 and three origins, each drained in turn and restored: one bucket moves at each
/// step, as few as possible, and the same weights come back with a different assignment.
/// No pure function of (weights, N) can do that, which is why the assignment is data.
#[test]
fn two_buckets_and_three_origins_in_turn() {
    let n = BucketCount::new(2).expect("in range");
    let steps: [[u32; 3]; 4] = [[1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]];
    let mut assignment = default_assignment(&steps[0], n).expect("valid");
    assert_eq!(assignment.encode(), "0:1,1:1");
    let mut seen = vec![assignment.encode()];
    for pair in steps.windows(2) {
        let next = reassign(&assignment, &pair[1]).expect("valid");
        let moved = assignment
            .owners()
            .iter()
            .zip(next.owners())
            .filter(|(a, b)| **a != *b)
            .count();
        assert_eq!(moved, 1, "{pair:?}");
        assert_eq!(next.counts(3), apportion(&pair[1], n).expect("valid"));
        assignment = next;
        seen.push(assignment.encode());
    }
    assert_eq!(seen, ["0:1,1:1", "2:1,1:1", "2:1,0:1", "1:1,0:1"]);
    // The first and last steps have the same weights and different assignments.
    assert_ne!(seen[0], seen[3]);
}

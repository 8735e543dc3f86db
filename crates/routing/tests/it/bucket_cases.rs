//! dw_routing::buckets on the shared cases of `bucket-cases.json`, which php/Buckets.php is
//! held to as well, by tests/differential/twin-selftest.php: counts, assignments in their
//! text form and error messages, byte for byte, so the two cannot drift apart unnoticed.

use dw_routing::buckets::{
    Assignment, BucketCount, apportion, default_assignment, reassign, reassign_by_name,
};
use serde_json::Value;

const CASES: &str = include_str!("../bucket-cases.json");

fn cases() -> Value {
    serde_json::from_str(CASES).expect("bucket-cases.json is JSON")
}

fn list<'a>(document: &'a Value, name: &str) -> &'a Vec<Value> {
    document[name].as_array().expect("a list of cases")
}

fn weights(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .expect("weights")
        .iter()
        .map(|w| u32::try_from(w.as_u64().expect("a weight")).expect("a u32"))
        .collect()
}

fn names(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("origins")
        .iter()
        .map(|o| o.as_str().expect("a name").to_owned())
        .collect()
}

fn count(value: &Value) -> BucketCount {
    BucketCount::new(value.as_i64().expect("n")).expect("a valid N")
}

#[test]
fn bucket_counts_match_the_shared_cases() {
    let document = cases();
    for case in list(&document, "counts") {
        let got = BucketCount::new(case["n"].as_i64().expect("n"))
            .map(|n| i64::from(n.get()))
            .map_err(|e| e.to_string());
        let want = match case["error"].as_str() {
            Some(error) => Err(error.to_owned()),
            None => Ok(case["n"].as_i64().expect("n")),
        };
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn apportion_matches_the_shared_cases() {
    let document = cases();
    let cases = list(&document, "apportion");
    assert!(cases.len() >= 10, "{} cases", cases.len());
    for case in cases {
        let got = BucketCount::new(case["n"].as_i64().expect("n"))
            .and_then(|n| apportion(&weights(&case["weights"]), n))
            .map_err(|e| e.to_string());
        let want = match case["error"].as_str() {
            Some(error) => Err(error.to_owned()),
            None => Ok(case["counts"]
                .as_array()
                .expect("counts")
                .iter()
                .map(|c| u16::try_from(c.as_u64().expect("a count")).expect("a u16"))
                .collect::<Vec<u16>>()),
        };
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn decode_matches_the_shared_cases() {
    let document = cases();
    let cases = list(&document, "decode");
    assert!(cases.len() >= 30, "{} cases", cases.len());
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let origins = usize::try_from(case["origins"].as_u64().expect("origins")).expect("usize");
        let got = Assignment::decode(text, count(&case["n"]), origins)
            .map(|a| a.encode())
            .map_err(|e| e.to_string());
        let want = match case["error"].as_str() {
            Some(error) => Err(error.to_owned()),
            None => Ok(case["want"].as_str().expect("want").to_owned()),
        };
        assert_eq!(got, want, "{}", dw_routing::quoted(text));
    }
}

#[test]
fn sequences_of_changes_match_the_shared_cases() {
    let document = cases();
    let sequences = list(&document, "sequences");
    assert!(sequences.len() >= 40, "{} sequences", sequences.len());
    let mut steps_checked = 0;
    for sequence in sequences {
        let name = sequence["name"].as_str().expect("name");
        let n = count(&sequence["n"]);
        let mut origins = names(&sequence["origins"]);
        let mut assignment =
            default_assignment(&weights(&sequence["weights"]), n).expect("a valid start");
        assert_eq!(assignment.encode(), sequence["default"], "{name}: default");
        for (index, step) in list(sequence, "steps").iter().enumerate() {
            let next_origins = names(&step["origins"]);
            let next_weights = weights(&step["weights"]);
            let got = if next_origins == origins {
                reassign(&assignment, &next_weights)
            } else {
                reassign_by_name(&assignment, &origins, &next_origins, &next_weights)
            };
            steps_checked += 1;
            if let Some(error) = step["error"].as_str() {
                assert_eq!(
                    got.map_err(|e| e.to_string()).err().as_deref(),
                    Some(error),
                    "{name}: step {index}"
                );
                continue;
            }
            let next = got.unwrap_or_else(|e| panic!("{name}: step {index}: {e}"));
            assert_eq!(next.encode(), step["want"], "{name}: step {index}");
            let moved = assignment
                .owners()
                .iter()
                .zip(next.owners())
                .filter(|&(&from, to)| origins[usize::from(from)] != next_origins[usize::from(to)])
                .count();
            assert_eq!(
                Some(moved as u64),
                step["moved"].as_u64(),
                "{name}: step {index}"
            );
            origins = next_origins;
            assignment = next;
        }
    }
    assert!(steps_checked >= 100, "{steps_checked} steps");
}

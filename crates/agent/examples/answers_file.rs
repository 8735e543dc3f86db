//! Writes the most hostile answer counter file the layout allows, for
//! tests/slow-clients/run (issue 40, finding 5; a test tool, not part of the agent): every
//! one of its 4,096 label sets registered, each with four 128-byte values made of `"`,
//! a byte the agent serves as three, and one answer counted each. Its render is about
//! 6.6 MB of `/metrics`.
//!
//! ```text
//! answers_file PATH
//! ```

use std::process::ExitCode;

use dw_traffic::layout::{MAX_LABEL_BYTES, MAX_LABEL_SETS};
use dw_traffic::{Counters, LabelSet, ProcessLocks, Step, count, words_to_bytes, zeroed_words};

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: answers_file PATH");
        return ExitCode::from(2);
    };
    let words = zeroed_words();
    let Ok(counters) = Counters::open(&words, ProcessLocks::default(), 1) else {
        eprintln!("answers_file: cannot lay out the counters");
        return ExitCode::FAILURE;
    };
    let Some(slot) = counters.claim_slot(1) else {
        eprintln!("answers_file: no slot");
        return ExitCode::FAILURE;
    };
    let slot = counters.slot_counters(slot);
    for set in 0..MAX_LABEL_SETS {
        let value = |field: u8| {
            let mut value = format!("{set:04}").into_bytes();
            value.push(field);
            value.resize(MAX_LABEL_BYTES, b'"');
            value
        };
        let labels = LabelSet::new(
            &value(b'g'),
            Step::Country,
            &value(b'k'),
            &value(b'o'),
            &value(b's'),
            false,
        );
        count(slot, counters.label_id(&labels));
    }
    if let Err(e) = std::fs::write(&path, words_to_bytes(&words)) {
        eprintln!("answers_file: {}: {e}", path.to_string_lossy());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

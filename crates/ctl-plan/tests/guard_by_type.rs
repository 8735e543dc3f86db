//! The capacity guard by type (issue 39): a writing command whose request states neither
//! its prediction inputs nor `Exempt(reason)` does not compile, with the compiler's
//! message pinned in `guard_by_type/*.stderr`; its twin that states them compiles and runs.
//! The dummies go through `dw_ctl_plan::guard::stated`, the gate dwctl's write path
//! (`ops::run::Predictor::new`, behind `run_plan`, `run_checked` and every writing op)
//! takes its guard through.
//!
//! Run by the layering suite (scripts/run-tests) and by `cargo test -p dw-ctl-plan`.
//! `TRYBUILD=overwrite` rewrites the pinned messages after a deliberate change.

#[test]
fn a_write_that_states_no_guard_does_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/guard_by_type/states_nothing.rs");
    cases.compile_fail("tests/guard_by_type/says_nothing.rs");
    cases.pass("tests/guard_by_type/states_its_guard.rs");
}

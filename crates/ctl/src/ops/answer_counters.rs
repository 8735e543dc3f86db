//! The answer counters as Prometheus holds them: the one place in dwctl that names them
//! (every node's dw-agent serves `dw_router_answers_total` and
//! `dw_router_answers_overflow_total`, docs/traffic.md), writes the PromQL over them
//! (`dwctl traffic`, the load prediction's traffic source), and says which of the rates
//! Prometheus answers can be used ([`usable_rate`]).

/// The counter of answers every node's dw-agent serves.
pub const ANSWERS: &str = "dw_router_answers_total";
/// Answers whose label set did not fit the node's bounds (counted, not labelled).
pub const OVERFLOW: &str = "dw_router_answers_overflow_total";

/// `rate(dw_router_answers_total{SELECTOR}[WINDOWs])`: answers per second of each series
/// over the window (`selector` is a whole PromQL selector, `{geo="DE"}`, or empty).
pub fn answers_rate(selector: &str, window_seconds: u64) -> String {
    format!("rate({ANSWERS}{selector}[{window_seconds}s])")
}

/// All answers past the nodes' label bounds, per second over the window.
pub fn overflow_rate(window_seconds: u64) -> String {
    format!("sum(rate({OVERFLOW}[{window_seconds}s]))")
}

/// The load prediction's traffic: answers per second by node, geo, kind (plain, sticky, bucket) and
/// step (each node's rates are checked for plausibility before the prediction believes
/// them; `fail_open` answers are kept apart by the prediction).
pub fn prediction_rows(window_seconds: u64) -> String {
    format!(
        "sum by (node, geo, kind, step) ({})",
        answers_rate("", window_seconds)
    )
}

/// Each node's busiest minute within the window, in answers per second (sampled every
/// 30 s): a counter that jumped shows there even when the window's average hides it.
pub fn node_peak_minutes(window_seconds: u64) -> String {
    format!(
        "max by (node) (max_over_time((sum by (node) ({}))[{window_seconds}s:30s]))",
        answers_rate("", 60)
    )
}

/// The nodes that had answer counters already when the window began (the others'
/// rates read low until one whole window has passed).
pub fn counting_at_window_start(window_seconds: u64) -> String {
    format!("count by (node) ({ANSWERS} offset {window_seconds}s)")
}

/// A rate as Prometheus answered it, when it can be used: finite and not below 0. `None`
/// for NaN (Prometheus' 0/0), an infinity or a negative rate: such a rate is *unusable*,
/// never read as 0 (issue 40: a counter that cannot be believed must not look like a node
/// that answers nothing). `-0` is 0. The one rule for every rate dwctl reads from
/// Prometheus.
pub fn usable_rate(value: f64) -> Option<f64> {
    (value.is_finite() && value >= 0.0).then_some(value.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_usable_when_finite_and_not_below_zero() {
        assert_eq!(usable_rate(0.0), Some(0.0));
        let zero = usable_rate(-0.0).unwrap();
        assert!(zero == 0.0 && zero.is_sign_positive(), "{zero}");
        assert_eq!(usable_rate(12.5), Some(12.5));
        assert_eq!(usable_rate(f64::MAX), Some(f64::MAX));
        assert_eq!(usable_rate(f64::MIN_POSITIVE), Some(f64::MIN_POSITIVE));
        for unusable in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -f64::MIN_POSITIVE,
            -1.0,
        ] {
            assert_eq!(usable_rate(unusable), None, "{unusable}");
        }
    }

    #[test]
    fn the_queries_name_the_counters_and_the_window() {
        assert_eq!(
            answers_rate("{geo=\"DE\"}", 300),
            "rate(dw_router_answers_total{geo=\"DE\"}[300s])"
        );
        assert_eq!(
            overflow_rate(60),
            "sum(rate(dw_router_answers_overflow_total[60s]))"
        );
        assert_eq!(
            prediction_rows(120),
            "sum by (node, geo, kind, step) (rate(dw_router_answers_total[120s]))"
        );
        assert_eq!(
            node_peak_minutes(300),
            "max by (node) (max_over_time((sum by (node) \
             (rate(dw_router_answers_total[60s])))[300s:30s]))"
        );
        assert_eq!(
            counting_at_window_start(300),
            "count by (node) (dw_router_answers_total offset 300s)"
        );
    }
}

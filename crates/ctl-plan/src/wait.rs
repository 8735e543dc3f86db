//! `--wait` and `--quorum`: how long a write waits for the fleet, and for how much of it.

use std::time::Duration;

/// `--wait` and `--quorum`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wait {
    /// How long to wait before giving up with exit code 5.
    pub timeout: Duration,
    /// Percent of the live nodes that must reach the revision (1..=100).
    pub quorum: u8,
}

/// How many of `live` nodes make a quorum of `percent`.
pub fn needed(live: usize, percent: u8) -> usize {
    (live * usize::from(percent)).div_ceil(100)
}

/// Parses `10s`, `500ms`, `2m` or a number of seconds.
pub fn parse_wait(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 0.001)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else if let Some(m) = text.strip_suffix('m') {
        (m, 60.0)
    } else {
        (text, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(value) if value.is_finite() && value > 0.0 && value * scale <= 86_400.0 => {
            Ok(Duration::from_secs_f64(value * scale))
        }
        _ => Err(format!("{text:?} is not a time-out like 10s, 500ms or 2m")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_rounds_up() {
        assert_eq!(needed(320, 100), 320);
        assert_eq!(needed(320, 95), 304);
        assert_eq!(needed(3, 50), 2);
        assert_eq!(needed(0, 100), 0);
    }

    #[test]
    fn timeouts_parse() {
        for (text, millis) in [("2s", 2_000), ("500ms", 500), ("1m", 60_000), ("3", 3_000)] {
            assert_eq!(
                parse_wait(text),
                Ok(Duration::from_millis(millis)),
                "{text}"
            );
        }
        for text in ["0", "soon"] {
            assert!(parse_wait(text).is_err(), "{text}");
        }
    }
}

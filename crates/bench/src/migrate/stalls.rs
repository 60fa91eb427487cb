//! Guest write stalls of a set of batches: how many writes waited on a
//! migration and how long (p50 / p99 / max).
//!
//! These are host-side measurements by the VMM's userfaultfd write guard:
//! from the moment its handler thread reads a write-protect fault to the
//! moment the migrator closes the window after waking the writers; one
//! sample per 4 KiB page written while protected. The guest waits a little
//! longer than that (fault delivery before, vCPU rescheduling after).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::stats::percentile;

/// Summary of observed write stalls, in microseconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StallSummary {
    /// Writes (4 KiB pages) that waited.
    pub count: usize,
    /// Median stall; `None` when no write waited.
    pub p50_us: Option<f64>,
    /// 99th percentile (nearest rank).
    pub p99_us: Option<f64>,
    /// Longest stall.
    pub max_us: Option<f64>,
}

impl StallSummary {
    /// Summarizes `stalls`.
    pub fn of(stalls: &[Duration]) -> Self {
        let micros: Vec<f64> = stalls.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        Self {
            count: micros.len(),
            p50_us: percentile(&micros, 0.5),
            p99_us: percentile(&micros, 0.99),
            max_us: percentile(&micros, 1.0),
        }
    }
}

/// `850 µs`, `1.25 ms`, `2.10 s`; `—` for none.
pub fn format_micros(micros: Option<f64>) -> String {
    match micros {
        None => "—".to_owned(),
        Some(us) if us < 1e3 => format!("{us:.0} µs"),
        Some(us) if us < 1e6 => format!("{:.2} ms", us / 1e3),
        Some(us) => format!("{:.2} s", us / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_stalls_in_microseconds() {
        let stalls: Vec<Duration> = (1..=200).map(Duration::from_micros).collect();
        let s = StallSummary::of(&stalls);
        assert_eq!(s.count, 200);
        assert_eq!(s.p50_us, Some(100.0));
        assert_eq!(s.p99_us, Some(198.0));
        assert_eq!(s.max_us, Some(200.0));
    }

    #[test]
    fn no_stalls_no_percentiles() {
        assert_eq!(StallSummary::of(&[]), StallSummary::default());
        assert_eq!(StallSummary::of(&[]).count, 0);
    }

    #[test]
    fn microseconds_are_printed_in_a_readable_unit() {
        assert_eq!(format_micros(None), "—");
        assert_eq!(format_micros(Some(850.4)), "850 µs");
        assert_eq!(format_micros(Some(1250.0)), "1.25 ms");
        assert_eq!(format_micros(Some(312_000.0)), "312.00 ms");
        assert_eq!(format_micros(Some(2_100_000.0)), "2.10 s");
    }
}

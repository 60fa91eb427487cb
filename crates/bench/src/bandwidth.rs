//! `Bandwidth`: the summary of one measurement repeated several times
//! (bytes moved per second, GB = 10^9 bytes, GiB = 2^30 bytes).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::stats::{median, relative_spread};

/// Bytes in a decimal gigabyte.
pub const GB: f64 = 1e9;
/// Bytes in a binary gibibyte.
pub const GIB: f64 = (1u64 << 30) as f64;

/// Shortest duration a sample is counted as, so that a clock too coarse
/// for a tiny copy gives a large finite bandwidth rather than infinity
/// (which JSON cannot hold).
const MIN_SAMPLE: Duration = Duration::from_nanos(1);

/// Repeated bandwidth samples of one measurement and their summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// Median of the samples, GB/s.
    pub median_gbps: f64,
    /// Median of the samples, GiB/s.
    pub median_gibps: f64,
    /// Slowest sample, GB/s.
    pub min_gbps: f64,
    /// Fastest sample, GB/s.
    pub max_gbps: f64,
    /// `(max - min) / median`.
    pub spread: f64,
    /// Every sample, GB/s, in the order measured.
    pub samples_gbps: Vec<f64>,
}

impl Bandwidth {
    /// Summarizes runs that each moved `bytes` bytes in the given times;
    /// `None` when there are no runs.
    pub fn from_runs(bytes: u64, times: &[Duration]) -> Option<Self> {
        let samples: Vec<f64> = times
            .iter()
            .map(|t| bytes as f64 / t.max(&MIN_SAMPLE).as_secs_f64() / GB)
            .collect();
        let median_gbps = median(&samples)?;
        Some(Self {
            median_gbps,
            median_gibps: median_gbps * GB / GIB,
            min_gbps: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max_gbps: samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            spread: relative_spread(&samples).unwrap_or(0.0),
            samples_gbps: samples,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizes_runs_in_decimal_and_binary_units() {
        // 1 GB in 0.5 s, 1 s, 2 s: 2, 1, 0.5 GB/s.
        let runs = [
            Duration::from_millis(500),
            Duration::from_secs(1),
            Duration::from_secs(2),
        ];
        let bw = Bandwidth::from_runs(1_000_000_000, &runs).unwrap();
        assert_eq!(bw.samples_gbps, vec![2.0, 1.0, 0.5]);
        assert_eq!(bw.median_gbps, 1.0);
        assert!((bw.median_gibps - 1e9 / 1073741824.0).abs() < 1e-12);
        assert_eq!(bw.min_gbps, 0.5);
        assert_eq!(bw.max_gbps, 2.0);
        assert_eq!(bw.spread, 1.5);
    }

    #[test]
    fn no_runs_no_bandwidth() {
        assert_eq!(Bandwidth::from_runs(100, &[]), None);
    }

    #[test]
    fn zero_time_gives_a_finite_bandwidth() {
        let bw = Bandwidth::from_runs(4096, &[Duration::ZERO]).unwrap();
        assert!(bw.median_gbps.is_finite() && bw.median_gbps > 0.0);
    }
}

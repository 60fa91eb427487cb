//! What a tracker's `collect()` calls cost the host: `CollectCost`, summed
//! over every call of every run of one tracker and interval.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::guest::Collects;
use super::settings::TrackSettings;
use crate::stats::median;

/// What a tracker's `collect()` calls cost the host, over every call of
/// every repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectCost {
    /// Calls timed.
    pub calls: usize,
    /// Median thread CPU time of one call (one interval), µs.
    pub cpu_us_per_interval: f64,
    /// Mean thread CPU time of one call, µs (the first call of a run may
    /// harvest everything written since boot).
    pub cpu_us_mean: f64,
    /// Longest thread CPU time of one call, µs.
    pub cpu_us_max: f64,
    /// Median CPU time per interval and GiB of guest RAM, µs.
    pub cpu_us_per_interval_per_gib: f64,
    /// Median wall time of one call, µs.
    pub wall_us_per_interval: f64,
    /// Mean CPU time of a call over the interval: the share of one host
    /// core the tracker keeps busy.
    pub core_share: f64,
    /// Mean pages reported written per interval.
    pub dirty_pages_per_interval: f64,
}

fn micros(d: &Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl CollectCost {
    /// Summarizes the `collect()` calls of several runs, made every
    /// `interval_ms`; `None` when no call was made.
    pub fn of<'a>(
        runs: impl IntoIterator<Item = &'a Collects>,
        interval_ms: u64,
        settings: &TrackSettings,
    ) -> Option<Self> {
        let collects: Vec<&Collects> = runs.into_iter().collect();
        let cpu: Vec<f64> = collects
            .iter()
            .flat_map(|c| c.cpu.iter().map(micros))
            .collect();
        let wall: Vec<f64> = collects
            .iter()
            .flat_map(|c| c.wall.iter().map(micros))
            .collect();
        let calls = cpu.len();
        let per_interval = median(&cpu)?;
        let mean = cpu.iter().sum::<f64>() / calls as f64;
        let dirty: u64 = collects.iter().map(|c| c.dirty_pages).sum();
        let interval_us = interval_ms as f64 * 1e3;
        Some(Self {
            calls,
            cpu_us_per_interval: per_interval,
            cpu_us_mean: mean,
            cpu_us_max: cpu.iter().copied().fold(0.0, f64::max),
            cpu_us_per_interval_per_gib: per_interval / settings.guest_gib(),
            wall_us_per_interval: median(&wall)?,
            core_share: mean / interval_us,
            dirty_pages_per_interval: dirty as f64 / calls as f64,
        })
    }
}

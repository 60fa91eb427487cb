//! Heat-model cost in-process: one update from a full-coverage sample
//! (dirty log), one from a per-frame sampled one (fault sampling), and
//! picking the hottest quarter, for 1 GiB, 64 GiB and 1 TiB of 2 MiB
//! frames. Synthetic samples from `tiering::synthetic`, as in the criterion
//! bench (tiering/benches/heat.rs): a hot tenth of frames, the rest with a
//! few stray pages.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use oracle::ranking;
use tiering::{AccessSample, HeatError, HeatModel, HeatSettings, synthetic};

use crate::stats::median;

/// 4 KiB pages per 2 MiB frame.
const PAGES: u32 = 512;
/// Pages a sampler looks at per frame and interval.
const SAMPLED_PAGES: u16 = 32;
/// Distinct synthetic samples cycled through.
const SAMPLES: u64 = 4;
/// Shortest timed stretch: fast operations are repeated until it passes.
const MIN_STRETCH: Duration = Duration::from_millis(5);
/// Pretend interval of the synthetic samples.
const INTERVAL: Duration = Duration::from_secs(1);

/// Median time per call of each heat-model operation at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeatSizeResult {
    /// Frames in the model.
    pub frames: usize,
    /// Guest RAM those frames hold, bytes.
    pub guest_bytes: u64,
    /// Timed repetitions per operation.
    pub repetitions: usize,
    /// `update()` with a full-coverage sample, µs.
    pub update_full_us: f64,
    /// `update()` with a per-frame sampled sample, µs.
    pub update_sampled_us: f64,
    /// `hottest(frames / 4)`, µs.
    pub hottest_quarter_us: f64,
}

impl HeatSizeResult {
    /// One interval's work for the engine: an update and a ranking, µs
    /// (the slower update).
    pub fn interval_us(&self) -> f64 {
        self.update_full_us.max(self.update_sampled_us) + self.hottest_quarter_us
    }
}

/// Median over `repetitions` of the time per call of `op`, µs; each
/// repetition calls `op` until [`MIN_STRETCH`] has passed.
fn time_per_call(
    repetitions: usize,
    mut op: impl FnMut() -> Result<(), HeatError>,
) -> Result<f64, HeatError> {
    op()?;
    let mut per_call = Vec::with_capacity(repetitions);
    for _ in 0..repetitions.max(1) {
        let start = Instant::now();
        let mut calls = 0u32;
        while calls == 0 || start.elapsed() < MIN_STRETCH {
            op()?;
            calls += 1;
        }
        per_call.push(start.elapsed().as_secs_f64() * 1e6 / f64::from(calls));
    }
    Ok(median(&per_call).unwrap_or(f64::NAN))
}

/// Measures the heat model at `frames` frames.
pub fn measure(frames: usize, repetitions: usize) -> Result<HeatSizeResult, HeatError> {
    let full = (1..=SAMPLES)
        .map(|seed| synthetic::full_coverage(frames, PAGES, INTERVAL, seed))
        .collect::<Result<Vec<_>, _>>()?;
    let partial: Vec<AccessSample> = full
        .iter()
        .map(|s| synthetic::sampled(s, SAMPLED_PAGES))
        .collect();
    let mut model = HeatModel::new(frames, PAGES, HeatSettings::default())?;
    for s in &full {
        model.update(s)?;
    }
    let mut next = 0;
    let update_full_us = time_per_call(repetitions, || {
        next = (next + 1) % full.len();
        model.update(black_box(&full[next]))
    })?;
    let update_sampled_us = time_per_call(repetitions, || {
        next = (next + 1) % partial.len();
        model.update(black_box(&partial[next]))
    })?;
    let hottest_quarter_us = time_per_call(repetitions, || {
        black_box(ranking::hottest(model.heats(), frames / 4));
        Ok(())
    })?;
    Ok(HeatSizeResult {
        frames,
        guest_bytes: frames as u64 * u64::from(PAGES) * 4096,
        repetitions,
        update_full_us,
        update_sampled_us,
        hottest_quarter_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_small_model() {
        let r = measure(512, 1).unwrap();
        assert_eq!(r.guest_bytes, 1 << 30);
        for t in [r.update_full_us, r.update_sampled_us, r.hottest_quarter_us] {
            assert!(t.is_finite() && t > 0.0, "{r:?}");
        }
        assert!(r.interval_us() >= r.hottest_quarter_us);
    }
}

//! One scenario's results (a protocol under a guest load) and one batch
//! size's within it: serde types for the JSON file, built from the
//! measured totals.

use serde::{Deserialize, Serialize};

use super::measure::SizeTotals;
use super::scenario::{GuestLoad, Protocol, Scenario};
use super::stalls::StallSummary;
use super::verify::Verification;
use crate::bandwidth::{Bandwidth, GB};
use crate::stats::ratio;

/// One protocol under one guest load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// The protocol.
    pub protocol: Protocol,
    /// The guest load.
    pub guest: GuestLoad,
    /// The guest's workload string.
    pub workload: String,
    /// Frames the batches were drawn from.
    pub pool_frames: usize,
    /// First and last frame index of the pool.
    pub pool_range: (usize, usize),
    /// The best copy's configuration timed once per round while the
    /// guest ran its load (`None` in results from before it was measured).
    #[serde(default)]
    pub loaded_copy: Option<Bandwidth>,
    /// One entry per batch size.
    pub batch_sizes: Vec<BatchSizeResult>,
    /// The end checks, all passed.
    pub verification: Verification,
}

/// One batch size in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchSizeResult {
    /// Frames per batch.
    pub frames_per_batch: usize,
    /// Timed batches.
    pub batches: usize,
    /// Frames moved.
    pub frames_moved: usize,
    /// `frames_moved` × frame size.
    pub bytes_moved: u64,
    /// Summed wall time of the `migrate()` calls, seconds.
    pub migrate_seconds: f64,
    /// `bytes_moved / migrate_seconds`, GB/s: the headline number.
    pub gbps: f64,
    /// Per round (each a bandwidth sample): median, spread, samples.
    pub bandwidth: Bandwidth,
    /// `gbps` relative to the best copy of the same run.
    pub vs_best_copy: Option<f64>,
    /// `gbps` relative to the same copy under this scenario's guest load.
    #[serde(default)]
    pub vs_loaded_copy: Option<f64>,
    /// Mean wall time of one batch, µs.
    pub mean_batch_us: f64,
    /// Where the migrator's time went.
    pub phases: PhaseTimes,
    /// Bytes the copy engine copied, pre-copy re-copies included.
    pub bytes_copied: u64,
    /// Pre-copy: 4 KiB pages copied again because the guest wrote them.
    pub recopied_pages: u64,
    /// Guest writes that waited on a batch.
    pub stalls: StallSummary,
}

/// Summed phase times of the migrator's reports, seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseTimes {
    /// Write-protecting.
    pub protect_s: f64,
    /// Copying (pre-copy: every round).
    pub copy_s: f64,
    /// `mmap(MAP_FIXED)`, userfaultfd re-registration and waking.
    pub remap_s: f64,
    /// Pre-copy: resetting and reading the dirty log (results written
    /// before it was named count it in `protect_s` and `other_s`).
    #[serde(default)]
    pub dirty_s: f64,
    /// Committing to the placement map, punching out and releasing the
    /// source slots (earlier results count it in `other_s`).
    #[serde(default)]
    pub commit_s: f64,
    /// The rest of `migrate()`: reserving slots, planning the copies.
    /// With the stages pipelined this is what is left of the total once
    /// the overlap is added back.
    pub other_s: f64,
    /// How long stages ran at once: their summed busy times beyond the
    /// wall time they spanned (pipelined batches; 0 before they were).
    #[serde(default)]
    pub overlap_s: f64,
    /// The migrator's own total.
    pub total_s: f64,
}

impl PhaseTimes {
    /// Each phase as a share of the total.
    pub fn shares(&self) -> [Option<f64>; 7] {
        [
            self.protect_s,
            self.copy_s,
            self.remap_s,
            self.dirty_s,
            self.commit_s,
            self.other_s,
            self.overlap_s,
        ]
        .map(|s| ratio(s, self.total_s))
    }
}

impl BatchSizeResult {
    /// Summarizes `totals` of `frame_size` frames against the best copy
    /// `best_gbps` and the copy under the guest's load `loaded_gbps`;
    /// `None` without timed rounds.
    pub fn build(
        totals: &SizeTotals,
        frame_size: u64,
        best_gbps: f64,
        loaded_gbps: Option<f64>,
    ) -> Option<Self> {
        let rounds = totals.round_times.len();
        if rounds == 0 || totals.batches == 0 {
            return None;
        }
        let bytes_moved = totals.frames as u64 * frame_size;
        let seconds = totals.wall.as_secs_f64();
        let gbps = bytes_moved as f64 / seconds.max(1e-9) / GB;
        let per_round = bytes_moved / rounds as u64;
        let phase = |d: std::time::Duration| d.as_secs_f64();
        let named = totals.protect + totals.copy + totals.remap + totals.dirty + totals.commit;
        Some(Self {
            frames_per_batch: totals.frames_per_batch,
            batches: totals.batches,
            frames_moved: totals.frames,
            bytes_moved,
            migrate_seconds: seconds,
            gbps,
            bandwidth: Bandwidth::from_runs(per_round, &totals.round_times)?,
            vs_best_copy: ratio(gbps, best_gbps),
            vs_loaded_copy: loaded_gbps.and_then(|l| ratio(gbps, l)),
            mean_batch_us: seconds * 1e6 / totals.batches as f64,
            phases: PhaseTimes {
                protect_s: phase(totals.protect),
                copy_s: phase(totals.copy),
                remap_s: phase(totals.remap),
                dirty_s: phase(totals.dirty),
                commit_s: phase(totals.commit),
                other_s: phase((totals.total + totals.overlap).saturating_sub(named)),
                overlap_s: phase(totals.overlap),
                total_s: phase(totals.total),
            },
            bytes_copied: totals.bytes_copied,
            recopied_pages: totals.recopied_pages,
            stalls: StallSummary::of(&totals.stalls),
        })
    }
}

impl ScenarioResult {
    /// The label of its scenario.
    pub fn scenario(&self) -> Scenario {
        Scenario {
            protocol: self.protocol,
            guest: self.guest,
        }
    }

    /// The batch size entry of `frames_per_batch`, if measured.
    pub fn batch_size(&self, frames_per_batch: usize) -> Option<&BatchSizeResult> {
        self.batch_sizes
            .iter()
            .find(|b| b.frames_per_batch == frames_per_batch)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn batch_size_result_is_computed_from_the_totals() {
        let totals = SizeTotals {
            frames_per_batch: 16,
            batches: 4,
            frames: 64,
            round_times: vec![Duration::from_millis(60), Duration::from_millis(40)],
            wall: Duration::from_millis(100),
            total: Duration::from_millis(96),
            protect: Duration::from_millis(6),
            copy: Duration::from_millis(60),
            remap: Duration::from_millis(10),
            dirty: Duration::from_millis(2),
            commit: Duration::from_millis(8),
            overlap: Duration::ZERO,
            bytes_copied: 64 << 21,
            recopied_pages: 0,
            stalls: vec![Duration::from_micros(300), Duration::from_micros(900)],
        };
        let b = BatchSizeResult::build(&totals, 2 << 20, 2.0, Some(1.0)).unwrap();
        assert_eq!(b.bytes_moved, 64 << 21);
        let expected = (64u64 << 21) as f64 / 0.1 / 1e9;
        assert!((b.gbps - expected).abs() < 1e-9, "{}", b.gbps);
        assert_eq!(b.bandwidth.samples_gbps.len(), 2);
        assert!((b.vs_best_copy.unwrap() - expected / 2.0).abs() < 1e-9);
        assert!((b.vs_loaded_copy.unwrap() - expected).abs() < 1e-9);
        let unloaded = BatchSizeResult::build(&totals, 2 << 20, 2.0, None).unwrap();
        assert_eq!(unloaded.vs_loaded_copy, None);
        assert!((b.mean_batch_us - 25_000.0).abs() < 1e-6);
        assert!((b.phases.other_s - 0.010).abs() < 1e-9);
        assert!((b.phases.commit_s - 0.008).abs() < 1e-9);
        let shares = b.phases.shares();
        assert!((shares[1].unwrap() - 0.625).abs() < 1e-9);
        assert_eq!(b.stalls.count, 2);
        assert_eq!(b.stalls.max_us, Some(900.0));
        assert!(BatchSizeResult::build(&SizeTotals::default(), 2 << 20, 2.0, None).is_none());
    }
}

//! What the engine publishes: counters, the last intervals, rebalance
//! progress, and a per-frame view — immutable snapshots, swapped in whole
//! once per interval so readers (the API, tests, the harness) never wait
//! on the engine and never see half an interval.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use guest_memory::TierUsage;

use crate::engine_cost::EngineCost;
use crate::engine_warning::EngineWarning;
use crate::policy::FastQuota;

/// Intervals kept in [`EngineStats::recent`].
pub const RECENT_INTERVALS: usize = 300;

/// Frames and bytes moved one way.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveCount {
    /// Frames.
    pub frames: u64,
    /// Bytes.
    pub bytes: u64,
}

impl MoveCount {
    pub(crate) fn add(&mut self, frames: usize, frame_size: u64) {
        self.frames += frames as u64;
        self.bytes += frames as u64 * frame_size;
    }
}

/// Microseconds spent per stage, summed over all intervals.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageMicros {
    /// Collecting the tracker's sample.
    pub collect: u64,
    /// Updating the heat model.
    pub heat: u64,
    /// Planning.
    pub plan: u64,
    /// Migrating.
    pub migrate: u64,
}

/// One interval.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Interval number (from 1).
    pub index: u64,
    /// Milliseconds since the engine started, at the interval's end.
    pub at_ms: u64,
    /// Threshold used; `None` when no frame could pass it (a quota of
    /// zero, or headroom and pins taking all of it).
    pub threshold: Option<f64>,
    /// Slow frames that passed the threshold.
    pub candidates: usize,
    /// Frames promoted.
    pub promoted: usize,
    /// Frames demoted.
    pub demoted: usize,
    /// Moves the migrator aborted (rolled back).
    pub aborted: usize,
    /// Bytes moved (both ways).
    pub bytes: u64,
    /// Frames on the fast tier afterwards.
    pub fast_frames: usize,
}

/// Where a live rebalance stands.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum RebalanceState {
    /// Frames are moving.
    Running,
    /// The fast tier holds what the new quota asks for.
    Done,
    /// The deadline passed first.
    Failed {
        /// Why.
        reason: String,
    },
}

/// Progress of the last rebalance.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebalanceProgress {
    /// The new fast-tier quota in bytes.
    pub target_bytes: u64,
    /// Fast-tier bytes when it started.
    pub start_bytes: u64,
    /// Fast-tier bytes now.
    pub fast_bytes: u64,
    /// Frames moved for it so far.
    pub moved_frames: u64,
    /// Milliseconds since it started; once it ended (done or failed), how
    /// long it ran.
    pub elapsed_ms: u64,
    /// Its deadline in milliseconds from the start.
    pub deadline_ms: u64,
    /// The state.
    pub state: RebalanceState,
}

/// A snapshot of the engine's counters.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineStats {
    /// Intervals completed.
    pub intervals: u64,
    /// The tracker in use.
    pub tracker: String,
    /// The quota in force.
    pub fast_quota: Option<FastQuota>,
    /// Threshold of the last interval; `None` when no frame could pass
    /// it.
    pub threshold: Option<f64>,
    /// `threshold` in pages: how many of a frame's 4 KiB pages must be
    /// seen touched every interval (a write counting as the policy's
    /// write weight, a read as its read weight) to hold the frame at the
    /// threshold (`HeatSettings::pages_per_interval`).
    #[serde(default)]
    pub threshold_pages: Option<f64>,
    /// The engine's estimate of the hot set: the fewest hottest frames
    /// that hold 90 % of all heat.
    pub hot_frames: usize,
    /// `hot_frames` in bytes.
    pub hot_set_bytes: u64,
    /// Sum of the heat model's hot-page estimates, in bytes (the hot set
    /// at 4 KiB granularity).
    pub hot_page_bytes: u64,
    /// Promotions.
    pub promotions: MoveCount,
    /// Demotions.
    pub demotions: MoveCount,
    /// Frames that swapped places (each exchange moves two).
    pub exchanges: u64,
    /// Moves the migrator aborted and rolled back.
    pub aborted: u64,
    /// Per-tier occupancy.
    pub tiers: Vec<TierUsage>,
    /// Time per stage.
    pub stage_micros: StageMicros,
    /// Tracker failures.
    pub tracker_errors: u64,
    /// What the engine costs and the benefit it estimates.
    pub cost: EngineCost,
    /// The last error (tracker or migrator), if any.
    pub last_error: Option<String>,
    /// The last rebalance, if any.
    pub rebalance: Option<RebalanceProgress>,
    /// The last [`RECENT_INTERVALS`] intervals, oldest first.
    pub recent: Vec<IntervalRecord>,
    /// What an operator should know now (e.g. a hot set larger than the
    /// quota).
    #[serde(default)]
    pub warnings: Vec<EngineWarning>,
}

/// A heat value for people: one decimal below 100, none above.
pub fn format_heat(value: f64) -> String {
    if value.abs() < 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

impl EngineStats {
    /// The threshold for people: its heat and the pages behind it, e.g.
    /// "196.3 (about 39 of a frame's 512 pages touched per interval)";
    /// `frame_size` in bytes.
    pub fn describe_threshold(&self, frame_size: u64) -> String {
        let Some(heat) = self.threshold else {
            return "none (no frame may be promoted)".to_owned();
        };
        let heat = format_heat(heat);
        match self.threshold_pages {
            Some(pages) => format!(
                "{heat} (about {pages:.0} of a frame's {} pages touched per interval)",
                frame_size / 4096
            ),
            None => heat,
        }
    }
}

/// Per frame: guest-physical address, tier and heat (for heat maps and
/// the API's frame listing).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FrameView {
    /// Guest-physical address per frame (the frame table's).
    pub gpa: Vec<u64>,
    /// Tier index per frame.
    pub tier: Vec<u8>,
    /// Heat per frame.
    pub heat: Vec<f32>,
}

/// The published snapshots: readers clone an `Arc` under a lock held for
/// nothing longer than that clone.
#[derive(Debug, Default)]
pub(crate) struct Published {
    stats: Mutex<Arc<EngineStats>>,
    frames: Mutex<Arc<FrameView>>,
}

impl Published {
    pub fn stats(&self) -> Arc<EngineStats> {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn frames(&self) -> Arc<FrameView> {
        self.frames
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn publish(&self, stats: EngineStats, frames: Option<FrameView>) {
        let stats = Arc::new(stats);
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = stats;
        if let Some(f) = frames {
            let f = Arc::new(f);
            *self.frames.lock().unwrap_or_else(PoisonError::into_inner) = f;
        }
    }
}

/// The recent-interval ring.
#[derive(Debug, Default)]
pub(crate) struct Recent(VecDeque<IntervalRecord>);

impl Recent {
    pub fn push(&mut self, r: IntervalRecord) {
        if self.0.len() == RECENT_INTERVALS {
            self.0.pop_front();
        }
        self.0.push_back(r);
    }

    pub fn to_vec(&self) -> Vec<IntervalRecord> {
        self.0.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_is_described_in_pages() {
        let mut stats = EngineStats::default();
        assert_eq!(
            stats.describe_threshold(2 << 20),
            "none (no frame may be promoted)"
        );
        stats.threshold = Some(196.34);
        assert_eq!(stats.describe_threshold(2 << 20), "196");
        stats.threshold_pages = Some(39.4);
        assert_eq!(
            stats.describe_threshold(2 << 20),
            "196 (about 39 of a frame's 512 pages touched per interval)"
        );
        stats.threshold = Some(12.25);
        stats.threshold_pages = Some(2.6);
        assert_eq!(
            stats.describe_threshold(1 << 20),
            "12.2 (about 3 of a frame's 256 pages touched per interval)"
        );
    }
}

//! Readable forms of the tiering engine's published snapshots.
//!
//! `tiering::EngineStats` and `RebalanceProgress` only serialize; tierctl
//! reads them back through these mirrors. The test below serializes the
//! real types and checks that every field comes back unchanged, so a
//! field added or renamed in `tiering` fails here first.

use serde::{Deserialize, Serialize};

use guest_memory::TierUsage;
use tiering::FastQuota;

/// `tiering::stats::MoveCount`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moves {
    /// Frames.
    pub frames: u64,
    /// Bytes.
    pub bytes: u64,
}

/// `tiering::stats::StageMicros`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stages {
    /// Collecting the tracker's sample.
    pub collect: u64,
    /// Updating the heat model.
    pub heat: u64,
    /// Planning.
    pub plan: u64,
    /// Migrating.
    pub migrate: u64,
}

/// `tiering::stats::IntervalRecord`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Interval number (from 1).
    pub index: u64,
    /// Milliseconds since the engine started.
    pub at_ms: u64,
    /// Threshold used.
    pub threshold: f64,
    /// Slow frames that passed the threshold.
    pub candidates: u64,
    /// Frames promoted.
    pub promoted: u64,
    /// Frames demoted.
    pub demoted: u64,
    /// Moves aborted.
    pub aborted: u64,
    /// Bytes moved (both ways).
    pub bytes: u64,
    /// Frames on the fast tier afterwards.
    pub fast_frames: u64,
}

/// `tiering::RebalanceState`.
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

/// `tiering::RebalanceProgress`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebalance {
    /// The new fast-tier quota in bytes.
    pub target_bytes: u64,
    /// Fast-tier bytes when it started.
    pub start_bytes: u64,
    /// Fast-tier bytes now.
    pub fast_bytes: u64,
    /// Frames moved for it so far.
    pub moved_frames: u64,
    /// Milliseconds since it started.
    pub elapsed_ms: u64,
    /// Its deadline in milliseconds from the start.
    pub deadline_ms: u64,
    /// The state.
    pub state: RebalanceState,
}

/// `tiering::EngineStats`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Intervals completed.
    pub intervals: u64,
    /// The tracker in use.
    pub tracker: String,
    /// The quota in force.
    pub fast_quota: Option<FastQuota>,
    /// Threshold of the last interval.
    pub threshold: f64,
    /// Frames in the estimated hot set.
    pub hot_frames: u64,
    /// `hot_frames` in bytes.
    pub hot_set_bytes: u64,
    /// Distinct hot 4 KiB pages, in bytes.
    pub hot_page_bytes: u64,
    /// Promotions.
    pub promotions: Moves,
    /// Demotions.
    pub demotions: Moves,
    /// Frames swapped (both of a pair count).
    pub exchanges: u64,
    /// Moves aborted and rolled back.
    pub aborted: u64,
    /// Per-tier occupancy.
    pub tiers: Vec<TierUsage>,
    /// Time per stage, summed.
    pub stage_micros: Stages,
    /// Tracker failures.
    pub tracker_errors: u64,
    /// The last tracker or migrator error.
    pub last_error: Option<String>,
    /// The last rebalance.
    pub rebalance: Option<Rebalance>,
    /// The last intervals, oldest first.
    pub recent: Vec<Interval>,
}

#[cfg(test)]
mod tests {
    use tiering::stats::{IntervalRecord, MoveCount, StageMicros};
    use tiering::{EngineStats, RebalanceProgress};

    use super::*;

    /// Serializes `value`, reads it as `M`, and checks that `M` writes
    /// back the same JSON: no field lost, renamed or retyped.
    fn round_trips<T: Serialize, M: Serialize + for<'de> Deserialize<'de>>(value: &T) {
        let json = serde_json::to_value(value).unwrap();
        let mirror: M = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&mirror).unwrap(), json);
    }

    fn progress(state: tiering::RebalanceState) -> RebalanceProgress {
        RebalanceProgress {
            target_bytes: 64 << 20,
            start_bytes: 128 << 20,
            fast_bytes: 96 << 20,
            moved_frames: 16,
            elapsed_ms: 1200,
            deadline_ms: 5000,
            state,
        }
    }

    #[test]
    fn mirrors_read_every_field_of_the_engine_snapshot() {
        let stats = EngineStats {
            intervals: 42,
            tracker: "dirty-log".into(),
            fast_quota: Some(FastQuota {
                min_bytes: 2 << 20,
                max_bytes: 256 << 20,
            }),
            threshold: 812.5,
            hot_frames: 12,
            hot_set_bytes: 24 << 20,
            hot_page_bytes: 20 << 20,
            promotions: MoveCount {
                frames: 30,
                bytes: 60 << 20,
            },
            demotions: MoveCount {
                frames: 20,
                bytes: 40 << 20,
            },
            exchanges: 4,
            aborted: 1,
            tiers: vec![TierUsage {
                name: "dram".into(),
                capacity_frames: 128,
                used_frames: 100,
            }],
            stage_micros: StageMicros {
                collect: 1,
                heat: 2,
                plan: 3,
                migrate: 4,
            },
            tracker_errors: 2,
            last_error: Some("tracker: boom".into()),
            rebalance: Some(progress(tiering::RebalanceState::Running)),
            recent: vec![IntervalRecord {
                index: 42,
                at_ms: 8400,
                threshold: 812.5,
                candidates: 3,
                promoted: 2,
                demoted: 1,
                aborted: 1,
                bytes: 6 << 20,
                fast_frames: 100,
            }],
        };
        round_trips::<_, Stats>(&stats);
        round_trips::<_, Stats>(&EngineStats::default());
        for state in [
            tiering::RebalanceState::Running,
            tiering::RebalanceState::Done,
            tiering::RebalanceState::Failed {
                reason: "deadline passed".into(),
            },
        ] {
            round_trips::<_, Rebalance>(&progress(state));
        }
        round_trips::<_, Option<Rebalance>>(&None::<RebalanceProgress>);
    }
}

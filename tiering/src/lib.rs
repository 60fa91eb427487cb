//! The tiering engine: what it knows about guest memory
//! and decides from it. It knows nothing of KVM ioctls or HTTP; trackers
//! and migrators are traits it is handed, and it never sees the workload's
//! ground truth.
//!
//! * [`HeatModel`]: per frame, the decayed access evidence of tracker
//!   samples ([`AccessSample`]) and an estimate of the frame's distinct hot
//!   4 KiB pages (ranking frames by it is the harness's job:
//!   `oracle::ranking`).
//! * [`TieringPolicy`]: the operator's knobs, validated as a whole.
//! * [`EngineCost`]: what the engine costs (sampling, CPU, write stalls,
//!   bytes moved) next to the benefit it estimates.
//! * [`planner`]: which frames to promote and demote this interval.
//! * [`Engine`]: the per-VM thread that closes the loop (collect → heat →
//!   plan → migrate → publish [`EngineStats`]) and runs live rebalances.

mod engine;
mod engine_cost;
mod engine_error;
mod engine_loop;
mod engine_warning;
mod error_chain;
mod heat_model;
mod heat_settings;
pub mod planner;
pub mod policy;
mod rate;
mod rebalance;
pub mod stats;
pub mod synthetic;

pub use access_track::{
    AccessSample, AccessTracker, Coverage, SamplingSettings, TrackerError, TrackerStatus,
};
pub use engine::{Engine, EngineParts, TrackerSource};
pub use engine_cost::EngineCost;
pub use engine_error::{EngineError, MAX_DEADLINE_MS, TrackerSourceError};
pub use engine_warning::EngineWarning;
pub use error_chain::error_chain;
pub use heat_model::{HeatError, HeatModel};
pub use heat_settings::{HeatSettings, HeatSettingsError};
pub use policy::{FastQuota, PinnedRange, PolicyError, PolicyLimits, Threshold, TieringPolicy};
pub use stats::{
    EngineStats, FrameView, IntervalRecord, MoveCount, RebalanceProgress, RebalanceState,
    StageMicros, format_heat,
};

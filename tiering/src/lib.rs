//! The tiering engine (ARCHITECTURE §6): what it knows about guest memory
//! and decides from it. It knows nothing of KVM ioctls or HTTP; trackers
//! and migrators are traits it is handed, and it never sees the workload's
//! ground truth.
//!
//! For now this crate holds the heat model ([`HeatModel`]): per frame, the
//! decayed access evidence of tracker samples ([`AccessSample`]), an
//! estimate of the frame's distinct hot 4 KiB pages, and a ranking.

mod heat_config;
mod heat_model;
mod ranking;
pub mod synthetic;

pub use access_track::{AccessSample, AccessTracker, Coverage, TrackerError, TrackerStatus};
pub use heat_config::{HeatConfig, HeatConfigError};
pub use heat_model::{HeatError, HeatModel};

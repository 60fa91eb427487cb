//! What the engine and its handle refuse, and why a tracker could not be
//! built for it.

use thiserror::Error;

use access_track::{TrackerBuildError, UnknownTracker};

use crate::heat_model::HeatError;
use crate::policy::PolicyError;

/// Longest rebalance deadline (one hour).
pub const MAX_DEADLINE_MS: u64 = 3_600_000;

/// Why a [`crate::TrackerSource`] could not build a tracker.
#[derive(Debug, Error)]
pub enum TrackerSourceError {
    /// No tracker has that name.
    #[error(transparent)]
    Unknown(#[from] UnknownTracker),
    /// The VM was not started with what the tracker needs (the dirty log,
    /// or minor faults on its write guard).
    #[error("this VM was not started ready for it")]
    NotReady,
    /// The tracker refused to start.
    #[error(transparent)]
    Build(#[from] TrackerBuildError),
}

/// Errors of the engine and its handle.
#[derive(Debug, Error)]
pub enum EngineError {
    /// The policy is invalid; the old one stays.
    #[error("invalid policy: {0}")]
    Policy(#[from] PolicyError),
    /// The tracker the policy names could not be built.
    #[error("tracker '{name}'")]
    Tracker {
        /// The tracker.
        name: String,
        /// Why.
        #[source]
        source: TrackerSourceError,
    },
    /// The heat model could not be built for this memory.
    #[error("heat model")]
    Heat(#[from] HeatError),
    /// Guest memory has a single tier.
    #[error("guest memory has one tier: there is nothing to tier")]
    OneTier,
    /// A rebalance deadline out of range.
    #[error("deadline_ms {0} not in 1..={MAX_DEADLINE_MS}")]
    Deadline(u64),
    /// The engine thread could not start.
    #[error("starting the engine thread")]
    Thread(#[source] std::io::Error),
    /// The engine has stopped.
    #[error("the tiering engine has stopped")]
    Stopped,
}

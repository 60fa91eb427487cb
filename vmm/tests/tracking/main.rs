//! Tracking accuracy on real KVM: trackers feed the heat model every
//! interval, and the model's top-K frames are compared with the oracle's
//! top-K for the phase (from the payload's ground truth). Precision must
//! reach 0.9 within 3 intervals of the start and of every phase shift,
//! and hold there (mean ≥ 0.95, no interval below 0.8).

mod access_log;
mod damon;
mod dirty_log;
mod exits;
mod fault_sample;
mod rig;

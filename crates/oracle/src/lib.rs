//! The oracle (tests and the benchmark harness only): from a payload's
//! ground-truth descriptor for a phase (the harness-only `GroundTruth`
//! hypercall), the true access and write probability of each frame, the
//! best placement for a fast-tier quota, what a placement earns, and how
//! well a tracker's ranking matches.
//!
//! The tiering engine never reads this; it sits on the bench and test side
//! of the dependency graph and depends on `guest-abi` only.

mod frame_map;
mod oracle;
mod precision;

pub use frame_map::FrameMapError;
pub use oracle::{Oracle, OracleError};
pub use precision::precision_at_k;

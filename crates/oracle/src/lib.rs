//! The oracle (tests and the benchmark harness only): from a payload's
//! ground-truth descriptor for a phase (the harness-only `GroundTruth`
//! hypercall), the true access and write probability of each frame, the
//! best placement for a fast-tier quota, what a placement earns, how frames
//! rank by a score (a heat model's heat, the true access probability), and
//! how well a tracker's ranking matches.
//!
//! The tiering engine never reads this; it sits on the bench and test side
//! of the dependency graph and depends on `guest-abi` only.

mod frame_map;
mod oracle;
mod precision;
pub mod ranking;

pub use frame_map::FrameMapError;
pub use oracle::{Oracle, OracleError};
pub use precision::precision_at_k;
pub use ranking::RankingError;

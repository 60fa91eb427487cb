//! Guest access tracking.
//!
//! * [`KvmDirtyLog`]: the owner of the KVM dirty log (the EPT/NPT dirty
//!   bits; shadow page tables under PVM), read with manual protection
//!   (`KVM_CLEAR_DIRTY_LOG` by range) and fanned out to every consumer, so
//!   that no consumer steals another's bits;
//! * [`AccessSample`] / [`AccessTracker`]: what a tracker reports per
//!   interval, and the trait the tiering engine is handed;
//! * [`DirtyLogTracker`]: pages written per frame and interval;
//! * [`FaultSampleTracker`]: a sample of pages zapped and watched through
//!   userfaultfd minor faults (reads and writes);
//! * [`CombinedTracker`]: the union of several trackers' evidence;
//! * [`TrackerKind`]: trackers by name, for the VMM and the harness.

mod by_name;
mod combined;
mod dirty_log;
mod dirty_tracker;
mod fault_config;
mod fault_rounds;
mod fault_state;
mod fault_tracker;
mod sample;
mod sampling_settings;
mod zap;

pub use by_name::{TrackerBuildError, TrackerKind, UnknownTracker};
pub use combined::{CombineError, CombinedTracker, combine};
pub use dirty_log::{DirtyConsumer, DirtyLogError, KvmDirtyLog, Memslot, enable_manual_protect};
pub use dirty_tracker::{DEFAULT_SAMPLE_PAGES, DEFAULT_WINDOW, DirtyCoverage, DirtyLogTracker};
pub use fault_config::{FaultConfigError, FaultSampleConfig, SampleBudget};
pub use fault_state::SamplerTotals;
pub use fault_tracker::{FaultSampleError, FaultSampleTracker};
pub use sample::{
    AccessSample, AccessTracker, Coverage, MAX_PAGES_PER_FRAME, SampleError, TrackerError,
    TrackerStatus,
};
pub use sampling_settings::{MIN_REGIONS, MIN_WINDOW_US, SamplingSettings, SamplingSettingsError};

//! Guest access tracking.
//!
//! * [`KvmDirtyLog`]: the owner of the KVM dirty log (the EPT/NPT dirty
//!   bits; shadow page tables under PVM), read with manual protection
//!   (`KVM_CLEAR_DIRTY_LOG` by range) and fanned out to every consumer, so
//!   that no consumer steals another's bits;
//! * [`AccessSample`] / [`AccessTracker`]: what a tracker reports per
//!   interval, and the trait the tiering engine is handed;
//! * [`DirtyLogTracker`]: how often each frame's pages are written, from a
//!   [`WindowSampler`] that arms a fixed budget of pages per second in
//!   short windows over DAMON-style adaptive regions ([`SamplingSettings`]);
//! * [`FaultSampleTracker`]: a sample of pages zapped and watched through
//!   userfaultfd minor faults (reads and writes);
//! * [`DamonTracker`]: how often each frame's sampled pages are touched
//!   (reads too), from the host kernel's DAMON watching their accessed
//!   bits in physical-address mode: no guest exit;
//! * [`AccessLogTracker`]: how often each frame's sampled pages are
//!   touched (reads too), from the accessed bits of KVM's secondary MMU
//!   read through the KVM access log ([`KvmAccessLog`], a host-kernel
//!   extension): no guest exit;
//! * [`CombinedTracker`]: the union of several trackers' evidence;
//! * [`TrackerKind`]: trackers by name, for the VMM and the harness.

mod access_log_probe;
mod access_log_tracker;
mod by_name;
mod combined;
mod cpu_time;
mod damon_sysfs;
mod damon_trace;
mod damon_tracker;
mod dirty_log;
mod dirty_probe;
mod dirty_tracker;
mod fault_config;
mod fault_rounds;
mod fault_state;
mod fault_tracker;
mod kvm_access_log;
mod regions;
mod sample;
mod sampler_thread;
mod sampling_settings;
mod stoppable;
mod window_sampler;
mod xorshift;
// The uapi header parser the ABI tests share with the other host-kernel
// clients (one file, outside any crate).
#[cfg(test)]
#[path = "../../../host-kernel/rust/uapi_defines.rs"]
mod uapi_defines;
mod zap;

pub use access_log_tracker::{AccessLogTracker, AccessLogTrackerError};
pub use by_name::{TrackerBuildError, TrackerInputs, TrackerKind, UnknownTracker};
pub use combined::{CombineError, CombinedTracker, combine};
pub use cpu_time::thread_cpu_time;
pub use damon_sysfs::{DAMON_ADMIN, DamonError, DamonIntervals, MIN_DAMON_REGIONS, OwnedKdamond};
pub use damon_trace::{Aggregated, DamonTrace, DamonTraceError, TRACEFS, parse_aggregated};
pub use damon_tracker::{CHECKS_PER_AGGREGATION, DamonTracker, DamonTrackerError, ROTATE_EVERY};
pub use dirty_log::{DirtyConsumer, DirtyLogError, KvmDirtyLog, Memslot, enable_manual_protect};
pub use dirty_probe::DirtyProbeError;
pub use dirty_tracker::{DirtyCoverage, DirtyLogTracker};
pub use fault_config::{FaultConfigError, FaultSampleConfig, SampleBudget};
pub use fault_state::SamplerTotals;
pub use fault_tracker::{FaultSampleError, FaultSampleTracker};
pub use guest_memory::pagemap::{Pagemap, PagemapError};
pub use kvm_access_log::{
    AccessLogError, KVM_ACCESS_LOG_FLUSH_TLB, KVM_ACCESS_LOG_MAX_PAGES, KVM_ACCESS_LOG_NO_CLEAR,
    KVM_CAP_TIERVISOR_ACCESS_LOG, KVM_TIERVISOR_ACCESS_LOG, KvmAccessLog, KvmAccessLogArgs,
};
pub use sample::{
    AccessSample, AccessTracker, Coverage, MAX_PAGES_PER_FRAME, SampleError, TrackerError,
    TrackerStatus,
};
pub use sampling_settings::{MIN_REGIONS, MIN_WINDOW_US, SamplingSettings, SamplingSettingsError};
pub use window_sampler::{
    AGGREGATION, Credit, FrameCounts, MIN_AGGREGATION_WINDOWS, PageProbe, SamplerReport,
    WindowClock, WindowSampler,
};

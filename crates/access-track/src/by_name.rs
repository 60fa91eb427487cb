//! Trackers by name (`dirty-log`, `fault-sample`, `combined`, `damon`,
//! `damon+dirty-log`, `access-log`, `access-log+dirty-log`), what each
//! needs from the VM ([`TrackerInputs`]), and how to build one: the one
//! entry point for the VMM and the benchmark harness.

use std::str::FromStr;
use std::sync::Arc;

use kvm_ioctls::VmFd;
use thiserror::Error;

use guest_memory::TieredMemory;
use guest_memory::migrate::WriteGuard;

use crate::access_log_tracker::{AccessLogTracker, AccessLogTrackerError};
use crate::combined::CombinedTracker;
use crate::damon_tracker::{DamonTracker, DamonTrackerError};
use crate::dirty_log::KvmDirtyLog;
use crate::dirty_tracker::DirtyLogTracker;
use crate::fault_config::FaultSampleConfig;
use crate::fault_tracker::{FaultSampleError, FaultSampleTracker};
use crate::sample::AccessTracker;
use crate::sampling_settings::SamplingSettings;

/// An unknown tracker name.
#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "unknown tracker '{0}' (dirty-log, fault-sample, combined, damon, damon+dirty-log, access-log, \
     access-log+dirty-log)"
)]
pub struct UnknownTracker(pub String);

/// Errors building a tracker.
#[derive(Debug, Error)]
pub enum TrackerBuildError {
    /// The VM was built without the KVM dirty log.
    #[error("{0}: the VM has no KVM dirty log (build it with this tracker named)")]
    NoDirtyLog(&'static str),
    /// The fault sampler could not be built.
    #[error(transparent)]
    FaultSample(#[from] FaultSampleError),
    /// The dirty-log sampler's thread could not be started.
    #[error("starting the dirty-log sampler thread")]
    SamplerThread(#[source] std::io::Error),
    /// The host cannot give DAMON to this VM.
    #[error(transparent)]
    Damon(#[from] DamonTrackerError),
    /// The host's KVM has no access log.
    #[error(transparent)]
    AccessLog(#[from] AccessLogTrackerError),
}

/// What a VM offers its trackers.
#[derive(Clone, Copy, Debug)]
pub struct TrackerInputs<'a> {
    /// The VM's memory.
    pub memory: &'a Arc<TieredMemory>,
    /// The VM (for the access log).
    pub vm: &'a Arc<VmFd>,
    /// The dirty log, when it is on.
    pub dirty_log: Option<&'a KvmDirtyLog>,
    /// The write guard, when there is one.
    pub guard: Option<&'a Arc<WriteGuard>>,
}

/// The trackers there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrackerKind {
    /// [`DirtyLogTracker`].
    DirtyLog,
    /// [`FaultSampleTracker`].
    FaultSample,
    /// [`CombinedTracker`] of both.
    Combined,
    /// [`DamonTracker`]: accessed bits through the host kernel's DAMON.
    Damon,
    /// [`CombinedTracker`] of DAMON (reads and writes) and the dirty log
    /// (writes).
    DamonDirtyLog,
    /// [`AccessLogTracker`]: accessed bits through the KVM access log.
    AccessLog,
    /// [`CombinedTracker`] of the access log (reads and writes) and the
    /// dirty log (writes).
    AccessLogDirtyLog,
}

impl TrackerKind {
    /// Every tracker, by name.
    pub const ALL: [TrackerKind; 7] = [
        TrackerKind::DirtyLog,
        TrackerKind::FaultSample,
        TrackerKind::Combined,
        TrackerKind::Damon,
        TrackerKind::DamonDirtyLog,
        TrackerKind::AccessLog,
        TrackerKind::AccessLogDirtyLog,
    ];

    /// The tracker's name.
    pub fn name(self) -> &'static str {
        match self {
            TrackerKind::DirtyLog => "dirty-log",
            TrackerKind::FaultSample => "fault-sample",
            TrackerKind::Combined => "combined",
            TrackerKind::Damon => "damon",
            TrackerKind::DamonDirtyLog => "damon+dirty-log",
            TrackerKind::AccessLog => "access-log",
            TrackerKind::AccessLogDirtyLog => "access-log+dirty-log",
        }
    }

    /// Whether the VM needs the KVM dirty log on for it.
    pub fn needs_dirty_log(self) -> bool {
        matches!(
            self,
            TrackerKind::DirtyLog
                | TrackerKind::Combined
                | TrackerKind::DamonDirtyLog
                | TrackerKind::AccessLogDirtyLog
        )
    }

    /// Whether the VM's write guard needs minor faults for it.
    pub fn needs_minor_faults(self) -> bool {
        matches!(self, TrackerKind::FaultSample | TrackerKind::Combined)
    }

    /// Builds the tracker over what the VM offers (`inputs`); the
    /// dirty-log, DAMON and access-log trackers sample at `sampling`
    /// (valid). A fault sampler without a usable guard is built all the
    /// same and says in its status why it observes nothing.
    pub fn build(
        self,
        inputs: &TrackerInputs<'_>,
        fault: FaultSampleConfig,
        sampling: SamplingSettings,
    ) -> Result<Box<dyn AccessTracker>, TrackerBuildError> {
        let memory = inputs.memory;
        let dirty = || -> Result<Box<dyn AccessTracker>, TrackerBuildError> {
            let log = inputs
                .dirty_log
                .ok_or(TrackerBuildError::NoDirtyLog(self.name()))?;
            let tracker = DirtyLogTracker::new(log, memory.clone(), sampling)
                .map_err(TrackerBuildError::SamplerThread)?;
            Ok(Box::new(tracker))
        };
        let sampled = || -> Result<Box<dyn AccessTracker>, TrackerBuildError> {
            Ok(Box::new(FaultSampleTracker::new(
                memory.clone(),
                inputs.guard.cloned(),
                fault,
            )?))
        };
        let damon = || -> Result<Box<dyn AccessTracker>, TrackerBuildError> {
            Ok(Box::new(DamonTracker::new(memory.clone(), sampling)?))
        };
        let access = || -> Result<Box<dyn AccessTracker>, TrackerBuildError> {
            Ok(Box::new(AccessLogTracker::new(
                inputs.vm.clone(),
                memory.clone(),
                sampling,
            )?))
        };
        Ok(match self {
            TrackerKind::DirtyLog => dirty()?,
            TrackerKind::FaultSample => sampled()?,
            TrackerKind::Combined => Box::new(CombinedTracker::new(vec![dirty()?, sampled()?])),
            TrackerKind::Damon => damon()?,
            TrackerKind::DamonDirtyLog => Box::new(CombinedTracker::new(vec![damon()?, dirty()?])),
            TrackerKind::AccessLog => access()?,
            TrackerKind::AccessLogDirtyLog => {
                Box::new(CombinedTracker::new(vec![access()?, dirty()?]))
            }
        })
    }
}

impl FromStr for TrackerKind {
    type Err = UnknownTracker;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TrackerKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownTracker(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in TrackerKind::ALL {
            assert_eq!(k.name().parse::<TrackerKind>(), Ok(k));
        }
        assert_eq!(
            "a-bit".parse::<TrackerKind>(),
            Err(UnknownTracker("a-bit".into()))
        );
        assert!(TrackerKind::Combined.needs_dirty_log());
        assert!(TrackerKind::Combined.needs_minor_faults());
        assert!(!TrackerKind::DirtyLog.needs_minor_faults());
    }
}

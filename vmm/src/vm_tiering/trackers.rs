//! The VM's side of the tiering engine: which trackers this VM can give
//! the engine (what the VM was built ready for), and starting the engine
//! over the VM's memory and migrator.

use std::sync::Arc;
use std::time::Duration;

use access_track::{
    AccessTracker, FaultSampleConfig, KvmDirtyLog, SamplingSettings, TrackerBuildError,
    TrackerInputs, TrackerKind,
};
use guest_memory::TieredMemory;
use guest_memory::migrate::WriteGuard;
use kvm_ioctls::VmFd;
use tiering::{TrackerSource, TrackerSourceError};

/// Builds trackers over the VM's dirty log, userfaultfd guard and access
/// log.
#[derive(Clone, Debug)]
pub struct VmTrackers {
    /// The VM's memory.
    pub memory: Arc<TieredMemory>,
    /// The VM.
    pub vm: Arc<VmFd>,
    /// The guard, when there is one (trackers use it when it takes minor
    /// faults).
    pub guard: Option<Arc<WriteGuard>>,
    /// The dirty log, when it is on.
    pub dirty_log: Option<KvmDirtyLog>,
}

impl VmTrackers {
    /// A new access tracker of `kind` over the VM's dirty log and guard
    /// (`fault` sets the fault sampler, `sampling` the dirty log's).
    pub fn tracker(
        &self,
        kind: TrackerKind,
        fault: FaultSampleConfig,
        sampling: SamplingSettings,
    ) -> Result<Box<dyn AccessTracker>, TrackerBuildError> {
        kind.build(&self.inputs(), fault, sampling)
    }

    /// What the VM offers its trackers.
    pub fn inputs(&self) -> TrackerInputs<'_> {
        TrackerInputs {
            memory: &self.memory,
            vm: &self.vm,
            dirty_log: self.dirty_log.as_ref(),
            guard: self.guard.as_ref(),
        }
    }

    fn ready(&self, kind: TrackerKind) -> bool {
        let minor = self
            .guard
            .as_ref()
            .is_some_and(|g| g.minor_faults_enabled());
        (!kind.needs_dirty_log() || self.dirty_log.is_some())
            && (!kind.needs_minor_faults() || minor)
    }
}

impl TrackerSource for VmTrackers {
    fn offered(&self) -> Vec<String> {
        TrackerKind::ALL
            .into_iter()
            .filter(|&k| self.ready(k))
            .map(|k| k.name().to_owned())
            .collect()
    }

    fn build(
        &self,
        name: &str,
        interval: Duration,
        sampling: SamplingSettings,
    ) -> Result<Box<dyn AccessTracker>, TrackerSourceError> {
        let kind: TrackerKind = name.parse()?;
        if !self.ready(kind) {
            return Err(TrackerSourceError::NotReady);
        }
        let fault = FaultSampleConfig {
            interval,
            ..FaultSampleConfig::default()
        };
        Ok(self.tracker(kind, fault, sampling)?)
    }
}

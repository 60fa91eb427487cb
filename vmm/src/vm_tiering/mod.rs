//! The tiering side of a VM: KVM's dirty logging on the memslots, the
//! userfaultfd write guard, the migrator ([`migration`]) and the VM-wide
//! write stop it uses ([`write_stop`]), the access trackers the VM can
//! give ([`trackers`]) and the tiering engine's thread ([`engine`]).
//!
//! It is built in two steps around the rest of the VM: a `TieringPlan`
//! decides, before the memslots exist, whether they are dirty-logged and
//! what the guard registers, and registers them; `VmTiering::new` then
//! builds the migrator, the guard and the engine once the guest's boot
//! image is written (the guard write-protects guest memory, the engine
//! may start moving frames).

pub mod engine_lifecycle;
mod memslots;
pub mod migration;
pub mod trackers;
pub mod write_stop;

use std::sync::Arc;

use kvm_ioctls::VmFd;

use access_track::{
    AccessTracker, FaultSampleConfig, KvmDirtyLog, Memslot, SamplingSettings, TrackerBuildError,
    TrackerKind,
};
use guest_memory::migrate::{GuardOptions, HostWriteLog, WriteGuard, WriteStop};
use guest_memory::{BackendKind, Migrator, TieredMemory};
use tiering::{Engine, EngineError, TieringPolicy};

use crate::vm_error::VmError;
use engine_lifecycle::{EngineStart, PendingParts, VmEngine};
use migration::{MigrationConfig, MigrationError, MigratorKind};
use trackers::VmTrackers;

/// What a VM asks of its tiering side (from its configuration and
/// options).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TieringRequest<'a> {
    /// How frames move between tiers.
    pub migration: &'a MigrationConfig,
    /// Keep the dirty log on even when the migrator does not need it.
    pub dirty_log_tracking: bool,
    /// The tiering engine's policy, if any.
    pub policy: Option<&'a TieringPolicy>,
    /// Access trackers to be ready for, besides the policy's.
    pub trackers: &'a [TrackerKind],
    /// When the engine starts.
    pub engine_start: EngineStart,
}

/// The tiering side, decided before the VM's memslots are registered.
#[derive(Debug)]
pub(crate) struct TieringPlan {
    migration: MigrationConfig,
    policy: Option<TieringPolicy>,
    engine_start: EngineStart,
    dirty_log: bool,
    guard: GuardOptions,
}

impl TieringPlan {
    /// Checks `request` against `memory`: tiering needs a migrator and a
    /// known tracker. The dirty log is on when the migrator, the request
    /// or a tracker needs it; the guard takes minor faults when a tracker
    /// samples them and every tier is shmem (none on hugetlb or file
    /// tiers).
    pub fn new(request: TieringRequest<'_>, memory: &TieredMemory) -> Result<Self, VmError> {
        let engine_tracker = match request.policy {
            Some(_) if request.migration.migrator == MigratorKind::None => {
                return Err(VmError::TieringWithoutMigrator);
            }
            Some(policy) => Some(policy.tracker.parse::<TrackerKind>()?),
            None => None,
        };
        let trackers: Vec<TrackerKind> = request
            .trackers
            .iter()
            .copied()
            .chain(engine_tracker)
            .collect();
        let dirty_log = request.migration.migrator.needs_dirty_log()
            || request.dirty_log_tracking
            || trackers.iter().any(|t| t.needs_dirty_log());
        let sampled = trackers.iter().any(|t| t.needs_minor_faults());
        let shmem = memory
            .tiers()
            .iter()
            .all(|t| matches!(t.kind(), BackendKind::Memfd { hugetlb: false, .. }));
        Ok(TieringPlan {
            migration: request.migration.clone(),
            policy: request.policy.cloned(),
            engine_start: request.engine_start,
            dirty_log,
            guard: GuardOptions {
                minor_faults: sampled && shmem,
            },
        })
    }

    /// Registers `memory` with the VM as its memslots, dirty-logged (with
    /// KVM's manual protection on) when the plan reads the dirty log.
    pub fn register_memslots(
        &self,
        vm_fd: &VmFd,
        memory: &TieredMemory,
    ) -> Result<Vec<Memslot>, VmError> {
        if self.dirty_log {
            access_track::enable_manual_protect(vm_fd).map_err(MigrationError::from)?;
        }
        memslots::register(vm_fd, memory, self.dirty_log)
    }
}

/// What the tiering side works with, from the rest of the VM.
pub(crate) struct TieringParts<'a> {
    /// The VM (the dirty log and the access log read it).
    pub vm_fd: &'a Arc<VmFd>,
    /// The memslots [`TieringPlan::register_memslots`] registered.
    pub memslots: Vec<Memslot>,
    /// The VM's memory.
    pub memory: &'a Arc<TieredMemory>,
    /// The log the VMM's own threads write guest memory through.
    pub writes: &'a Arc<HostWriteLog>,
    /// Stops the VM's writers while frames the guard cannot protect move.
    pub write_stop: Arc<dyn WriteStop>,
}

/// A VM's dirty log, write guard, migrator, trackers and tiering engine.
#[derive(Debug)]
pub(crate) struct VmTiering {
    // Field order is drop order: the engine before the migrator, the
    // migrator before the guard and dirty log it uses.
    engine: VmEngine,
    migrator: Option<Arc<dyn Migrator>>,
    trackers: VmTrackers,
}

impl VmTiering {
    /// Builds what `plan` decided over `parts`: the dirty log, the
    /// migrator and its guard (or the fault sampler's own guard: one
    /// userfaultfd per VM), and the engine, started now or checked and
    /// kept as the plan's [`EngineStart`] says.
    pub fn new(plan: TieringPlan, parts: TieringParts<'_>) -> Result<Self, VmError> {
        let dirty_log = plan
            .dirty_log
            .then(|| KvmDirtyLog::new(parts.vm_fd.clone(), parts.memslots));
        let setup = migration::build(
            &plan.migration,
            parts.memory,
            dirty_log.as_ref(),
            parts.writes,
            plan.guard,
            parts.write_stop,
        )?;
        let (migrator, mut guard) = match setup {
            Some(s) => (Some(s.migrator), s.guard),
            None => (None, None),
        };
        if guard.is_none() && plan.guard.minor_faults {
            // Without a remap migrator, fault sampling gets a guard of
            // its own.
            guard = Some(Arc::new(WriteGuard::with_options(
                parts.memory.regions(),
                plan.guard,
            )?));
        }
        let trackers = VmTrackers {
            memory: parts.memory.clone(),
            vm: parts.vm_fd.clone(),
            guard,
            dirty_log,
        };
        let engine = match (plan.policy, &migrator) {
            (Some(policy), Some(m)) => VmEngine::new(
                PendingParts {
                    migrator: m.clone(),
                    trackers: trackers.clone(),
                },
                policy,
                plan.engine_start,
            )?,
            _ => VmEngine::None,
        };
        Ok(VmTiering {
            engine,
            migrator,
            trackers,
        })
    }

    /// The running engine.
    pub fn engine(&self) -> Option<&Arc<Engine>> {
        self.engine.engine()
    }

    /// Starts a deferred engine; on failure it stays deferred.
    pub fn start_engine(&mut self) -> Result<(), EngineError> {
        self.engine.start()
    }

    /// The policy in force or waiting for the engine to start.
    pub fn policy(&self) -> Option<TieringPolicy> {
        self.engine.policy()
    }

    /// Replaces the policy; `None` without tiering.
    pub fn set_policy(&mut self, policy: TieringPolicy) -> Option<Result<(), EngineError>> {
        self.engine.set_policy(policy)
    }

    /// The migrator, if one is configured.
    pub fn migrator(&self) -> Option<&Arc<dyn Migrator>> {
        self.migrator.as_ref()
    }

    /// The KVM dirty log, when it is on.
    pub fn dirty_log(&self) -> Option<&KvmDirtyLog> {
        self.trackers.dirty_log.as_ref()
    }

    /// The userfaultfd guard, when there is one.
    pub fn guard(&self) -> Option<&Arc<WriteGuard>> {
        self.trackers.guard.as_ref()
    }

    /// What builds this VM's trackers.
    pub fn trackers(&self) -> &VmTrackers {
        &self.trackers
    }

    /// A new access tracker of `kind` over the VM's dirty log and guard,
    /// the dirty log sampled at the default [`SamplingSettings`].
    pub fn tracker(
        &self,
        kind: TrackerKind,
        fault: FaultSampleConfig,
    ) -> Result<Box<dyn AccessTracker>, TrackerBuildError> {
        self.trackers
            .tracker(kind, fault, SamplingSettings::default())
    }
}

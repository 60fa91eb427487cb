//! Which migrator a VM uses and what it needs from the VMM: the userfaultfd
//! write guard (remap), the KVM dirty log and host write log (pre-copy),
//! and the copy engine.

use std::sync::Arc;

use thiserror::Error;

use access_track::{DirtyLogError, KvmDirtyLog};
pub use guest_memory::migrate::MigratorKind;
use guest_memory::migrate::{
    CombinedDirty, GuardError, GuardOptions, HostWriteLog, KernelError, KernelMigrator,
    PrecopyConfig, RemapError, RemapMigrator, WriteGuard,
};
use guest_memory::{BackendKind, Migrator, TieredMemory};
use page_copy::{CopyError, EngineSpec, engine_from_spec};

use crate::debug_corruption;

/// Migration settings of a VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationConfig {
    /// The migrator.
    pub migrator: MigratorKind,
    /// Copy engine of the remap migrators.
    pub copy_engine: EngineSpec,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig {
            migrator: MigratorKind::None,
            copy_engine: EngineSpec::Threads {
                workers: page_copy::default_workers(),
                pin: false,
            },
        }
    }
}

/// Errors setting up migration.
#[derive(Debug, Error)]
pub enum MigrationError {
    /// The write guard could not be set up.
    #[error("userfaultfd guard")]
    Guard(#[from] GuardError),
    /// The dirty log could not be enabled.
    #[error("KVM dirty log")]
    DirtyLog(#[from] DirtyLogError),
    /// The copy engine could not be built.
    #[error("copy engine")]
    Engine(#[from] CopyError),
    /// The remap migrator refused the memory.
    #[error(transparent)]
    Remap(#[from] RemapError),
    /// The kernel migrator refused the memory.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A remap migrator over a device-DAX tier: userfaultfd cannot
    /// register DAX mappings, so nothing could hold the guest's writes
    /// while a frame on that tier is copied.
    #[error(
        "tier '{0}' is device-DAX, which userfaultfd cannot write-protect: the remap migrators \
         cannot move its frames (use --migrator none, or online the device as a NUMA node and \
         use the kernel migrator)"
    )]
    DaxNotGuardable(String),
}

/// A VM's migrator and the parts it keeps alive.
#[derive(Debug)]
pub struct MigrationSetup {
    /// The migrator.
    pub migrator: Arc<dyn Migrator>,
    /// The write guard (remap migrators).
    pub guard: Option<Arc<WriteGuard>>,
}

/// Builds the migrator of `cfg` over `memory`. `dirty_log` is the VM's
/// dirty log (present when the migrator needs it), `host_writes` the log
/// VMM threads write guest memory through; `guard` says what the remap
/// migrators' write guard registers besides write-protection (the VM's
/// one userfaultfd, which fault sampling shares).
pub fn build(
    cfg: &MigrationConfig,
    memory: &Arc<TieredMemory>,
    dirty_log: Option<&KvmDirtyLog>,
    host_writes: &Arc<HostWriteLog>,
    guard: GuardOptions,
) -> Result<Option<MigrationSetup>, MigrationError> {
    let remap = |precopy: Option<PrecopyConfig>| -> Result<MigrationSetup, MigrationError> {
        if let Some(tier) = memory
            .tiers()
            .iter()
            .find(|t| matches!(t.kind(), BackendKind::DevDax { .. }))
        {
            return Err(MigrationError::DaxNotGuardable(tier.name().to_owned()));
        }
        let guard = Arc::new(WriteGuard::with_options(memory.regions(), guard)?);
        let engine = engine_from_spec(&cfg.copy_engine)?;
        let migrator = RemapMigrator::new(memory.clone(), guard.clone(), engine, precopy)?;
        Ok(MigrationSetup {
            migrator: Arc::new(migrator),
            guard: Some(guard),
        })
    };
    let setup = match cfg.migrator {
        MigratorKind::None => return Ok(None),
        MigratorKind::Remap => remap(None)?,
        MigratorKind::RemapPrecopy => {
            let Some(log) = dirty_log else {
                return Err(MigrationError::DirtyLog(DirtyLogError::NoManualProtect));
            };
            host_writes.enable();
            let kvm = log.subscribe();
            let dirty = CombinedDirty(vec![Arc::new(kvm), host_writes.clone()]);
            remap(Some(PrecopyConfig::new(Arc::new(dirty))))?
        }
        MigratorKind::Kernel => MigrationSetup {
            migrator: Arc::new(KernelMigrator::new(memory.clone())?),
            guard: None,
        },
    };
    Ok(Some(MigrationSetup {
        migrator: debug_corruption::wrap(setup.migrator, memory),
        guard: setup.guard,
    }))
}

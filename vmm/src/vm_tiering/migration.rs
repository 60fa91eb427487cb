//! Which migrator a VM uses and what it needs from the VMM: the userfaultfd
//! write guard (remap), the VM-wide write stop (remap, for device-DAX and
//! file tiers), the KVM dirty log and host write log (pre-copy), and the
//! copy engine.

use std::sync::Arc;

use thiserror::Error;

use access_track::{DirtyLogError, KvmDirtyLog};
pub use guest_memory::migrate::MigratorKind;
use guest_memory::migrate::{
    CombinedDirty, GuardError, GuardOptions, HostWriteLog, KernelError, KernelMigrator,
    PrecopyConfig, RemapError, RemapMigrator, WriteGuard, WriteStop,
};
use guest_memory::{Migrator, TieredMemory};
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
/// one userfaultfd, which fault sampling shares); `stop` stops the VM's
/// writers while frames of tiers userfaultfd cannot protect move.
pub fn build(
    cfg: &MigrationConfig,
    memory: &Arc<TieredMemory>,
    dirty_log: Option<&KvmDirtyLog>,
    host_writes: &Arc<HostWriteLog>,
    guard: GuardOptions,
    stop: Arc<dyn WriteStop>,
) -> Result<Option<MigrationSetup>, MigrationError> {
    let remap = |precopy: Option<PrecopyConfig>| -> Result<MigrationSetup, MigrationError> {
        // Device-DAX and file mappings cannot be registered: the guard
        // covers the memfd frames, the stop the others.
        let ranges = memory.write_protectable_ranges();
        let guard = Arc::new(WriteGuard::with_options(&ranges, guard)?);
        let engine = engine_from_spec(&cfg.copy_engine)?;
        let migrator = RemapMigrator::with_write_stop(
            memory.clone(),
            guard.clone(),
            engine,
            precopy,
            stop.clone(),
        )?;
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

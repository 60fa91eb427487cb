//! [`VmError`]: everything that can go wrong creating or running a VM,
//! from the configuration's checks to KVM, the guest image, devices,
//! migration, trackers and the tiering engine.

use std::path::PathBuf;

use thiserror::Error;

use access_track::{TrackerBuildError, UnknownTracker};
use guest_memory::migrate::GuardError;
use tiering::EngineError;

use crate::acpi::AcpiError;
use crate::arch::regs::RegsError;
use crate::devices::power_button::PowerButtonError;
use crate::linux::LinuxError;
use crate::payload::boot::BootError;
use crate::payload::elf::ElfError;
use crate::vm_tiering::migration::MigrationError;

/// Errors creating or running a VM.
#[derive(Debug, Error)]
pub enum VmError {
    /// Zero vCPUs or more than KVM allows.
    #[error("vCPU count {requested} not in 1..={max}")]
    VcpuCount {
        /// Requested count.
        requested: u32,
        /// KVM's limit.
        max: u32,
    },
    /// The embedded workload argument string is invalid.
    #[error("workload: {0}")]
    Workload(String),
    /// The payload file could not be read.
    #[error("reading payload {path}")]
    ReadPayload {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The payload image is invalid.
    #[error("payload: {0}")]
    Elf(#[from] ElfError),
    /// The Linux kernel, initramfs or command line cannot boot.
    #[error("linux: {0}")]
    Linux(#[from] LinuxError),
    /// The ACPI tables could not be built for this VM.
    #[error("ACPI tables")]
    Acpi(#[from] AcpiError),
    /// The serial console could not be set up (its file, its eventfd).
    #[error("serial console")]
    Console(#[source] std::io::Error),
    /// The ACPI power button could not be wired.
    #[error("power button")]
    PowerButton(#[from] PowerButtonError),
    /// Boot state could not be planned or written.
    #[error("boot: {0}")]
    Boot(#[from] BootError),
    /// Guest memory could not be created.
    #[error("guest memory: {0}")]
    Memory(#[from] guest_memory::Error),
    /// A KVM ioctl failed.
    #[error("KVM: {what}")]
    Kvm {
        /// The operation.
        what: &'static str,
        /// The error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// vCPU register setup failed.
    #[error("vCPU setup: {0}")]
    Regs(#[from] RegsError),
    /// A thread could not be started or a signal installed.
    #[error("starting vCPU threads")]
    Thread(#[source] std::io::Error),
    /// Migration could not be set up.
    #[error("migration: {0}")]
    Migration(#[from] MigrationError),
    /// The userfaultfd guard for fault sampling could not be set up.
    #[error("fault sampling: userfaultfd guard")]
    Guard(#[from] GuardError),
    /// No tracker of that name.
    #[error(transparent)]
    UnknownTracker(#[from] UnknownTracker),
    /// A tracker could not be built.
    #[error("tracker: {0}")]
    Tracker(#[from] TrackerBuildError),
    /// Tiering asked for without a migrator.
    #[error("tiering needs a migrator (remap, remap-precopy or kernel)")]
    TieringWithoutMigrator,
    /// The tiering engine could not start.
    #[error("tiering engine")]
    Engine(#[from] EngineError),
}

/// Maps a failed KVM ioctl to [`VmError::Kvm`], saying what it was for.
pub(crate) fn kvm_err(what: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> VmError {
    move |source| VmError::Kvm { what, source }
}

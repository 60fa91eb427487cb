//! Live migration of guest frames between tiers (ARCHITECTURE §3).
//!
//! A [`Migrator`] takes a batch of [`Move`]s and returns a [`BatchReport`].
//! Two families exist: the remap migrator (each tier its own backing
//! object; userfaultfd write-protect → copy → `mmap(MAP_FIXED)` → wake,
//! with a pre-copy variant and exchange; a VM-wide [`WriteStop`] instead
//! of write-protection for tiers userfaultfd cannot register) and the kernel migrator (one
//! backing object, tiers are host NUMA nodes, `move_pages(2)`). Every
//! failure rolls back: a migration never loses a guest write.

mod bounce;
pub mod dirty;
pub mod faults;
pub mod guard;
mod kernel;
mod kernel_pages;
mod kernel_plan;
mod kind;
pub mod remap;
mod report;
pub mod stop;
mod urgent;

use std::fmt::Debug;

pub use dirty::{CombinedDirty, DirtyError, DirtySource, GpaSpan, HostWriteLog};
pub use faults::{FaultInjection, Step};
pub use guard::{GuardError, GuardOptions, MinorFaultSink, WindowLock, WriteGuard};
pub use kernel::{KernelError, KernelMigrator};
pub use kernel_pages::PageCounts;
pub use kind::MigratorKind;
pub use remap::{PrecopyConfig, RemapError, RemapMigrator};
pub use report::BatchReport;
pub use stop::{StopError, WriteStop};

/// Move one frame to a tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Move {
    /// Frame index.
    pub frame: usize,
    /// Destination tier index.
    pub to_tier: usize,
}

/// Something that moves guest frames between tiers while the guest runs.
///
/// Calls are serialized per migrator (a second caller waits). The
/// placement map is updated for every frame that moved, and only for those.
pub trait Migrator: Send + Sync + Debug {
    /// Short name ("remap", "remap-precopy", "kernel").
    fn name(&self) -> &str;

    /// Moves what it can of `batch` and reports what happened. Moves to the
    /// tier a frame is already on are skipped; a frame named twice is
    /// moved once (the first move wins).
    fn migrate(&self, batch: &[Move]) -> BatchReport;

    /// Moves `frames` to tier `to_tier`.
    fn migrate_frames(&self, frames: &[usize], to_tier: usize) -> BatchReport {
        let batch: Vec<Move> = frames
            .iter()
            .map(|&frame| Move { frame, to_tier })
            .collect();
        self.migrate(&batch)
    }

    /// The migrator's fault-injection switches, if it has any (tests and
    /// soak runs make steps fail on purpose to exercise every rollback).
    fn faults(&self) -> Option<&std::sync::Arc<FaultInjection>> {
        None
    }
}

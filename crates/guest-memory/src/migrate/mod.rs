//! Live migration of guest frames between tiers.
//!
//! A [`Migrator`] takes a [`Batch`] (plain moves and exchanges) and returns
//! a [`BatchOutcome`]: each frame moved, each move failed with its step and
//! cause, and the batch's counts and costs ([`BatchReport`]).
//!
//! Two families exist: the remap migrator (each tier its own backing
//! object; userfaultfd write-protect → copy → `mmap(MAP_FIXED)` → wake,
//! with a pre-copy variant and exchange; a VM-wide [`WriteStop`] instead
//! of write-protection for tiers userfaultfd cannot register) and the
//! kernel migrator (one backing object, tiers are host NUMA nodes,
//! `move_pages(2)`). Every failure rolls back: a migration never loses a
//! guest write.

mod batch;
mod bounce;
pub mod dirty;
pub mod faults;
pub mod guard;
mod kernel;
mod kernel_pages;
mod kernel_plan;
mod kind;
mod outcome;
pub mod remap;
mod report;
pub mod stop;
mod urgent;

use std::fmt::Debug;

use crate::ids::{FrameId, TierId};
use crate::tiered::TieredMemory;

pub use batch::{Batch, Exchange, Move};
pub use dirty::{CombinedDirty, DirtyError, DirtySource, HostWriteLog};
pub use faults::{FaultInjection, Step};
pub use guard::{GuardError, GuardOptions, MinorFaultSink, WindowLock, WriteGuard};
pub use kernel::{KernelError, KernelMigrator};
pub use kernel_pages::{PageCounts, PageError};
pub use kind::MigratorKind;
pub use outcome::{BatchOutcome, MoveError, MoveStep, MovedFrame, StepError};
pub use remap::{PrecopyConfig, RemapError, RemapMigrator};
pub use report::BatchReport;
pub use stop::{StopError, WriteStop};

/// Something that moves guest frames between tiers while the guest runs.
///
/// Calls are serialized per migrator (a second caller waits). The
/// placement map is updated for every frame that moved, and only for those.
pub trait Migrator: Send + Sync + Debug {
    /// Short name ("remap", "remap-precopy", "kernel").
    fn name(&self) -> &str;

    /// The memory whose frames it moves.
    fn memory(&self) -> &TieredMemory;

    /// Moves what it can of `batch` and reports what became of each move.
    /// Moves to the tier a frame is already on are skipped; a frame named
    /// twice is moved once (the first move wins). A plain move into a full
    /// tier may take the room a plain move of the same batch frees by
    /// leaving that tier, and fails otherwise; an exchange swaps its two
    /// frames.
    fn migrate(&self, batch: &Batch) -> BatchOutcome;

    /// Moves `moves`, letting [`Batch::pairing`] turn the moves that find
    /// their destination full into exchanges.
    fn migrate_moves(&self, moves: &[Move]) -> BatchOutcome {
        self.migrate(&Batch::pairing(moves, self.memory()))
    }

    /// Moves `frames` to tier `to_tier`.
    fn migrate_frames(&self, frames: &[FrameId], to_tier: TierId) -> BatchOutcome {
        let mut batch = Batch::new();
        for &frame in frames {
            batch.push_move(frame, to_tier);
        }
        self.migrate(&batch)
    }

    /// The migrator's fault-injection switches, if it has any (tests and
    /// soak runs make steps fail on purpose to exercise every rollback).
    fn faults(&self) -> Option<&std::sync::Arc<FaultInjection>> {
        None
    }
}

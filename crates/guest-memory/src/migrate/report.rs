//! What one migration batch did and what it cost.

use std::time::Duration;

use serde::Serialize;

/// The counts and costs of a batch (or of many, summed): the part of a
/// [`super::BatchOutcome`] that adds up.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BatchReport {
    /// Moves asked for.
    pub requested: usize,
    /// Frames now on their destination tier.
    pub moved: usize,
    /// Of `moved`, frames that swapped places with another frame.
    pub exchanged: usize,
    /// Moves skipped (frame already there, or named twice).
    pub skipped: usize,
    /// Moves not done because a step failed; each was rolled back.
    pub aborted: usize,
    /// Bytes copied, re-copies included.
    pub bytes: u64,
    /// Pre-copy: 4 KiB pages copied again because the guest dirtied them.
    pub recopied_pages: u64,
    /// Time write-protecting the batch (or stopping the writers).
    pub protect: Duration,
    /// Time copying.
    pub copy: Duration,
    /// Time replacing mappings, re-registering and waking.
    pub remap: Duration,
    /// Pre-copy: time resetting and reading the dirty log.
    pub dirty: Duration,
    /// Time committing moves to the placement map and punching out and
    /// releasing their source slots.
    pub commit: Duration,
    /// Time the stages above ran at once: in a pipelined batch, their
    /// summed busy times less the wall time they spanned (0 when they ran
    /// one after another).
    pub overlap: Duration,
    /// Sub-batches the pipelined plain protocol cut its batches into (0
    /// when every stage ran one after another).
    pub sub_batches: usize,
    /// Whole call.
    pub total: Duration,
    /// Longest time a guest write waited on this batch (0 if none waited).
    pub stall_max: Duration,
    /// Every observed write stall of this batch (a VM-wide write stop
    /// counts once, for its whole length).
    pub stalls: Vec<Duration>,
    /// VM-wide write stops (frames of tiers userfaultfd cannot protect).
    pub stops: u64,
}

impl BatchReport {
    /// Adds `other` to `self` (for totals over many batches).
    pub fn absorb(&mut self, other: &BatchReport) {
        self.requested += other.requested;
        self.moved += other.moved;
        self.exchanged += other.exchanged;
        self.skipped += other.skipped;
        self.aborted += other.aborted;
        self.bytes += other.bytes;
        self.recopied_pages += other.recopied_pages;
        self.protect += other.protect;
        self.copy += other.copy;
        self.remap += other.remap;
        self.dirty += other.dirty;
        self.commit += other.commit;
        self.overlap += other.overlap;
        self.sub_batches += other.sub_batches;
        self.total += other.total;
        self.stall_max = self.stall_max.max(other.stall_max);
        self.stalls.extend_from_slice(&other.stalls);
        self.stops += other.stops;
    }
}

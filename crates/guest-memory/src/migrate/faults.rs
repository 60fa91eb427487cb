//! Fault injection for migration tests and soak runs: make the next N
//! destination reservations, write-protections, write stops, copies,
//! remaps or registrations fail (optionally after letting some through,
//! to hit a pipelined batch's later sub-batches), so every rollback path
//! runs for real; and hold the next N
//! write-protected batches until a writer is seen waiting on one (or
//! pre-copy passes until a page of theirs is dirtied), so tests of write
//! stalls and re-copies see one by construction, not by luck. Off (all zero) in
//! normal operation; checking it costs one relaxed atomic load per step.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Longest a hold of [`FaultInjection::hold_until_write_waits`] waits for
/// a writer: far beyond any guest that writes its frames at all, short
/// enough that a guest that never does fails its test instead of hanging.
pub const WRITE_WAIT_LIMIT: Duration = Duration::from_secs(60);

/// A migration step that can be made to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reserving a destination slot (as if the tier were full).
    Reserve,
    /// Write-protecting frames (as if `UFFDIO_WRITEPROTECT` failed).
    Protect,
    /// Copying a batch (as if the copy engine failed).
    Copy,
    /// Replacing a frame's mapping (as if `mmap(MAP_FIXED)` failed).
    Remap,
    /// Stopping the VM's writers (as if a vCPU never parked).
    Stop,
    /// Registering a batch's new mappings with the write guard (as if
    /// `UFFDIO_REGISTER` failed).
    Register,
}

/// Counters of failures still to inject, per step.
#[derive(Debug, Default)]
pub struct FaultInjection {
    reserve: AtomicU64,
    protect: AtomicU64,
    copy: AtomicU64,
    remap: AtomicU64,
    stop: AtomicU64,
    register: AtomicU64,
    /// Attempts to let through before the failures, per step (in
    /// [`Step`]'s order).
    skips: [AtomicU64; 6],
    injected: AtomicU64,
    write_waits: AtomicU64,
    dirty_waits: AtomicU64,
}

impl FaultInjection {
    fn counter(&self, step: Step) -> &AtomicU64 {
        match step {
            Step::Reserve => &self.reserve,
            Step::Protect => &self.protect,
            Step::Copy => &self.copy,
            Step::Remap => &self.remap,
            Step::Stop => &self.stop,
            Step::Register => &self.register,
        }
    }

    fn skips(&self, step: Step) -> &AtomicU64 {
        &self.skips[match step {
            Step::Reserve => 0,
            Step::Protect => 1,
            Step::Copy => 2,
            Step::Remap => 3,
            Step::Stop => 4,
            Step::Register => 5,
        }]
    }

    /// Makes the next `count` attempts of `step` fail.
    pub fn fail_next(&self, step: Step, count: u64) {
        self.fail_after(step, 0, count);
    }

    /// Lets the next `skip` attempts of `step` through, then makes the
    /// `count` after them fail: in a pipelined batch, whose sub-batches
    /// take each step in turn, this fails sub-batch `skip` while its
    /// neighbours are in other stages.
    pub fn fail_after(&self, step: Step, skip: u64, count: u64) {
        self.skips(step).store(skip, Ordering::SeqCst);
        self.counter(step).store(count, Ordering::SeqCst);
    }

    /// Whether this attempt of `step` must fail (consumes one failure).
    pub fn should_fail(&self, step: Step) -> bool {
        if self.counter(step).load(Ordering::Relaxed) == 0 || take_one(self.skips(step)) {
            return false;
        }
        let fail = take_one(self.counter(step));
        if fail {
            self.injected.fetch_add(1, Ordering::Relaxed);
        }
        fail
    }

    /// Makes the next `count` write-protected holds (the migration
    /// window of a batch or of a pre-copy group, once protected) wait
    /// until a writer is recorded waiting in the window before the
    /// migrator goes on, at most [`WRITE_WAIT_LIMIT`]: a test of write
    /// stalls then sees one whenever the guest writes those frames at all.
    pub fn hold_until_write_waits(&self, count: u64) {
        self.write_waits.store(count, Ordering::SeqCst);
    }

    /// Whether this hold must wait for a writer (consumes one).
    pub fn take_write_wait(&self) -> bool {
        take_one(&self.write_waits)
    }

    /// Makes the next `count` pre-copy passes wait, after their first
    /// copy, until the dirty log shows a page of the batch written since
    /// (at most [`WRITE_WAIT_LIMIT`]); those pages are copied again. A test
    /// of pre-copy's re-copies then sees one whenever the guest writes
    /// those frames at all.
    pub fn hold_precopy_until_dirty(&self, count: u64) {
        self.dirty_waits.store(count, Ordering::SeqCst);
    }

    /// Whether this pre-copy pass must wait for a dirty page (consumes
    /// one).
    pub fn take_dirty_wait(&self) -> bool {
        take_one(&self.dirty_waits)
    }

    /// Failures injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }
}

/// Takes one from `counter` if it is above zero; whether it did.
fn take_one(counter: &AtomicU64) -> bool {
    let mut cur = counter.load(Ordering::Relaxed);
    while cur > 0 {
        match counter.compare_exchange_weak(cur, cur - 1, Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injects_exactly_n_failures() {
        let f = FaultInjection::default();
        assert!(!f.should_fail(Step::Copy));
        f.fail_next(Step::Copy, 2);
        assert!(f.should_fail(Step::Copy));
        assert!(!f.should_fail(Step::Remap));
        assert!(f.should_fail(Step::Copy));
        assert!(!f.should_fail(Step::Copy));
        assert_eq!(f.injected(), 2);
    }

    #[test]
    fn fails_after_the_attempts_it_lets_through() {
        let f = FaultInjection::default();
        f.fail_after(Step::Protect, 2, 1);
        assert!(!f.should_fail(Step::Protect));
        assert!(!f.should_fail(Step::Copy));
        assert!(!f.should_fail(Step::Protect));
        assert!(f.should_fail(Step::Protect));
        assert!(!f.should_fail(Step::Protect));
        assert_eq!(f.injected(), 1);
        // Cleared: nothing skipped or failed.
        f.fail_after(Step::Remap, 1, 1);
        f.fail_next(Step::Remap, 0);
        assert!(!f.should_fail(Step::Remap));
        assert!(!f.should_fail(Step::Remap));
    }

    #[test]
    fn write_waits_are_counted_apart_from_failures() {
        let f = FaultInjection::default();
        assert!(!f.take_write_wait());
        f.hold_until_write_waits(1);
        assert!(!f.should_fail(Step::Copy));
        assert!(f.take_write_wait());
        assert!(!f.take_write_wait());
        assert!(!f.take_dirty_wait());
        f.hold_precopy_until_dirty(1);
        assert!(f.take_dirty_wait());
        assert!(!f.take_dirty_wait());
        assert_eq!(f.injected(), 0);
    }
}

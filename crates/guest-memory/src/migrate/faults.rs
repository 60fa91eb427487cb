//! Fault injection for migration tests and soak runs: make the next N
//! destination reservations, write stops, copies, remaps or registrations
//! fail, so every rollback path runs for real. Off (all zero) in normal
//! operation; checking it costs one relaxed atomic load per step.

use std::sync::atomic::{AtomicU64, Ordering};

/// A migration step that can be made to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reserving a destination slot (as if the tier were full).
    Reserve,
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
    copy: AtomicU64,
    remap: AtomicU64,
    stop: AtomicU64,
    register: AtomicU64,
    injected: AtomicU64,
}

impl FaultInjection {
    fn counter(&self, step: Step) -> &AtomicU64 {
        match step {
            Step::Reserve => &self.reserve,
            Step::Copy => &self.copy,
            Step::Remap => &self.remap,
            Step::Stop => &self.stop,
            Step::Register => &self.register,
        }
    }

    /// Makes the next `count` attempts of `step` fail.
    pub fn fail_next(&self, step: Step, count: u64) {
        self.counter(step).store(count, Ordering::SeqCst);
    }

    /// Whether this attempt of `step` must fail (consumes one failure).
    pub fn should_fail(&self, step: Step) -> bool {
        let c = self.counter(step);
        let mut cur = c.load(Ordering::Relaxed);
        while cur > 0 {
            match c.compare_exchange_weak(cur, cur - 1, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => {
                    self.injected.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                Err(now) => cur = now,
            }
        }
        false
    }

    /// Failures injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }
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
}

//! What a workload needs from where it runs: a clock, hypercalls, a log, a
//! barrier across vCPUs and access to guest memory. The payload implements
//! these with `rdtsc`, `out` and identity-mapped pointers; host tests with
//! recording fakes over a `Vec`.

use core::hint::spin_loop;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use guest_abi::{Op, Request, Status};

use crate::run_error::RunError;

/// The environment one vCPU runs in.
pub trait Platform {
    /// Monotonic nanoseconds since an arbitrary origin, or `None` when the
    /// guest has no usable clock (BootInfo `tsc_khz` = 0).
    fn now_ns(&self) -> Option<u64>;

    /// Performs a hypercall; the VMM writes [`Request::status`].
    fn hypercall(&self, request: &mut Request);

    /// Sends `message` with the `Log` hypercall (cut to
    /// [`guest_abi::MAX_LOG_LEN`] bytes by the implementation).
    fn log(&self, message: &[u8]);

    /// Waits until every vCPU of the run has called `barrier` as often as
    /// this one.
    fn barrier(&self);

    /// A barrier that also returns whether any vCPU voted `true`, the same
    /// answer on every vCPU. Without other vCPUs: the own vote.
    fn barrier_vote(&self, vote: bool) -> bool {
        self.barrier();
        vote
    }

    /// Whether the VMM asked the payload to stop (BootInfo `stop_gpa`).
    fn stop_requested(&self) -> bool {
        false
    }
}

/// Guest memory as the payload sees it.
pub trait GuestMemory {
    /// The bytes at `[gpa, gpa + len)`, if addressable.
    fn bytes(&self, gpa: u64, len: u64) -> Option<&[u8]>;

    /// The 8-byte words at `[gpa, gpa + len)`, if addressable and aligned.
    /// Everything the workloads touch goes through these atomics (relaxed
    /// loads and stores are plain `mov`s), so vCPUs sharing a buffer are
    /// never a data race.
    fn words(&self, gpa: u64, len: u64) -> Option<&[AtomicU64]>;
}

/// Sends a hypercall and checks that the VMM accepted it.
pub(crate) fn send<P: Platform>(platform: &P, op: Op, args: [u64; 4]) -> Result<(), RunError> {
    let mut request = Request::new(op, args);
    platform.hypercall(&mut request);
    if request.status != Status::Ok as u32 {
        return Err(RunError::Rejected {
            op,
            status: request.status,
        });
    }
    Ok(())
}

/// A spinning barrier for a fixed number of parties, usable from a static
/// in guest memory (all-zero is its initial state).
#[derive(Debug, Default)]
pub struct SpinBarrier {
    arrived: AtomicU32,
    generation: AtomicU32,
    /// Votes of the current and the next generation (see `wait_vote`).
    votes: [AtomicU32; 2],
}

impl SpinBarrier {
    /// A barrier nobody has reached.
    pub const fn new() -> Self {
        SpinBarrier {
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            votes: [AtomicU32::new(0), AtomicU32::new(0)],
        }
    }

    /// Waits until `parties` callers (this one included) have arrived.
    pub fn wait(&self, parties: u32) {
        self.wait_vote(parties, false);
    }

    /// Like [`SpinBarrier::wait`]; returns whether any party voted `true`.
    /// Generation g collects votes in cell g % 2; the last arriver clears
    /// the other cell before releasing, and nobody can vote into it again
    /// before every party has read this generation's cell.
    pub fn wait_vote(&self, parties: u32, vote: bool) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        let cell = &self.votes[(generation % 2) as usize];
        if vote {
            cell.fetch_or(1, Ordering::AcqRel);
        }
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 >= parties {
            // Reset before releasing: nobody can arrive again until the
            // generation moves.
            self.arrived.store(0, Ordering::Relaxed);
            self.votes[((generation + 1) % 2) as usize].store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
        } else {
            while self.generation.load(Ordering::Acquire) == generation {
                spin_loop();
            }
        }
        cell.load(Ordering::Acquire) != 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    #[test]
    fn barrier_separates_rounds() {
        const THREADS: u32 = 3;
        const ROUNDS: u64 = 50;
        let barrier = SpinBarrier::new();
        let counter = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for round in 0..ROUNDS {
                        counter.fetch_add(1, Ordering::SeqCst);
                        barrier.wait(THREADS);
                        // Everyone finished this round's increment, nobody the next.
                        assert_eq!(
                            counter.load(Ordering::SeqCst),
                            (round + 1) * u64::from(THREADS)
                        );
                        barrier.wait(THREADS);
                    }
                });
            }
        });
    }

    #[test]
    fn single_party_never_blocks() {
        let barrier = SpinBarrier::new();
        for _ in 0..3 {
            barrier.wait(1);
        }
    }
}

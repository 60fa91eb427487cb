//! Per-phase bookkeeping: counts operations and bytes, sends `Progress`
//! about every 100 ms and decides when a phase is over — by the guest clock,
//! or by an operation budget when the guest has no clock.

use guest_abi::Op;

use crate::platform::{Platform, send};
use crate::run_error::RunError;

/// Time between `Progress` hypercalls.
pub const PROGRESS_INTERVAL_NS: u64 = 100_000_000;
/// Without a clock (BootInfo `tsc_khz` = 0) a phase of `seconds` lasts
/// `seconds * FALLBACK_OPS_PER_SECOND` operations per vCPU, and `Progress`
/// goes out every tenth of that rate.
pub const FALLBACK_OPS_PER_SECOND: u64 = 10_000_000;

/// Counters and end condition of one phase on one vCPU.
#[derive(Debug)]
pub struct PhaseMeter<'p, P: Platform> {
    platform: &'p P,
    phase: u32,
    start_ns: Option<u64>,
    /// End of the phase: a time with a clock, an op count without one;
    /// `None` for phases that end by themselves (memcheck rounds).
    end: Option<u64>,
    /// Next `Progress`: a time with a clock, an op count without one.
    next_progress: u64,
    ops: u64,
    bytes: u64,
}

impl<'p, P: Platform> PhaseMeter<'p, P> {
    /// Starts metering `phase`, which lasts `phase_ms` (0 = until the
    /// workload stops by itself).
    pub fn start(platform: &'p P, phase: u32, phase_ms: u64) -> Self {
        let start_ns = platform.now_ns();
        let (end, next_progress) = match start_ns {
            Some(t) => (
                t.saturating_add(phase_ms.saturating_mul(1_000_000)),
                t.saturating_add(PROGRESS_INTERVAL_NS),
            ),
            None => (
                (phase_ms.saturating_mul(FALLBACK_OPS_PER_SECOND) / 1000).max(1),
                FALLBACK_OPS_PER_SECOND / 10,
            ),
        };
        PhaseMeter {
            platform,
            phase,
            start_ns,
            end: (phase_ms > 0).then_some(end),
            next_progress,
            ops: 0,
            bytes: 0,
        }
    }

    /// The platform the phase runs on (for workloads that make their own
    /// hypercalls).
    pub fn platform(&self) -> &'p P {
        self.platform
    }

    /// Where the phase stands: the time, or the op count without a clock.
    fn position(&self) -> u64 {
        match self.start_ns {
            Some(_) => self.platform.now_ns().unwrap_or(0),
            None => self.ops,
        }
    }

    /// Counts `ops` operations touching `bytes` bytes; sends `Progress` when
    /// due. Returns whether the phase is over. Call it every few thousand
    /// operations: each call may read the clock.
    pub fn add(&mut self, ops: u64, bytes: u64) -> Result<bool, RunError> {
        self.ops += ops;
        self.bytes += bytes;
        let now = self.position();
        if now >= self.next_progress {
            send(
                self.platform,
                Op::Progress,
                [u64::from(self.phase), self.ops, 0, 0],
            )?;
            let interval = match self.start_ns {
                Some(_) => PROGRESS_INTERVAL_NS,
                None => FALLBACK_OPS_PER_SECOND / 10,
            };
            self.next_progress = now.saturating_add(interval);
        }
        Ok(self.end.is_some_and(|end| now >= end) || self.platform.stop_requested())
    }

    /// Whether the phase's time (or op budget) is used up, or the VMM asked
    /// the run to stop.
    pub fn expired(&self) -> bool {
        self.end.is_some_and(|end| self.position() >= end) || self.platform.stop_requested()
    }

    /// Whether the VMM asked the run to stop: the phase ends early.
    pub fn stop_requested(&self) -> bool {
        self.platform.stop_requested()
    }

    /// Whether this phase has an end of its own.
    pub fn is_timed(&self) -> bool {
        self.end.is_some()
    }

    /// Operations, bytes touched and guest nanoseconds (0 without a clock)
    /// of the phase.
    pub fn finish(&self) -> (u64, u64, u64) {
        let nanos = match (self.start_ns, self.platform.now_ns()) {
            (Some(start), Some(now)) => now.saturating_sub(start),
            _ => 0,
        };
        (self.ops, self.bytes, nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{Event, FakeGuest, Recorder};

    #[test]
    fn timed_phase_ends_and_reports_progress() {
        let guest = FakeGuest::new(1 << 20);
        // Every clock read advances 10 ms.
        let rec = Recorder::new(&guest, Some(10_000_000));
        let mut m = PhaseMeter::start(&rec, 2, 1000);
        let mut batches = 0;
        while !m.add(10, 80).unwrap() {
            batches += 1;
        }
        // 1 s at 10 ms per read: about 100 reads.
        assert!((95..=100).contains(&batches), "{batches}");
        let progress: Vec<_> = rec
            .events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Progress { phase, ops } => Some((phase, ops)),
                _ => None,
            })
            .collect();
        assert!((9..=11).contains(&progress.len()), "{progress:?}");
        assert!(progress.iter().all(|&(p, _)| p == 2));
        assert!(progress.windows(2).all(|w| w[0].1 < w[1].1));
        let (ops, bytes, nanos) = m.finish();
        assert_eq!((ops, bytes), ((batches + 1) * 10, (batches + 1) * 80));
        assert!(nanos >= 1_000_000_000, "{nanos}");
    }

    #[test]
    fn without_clock_an_op_budget_ends_the_phase() {
        let guest = FakeGuest::new(1 << 20);
        let rec = Recorder::new(&guest, None);
        let mut m = PhaseMeter::start(&rec, 0, 500);
        let mut ops = 0;
        while !m.add(100_000, 0).unwrap() {
            ops += 100_000;
        }
        assert_eq!(ops + 100_000, FALLBACK_OPS_PER_SECOND / 2);
        assert_eq!(m.finish().2, 0);
        let progress = rec
            .events()
            .iter()
            .filter(|e| matches!(e, Event::Progress { .. }))
            .count();
        assert_eq!(progress, 5);
    }

    #[test]
    fn untimed_phase_never_expires() {
        let guest = FakeGuest::new(1 << 20);
        let rec = Recorder::new(&guest, Some(1_000_000_000));
        let mut m = PhaseMeter::start(&rec, 0, 0);
        for _ in 0..100 {
            assert!(!m.add(1, 8).unwrap());
        }
        assert!(!m.expired());
        assert!(!m.is_timed());
    }

    #[test]
    fn rejected_progress_is_an_error() {
        let guest = FakeGuest::new(1 << 20);
        let rec = Recorder::new(&guest, Some(PROGRESS_INTERVAL_NS)).rejecting(Op::Progress);
        let mut m = PhaseMeter::start(&rec, 0, 10_000);
        assert_eq!(
            m.add(1, 8),
            Err(RunError::Rejected {
                op: Op::Progress,
                status: guest_abi::Status::Invalid as u32
            })
        );
    }
}

//! `idle`: a guest with nothing to do. Each vCPU parks its thread in the
//! VMM with `Idle` hypercalls until the phase ends, as an idle kernel
//! halts, so the host CPUs stay free for the VMM (migration benchmarks
//! measure copies against an idle guest this way). One operation is one
//! `Idle` call; nothing in the buffer is touched after warm-up.

use guest_abi::{AccessRange, Op};

use crate::ground_truth::GroundTruthArea;
use crate::meter::PhaseMeter;
use crate::platform::{Platform, send};
use crate::run_error::RunError;
use crate::workload::{Region, Workload};

/// Microseconds per `Idle` call: a stop request is seen within about this.
pub(crate) const IDLE_SLICE_MICROS: u64 = 5_000;

/// The idle workload on one vCPU.
#[derive(Debug)]
pub(crate) struct Idle {
    buffer_gpa: u64,
    buffer_bytes: u64,
}

impl Idle {
    pub fn new(region: &Region<'_>) -> Self {
        Idle {
            buffer_gpa: region.buffer_gpa,
            buffer_bytes: region.buffer_bytes(),
        }
    }
}

impl Workload for Idle {
    fn begin_phase(&mut self, _phase: u32) {}

    fn ground_truth(&self, area: &GroundTruthArea<'_>) -> u64 {
        // No accesses: a zero weight describes none (the oracle's rule).
        area.set(
            0,
            &AccessRange {
                gpa: self.buffer_gpa,
                len: self.buffer_bytes,
                weight: 0.0,
                write_fraction: 0.0,
            },
        );
        1
    }

    fn run_phase<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        // Without a clock the meter ends a phase by operation count, which
        // a few idle calls reach quickly; that only shortens the phase.
        loop {
            send(meter.platform(), Op::Idle, [IDLE_SLICE_MICROS, 0, 0, 0])?;
            if meter.add(1, 0)? {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{Event, FakeGuest, reports, run_vm};

    #[test]
    fn idles_until_the_phase_ends_and_touches_nothing() {
        let guest = FakeGuest::booted(4 << 20, 2, "idle:phases=2,seconds=0.01");
        let per_vcpu = run_vm(&guest, 2, Some(1_000_000), None);
        for events in &per_vcpu {
            assert_eq!(reports(events).len(), 2);
            assert!(events.iter().any(|e| matches!(e, Event::Idle(_))));
            assert_eq!(events.last(), Some(&Event::Exit(0)));
        }
    }
}

//! The per-vCPU phase loop shared by all workloads: barrier, `Phase`,
//! `GroundTruth` (vCPU 0), the workload's own work, `Report`.

use guest_abi::Op;

use crate::kinds::{Hotset, Idle, Memcheck, Pmbench, Stream, Zipf, ZipfSampler};
use crate::layout::Plan;
use crate::meter::PhaseMeter;
use crate::platform::{Platform, send};
use crate::run_error::RunError;
use crate::spec::Spec;
use crate::workload::{Region, Vcpu, WORDS_PER_PAGE, Workload};

/// Runs `spec` on one vCPU over `region`.
pub(crate) fn run_vcpu<P: Platform>(
    platform: &P,
    vcpu: Vcpu,
    spec: &Spec,
    region: &Region<'_>,
) -> Result<(), RunError> {
    match spec.plan(region.buffer_bytes())? {
        Plan::Hotset(plan) => drive(
            platform,
            vcpu,
            spec,
            region,
            &mut Hotset::new(region, plan, vcpu)?,
        ),
        Plan::Zipf(plan) => {
            // Filled in place: the tables are too big to move on the stack.
            let mut sampler = ZipfSampler::empty();
            sampler.fill(plan.items, plan.theta);
            drive(
                platform,
                vcpu,
                spec,
                region,
                &mut Zipf::new(region, plan, vcpu, &sampler),
            )
        }
        Plan::Pmbench(plan) => drive(
            platform,
            vcpu,
            spec,
            region,
            &mut Pmbench::new(region, plan, vcpu),
        ),
        Plan::Stream(op) => drive(
            platform,
            vcpu,
            spec,
            region,
            &mut Stream::new(region, op, vcpu),
        ),
        Plan::Memcheck { rounds } => drive(
            platform,
            vcpu,
            spec,
            region,
            &mut Memcheck::new(region, rounds, vcpu),
        ),
        Plan::Idle => drive(platform, vcpu, spec, region, &mut Idle::new(region)),
    }
}

/// Touches (writes, without changing) one word of every 4 KiB page of this
/// vCPU's share of the buffer, so that first-touch page faults (host
/// allocation, shadow or nested page tables) are paid before phase 0
/// instead of inside the first phases' measurements.
///
/// The write is a volatile load and store of the same value: an idempotent
/// atomic RMW (`fetch_add(0)`) is lowered by LLVM to a fence plus a plain
/// load, which never write-faults the page.
fn warm_up(vcpu: Vcpu, region: &Region<'_>) {
    let (start, end) = vcpu.share(region.buffer.len());
    for word in region.buffer[start..end].iter().step_by(WORDS_PER_PAGE) {
        let p = word.as_ptr();
        // SAFETY: `p` points into the live buffer. Warm-up runs before the
        // first barrier, when no other vCPU writes this vCPU's share, so the
        // non-atomic access races with nothing.
        unsafe { core::ptr::write_volatile(p, core::ptr::read_volatile(p)) };
    }
}

fn drive<P: Platform, W: Workload>(
    platform: &P,
    vcpu: Vcpu,
    spec: &Spec,
    region: &Region<'_>,
    workload: &mut W,
) -> Result<(), RunError> {
    warm_up(vcpu, region);
    for phase in 0..spec.phases {
        workload.begin_phase(phase);
        // Built before the barrier so no vCPU runs while vCPU 0 computes it.
        let truth = (vcpu.index == 0).then(|| workload.ground_truth(&region.ground_truth));
        platform.barrier();
        let p = u64::from(phase);
        send(platform, Op::Phase, [p, 0, 0, 0])?;
        if let Some(count) = truth {
            send(
                platform,
                Op::GroundTruth,
                [region.ground_truth.gpa(), count, p, 0],
            )?;
        }
        let mut meter = PhaseMeter::start(platform, phase, spec.phase_ms);
        workload.run_phase(&mut meter)?;
        // Every vCPU must agree on the last phase, or one would wait at the
        // next barrier forever: they vote on the VMM's stop request.
        let last = phase + 1 == spec.phases || platform.barrier_vote(platform.stop_requested());
        if last {
            workload.finish(&mut meter)?;
        }
        let (ops, bytes, nanos) = meter.finish();
        send(platform, Op::Report, [p, ops, bytes, nanos])?;
        if last {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use core::sync::atomic::AtomicU64;

    use super::*;
    use crate::ground_truth::GroundTruthArea;

    #[test]
    fn a_stop_request_ends_every_vcpu_after_the_same_phase() {
        use crate::test_support::{Event, FakeGuest, reports, run_vm};
        for spec in [
            "memcheck:phases=50,seconds=0.01",
            "hotset:phases=50,seconds=0.01",
            "hotset:phases=50,seconds=0.01,verify=1",
            "memcheck:rounds=1000000",
        ] {
            let guest = FakeGuest::booted(4 << 20, 3, spec);
            // Stop once vCPU 1 has reported phase 0 (memcheck in rounds
            // mode has only phase 0: once it reports progress there).
            let hook = |v: u32, e: &Event| {
                let due = match e {
                    Event::Report { phase: 0, .. } => true,
                    Event::Progress { .. } => spec.contains("rounds"),
                    _ => false,
                };
                if v == 1 && due {
                    guest.request_stop();
                }
            };
            let per_vcpu = run_vm(&guest, 3, Some(100_000), Some(&hook));
            let counts: Vec<usize> = per_vcpu.iter().map(|ev| reports(ev).len()).collect();
            assert!(counts[0] < 50, "{spec}: stopped early: {counts:?}");
            assert!(
                counts.iter().all(|&c| c == counts[0]),
                "{spec}: same last phase: {counts:?}"
            );
            for ev in &per_vcpu {
                assert_eq!(
                    ev.last(),
                    Some(&Event::Exit(0)),
                    "{spec}: clean exit, final check passed"
                );
            }
        }
    }

    #[test]
    fn warm_up_keeps_data() {
        let words: Vec<AtomicU64> = (0..4096u64).map(AtomicU64::new).collect();
        let area: [AtomicU64; 0] = [];
        let region = Region {
            buffer: &words,
            buffer_gpa: 0,
            ground_truth: GroundTruthArea::new(&area, 0),
        };
        for index in 0..3 {
            warm_up(
                Vcpu {
                    index,
                    count: 3,
                    seed: 0,
                },
                &region,
            );
        }
        assert!(
            words
                .iter()
                .enumerate()
                .all(|(i, w)| w.load(core::sync::atomic::Ordering::Relaxed) == i as u64)
        );
    }

    #[test]
    fn shares_cover_everything_once() {
        for (len, count) in [(10usize, 3u32), (2, 4), (1 << 20, 7), (0, 2)] {
            let mut next = 0;
            for index in 0..count {
                let (s, e) = Vcpu {
                    index,
                    count,
                    seed: 0,
                }
                .share(len);
                assert_eq!(s, next);
                assert!(e >= s);
                next = e;
            }
            assert_eq!(next, len);
        }
    }
}

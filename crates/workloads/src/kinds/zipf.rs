//! `zipf`: key-value lookups. `items` records of `item` bytes; the record
//! of popularity rank k is `scatter(k)`, so popular records are spread over
//! the buffer; ranks are drawn Zipf(θ). A lookup reads and sums the whole
//! record, or (`write-frac` of them) overwrites it. With more than one phase
//! the scatter is re-keyed per phase, which moves the hot records.

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::ground_truth::{ChunkGrid, GroundTruthArea};
use crate::kinds::scatter::Scatter;
pub(crate) use crate::kinds::zipf_sampler::ZipfSampler;
use crate::layout::ZipfPlan;
use crate::meter::PhaseMeter;
use crate::platform::Platform;
use crate::rng::{Chance, Rng, mix};
use crate::run_error::RunError;
use crate::workload::{RANDOM_BATCH, Region, Vcpu, Workload};

/// Salt that keeps the scatter key independent of other seeded choices.
const SCATTER_SALT: u64 = 0x7a69_7066;

/// The zipf workload on one vCPU.
#[derive(Debug)]
pub(crate) struct Zipf<'m> {
    sampler: &'m ZipfSampler,
    buffer: &'m [AtomicU64],
    buffer_gpa: u64,
    plan: ZipfPlan,
    item_words: usize,
    seed: u64,
    scatter: Scatter,
    write: Chance,
    rng: Rng,
    /// Sum of everything read, kept so the reads cannot be optimised out.
    sum: u64,
}

impl<'m> Zipf<'m> {
    /// The workload; `sampler` must be filled for `plan`'s items and theta.
    pub fn new(region: &Region<'m>, plan: ZipfPlan, vcpu: Vcpu, sampler: &'m ZipfSampler) -> Self {
        Zipf {
            sampler,
            buffer: region.buffer,
            buffer_gpa: region.buffer_gpa,
            plan,
            item_words: (plan.item / 8) as usize,
            seed: vcpu.seed,
            scatter: Scatter::new(plan.items, 0),
            write: Chance::new(plan.write_frac),
            rng: Rng::for_vcpu(vcpu.seed, vcpu.index),
            sum: 0,
        }
    }
}

impl Workload for Zipf<'_> {
    fn begin_phase(&mut self, phase: u32) {
        self.scatter = Scatter::new(
            self.plan.items,
            mix(self.seed ^ SCATTER_SALT, u64::from(phase)),
        );
    }

    /// Exact per-chunk probability of the sampler: every rank's probability
    /// added to the chunk(s) its record occupies. O(items) — about 5 ns per
    /// record, paid by vCPU 0 at each phase start.
    fn ground_truth(&self, area: &GroundTruthArea<'_>) -> u64 {
        let grid = ChunkGrid::new(self.buffer.len() as u64 * 8);
        grid.reset(area, self.buffer_gpa, self.plan.write_frac);
        for (first, end, p) in self.sampler.buckets() {
            for rank in first..end {
                let record = self.scatter.apply(rank);
                grid.add_span(area, record * self.plan.item, self.plan.item, p);
            }
        }
        grid.count()
    }

    fn run_phase<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        let n = self.item_words;
        loop {
            for _ in 0..RANDOM_BATCH {
                let rank = self.sampler.sample(&mut self.rng);
                let base = self.scatter.apply(rank) as usize * n;
                let record = &self.buffer[base..base + n];
                if self.write.hit(self.rng.next_u64()) {
                    for (i, word) in record.iter().enumerate() {
                        word.store(rank ^ i as u64, Relaxed);
                    }
                } else {
                    for word in record {
                        self.sum = self.sum.wrapping_add(word.load(Relaxed));
                    }
                }
            }
            if meter.add(RANDOM_BATCH, RANDOM_BATCH * self.plan.item)? {
                black_box(self.sum);
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use guest_abi::GpaRange;

    use super::*;
    use crate::test_support::{FakeGuest, RAM_BASE, check_protocol, run_vm};

    fn region<'a>(words: &'a [AtomicU64], gt: &'a [AtomicU64]) -> Region<'a> {
        Region {
            buffer: &words[..words.len()],
            buffer_gpa: RAM_BASE,
            ground_truth: GroundTruthArea::new(gt, RAM_BASE + words.len() as u64 * 8),
        }
    }

    fn zeroed(n: usize) -> Vec<AtomicU64> {
        (0..n).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn ground_truth_matches_sampled_chunk_frequencies() {
        // 8 MiB of 72-byte records: records straddle chunk boundaries.
        let buffer = zeroed((8 << 20) / 8);
        let gt = zeroed(4 * 4);
        let r = region(&buffer, &gt);
        let plan = ZipfPlan {
            items: (8 << 20) / 72,
            item: 72,
            theta: 0.99,
            write_frac: 0.25,
        };
        let sampler = ZipfSampler::new(plan.items, plan.theta);
        let vcpu = Vcpu {
            index: 0,
            count: 1,
            seed: 3,
        };
        let mut z = Zipf::new(&r, plan, vcpu, &sampler);
        z.begin_phase(0);
        assert_eq!(z.ground_truth(&r.ground_truth), 4);
        let truth: Vec<_> = (0..4).map(|i| r.ground_truth.get(i)).collect();
        let total: f64 = truth.iter().map(|t| t.weight).sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        assert!(
            truth
                .iter()
                .all(|t| t.write_fraction == 0.25 && t.len == 2 << 20)
        );
        // Sample lookups the way run_phase does and count bytes per chunk.
        let mut counts = [0f64; 4];
        let mut rng = Rng::for_vcpu(9, 0);
        const N: usize = 400_000;
        for _ in 0..N {
            let start = z.scatter.apply(z.sampler.sample(&mut rng)) * 72;
            for b in [start, start + 71] {
                counts[(b >> 21) as usize] += 0.5;
            }
        }
        for (c, t) in counts.iter().zip(&truth) {
            let want = t.weight * N as f64;
            assert!((c - want).abs() < 5.0 * want.sqrt(), "{c} vs {want}");
        }
    }

    #[test]
    fn hot_records_are_spread_and_move_between_phases() {
        let buffer = zeroed((64 << 20) / 8);
        let gt = zeroed(32 * 4);
        let r = region(&buffer, &gt);
        let plan = ZipfPlan {
            items: 1 << 20,
            item: 64,
            theta: 1.2,
            write_frac: 0.0,
        };
        let sampler = ZipfSampler::new(plan.items, plan.theta);
        let vcpu = Vcpu {
            index: 0,
            count: 1,
            seed: 1,
        };
        let mut z = Zipf::new(&r, plan, vcpu, &sampler);
        z.begin_phase(0);
        let top0: Vec<u64> = (0..64).map(|k| z.scatter.apply(k)).collect();
        let chunks: std::collections::HashSet<u64> =
            top0.iter().map(|rec| (rec * 64) >> 21).collect();
        assert!(chunks.len() > 20, "{}", chunks.len());
        z.begin_phase(1);
        let moved = (0..64)
            .filter(|&k| z.scatter.apply(k) != top0[k as usize])
            .count();
        assert!(moved > 60, "{moved}");
    }

    #[test]
    fn runs_on_two_vcpus_and_writes_records() {
        let guest = FakeGuest::booted(
            16 << 20,
            2,
            "zipf:size=4M,item=128,write-frac=1,phases=2,seconds=0.01",
        );
        let per_vcpu = run_vm(&guest, 2, Some(1_000_000), None);
        let truths = check_protocol(
            &per_vcpu,
            2,
            GpaRange {
                start: RAM_BASE,
                len: 4 << 20,
            },
        );
        assert_eq!(truths[0].len(), 2);
        assert!(
            truths
                .iter()
                .all(|t| t.iter().all(|r| r.write_fraction == 1.0))
        );
        // Every written record holds rank ^ word-index in each word.
        let words = &guest.ram()[..(4 << 20) / 8];
        let mut written = 0;
        for rec in words.chunks(16) {
            let rank = rec[0].load(Relaxed);
            if rec.iter().any(|w| w.load(Relaxed) != 0) {
                written += 1;
                for (i, w) in rec.iter().enumerate() {
                    assert_eq!(w.load(Relaxed), rank ^ i as u64);
                }
            }
        }
        assert!(written > 100, "{written}");
    }

    #[test]
    fn single_item_works() {
        let guest = FakeGuest::booted(1 << 20, 1, "zipf:items=1,item=8,seconds=0.01");
        let per_vcpu = run_vm(&guest, 1, Some(1_000_000), None);
        let truths = check_protocol(
            &per_vcpu,
            1,
            GpaRange {
                start: RAM_BASE,
                len: 4096,
            },
        );
        assert_eq!(truths[0].len(), 1);
        assert!((truths[0][0].weight - 1.0).abs() < 1e-12);
    }
}

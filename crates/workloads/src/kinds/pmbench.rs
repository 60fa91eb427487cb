//! `pmbench`: page-granular accesses. Each access picks a page number from
//! a normal distribution around a per-phase center (wrapped around the
//! buffer), then one random 8-byte word in that page, and reads it
//! (`read-frac`) or increments it.

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::ground_truth::{ChunkGrid, GroundTruthArea};
use crate::kinds::normal_table::{NormalTable, SEGMENTS};
use crate::layout::{PAGE_BYTES, PmbenchPlan};
use crate::meter::PhaseMeter;
use crate::platform::Platform;
use crate::rng::{Chance, Rng, mix};
use crate::run_error::RunError;
use crate::workload::{RANDOM_BATCH, Region, Vcpu, Workload};

/// Salt that keeps the center placement independent of other seeded choices.
const CENTER_SALT: u64 = 0x706d_6265_6e63;
/// Words per page.
const PAGE_WORDS: u64 = PAGE_BYTES / 8;

/// The pmbench workload on one vCPU.
#[derive(Debug)]
pub(crate) struct Pmbench<'m> {
    buffer: &'m [AtomicU64],
    buffer_gpa: u64,
    plan: PmbenchPlan,
    table: NormalTable,
    read: Chance,
    seed: u64,
    rng: Rng,
    center: Option<u64>,
    sum: u64,
}

impl<'m> Pmbench<'m> {
    pub fn new(region: &Region<'m>, plan: PmbenchPlan, vcpu: Vcpu) -> Self {
        Pmbench {
            buffer: region.buffer,
            buffer_gpa: region.buffer_gpa,
            plan,
            table: NormalTable::new(plan.stddev_pages),
            read: Chance::new(plan.read_frac),
            seed: vcpu.seed,
            rng: Rng::for_vcpu(vcpu.seed, vcpu.index),
            center: None,
            sum: 0,
        }
    }
}

impl Workload for Pmbench<'_> {
    fn begin_phase(&mut self, phase: u32) {
        let pages = self.plan.pages;
        let mut center = mix(self.seed ^ CENTER_SALT, u64::from(phase)) % pages;
        if Some(center) == self.center && pages > 1 {
            center = (center + pages / 2) % pages;
        }
        self.center = Some(center);
    }

    /// Each of the 1024 equally likely segments spread over its pages
    /// (wrapped around the buffer), summed per chunk.
    fn ground_truth(&self, area: &GroundTruthArea<'_>) -> u64 {
        let pages = self.plan.pages;
        let grid = ChunkGrid::new(pages * PAGE_BYTES);
        grid.reset(area, self.buffer_gpa, 1.0 - self.plan.read_frac);
        let center = self.center.unwrap_or(0) as i64;
        let segment_weight = 1.0 / SEGMENTS as f64;
        for (lo, hi) in self.table.segments() {
            let len = (hi - lo) as u64;
            let per_page = segment_weight / len as f64;
            let mut page = (center + lo).rem_euclid(pages as i64) as u64;
            let mut left = len;
            while left > 0 {
                let run = left.min(pages - page);
                grid.add_span(
                    area,
                    page * PAGE_BYTES,
                    run * PAGE_BYTES,
                    per_page * run as f64,
                );
                left -= run;
                page = 0;
            }
        }
        grid.count()
    }

    fn run_phase<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        let pages = self.plan.pages as i64;
        let center = self.center.unwrap_or(0) as i64;
        loop {
            for _ in 0..RANDOM_BATCH {
                let page =
                    (center + self.table.sample(self.rng.next_u64())).rem_euclid(pages) as u64;
                let r = self.rng.next_u64();
                let word = &self.buffer[(page * PAGE_WORDS + (r & (PAGE_WORDS - 1))) as usize];
                if self.read.hit(r) {
                    self.sum = self.sum.wrapping_add(word.load(Relaxed));
                } else {
                    word.store(word.load(Relaxed).wrapping_add(1), Relaxed);
                }
            }
            if meter.add(RANDOM_BATCH, RANDOM_BATCH * 8)? {
                black_box(self.sum);
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::Ordering::Relaxed;

    use guest_abi::GpaRange;

    use crate::test_support::{Event, FakeGuest, RAM_BASE, check_protocol, run_vm};

    #[test]
    fn writes_per_chunk_match_the_ground_truth() {
        // 16 MiB = 8 chunks; read-frac 0 makes every access an increment,
        // so memory counts the accesses.
        let args = "pmbench:size=16M,stddev=600,read-frac=0,phases=3,seconds=0.02";
        let guest = FakeGuest::booted(32 << 20, 1, args);
        let snaps = Mutex::new(Vec::new());
        let hook = |_v: u32, e: &Event| {
            if matches!(e, Event::Phase(_) | Event::Exit(_)) {
                snaps.lock().unwrap().push(
                    guest
                        .ram()
                        .iter()
                        .map(|w| w.load(Relaxed))
                        .collect::<Vec<_>>(),
                );
            }
        };
        let per_vcpu = run_vm(&guest, 1, Some(1_000_000), Some(&hook));
        let truths = check_protocol(
            &per_vcpu,
            3,
            GpaRange {
                start: RAM_BASE,
                len: 16 << 20,
            },
        );
        let snaps = snaps.into_inner().unwrap();
        let mut heaviest = Vec::new();
        for (p, truth) in truths.iter().enumerate() {
            assert_eq!(truth.len(), 8);
            assert!(
                truth
                    .iter()
                    .all(|r| r.write_fraction == 1.0 && r.len == 2 << 20)
            );
            let total_w: f64 = truth.iter().map(|r| r.weight).sum();
            assert!((total_w - 1.0).abs() < 1e-9);
            let per_chunk: Vec<f64> = (0..8)
                .map(|c| {
                    let words = (c * (2 << 20) / 8)..((c + 1) * (2 << 20) / 8);
                    words.map(|w| (snaps[p + 1][w] - snaps[p][w]) as f64).sum()
                })
                .collect();
            let n: f64 = per_chunk.iter().sum();
            for (c, r) in per_chunk.iter().zip(truth) {
                let want = r.weight * n;
                assert!(
                    (c - want).abs() < 5.0 * want.sqrt() + 0.002 * n,
                    "phase {p}: {c} vs {want}"
                );
            }
            heaviest.push(
                truth
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.weight.total_cmp(&b.1.weight))
                    .unwrap()
                    .0,
            );
        }
        // The center moved: the heaviest chunk is not the same in all phases.
        assert!(heaviest.windows(2).any(|w| w[0] != w[1]), "{heaviest:?}");
    }

    #[test]
    fn wide_distribution_wraps_around_the_buffer() {
        // σ = all pages: the ±4σ segments wrap several times.
        let guest = FakeGuest::booted(
            8 << 20,
            2,
            "pmbench:size=4M,stddev=1024,phases=1,seconds=0.01",
        );
        let per_vcpu = run_vm(&guest, 2, Some(1_000_000), None);
        let truths = check_protocol(
            &per_vcpu,
            1,
            GpaRange {
                start: RAM_BASE,
                len: 4 << 20,
            },
        );
        let w: Vec<f64> = truths[0].iter().map(|r| r.weight).collect();
        assert_eq!(w.len(), 2);
        assert!(
            (w[0] + w[1] - 1.0).abs() < 1e-9 && w.iter().all(|&x| x > 0.2),
            "{w:?}"
        );
        assert!(
            truths[0]
                .iter()
                .all(|r| (r.write_fraction - 0.2).abs() < 1e-12)
        );
    }
}

//! `hotset`: GUPS-style random read-modify-write (+1) of 8-byte words;
//! `hot-frac` of the accesses go to a hot subset that moves every phase, the
//! rest are uniform over the whole buffer.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use guest_abi::AccessRange;

use crate::ground_truth::GroundTruthArea;
use crate::layout::HotsetPlan;
use crate::meter::PhaseMeter;
use crate::platform::Platform;
use crate::rng::{Chance, Rng, mix};
use crate::run::{RANDOM_BATCH, Region, Vcpu, Workload};
use crate::run_error::RunError;

/// Salt that keeps hot-set placement independent of other seeded choices.
const PLACEMENT_SALT: u64 = 0x686f_7473_6574;

/// The hotset workload on one vCPU.
#[derive(Debug)]
pub(crate) struct Hotset<'m> {
    buffer: &'m [AtomicU64],
    buffer_gpa: u64,
    plan: HotsetPlan,
    seed: u64,
    rng: Rng,
    hot: Chance,
    /// Current hot-set position in `plan.align` units.
    slot: Option<u64>,
}

impl<'m> Hotset<'m> {
    pub fn new(region: &Region<'m>, plan: HotsetPlan, vcpu: Vcpu) -> Self {
        Hotset {
            buffer: region.buffer,
            buffer_gpa: region.buffer_gpa,
            plan,
            seed: vcpu.seed,
            rng: Rng::for_vcpu(vcpu.seed, vcpu.index),
            hot: Chance::new(plan.hot_frac),
            slot: None,
        }
    }

    /// Byte offset of the hot subset in the buffer.
    fn hot_offset(&self) -> u64 {
        self.slot.unwrap_or(0) * self.plan.align
    }

    fn buffer_bytes(&self) -> u64 {
        self.buffer.len() as u64 * 8
    }
}

impl Workload for Hotset<'_> {
    fn begin_phase(&mut self, phase: u32) {
        let slots = (self.buffer_bytes() - self.plan.hot_bytes) / self.plan.align + 1;
        let mut slot = mix(self.seed ^ PLACEMENT_SALT, u64::from(phase)) % slots;
        if Some(slot) == self.slot && slots > 1 {
            slot = (slot + (slots / 2).max(1)) % slots;
        }
        self.slot = Some(slot);
    }

    fn ground_truth(&self, area: &GroundTruthArea<'_>) -> u64 {
        area.set(
            0,
            &AccessRange {
                gpa: self.buffer_gpa + self.hot_offset(),
                len: self.plan.hot_bytes,
                weight: self.plan.hot_frac,
                write_fraction: 1.0,
            },
        );
        area.set(
            1,
            &AccessRange {
                gpa: self.buffer_gpa,
                len: self.buffer_bytes(),
                weight: 1.0 - self.plan.hot_frac,
                write_fraction: 1.0,
            },
        );
        2
    }

    fn run_phase<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        let words = self.buffer.len() as u64;
        let hot_start = self.hot_offset() / 8;
        let hot_words = self.plan.hot_bytes / 8;
        loop {
            for _ in 0..RANDOM_BATCH {
                let index = if self.hot.hit(self.rng.next_u64()) {
                    hot_start + self.rng.below(hot_words)
                } else {
                    self.rng.below(words)
                };
                let word = &self.buffer[index as usize];
                word.store(word.load(Relaxed).wrapping_add(1), Relaxed);
            }
            if meter.add(RANDOM_BATCH, RANDOM_BATCH * 8)? {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use guest_abi::GpaRange;

    use crate::test_support::{Event, FakeGuest, RAM_BASE, check_protocol, reports, run_vm};

    /// What a single-vCPU run produced.
    struct Counted {
        truths: Vec<Vec<guest_abi::AccessRange>>,
        /// Per phase, how much each word of RAM grew.
        deltas: Vec<Vec<u64>>,
        events: Vec<Vec<Event>>,
    }

    /// Runs on one vCPU with snapshots of RAM at every `Phase` and at `Exit`,
    /// so the per-phase increments count the accesses.
    fn run_counting(args: &str, ram: u64, phases: u32) -> Counted {
        let guest = FakeGuest::booted(ram, 1, args);
        let snapshots = Mutex::new(Vec::new());
        let snap = || {
            guest
                .ram()
                .iter()
                .map(|w| w.load(std::sync::atomic::Ordering::Relaxed))
                .collect::<Vec<u64>>()
        };
        let hook = |_v: u32, e: &Event| {
            if matches!(e, Event::Phase(_) | Event::Exit(_)) {
                snapshots.lock().unwrap().push(snap());
            }
        };
        let per_vcpu = run_vm(&guest, 1, Some(1_000_000), Some(&hook));
        let spec = crate::Spec::parse(args).unwrap();
        let buffer = spec.buffer_bytes(ram).unwrap();
        let truths = check_protocol(
            &per_vcpu,
            phases,
            GpaRange {
                start: RAM_BASE,
                len: buffer,
            },
        );
        let snaps = snapshots.into_inner().unwrap();
        let deltas = snaps
            .windows(2)
            .map(|w| {
                w[0].iter()
                    .zip(&w[1])
                    .map(|(a, b)| b.wrapping_sub(*a))
                    .collect()
            })
            .collect();
        Counted {
            truths,
            deltas,
            events: per_vcpu,
        }
    }

    #[test]
    fn accesses_follow_the_moving_hot_set() {
        let args = "hotset:size=16M,hot=2M,hot-frac=0.9,phases=3,seconds=0.02";
        let Counted {
            truths,
            deltas,
            events: per_vcpu,
        } = run_counting(args, 32 << 20, 3);
        let hot_gpas: Vec<u64> = truths.iter().map(|t| t[0].gpa).collect();
        // The hot set moves every phase, 2 MiB aligned.
        assert!(hot_gpas.windows(2).all(|w| w[0] != w[1]), "{hot_gpas:?}");
        assert!(hot_gpas.iter().all(|g| (g - RAM_BASE) % (2 << 20) == 0));
        for (p, t) in truths.iter().enumerate() {
            assert_eq!(t.len(), 2);
            assert_eq!(
                (t[0].len, t[0].weight, t[0].write_fraction),
                (2 << 20, 0.9, 1.0)
            );
            assert_eq!((t[1].gpa, t[1].len), (RAM_BASE, 16 << 20));
            assert!((t[1].weight - 0.1).abs() < 1e-12);
            // Increments counted in memory match the ground truth: 0.9 of
            // accesses, plus 0.1 * 1/8 of the uniform ones, are hot.
            let delta = &deltas[p];
            let total: u64 = delta[..(16 << 20) / 8].iter().sum();
            let (lo, hi) = (
                ((t[0].gpa - RAM_BASE) / 8) as usize,
                ((t[0].gpa - RAM_BASE + t[0].len) / 8) as usize,
            );
            let hot: u64 = delta[lo..hi].iter().sum();
            let share = hot as f64 / total as f64;
            assert!(
                (share - (0.9 + 0.1 / 8.0)).abs() < 0.01,
                "phase {p}: {share}"
            );
            // Reported ops are exactly the increments made.
            assert_eq!(reports(&per_vcpu[0])[p].1, total);
            // Nothing past the buffer and its ground-truth page was touched.
            assert!(delta[((16 << 20) + 4096) / 8..].iter().all(|&d| d == 0));
        }
    }

    #[test]
    fn several_vcpus_share_the_buffer_and_agree_on_the_hot_set() {
        let guest = FakeGuest::booted(
            16 << 20,
            3,
            "hotset:size=8M,hot=2M,phases=2,seconds=0.01,seed=5",
        );
        let per_vcpu = run_vm(&guest, 3, Some(1_000_000), None);
        let truths = check_protocol(
            &per_vcpu,
            2,
            GpaRange {
                start: RAM_BASE,
                len: 8 << 20,
            },
        );
        let ops: u64 = per_vcpu.iter().flat_map(|e| reports(e)).map(|r| r.1).sum();
        // Increments can be lost between vCPUs (GUPS semantics), but most land.
        let buffer = &guest.ram()[..(8 << 20) / 8];
        let total: u64 = buffer
            .iter()
            .map(|w| w.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        assert!(
            total <= ops && total as f64 > 0.9 * ops as f64,
            "{total} of {ops}"
        );
        assert_ne!(truths[0][0].gpa, truths[1][0].gpa);
    }

    #[test]
    fn hot_set_as_large_as_the_buffer_stays_put() {
        let truths = run_counting("hotset:size=4M,hot=4M,phases=2,seconds=0.01", 8 << 20, 2).truths;
        assert_eq!(truths[0][0].gpa, RAM_BASE);
        assert_eq!(truths[1][0].gpa, RAM_BASE);
    }

    #[test]
    fn page_sized_hot_sets_move_by_pages() {
        let truths =
            run_counting("hotset:size=64K,hot=8K,phases=4,seconds=0.01", 1 << 20, 4).truths;
        for w in truths.windows(2) {
            assert_ne!(w[0][0].gpa, w[1][0].gpa);
        }
        assert!(
            truths.iter().all(|t| (t[0].gpa - RAM_BASE) % 4096 == 0
                && t[0].gpa + t[0].len <= RAM_BASE + (64 << 10))
        );
    }
}

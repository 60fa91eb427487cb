//! `hotset`: GUPS-style random read-modify-write (+1) of 8-byte words;
//! `hot-frac` of the accesses go to a hot subset that moves every phase, the
//! rest are uniform over the whole buffer.
//!
//! With `verify`, each vCPU increments only the words of its own stripe
//! (see [`Stripe`]) and counts its increments; after the last phase it sums
//! its stripe and fails the run with [`RunError::LostWrites`] if the sum
//! differs. The buffer starts zeroed and warm-up rewrites the same values,
//! so the two must be equal unless a write was lost.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use guest_abi::AccessRange;

use crate::ground_truth::GroundTruthArea;
use crate::layout::HotsetPlan;
use crate::meter::PhaseMeter;
use crate::platform::Platform;
use crate::rng::{Chance, Rng, mix};
use crate::run_error::RunError;
use crate::workload::{RANDOM_BATCH, Region, SEQUENTIAL_BATCH, Vcpu, WORDS_PER_PAGE, Workload};

/// Salt that keeps hot-set placement independent of other seeded choices.
const PLACEMENT_SALT: u64 = 0x686f_7473_6574;

/// Words per 4 KiB page; stripes repeat every page.
const PAGE_WORDS: u64 = WORDS_PER_PAGE as u64;

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
    /// With `verify`: the only words this vCPU writes.
    stripe: Option<Stripe>,
    /// Increments made over all phases so far (wrapping).
    increments: u64,
}

/// The words one vCPU owns under `verify`: those whose offset in their
/// 4 KiB page is `index` modulo `count` (for counts dividing 512, simply
/// word index ≡ `index` mod `count`). No two vCPUs then race on a word,
/// and each page keeps its share of the accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stripe {
    index: u64,
    count: u64,
}

impl Stripe {
    /// The stripe of `vcpu`; every vCPU has a word in each page only up to
    /// 512 vCPUs.
    fn of(vcpu: Vcpu) -> Result<Self, RunError> {
        if u64::from(vcpu.count) > PAGE_WORDS {
            return Err(RunError::TooManyVcpusToVerify {
                vcpus: vcpu.count,
                max: PAGE_WORDS as u32,
            });
        }
        Ok(Stripe {
            index: u64::from(vcpu.index),
            count: u64::from(vcpu.count),
        })
    }

    /// The stripe's word in `word`'s aligned group of `count` words, or in
    /// the group before when the page's last group is too short to have
    /// one: always in the same page, fewer than `count` words away.
    fn map(self, word: u64) -> u64 {
        let offset = word % PAGE_WORDS;
        let mut mine = offset - offset % self.count + self.index;
        if mine >= PAGE_WORDS {
            mine -= self.count;
        }
        word - offset + mine
    }
}

impl<'m> Hotset<'m> {
    pub fn new(region: &Region<'m>, plan: HotsetPlan, vcpu: Vcpu) -> Result<Self, RunError> {
        Ok(Hotset {
            buffer: region.buffer,
            buffer_gpa: region.buffer_gpa,
            plan,
            seed: vcpu.seed,
            rng: Rng::for_vcpu(vcpu.seed, vcpu.index),
            hot: Chance::new(plan.hot_frac),
            slot: None,
            stripe: if plan.verify {
                Some(Stripe::of(vcpu)?)
            } else {
                None
            },
            increments: 0,
        })
    }

    /// Byte offset of the hot subset in the buffer.
    fn hot_offset(&self) -> u64 {
        self.slot.unwrap_or(0) * self.plan.align
    }

    fn buffer_bytes(&self) -> u64 {
        self.buffer.len() as u64 * 8
    }

    /// Increments random words, each first passed through `pick`, until
    /// the meter ends the phase. Generic so that the plain run compiles to
    /// the loop it always had.
    fn increment<P: Platform>(
        &mut self,
        meter: &mut PhaseMeter<'_, P>,
        pick: impl Fn(u64) -> u64,
    ) -> Result<(), RunError> {
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
                let word = &self.buffer[pick(index) as usize];
                word.store(word.load(Relaxed).wrapping_add(1), Relaxed);
            }
            // Batches always complete, so the count stays exact when the
            // meter ends the phase (time, stop request) or fails.
            self.increments = self.increments.wrapping_add(RANDOM_BATCH);
            if meter.add(RANDOM_BATCH, RANDOM_BATCH * 8)? {
                return Ok(());
            }
        }
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
        match self.stripe {
            Some(stripe) => self.increment(meter, |w| stripe.map(w)),
            None => self.increment(meter, |w| w),
        }
    }

    /// With `verify`: sums this vCPU's stripe and compares it with the
    /// increments made. The reads count as bytes, not operations, so the
    /// reported operations stay the increments.
    fn finish<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        let Some(stripe) = self.stripe else {
            return Ok(());
        };
        let mut sum = 0u64;
        // Chunks are whole pages, so stripe offsets restart in each.
        for chunk in self.buffer.chunks(SEQUENTIAL_BATCH) {
            let mut read = 0;
            for page in chunk.chunks(WORDS_PER_PAGE) {
                for word in page
                    .iter()
                    .skip(stripe.index as usize)
                    .step_by(stripe.count as usize)
                {
                    sum = sum.wrapping_add(word.load(Relaxed));
                    read += 1;
                }
            }
            meter.add(0, read * 8)?;
        }
        if sum != self.increments {
            return Err(RunError::LostWrites {
                vcpu: stripe.index as u32,
                sum,
                increments: self.increments,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    use guest_abi::GpaRange;

    use super::*;
    use crate::entry::guest_main;
    use crate::run_error::{EXIT_DATA_ERROR, EXIT_SETUP_ERROR};
    use crate::test_support::{
        Event, FakeGuest, RAM_BASE, Recorder, check_protocol, logs, reports, run_vm,
    };

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

    /// Wrapping sum of the words of `vcpu`'s verify stripe among the first
    /// `words` words of RAM, computed independently of [`Stripe`].
    fn stripe_sum(guest: &FakeGuest, words: usize, vcpu: usize, vcpus: usize) -> u64 {
        guest.ram()[..words]
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 512 % vcpus == vcpu)
            .map(|(_, w)| w.load(Relaxed))
            .fold(0, u64::wrapping_add)
    }

    #[test]
    fn stripes_partition_each_page_and_stay_near_the_drawn_word() {
        for count in [1u64, 2, 3, 4, 5, 7, 8, 9, 64, 500, 511, 512] {
            for index in 0..count {
                let stripe = Stripe { index, count };
                // Page 1 of the buffer, so page-relative and absolute
                // offsets differ.
                for word in 512..1024 {
                    let mine = stripe.map(word);
                    assert_eq!(mine / 512, word / 512, "{stripe:?} {word}");
                    assert_eq!(mine % 512 % count, index, "{stripe:?} {word}");
                    assert!(mine.abs_diff(word) < count, "{stripe:?} {word}");
                    if 8 % count == 0 {
                        assert_eq!(mine / 8, word / 8, "same cache line");
                    }
                }
            }
        }
        let vcpu = |count| Vcpu {
            index: 0,
            count,
            seed: 0,
        };
        assert!(Stripe::of(vcpu(512)).is_ok());
        assert_eq!(
            Stripe::of(vcpu(513)),
            Err(RunError::TooManyVcpusToVerify {
                vcpus: 513,
                max: 512
            })
        );
    }

    #[test]
    fn verify_run_keeps_every_increment_in_its_own_stripe() {
        let args = "hotset:size=4M,hot=64K,phases=3,seconds=0.01,verify=1";
        let words = (4 << 20) / 8;
        for vcpus in [2u32, 3] {
            let guest = FakeGuest::booted(8 << 20, vcpus, args);
            let per_vcpu = run_vm(&guest, vcpus, Some(1_000_000), None);
            check_protocol(
                &per_vcpu,
                3,
                GpaRange {
                    start: RAM_BASE,
                    len: 4 << 20,
                },
            );
            assert!(logs(&per_vcpu[0])[0].contains(",verify=1 on"));
            for (v, events) in per_vcpu.iter().enumerate() {
                // Reported operations are exactly the increments, and all
                // of them landed in this vCPU's stripe.
                let ops: u64 = reports(events).iter().map(|r| r.1).sum();
                assert!(ops > 0);
                assert_eq!(
                    stripe_sum(&guest, words, v, vcpus as usize),
                    ops,
                    "vcpu {v} of {vcpus}"
                );
            }
        }
    }

    #[test]
    fn verify_reports_a_destroyed_write_as_a_data_error() {
        let words = (4 << 20) / 8;
        // Word 1 of page 3: vCPU 1's stripe.
        let target = RAM_BASE + 3 * 4096 + 8;
        for stop in [false, true] {
            let guest =
                FakeGuest::booted(8 << 20, 2, "hotset:size=4M,phases=50,seconds=0.01,verify=1");
            let done = AtomicBool::new(false);
            // vCPU 1 sends its phase-0 Report between batches, so it is not
            // inside a load+store of the word, and vCPU 0 never writes it.
            // With `stop`, the run ends after phase 1 and must still check.
            let hook = |v: u32, e: &Event| {
                if v == 1
                    && matches!(e, Event::Report { phase: 0, .. })
                    && !done.swap(true, Relaxed)
                {
                    guest.word(target).fetch_sub(1, Relaxed);
                    if stop {
                        guest.request_stop();
                    }
                }
            };
            let per_vcpu = run_vm(&guest, 2, Some(1_000_000), Some(&hook));
            assert!(done.load(Relaxed));
            assert_eq!(per_vcpu[0].last(), Some(&Event::Exit(0)), "stop {stop}");
            assert_eq!(
                per_vcpu[1].last(),
                Some(&Event::Exit(EXIT_DATA_ERROR)),
                "stop {stop}"
            );
            let sum = stripe_sum(&guest, words, 1, 2);
            assert_eq!(
                logs(&per_vcpu[1]).last().unwrap(),
                &format!(
                    "hotset: vcpu 1 lost writes: stripe sum {sum}, increments {}",
                    sum.wrapping_add(1)
                )
            );
            // The check ran in the last phase, before its Report.
            let last = reports(&per_vcpu[0]).len();
            assert_eq!(reports(&per_vcpu[1]).len(), last - 1);
            if stop {
                assert_eq!(last, 2, "stopped after phase 1");
            } else {
                assert_eq!(last, 50);
            }
        }
    }

    #[test]
    fn verify_with_more_vcpus_than_page_words_is_a_setup_error() {
        let guest = FakeGuest::booted(1 << 20, 513, "hotset:size=64K,verify=1");
        let rec = Recorder::new(&guest, Some(1_000_000));
        assert_eq!(
            guest_main(&rec, &guest, 1, 513, guest.boot_info_gpa()),
            EXIT_SETUP_ERROR
        );
        assert_eq!(
            logs(&rec.events()),
            ["hotset: verify supports at most 512 vcpus, not 513"]
        );
    }
}

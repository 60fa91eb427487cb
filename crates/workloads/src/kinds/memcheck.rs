//! `memcheck`: proves guest memory never loses a write. The buffer is split
//! among vCPUs; in round r each vCPU visits every word of its slice, checks
//! that it still holds the value of round r−1 and writes the value of round
//! r (both derived from address, round, vCPU and seed). After the last
//! phase it checks the final round once more. The first mismatch ends the
//! run with [`RunError::Corruption`].

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use guest_abi::AccessRange;

use crate::ground_truth::GroundTruthArea;
use crate::meter::PhaseMeter;
use crate::platform::Platform;
use crate::rng::mix;
use crate::run_error::RunError;
use crate::workload::{Region, SEQUENTIAL_BATCH, Vcpu, Workload};

/// The memcheck workload on one vCPU.
#[derive(Debug)]
pub(crate) struct Memcheck<'m> {
    buffer_gpa: u64,
    buffer_bytes: u64,
    slice: &'m [AtomicU64],
    slice_gpa: u64,
    vcpu: Vcpu,
    rounds_per_phase: u64,
    /// Last round written to the slice (0: none yet).
    round: u64,
}

impl<'m> Memcheck<'m> {
    pub fn new(region: &Region<'m>, rounds_per_phase: u64, vcpu: Vcpu) -> Self {
        let (start, end) = vcpu.share(region.buffer.len());
        Memcheck {
            buffer_gpa: region.buffer_gpa,
            buffer_bytes: region.buffer_bytes(),
            slice: &region.buffer[start..end],
            slice_gpa: region.buffer_gpa + start as u64 * 8,
            vcpu,
            rounds_per_phase,
            round: 0,
        }
    }

    /// The value `vcpu` writes at `gpa` in `round` of a run seeded `seed`.
    pub(crate) fn value(seed: u64, vcpu: u32, gpa: u64, round: u64) -> u64 {
        mix(seed ^ gpa, (round << 16) ^ u64::from(vcpu))
    }

    /// One pass over the slice: check the last round's values (if any),
    /// then write `write`'s (if any).
    fn pass<P: Platform>(
        &self,
        meter: &mut PhaseMeter<'_, P>,
        write: Option<u64>,
    ) -> Result<(), RunError> {
        let check = (self.round > 0).then_some(self.round);
        let word_bytes = 8 * (u64::from(check.is_some()) + u64::from(write.is_some()));
        let (seed, vcpu) = (self.vcpu.seed, self.vcpu.index);
        for (c, chunk) in self.slice.chunks(SEQUENTIAL_BATCH).enumerate() {
            let chunk_gpa = self.slice_gpa + (c * SEQUENTIAL_BATCH * 8) as u64;
            for (i, word) in chunk.iter().enumerate() {
                let gpa = chunk_gpa + i as u64 * 8;
                if let Some(round) = check {
                    let expected = Self::value(seed, vcpu, gpa, round);
                    let got = word.load(Relaxed);
                    if got != expected {
                        return Err(RunError::Corruption {
                            vcpu,
                            gpa,
                            expected,
                            got,
                        });
                    }
                }
                if let Some(round) = write {
                    word.store(Self::value(seed, vcpu, gpa, round), Relaxed);
                }
            }
            meter.add(chunk.len() as u64, chunk.len() as u64 * word_bytes)?;
        }
        Ok(())
    }
}

impl Workload for Memcheck<'_> {
    fn begin_phase(&mut self, _phase: u32) {}

    fn ground_truth(&self, area: &GroundTruthArea<'_>) -> u64 {
        // Every word is read once and written once per round.
        area.set(
            0,
            &AccessRange {
                gpa: self.buffer_gpa,
                len: self.buffer_bytes,
                weight: 1.0,
                write_fraction: 0.5,
            },
        );
        1
    }

    /// Runs `rounds` rounds, or with `seconds` as many rounds as start
    /// before the phase's time is up (at least one).
    fn run_phase<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        if self.slice.is_empty() {
            return Ok(());
        }
        let mut done = 0;
        loop {
            self.pass(meter, Some(self.round + 1))?;
            self.round += 1;
            done += 1;
            // Rounds always complete, so the final check knows each word's
            // round; a stop request ends the phase after the current one.
            let over = if meter.is_timed() {
                meter.expired()
            } else {
                done >= self.rounds_per_phase || meter.stop_requested()
            };
            if over {
                return Ok(());
            }
        }
    }

    fn finish<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        self.pass(meter, None)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    use guest_abi::GpaRange;

    use super::*;
    use crate::meter::PROGRESS_INTERVAL_NS;
    use crate::run_error::EXIT_DATA_ERROR;
    use crate::test_support::{Event, FakeGuest, RAM_BASE, check_protocol, logs, reports, run_vm};

    #[test]
    fn clean_run_leaves_the_last_round_everywhere() {
        let ram = 4 << 20;
        let guest = FakeGuest::booted(ram, 3, "memcheck:rounds=3,seed=11");
        let per_vcpu = run_vm(&guest, 3, None, None);
        let buffer = ram - 4096;
        let truths = check_protocol(
            &per_vcpu,
            1,
            GpaRange {
                start: RAM_BASE,
                len: buffer,
            },
        );
        assert_eq!(truths[0][0].len, buffer);
        let words = (buffer / 8) as usize;
        let mut visited = 0;
        for v in 0..3u32 {
            let (s, e) = Vcpu {
                index: v,
                count: 3,
                seed: 11,
            }
            .share(words);
            for i in s..e {
                let gpa = RAM_BASE + i as u64 * 8;
                assert_eq!(
                    guest.word(gpa).load(Relaxed),
                    Memcheck::value(11, v, gpa, 3)
                );
            }
            // 3 rounds + final check = 4 visits per word.
            let (_, ops, bytes) = reports(&per_vcpu[v as usize])[0];
            assert_eq!(ops, 4 * (e - s) as u64);
            assert_eq!(bytes, (8 + 16 + 16 + 8) * (e - s) as u64);
            visited += e - s;
        }
        assert_eq!(visited, words);
    }

    #[test]
    fn detects_a_corrupted_word_between_phases() {
        let guest = FakeGuest::booted(2 << 20, 2, "memcheck:rounds=1,phases=2");
        let target = RAM_BASE + 0x1_2340;
        let done = AtomicBool::new(false);
        let hook = |v: u32, e: &Event| {
            // Flip one bit while both vCPUs wait to start phase 1.
            if v == 0 && *e == Event::Phase(1) && !done.swap(true, Relaxed) {
                guest.word(target).fetch_xor(1 << 17, Relaxed);
            }
        };
        let per_vcpu = run_vm(&guest, 2, None, Some(&hook));
        let expected = Memcheck::value(0, 0, target, 1);
        let vcpu0_logs = logs(&per_vcpu[0]);
        assert_eq!(vcpu0_logs.len(), 2, "{vcpu0_logs:?}");
        assert_eq!(
            vcpu0_logs[1],
            format!(
                "memcheck: vcpu 0 addr {target:#x} expected {expected:#x} got {:#x}",
                expected ^ (1 << 17)
            )
        );
        assert_eq!(per_vcpu[0].last(), Some(&Event::Exit(EXIT_DATA_ERROR)));
        // The other vCPU's slice was intact.
        assert_eq!(per_vcpu[1].last(), Some(&Event::Exit(0)));
    }

    #[test]
    fn final_check_catches_corruption_after_the_last_round() {
        let guest = FakeGuest::booted(1 << 20, 1, "memcheck:rounds=1");
        let target = RAM_BASE + 8 * 1000;
        let done = AtomicBool::new(false);
        // With the clock stepping one progress interval per read, the one
        // meter call of the single round sends Progress right after the
        // round's writes; the final check must see the damage.
        let hook = |_v: u32, e: &Event| {
            if matches!(e, Event::Progress { .. }) && !done.swap(true, Relaxed) {
                guest.word(target).fetch_add(1, Relaxed);
            }
        };
        let per_vcpu = run_vm(&guest, 1, Some(PROGRESS_INTERVAL_NS), Some(&hook));
        assert!(done.load(Relaxed));
        assert_eq!(per_vcpu[0].last(), Some(&Event::Exit(EXIT_DATA_ERROR)));
        let expected = Memcheck::value(0, 0, target, 1);
        assert_eq!(
            logs(&per_vcpu[0]).last().unwrap(),
            &format!(
                "memcheck: vcpu 0 addr {target:#x} expected {expected:#x} got {:#x}",
                expected.wrapping_add(1)
            )
        );
        // No Report: the run stopped inside the last phase.
        assert!(reports(&per_vcpu[0]).is_empty());
    }

    #[test]
    fn timed_rounds_repeat_until_the_phase_ends() {
        let guest = FakeGuest::booted(1 << 20, 1, "memcheck:seconds=0.05");
        let per_vcpu = run_vm(&guest, 1, Some(1_000_000), None);
        let (_, ops, _) = reports(&per_vcpu[0])[0];
        let words = ((1 << 20) - 4096) / 8;
        // Two clock reads per round at 1 ms each: about 25 rounds, plus the
        // final check.
        assert!(ops >= 20 * words && ops % words == 0, "{ops}");
    }
}

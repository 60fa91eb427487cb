//! `stream`: sequential passes over the buffer, split evenly among vCPUs
//! (like STREAM with threads). `read` sums words, `write` stores a
//! per-phase pattern, `copy` copies the first half of the buffer onto the
//! second half. One operation is one 8-byte word.

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use guest_abi::AccessRange;

use crate::ground_truth::GroundTruthArea;
use crate::meter::PhaseMeter;
use crate::platform::Platform;
use crate::rng::mix;
use crate::run_error::RunError;
use crate::spec::StreamOp;
use crate::workload::{Region, SEQUENTIAL_BATCH, Vcpu, Workload};

/// The stream workload on one vCPU.
#[derive(Debug)]
pub(crate) struct Stream<'m> {
    buffer: &'m [AtomicU64],
    buffer_gpa: u64,
    op: StreamOp,
    /// Words of the source (read/write: the whole buffer; copy: first half).
    half: usize,
    /// This vCPU's share of the source.
    start: usize,
    end: usize,
    /// Next word of the share; passes continue across phases.
    pos: usize,
    /// Value pattern of the current phase for `write`.
    stamp: u64,
    seed: u64,
    sum: u64,
}

impl<'m> Stream<'m> {
    pub fn new(region: &Region<'m>, op: StreamOp, vcpu: Vcpu) -> Self {
        let words = region.buffer.len();
        let half = if op == StreamOp::Copy {
            words / 2
        } else {
            words
        };
        let (start, end) = vcpu.share(half);
        Stream {
            buffer: region.buffer,
            buffer_gpa: region.buffer_gpa,
            op,
            half,
            start,
            end,
            pos: start,
            stamp: 0,
            seed: vcpu.seed,
            sum: 0,
        }
    }

    /// The value `write` stores at word `i` in a phase with `stamp`.
    pub(crate) fn pattern(stamp: u64, i: usize) -> u64 {
        stamp ^ i as u64
    }

    /// Processes words `[from, to)` of the share.
    fn pass(&mut self, from: usize, to: usize) {
        match self.op {
            StreamOp::Read => {
                for word in &self.buffer[from..to] {
                    self.sum = self.sum.wrapping_add(word.load(Relaxed));
                }
            }
            StreamOp::Write => {
                for (i, word) in self.buffer[from..to].iter().enumerate() {
                    word.store(Self::pattern(self.stamp, from + i), Relaxed);
                }
            }
            StreamOp::Copy => {
                let (src, dst) = self.buffer.split_at(self.half);
                for (s, d) in src[from..to].iter().zip(&dst[from..to]) {
                    d.store(s.load(Relaxed), Relaxed);
                }
            }
        }
    }
}

impl Workload for Stream<'_> {
    fn begin_phase(&mut self, phase: u32) {
        self.stamp = mix(self.seed, u64::from(phase));
    }

    fn ground_truth(&self, area: &GroundTruthArea<'_>) -> u64 {
        let half_bytes = self.half as u64 * 8;
        match self.op {
            StreamOp::Read | StreamOp::Write => {
                area.set(
                    0,
                    &AccessRange {
                        gpa: self.buffer_gpa,
                        len: half_bytes,
                        weight: 1.0,
                        write_fraction: if self.op == StreamOp::Write { 1.0 } else { 0.0 },
                    },
                );
                1
            }
            StreamOp::Copy => {
                for (i, write_fraction) in [0.0, 1.0].into_iter().enumerate() {
                    area.set(
                        i,
                        &AccessRange {
                            gpa: self.buffer_gpa + i as u64 * half_bytes,
                            len: half_bytes,
                            weight: 0.5,
                            write_fraction,
                        },
                    );
                }
                2
            }
        }
    }

    fn run_phase<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        if self.start == self.end {
            // More vCPUs than words: nothing to do here.
            return Ok(());
        }
        let bytes_per_word = if self.op == StreamOp::Copy { 16 } else { 8 };
        loop {
            let to = (self.pos + SEQUENTIAL_BATCH).min(self.end);
            self.pass(self.pos, to);
            let n = (to - self.pos) as u64;
            self.pos = if to == self.end { self.start } else { to };
            if meter.add(n, n * bytes_per_word)? {
                black_box(self.sum);
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use guest_abi::GpaRange;

    use super::*;
    use crate::test_support::{FakeGuest, RAM_BASE, check_protocol, reports, run_vm};

    const SIZE: u64 = 4 << 20;
    const WORDS: usize = (SIZE / 8) as usize;

    #[test]
    fn read_covers_the_buffer_uniformly() {
        let guest = FakeGuest::booted(8 << 20, 2, "stream:size=4M,phases=2,seconds=0.02");
        let per_vcpu = run_vm(&guest, 2, Some(1_000_000), None);
        let truths = check_protocol(
            &per_vcpu,
            2,
            GpaRange {
                start: RAM_BASE,
                len: SIZE,
            },
        );
        assert_eq!(
            truths[0],
            vec![AccessRange {
                gpa: RAM_BASE,
                len: SIZE,
                weight: 1.0,
                write_fraction: 0.0
            }]
        );
        for events in &per_vcpu {
            for (_, ops, bytes) in reports(events) {
                assert_eq!(bytes, ops * 8);
                // 20 meter calls of up to 1 MiB each over a 2 MiB share.
                assert!(ops >= WORDS as u64, "{ops}");
            }
        }
    }

    #[test]
    fn write_stores_the_pattern_everywhere() {
        let guest = FakeGuest::booted(
            8 << 20,
            3,
            "stream:size=4M,op=write,phases=2,seconds=0.02,seed=7",
        );
        let per_vcpu = run_vm(&guest, 3, Some(1_000_000), None);
        let truths = check_protocol(
            &per_vcpu,
            2,
            GpaRange {
                start: RAM_BASE,
                len: SIZE,
            },
        );
        assert_eq!(truths[1][0].write_fraction, 1.0);
        let stamps = [mix(7, 0), mix(7, 1)];
        for (i, w) in guest.ram()[..WORDS].iter().enumerate() {
            let v = w.load(Relaxed);
            assert!(
                stamps.iter().any(|&s| v == Stream::pattern(s, i)),
                "word {i} = {v:#x}"
            );
        }
        // Past the buffer only the ground-truth page was written.
        assert!(
            guest.ram()[WORDS + 512..]
                .iter()
                .all(|w| w.load(Relaxed) == 0)
        );
    }

    #[test]
    fn copy_duplicates_the_first_half() {
        let guest = FakeGuest::booted(8 << 20, 2, "stream:size=4M,op=copy,phases=1,seconds=0.02");
        for (i, w) in guest.ram()[..WORDS / 2].iter().enumerate() {
            w.store(crate::rng::splitmix64(i as u64), Relaxed);
        }
        let per_vcpu = run_vm(&guest, 2, Some(1_000_000), None);
        let truths = check_protocol(
            &per_vcpu,
            1,
            GpaRange {
                start: RAM_BASE,
                len: SIZE,
            },
        );
        assert_eq!(truths[0].len(), 2);
        assert_eq!(
            (truths[0][1].gpa, truths[0][1].write_fraction),
            (RAM_BASE + SIZE / 2, 1.0)
        );
        let ram = guest.ram();
        for i in 0..WORDS / 2 {
            assert_eq!(
                ram[WORDS / 2 + i].load(Relaxed),
                ram[i].load(Relaxed),
                "word {i}"
            );
        }
        for (_, ops, bytes) in reports(&per_vcpu[1]) {
            assert_eq!(bytes, ops * 16);
        }
    }

    #[test]
    fn tiny_buffer_splits_among_vcpus() {
        let guest = FakeGuest::booted(1 << 20, 2, "stream:size=4K,op=copy,seconds=0.01,phases=1");
        let per_vcpu = run_vm(&guest, 2, Some(1_000_000), None);
        check_protocol(
            &per_vcpu,
            1,
            GpaRange {
                start: RAM_BASE,
                len: 4096,
            },
        );
    }

    #[test]
    fn empty_share_returns_at_once_even_without_a_clock() {
        let guest = FakeGuest::new(8192);
        let region = Region {
            buffer: &guest.ram()[..512],
            buffer_gpa: RAM_BASE,
            ground_truth: GroundTruthArea::new(&guest.ram()[512..], RAM_BASE + 4096),
        };
        let mut s = Stream::new(
            &region,
            StreamOp::Read,
            Vcpu {
                index: 0,
                count: 1000,
                seed: 0,
            },
        );
        assert_eq!(s.start, s.end);
        let rec = crate::test_support::Recorder::new(&guest, None);
        let mut meter = PhaseMeter::start(&rec, 0, 1000);
        s.begin_phase(0);
        s.run_phase(&mut meter).unwrap();
        assert_eq!(meter.finish().0, 0);
    }
}

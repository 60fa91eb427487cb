//! Checks a memcheck guest's memory from outside the guest (the VMM's half
//! of "verified by the guest and by the VMM"): after the payload exits,
//! every word of each vCPU's share must hold the value of that share's
//! final round. The final round is recovered from the share's first word.

use guest_abi::GpaRange;

use crate::kinds::Memcheck;
use crate::spec::{Spec, Workload};
use crate::workload::Vcpu;

/// Largest final round searched for (memcheck runs far fewer).
const MAX_ROUND: u64 = 1 << 24;

/// What the check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageCheck {
    /// Every word matched; `words` checked, final round of each share.
    Intact {
        /// Words checked.
        words: u64,
        /// Highest final round among the shares.
        max_round: u64,
    },
    /// A word differs from its share's final round.
    Mismatch {
        /// vCPU owning the word.
        vcpu: u32,
        /// Where.
        gpa: u64,
        /// What the final round wrote.
        expected: u64,
        /// What memory holds.
        got: u64,
    },
    /// The share's first word matches no round: its first write was lost.
    NoRound {
        /// vCPU owning the share.
        vcpu: u32,
        /// Address of the first word.
        gpa: u64,
    },
    /// The spec is not a memcheck workload, or the buffer does not fit.
    NotMemcheck,
}

/// Checks the memcheck image of a run of `spec` on `vcpus` vCPUs whose
/// first free range was `free`; `read` returns the u64 at a guest-physical
/// address (None if unreadable).
pub fn check_memcheck_image(
    spec: &Spec,
    free: GpaRange,
    vcpus: u32,
    mut read: impl FnMut(u64) -> Option<u64>,
) -> ImageCheck {
    if !matches!(spec.workload, Workload::Memcheck(_)) {
        return ImageCheck::NotMemcheck;
    }
    let Ok(layout) = spec.layout(free.len) else {
        return ImageCheck::NotMemcheck;
    };
    let words = (layout.buffer_bytes / 8) as usize;
    let mut checked = 0;
    let mut max_round = 0;
    for index in 0..vcpus {
        let vcpu = Vcpu {
            index,
            count: vcpus,
            seed: spec.seed,
        };
        let (start, end) = vcpu.share(words);
        if start == end {
            continue;
        }
        let first = free.start + start as u64 * 8;
        let value = |gpa, round| Memcheck::value(spec.seed, index, gpa, round);
        let Some(got) = read(first) else {
            return ImageCheck::NoRound {
                vcpu: index,
                gpa: first,
            };
        };
        let Some(round) = (1..=MAX_ROUND).find(|&r| value(first, r) == got) else {
            return ImageCheck::NoRound {
                vcpu: index,
                gpa: first,
            };
        };
        max_round = max_round.max(round);
        for w in start..end {
            let gpa = free.start + w as u64 * 8;
            let expected = value(gpa, round);
            let got = read(gpa).unwrap_or(!expected);
            if got != expected {
                return ImageCheck::Mismatch {
                    vcpu: index,
                    gpa,
                    expected,
                    got,
                };
            }
            checked += 1;
        }
    }
    ImageCheck::Intact {
        words: checked,
        max_round,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{FakeGuest, RAM_BASE, run_vm};

    #[test]
    fn a_clean_run_checks_out_and_a_flipped_bit_does_not() {
        let ram = 2 << 20;
        let spec = Spec::parse("memcheck:rounds=3,seed=5").unwrap();
        let guest = FakeGuest::booted(ram, 2, "memcheck:rounds=3,seed=5");
        run_vm(&guest, 2, Some(1000), None);
        let free = GpaRange {
            start: RAM_BASE,
            len: ram,
        };
        let check = check_memcheck_image(&spec, free, 2, |gpa| {
            Some(guest.word(gpa).load(std::sync::atomic::Ordering::Relaxed))
        });
        assert!(
            matches!(check, ImageCheck::Intact { max_round: 3, .. }),
            "{check:?}"
        );
        guest
            .word(RAM_BASE + 4096)
            .fetch_xor(1, std::sync::atomic::Ordering::Relaxed);
        let check = check_memcheck_image(&spec, free, 2, |gpa| {
            Some(guest.word(gpa).load(std::sync::atomic::Ordering::Relaxed))
        });
        assert!(
            matches!(check, ImageCheck::Mismatch { vcpu: 0, gpa, .. } if gpa == RAM_BASE + 4096),
            "{check:?}"
        );
        assert_eq!(
            check_memcheck_image(&Spec::parse("hotset").unwrap(), free, 2, |_| Some(0)),
            ImageCheck::NotMemcheck
        );
    }
}

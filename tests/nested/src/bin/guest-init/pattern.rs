//! The data pattern: what each word holds in each round, and the sweep that checks and
//! rewrites a share of the buffer.

use std::ops::Range;

// The workloads crate is no_std with no other dependency than guest-abi,
// so this static std binary can share its splitmix64 finaliser.
use workloads::{mix, splitmix64};

/// Mismatches kept (and printed) per thread; further ones are only counted.
pub const MAX_MISMATCHES_KEPT: usize = 10;

/// One word that did not hold the value written in the previous round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Byte offset of the word in the whole buffer.
    pub offset: u64,
    pub expected: u64,
    pub got: u64,
}

/// Mismatches found by sweeps: all counted, the first few kept.
#[derive(Debug, Default)]
pub struct Mismatches {
    pub errors: u64,
    pub first: Vec<Mismatch>,
}

/// One pass over a share: check the words against one round key, then write another.
#[derive(Debug, Clone, Copy)]
pub struct Sweep {
    pub check: Option<u64>,
    pub write: Option<u64>,
}

/// The key of one thread's round; hoisted out of the per-word loop.
pub fn round_key(round: u64, thread: u64, seed: u64) -> u64 {
    mix(seed, round.rotate_left(32) ^ thread)
}

/// The value of the word at byte `offset` in the round with key `key`.
pub fn value_at(key: u64, offset: u64) -> u64 {
    splitmix64(key ^ offset)
}

/// Splits `total` words into `parts` contiguous ranges whose lengths differ by at most one.
pub fn split_shares(total: usize, parts: usize) -> Vec<Range<usize>> {
    let parts = parts.max(1);
    let (base, extra) = (total / parts, total % parts);
    let mut start = 0;
    (0..parts)
        .map(|i| {
            let len = base + usize::from(i < extra);
            start += len;
            start - len..start
        })
        .collect()
}

/// Runs one sweep over `words`, whose first word lies at byte `base` of the buffer. Returns
/// the number of mismatches it found, which are also added to `found`.
pub fn sweep(words: &mut [u64], base: u64, sweep: Sweep, found: &mut Mismatches) -> u64 {
    let mut errors = 0;
    for (offset, word) in (base..).step_by(8).zip(words.iter_mut()) {
        let word: *mut u64 = word;
        if let Some(key) = sweep.check {
            // SAFETY: `word` comes from a live `&mut u64`, so it is valid, aligned and
            // unaliased. Volatile so that the load really goes to memory.
            let got = unsafe { word.read_volatile() };
            let expected = value_at(key, offset);
            if got != expected {
                errors += 1;
                if found.first.len() < MAX_MISMATCHES_KEPT {
                    found.first.push(Mismatch {
                        offset,
                        expected,
                        got,
                    });
                }
            }
        }
        if let Some(key) = sweep.write {
            // SAFETY: as above; volatile so that the store cannot be elided.
            unsafe { word.write_volatile(value_at(key, offset)) };
        }
    }
    found.errors += errors;
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: u64 = 42;

    #[test]
    fn values_depend_on_offset_round_and_thread() {
        let k = round_key(2, 1, SEED);
        assert_eq!(value_at(k, 8), value_at(round_key(2, 1, SEED), 8));
        assert_ne!(value_at(k, 8), value_at(k, 16));
        assert_ne!(k, round_key(3, 1, SEED));
        assert_ne!(k, round_key(2, 0, SEED));
        assert_ne!(k, round_key(2, 1, SEED + 1));
    }

    #[test]
    fn shares_cover_everything_evenly() {
        assert_eq!(split_shares(10, 3), vec![0..4, 4..7, 7..10]);
        assert_eq!(split_shares(5, 0), vec![0..5]);
    }

    #[test]
    fn corrupted_word_is_reported_at_its_offset() {
        let (k1, k2) = (round_key(1, 0, SEED), round_key(2, 0, SEED));
        let mut words = vec![0u64; 64];
        let mut found = Mismatches::default();
        let write = Sweep {
            check: None,
            write: Some(k1),
        };
        assert_eq!(sweep(&mut words, 0x1000, write, &mut found), 0);
        words[5] ^= 1 << 17;
        let rewrite = Sweep {
            check: Some(k1),
            write: Some(k2),
        };
        assert_eq!(sweep(&mut words, 0x1000, rewrite, &mut found), 1);
        let expected = value_at(k1, 0x1000 + 5 * 8);
        let got = expected ^ (1 << 17);
        assert_eq!(
            found.first,
            vec![Mismatch {
                offset: 0x1028,
                expected,
                got
            }]
        );
        let verify = Sweep {
            check: Some(k2),
            write: None,
        };
        assert_eq!(sweep(&mut words, 0x1000, verify, &mut found), 0);
        assert_eq!(found.errors, 1);
    }

    #[test]
    fn kept_mismatches_are_capped_but_all_counted() {
        let mut words = vec![0u64; 32];
        let mut found = Mismatches::default();
        let check = Sweep {
            check: Some(round_key(1, 0, SEED)),
            write: None,
        };
        assert_eq!(sweep(&mut words, 0, check, &mut found), 32);
        assert_eq!((found.errors, found.first.len()), (32, MAX_MISMATCHES_KEPT));
    }
}

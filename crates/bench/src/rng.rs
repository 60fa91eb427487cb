//! A small seeded generator (SplitMix64) for reproducible shuffles and
//! fill patterns: the same seed gives the same benchmark input on every
//! machine. The mixing function is the workloads crate's (one splitmix64
//! in the workspace); this module owns the stateful generator around it.

use workloads::{SPLITMIX64_GAMMA, splitmix64};

/// SplitMix64 (Steele, Lea, Flood 2014): fast, full-period, good enough
/// to scatter benchmark inputs; not for cryptography.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        // The finaliser adds the golden-ratio step itself: hashing the
        // old state is the same as hashing the stepped one unmixed.
        let value = splitmix64(self.state);
        self.state = self.state.wrapping_add(SPLITMIX64_GAMMA);
        value
    }

    /// A uniform value in `0..bound` (`bound` > 0), by rejection so that
    /// no value is favoured.
    pub fn below(&mut self, bound: u64) -> u64 {
        let bound = bound.max(1);
        // Largest multiple of `bound` that fits: values at or above it
        // would favour the low residues.
        let zone = u64::MAX - (u64::MAX % bound);
        loop {
            let value = self.next_u64();
            if value < zone {
                return value % bound;
            }
        }
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let tail = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        tail.copy_from_slice(&last[..tail.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sequence() {
        // First outputs of SplitMix64 seeded with 0 (reference C code).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn shuffle_is_a_seeded_permutation() {
        let original: Vec<u32> = (0..1000).collect();
        let mut a = original.clone();
        let mut b = original.clone();
        let mut c = original.clone();
        SplitMix64::new(7).shuffle(&mut a);
        SplitMix64::new(7).shuffle(&mut b);
        SplitMix64::new(8).shuffle(&mut c);
        assert_eq!(a, b, "same seed, same order");
        assert_ne!(a, c, "other seed, other order");
        assert_ne!(a, original, "actually shuffled");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, original, "nothing lost or duplicated");
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = SplitMix64::new(1);
        let mut seen = [false; 6];
        for _ in 0..600 {
            let v = rng.below(6);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn fill_covers_odd_lengths() {
        let mut buf = [0u8; 13];
        SplitMix64::new(3).fill(&mut buf);
        assert!(buf[8..].iter().any(|&b| b != 0));
    }
}

//! A keyed bijection on `0..n` that spreads popular zipf ranks over the
//! whole buffer: two rounds of odd-multiply-add and xorshift on the next
//! power of two, with cycle walking back into `0..n`.

use crate::rng::splitmix64;

/// A permutation of `0..n` chosen by a key.
#[derive(Clone, Copy, Debug)]
pub struct Scatter {
    n: u64,
    mask: u64,
    shift: u32,
    mul: [u64; 2],
    add: [u64; 2],
}

impl Scatter {
    /// The permutation of `0..n` (n ≥ 1) for `key`.
    pub fn new(n: u64, key: u64) -> Self {
        let n = n.max(1);
        let bits = 64 - (n - 1).leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1 << bits) - 1
        };
        Scatter {
            n,
            mask,
            shift: bits.div_ceil(2).max(1),
            mul: [splitmix64(key) | 1, splitmix64(key ^ 0x2) | 1],
            add: [splitmix64(key ^ 0x1), splitmix64(key ^ 0x3)],
        }
    }

    /// One bijective round trip over `0..=mask`.
    #[inline(always)]
    fn permute(&self, mut x: u64) -> u64 {
        for round in 0..2 {
            x = x
                .wrapping_mul(self.mul[round])
                .wrapping_add(self.add[round])
                & self.mask;
            x ^= x >> self.shift;
        }
        x
    }

    /// The image of `x` (< n). Walking the cycle of `x` until it re-enters
    /// `0..n` keeps the map a bijection; it takes under 2 steps on average
    /// since n > mask / 2.
    #[inline(always)]
    pub fn apply(&self, x: u64) -> u64 {
        let mut y = self.permute(x);
        while y >= self.n {
            y = self.permute(y);
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn is_a_bijection() {
        for n in [1u64, 2, 3, 7, 8, 9, 1000, 1024, 1025, 65_537] {
            let s = Scatter::new(n, 99);
            let image: HashSet<u64> = (0..n).map(|x| s.apply(x)).collect();
            assert_eq!(image.len() as u64, n, "n = {n}");
            assert!(image.iter().all(|&y| y < n));
        }
    }

    #[test]
    fn spreads_neighbours_and_depends_on_key() {
        let n = 1 << 24;
        let a = Scatter::new(n, 1);
        // The first 1000 ranks land in many of the 512 chunks of 32768
        // records (a random map would hit about 440).
        let chunks: HashSet<u64> = (0..1000).map(|x| a.apply(x) >> 15).collect();
        assert!(chunks.len() >= 350, "{}", chunks.len());
        let b = Scatter::new(n, 2);
        let same = (0..1000).filter(|&x| a.apply(x) == b.apply(x)).count();
        assert!(same < 10, "{same}");
    }
}

//! The samplers' random numbers: xorshift64, fast and good enough to pick
//! which pages to look at (nothing here needs to be unpredictable).

/// A xorshift64 generator.
#[derive(Clone, Debug)]
pub(crate) struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (0 is replaced: xorshift never leaves 0).
    pub fn new(seed: u64) -> Self {
        XorShift(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `[0, n)` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_stay_below_the_bound_and_vary() {
        let mut r = XorShift::new(0);
        let picks: Vec<u64> = (0..100).map(|_| r.below(10)).collect();
        assert!(picks.iter().all(|&p| p < 10));
        assert!(picks.iter().any(|&p| p != picks[0]));
        assert_eq!(r.below(0), 0);
    }
}

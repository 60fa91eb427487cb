//! Fast pseudo-random numbers: wyrand per vCPU for the access streams and
//! splitmix64 for deterministic per-phase choices every vCPU must agree on.
//! The splitmix64 finaliser here is the workspace's one copy: the bench
//! crate's seeded generator and the nested guest's data pattern use it.

/// The wyrand generator: one 64×64→128 multiply per number.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `vcpu` of a run seeded with `seed` (each vCPU its own
    /// stream).
    pub fn for_vcpu(seed: u64, vcpu: u32) -> Self {
        Rng {
            state: mix(seed, 0x7663_7075 ^ u64::from(vcpu)),
        }
    }

    /// The next 64 random bits.
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.state) * u128::from(self.state ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) as u64) ^ (t as u64)
    }

    /// A number in `0..n` (multiply-high; bias below n / 2^64).
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        mul_high(self.next_u64(), n)
    }
}

/// The high 64 bits of `a * b`: maps a uniform `a` onto `0..b`.
#[inline(always)]
pub fn mul_high(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) >> 64) as u64
}

/// splitmix64's state step (the golden ratio, odd): a generator's state
/// advances by it, and [`splitmix64`] adds it before mixing.
pub const SPLITMIX64_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The splitmix64 finaliser: a bijective 64-bit hash.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(SPLITMIX64_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hashes two words into one (deterministic, order-sensitive).
pub fn mix(a: u64, b: u64) -> u64 {
    splitmix64(a ^ splitmix64(b))
}

/// A probability turned into an integer threshold over 53 random bits, so
/// the hot loops decide with one compare instead of float math.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chance {
    threshold: u64,
}

impl Chance {
    /// A chance of `p`, clamped to `[0, 1]`.
    pub fn new(p: f64) -> Self {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        Chance {
            threshold: (p * (1u64 << 53) as f64) as u64,
        }
    }

    /// Whether the random word `r` falls inside the chance (uses its top 53
    /// bits).
    #[inline(always)]
    pub fn hit(self, r: u64) -> bool {
        (r >> 11) < self.threshold
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn vcpus_get_distinct_streams() {
        let firsts: HashSet<u64> = (0..64).map(|v| Rng::for_vcpu(7, v).next_u64()).collect();
        assert_eq!(firsts.len(), 64);
        let mut a = Rng::for_vcpu(7, 3);
        let mut b = Rng::for_vcpu(7, 3);
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(
            Rng::for_vcpu(8, 3).next_u64(),
            Rng::for_vcpu(7, 3).next_u64()
        );
    }

    #[test]
    fn below_is_roughly_uniform() {
        let mut rng = Rng::for_vcpu(1, 0);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[rng.below(10) as usize] += 1;
        }
        for c in counts {
            assert!((9_400..10_600).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn bits_are_balanced() {
        let mut rng = Rng::for_vcpu(2, 0);
        let mut ones = [0u32; 64];
        for _ in 0..20_000 {
            let x = rng.next_u64();
            for (bit, n) in ones.iter_mut().enumerate() {
                *n += ((x >> bit) & 1) as u32;
            }
        }
        for n in ones {
            assert!((9_500..10_500).contains(&n), "{ones:?}");
        }
    }

    #[test]
    fn chance_edges_and_rate() {
        let mut rng = Rng::for_vcpu(3, 0);
        let (never, always, tenth) = (Chance::new(0.0), Chance::new(1.0), Chance::new(0.1));
        let mut hits = 0;
        for _ in 0..100_000 {
            let r = rng.next_u64();
            assert!(!never.hit(r));
            assert!(always.hit(r));
            hits += u32::from(tenth.hit(r));
        }
        assert!((9_500..10_500).contains(&hits), "{hits}");
        assert!(always.hit(u64::MAX));
        assert_eq!(Chance::new(f64::NAN), never);
    }

    #[test]
    fn mix_is_order_sensitive() {
        assert_ne!(mix(1, 2), mix(2, 1));
        assert_ne!(splitmix64(0), splitmix64(1));
    }
}

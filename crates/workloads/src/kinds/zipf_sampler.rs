//! Zipf rank sampling in O(1) with integer math per sample.
//!
//! Ranks (0 = most popular, P(k) ∝ (k+1)^-θ) are grouped into buckets: the
//! first 1024 ranks each form their own bucket, the rest are geometric
//! buckets 2% wide. A bucket is drawn with Walker's alias method, a rank
//! inside it uniformly. So the head is exact and each tail rank gets its
//! bucket's mean probability (within 2% of its own). [`ZipfSampler::buckets`]
//! exposes exactly these probabilities for the ground truth.

use crate::math;
use crate::rng::{Rng, mul_high};

/// Ranks that get a bucket each.
const HEAD_RANKS: u64 = 1024;
/// Tail buckets grow by `1 / TAIL_GROWTH` of their start (2%).
const TAIL_GROWTH: u64 = 50;
/// Table size: enough for 2^39 ranks (a 4 TiB buffer of 8-byte records);
/// beyond that the last bucket takes the rest.
const MAX_BUCKETS: usize = 2048;

/// Alias tables over rank buckets: 45 KiB, built in place (see
/// [`ZipfSampler::fill`]) because vCPU stacks are only 256 KiB.
#[derive(Clone, Debug)]
pub struct ZipfSampler {
    buckets: usize,
    /// First rank of each bucket; `start[buckets]` = number of ranks.
    start: [u64; MAX_BUCKETS + 1],
    /// Alias method: keep bucket `i` if the low 32 random bits are below
    /// `accept[i]`, else take `alias[i]`.
    accept: [u32; MAX_BUCKETS],
    alias: [u16; MAX_BUCKETS],
    /// Probability of each single rank in the bucket.
    rank_prob: [f64; MAX_BUCKETS],
}

impl ZipfSampler {
    /// A sampler with no buckets; [`ZipfSampler::fill`] makes it usable.
    pub const fn empty() -> Self {
        ZipfSampler {
            buckets: 0,
            start: [0; MAX_BUCKETS + 1],
            accept: [0; MAX_BUCKETS],
            alias: [0; MAX_BUCKETS],
            rank_prob: [0.0; MAX_BUCKETS],
        }
    }

    /// A sampler over `ranks` ranks with exponent `theta` (tests only: the
    /// guest builds in place).
    #[cfg(test)]
    pub fn new(ranks: u64, theta: f64) -> Self {
        let mut s = Self::empty();
        s.fill(ranks, theta);
        s
    }

    /// Sets the sampler up for `ranks` ranks (at least 1) with exponent
    /// `theta`.
    pub fn fill(&mut self, ranks: u64, theta: f64) {
        let ranks = ranks.max(1);
        let mut n = 0;
        let mut total = 0.0;
        let mut at = 0;
        while at < ranks {
            let end = if at < HEAD_RANKS {
                at + 1
            } else if n == MAX_BUCKETS - 1 {
                ranks
            } else {
                (at + (at / TAIL_GROWTH).max(1)).min(ranks)
            };
            self.start[n] = at;
            self.rank_prob[n] = bucket_mass(at, end, theta);
            total += self.rank_prob[n];
            n += 1;
            at = end;
        }
        self.start[n] = ranks;
        self.buckets = n;
        // Scaled so the mean is 1, which the alias construction consumes.
        for p in &mut self.rank_prob[..n] {
            *p *= n as f64 / total;
        }
        self.build_alias();
        for i in 0..n {
            let (lo, hi) = (self.start[i], self.start[i + 1]);
            self.rank_prob[i] = bucket_mass(lo, hi, theta) / total / (hi - lo) as f64;
        }
    }

    /// Builds the alias tables from the mean-1 masses in `rank_prob`, which
    /// it destroys (Vose's method, with the small and large worklists
    /// sharing one array from either end).
    fn build_alias(&mut self) {
        let n = self.buckets;
        let scaled = &mut self.rank_prob;
        let mut work = [0u16; MAX_BUCKETS];
        let (mut ns, mut nl) = (0, 0);
        for (i, s) in scaled[..n].iter().enumerate() {
            if *s < 1.0 {
                work[ns] = i as u16;
                ns += 1;
            } else {
                nl += 1;
                work[n - nl] = i as u16;
            }
        }
        while ns > 0 && nl > 0 {
            ns -= 1;
            let s = usize::from(work[ns]);
            let l = usize::from(work[n - nl]);
            self.accept[s] = ((scaled[s] * 4_294_967_296.0) as u64).min(u64::from(u32::MAX)) as u32;
            self.alias[s] = l as u16;
            scaled[l] = (scaled[l] + scaled[s]) - 1.0;
            if scaled[l] < 1.0 {
                nl -= 1;
                work[ns] = l as u16;
                ns += 1;
            }
        }
        // Whatever is left is full (up to rounding): it keeps itself, so the
        // accept test cannot matter.
        for &i in work[..ns].iter().chain(&work[n - nl..n]) {
            let i = usize::from(i);
            self.accept[i] = u32::MAX;
            self.alias[i] = i as u16;
        }
    }

    /// Number of ranks.
    #[cfg(test)]
    pub fn ranks(&self) -> u64 {
        self.start[self.buckets]
    }

    /// Draws a rank.
    #[inline(always)]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let r = rng.next_u64();
        let i = mul_high(r >> 32 << 32, self.buckets as u64) as usize;
        let b = if (r as u32) < self.accept[i] {
            i
        } else {
            usize::from(self.alias[i])
        };
        let (lo, hi) = (self.start[b], self.start[b + 1]);
        if hi - lo == 1 {
            lo
        } else {
            lo + rng.below(hi - lo)
        }
    }

    /// The buckets as `(first rank, end rank, probability of each rank)`.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, f64)> + '_ {
        (0..self.buckets).map(|i| (self.start[i], self.start[i + 1], self.rank_prob[i]))
    }
}

/// Σ (k+1)^-θ over ranks `lo..hi`: exact for one rank, else the midpoint
/// integral ∫ x^-θ dx over [lo + ½, hi + ½] (relative error below 1e-7 for
/// the tail buckets, which start at rank 1024).
fn bucket_mass(lo: u64, hi: u64, theta: f64) -> f64 {
    if hi - lo == 1 {
        return math::powf(lo as f64 + 1.0, -theta);
    }
    let l0 = math::ln(lo as f64 + 0.5);
    let d = math::ln(hi as f64 + 0.5) - l0;
    let t = 1.0 - theta;
    math::exp(t * l0) * d * math::exp_m1_over_x(t * d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact_probs(n: u64, theta: f64) -> Vec<f64> {
        let w: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-theta)).collect();
        let total: f64 = w.iter().sum();
        w.into_iter().map(|x| x / total).collect()
    }

    #[test]
    fn bucket_probabilities_match_zipf() {
        for (n, theta) in [
            (1, 0.99),
            (10, 0.5),
            (5000, 0.99),
            (200_000, 1.0),
            (100_000, 2.0),
        ] {
            let s = ZipfSampler::new(n, theta);
            let exact = exact_probs(n, theta);
            let mut sum = 0.0;
            for (lo, hi, p) in s.buckets() {
                let want: f64 = exact[lo as usize..hi as usize].iter().sum();
                let got = p * (hi - lo) as f64;
                assert!(
                    (got - want).abs() <= 1e-6 * want + 1e-15,
                    "{n} {theta} {lo}..{hi}"
                );
                if hi - lo == 1 {
                    // Exact up to the tail integrals' share of the total.
                    assert!((p - exact[lo as usize]).abs() <= 1e-7 * p, "head rank {lo}");
                }
                sum += got;
            }
            assert!((sum - 1.0).abs() < 1e-12);
            assert_eq!(s.ranks(), n);
        }
    }

    #[test]
    fn huge_rank_counts_fit_the_table() {
        let s = ZipfSampler::new(1 << 39, 0.99);
        assert!(s.buckets < MAX_BUCKETS);
        assert_eq!(s.ranks(), 1 << 39);
        let s = ZipfSampler::new(u64::MAX, 0.99);
        assert_eq!(s.buckets, MAX_BUCKETS);
        let mut rng = Rng::for_vcpu(0, 0);
        for _ in 0..1000 {
            assert!(s.sample(&mut rng) < u64::MAX);
        }
    }

    #[test]
    fn sampled_frequencies_follow_the_skew() {
        const SAMPLES: usize = 1_000_000;
        let (n, theta) = (100_000u64, 0.99);
        let s = ZipfSampler::new(n, theta);
        let exact = exact_probs(n, theta);
        let mut rng = Rng::for_vcpu(42, 1);
        let mut counts = vec![0u32; n as usize];
        for _ in 0..SAMPLES {
            counts[s.sample(&mut rng) as usize] += 1;
        }
        // Head ranks: within 4 standard deviations of the exact frequency.
        for k in [0usize, 1, 2, 9, 99, 999] {
            let want = exact[k] * SAMPLES as f64;
            let sd = want.sqrt();
            let got = f64::from(counts[k]);
            assert!(
                (got - want).abs() < 4.0 * sd + 1.0,
                "rank {k}: {got} vs {want}"
            );
        }
        // Rank 0 vs rank 1 is 2^θ.
        let ratio = f64::from(counts[0]) / f64::from(counts[1]);
        assert!((ratio - 2f64.powf(theta)).abs() < 0.05, "{ratio}");
        // Aggregates over the tail.
        for (lo, hi) in [(1000usize, 2000usize), (10_000, 50_000), (50_000, 100_000)] {
            let want: f64 = exact[lo..hi].iter().sum::<f64>() * SAMPLES as f64;
            let got: f64 = counts[lo..hi].iter().map(|&c| f64::from(c)).sum();
            assert!(
                (got - want).abs() < 4.0 * want.sqrt() + 0.01 * want,
                "{lo}..{hi}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn single_rank_always_wins() {
        let s = ZipfSampler::new(1, 3.0);
        let mut rng = Rng::for_vcpu(0, 0);
        assert!((0..100).all(|_| s.sample(&mut rng) == 0));
    }
}

//! Normally distributed page offsets with integer math per sample: the
//! normal quantile function sampled at 1024 evenly spaced probabilities
//! (ends cut at ±4σ) and interpolated linearly between them. Each of the
//! 1024 segments has probability 1/1024 and is uniform inside, which is
//! exactly what the ground truth describes.

use crate::math;

/// Number of equally likely segments.
pub const SEGMENTS: usize = 1024;
/// Where the outermost segments are cut, in standard deviations.
const TAIL_SIGMAS: f64 = 4.0;

/// Quantiles of N(0, σ²) in whole pages at probabilities i/1024.
#[derive(Clone, Debug)]
pub struct NormalTable {
    offsets: [i64; SEGMENTS + 1],
}

impl NormalTable {
    /// The table for a standard deviation of `stddev_pages` pages.
    pub fn new(stddev_pages: u64) -> Self {
        let sigma = stddev_pages as f64;
        let mut offsets = [0i64; SEGMENTS + 1];
        for (i, slot) in offsets.iter_mut().enumerate() {
            let z = match i {
                0 => -TAIL_SIGMAS,
                SEGMENTS => TAIL_SIGMAS,
                _ => math::normal_quantile(i as f64 / SEGMENTS as f64),
            };
            *slot = math::round_to_i64(z * sigma);
        }
        NormalTable { offsets }
    }

    /// An offset in pages from 64 random bits: the top 10 pick the segment,
    /// the next 32 the position inside it.
    #[inline(always)]
    pub fn sample(&self, r: u64) -> i64 {
        let i = (r >> 54) as usize;
        let frac = (r >> 22) & 0xffff_ffff;
        let lo = self.offsets[i];
        let width = (self.offsets[i + 1] - lo) as u64;
        lo + ((u128::from(width) * u128::from(frac)) >> 32) as i64
    }

    /// The segments as page offset ranges `[lo, hi)`, each of probability
    /// 1/1024 and uniform inside; a zero-width segment is the single page
    /// `lo` (`hi` = `lo` + 1 is returned for it).
    pub fn segments(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.offsets.windows(2).map(|w| (w[0], w[1].max(w[0] + 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn offsets_are_monotone_and_symmetric() {
        for sigma in [1u64, 3, 100, 1 << 20] {
            let t = NormalTable::new(sigma);
            assert!(t.offsets.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!(t.offsets[0], -4 * sigma as i64);
            assert_eq!(t.offsets[SEGMENTS / 2], 0);
            for i in 0..=SEGMENTS {
                assert_eq!(t.offsets[i], -t.offsets[SEGMENTS - i], "{sigma} {i}");
            }
        }
    }

    #[test]
    fn samples_are_normal() {
        let sigma = 1000u64;
        let t = NormalTable::new(sigma);
        let mut rng = Rng::for_vcpu(4, 0);
        const N: usize = 200_000;
        let (mut sum, mut sq, mut within1) = (0f64, 0f64, 0usize);
        for _ in 0..N {
            let x = t.sample(rng.next_u64()) as f64;
            sum += x;
            sq += x * x;
            within1 += usize::from(x.abs() < sigma as f64);
        }
        let mean = sum / N as f64;
        let sd = (sq / N as f64 - mean * mean).sqrt();
        assert!(mean.abs() < 10.0, "{mean}");
        assert!((sd / sigma as f64 - 1.0).abs() < 0.02, "{sd}");
        let p1 = within1 as f64 / N as f64;
        assert!((p1 - 0.6827).abs() < 0.01, "{p1}");
    }

    #[test]
    fn samples_stay_in_their_segment() {
        let t = NormalTable::new(2);
        let segs: Vec<_> = t.segments().collect();
        let mut rng = Rng::for_vcpu(5, 0);
        for _ in 0..10_000 {
            let r = rng.next_u64();
            let (lo, hi) = segs[(r >> 54) as usize];
            let x = t.sample(r);
            assert!(lo <= x && x < hi, "{x} not in {lo}..{hi}");
        }
    }
}

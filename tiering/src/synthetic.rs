//! Synthetic tracker samples with a known shape, for benchmarks of the
//! heat model (the criterion bench and `tierbench track`): a tenth of the
//! frames hot (most pages touched, a third written), the rest with a few
//! stray pages. Deterministic per seed.

use std::time::Duration;

use crate::{AccessSample, Coverage, HeatError};

/// xorshift64: cheap deterministic counts.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A full-coverage sample of `frames` frames of `pages` 4 KiB pages
/// (at least 2) over `interval`.
pub fn full_coverage(
    frames: usize,
    pages: u32,
    interval: Duration,
    seed: u64,
) -> Result<AccessSample, HeatError> {
    let mut rng = Xorshift(seed | 1);
    let mut s = AccessSample::new(frames, pages, interval)?;
    let pages = u64::from(pages.min(u32::from(u16::MAX)));
    for (accessed, dirty) in s.accessed.iter_mut().zip(s.dirty.iter_mut()) {
        let touched = if rng.below(10) == 0 {
            pages / 2 + rng.below(pages / 2 + 1)
        } else {
            rng.below(8.min(pages))
        };
        // touched ≤ pages ≤ u16::MAX.
        *accessed = touched as u16;
        *dirty = (touched / 3) as u16;
    }
    Ok(s)
}

/// The same evidence as a sampler observing `observed` pages of each frame
/// sees it (counts scaled down, per-frame coverage).
pub fn sampled(full: &AccessSample, observed: u16) -> AccessSample {
    let mut s = full.clone();
    let scale = (full.pages_per_frame / u32::from(observed.max(1))).max(1);
    for (a, d) in s.accessed.iter_mut().zip(s.dirty.iter_mut()) {
        *a = (u32::from(*a) / scale) as u16;
        *d = (u32::from(*d) / scale) as u16;
    }
    s.coverage = Coverage::PerFrame(vec![observed; s.frames()]);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenth_is_hot_and_sampling_scales_down() {
        let s = full_coverage(1000, 512, Duration::from_secs(1), 7).unwrap();
        let hot = s.accessed.iter().filter(|&&a| a >= 256).count();
        assert!((50..200).contains(&hot), "{hot}");
        assert!(s.accessed.iter().all(|&a| a <= 512));
        assert_eq!(
            s,
            full_coverage(1000, 512, Duration::from_secs(1), 7).unwrap()
        );
        let p = sampled(&s, 32);
        assert_eq!(p.accessed[0], s.accessed[0] / 16);
        assert_eq!(p.coverage, Coverage::PerFrame(vec![32; 1000]));
    }
}

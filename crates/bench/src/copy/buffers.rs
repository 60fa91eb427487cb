//! `Buffers`: the source and destination tiers of the copy suite (two
//! separate memfd mappings, faulted in) and the shuffled range lists that
//! cut one batch into ranges of a given size.

use page_copy::CopyRange;

use crate::memory::{MemfdRegion, MemoryError};
use crate::rng::SplitMix64;

/// A source filled with seeded random bytes and a destination, both
/// touched on every page before anything is timed.
#[derive(Debug)]
pub struct Buffers {
    src: MemfdRegion,
    dst: MemfdRegion,
}

impl Buffers {
    /// Maps two regions of `len` bytes, fills the source from `seed` and
    /// zeroes the destination (writing every page of both).
    pub fn new(len: usize, seed: u64) -> Result<Self, MemoryError> {
        let mut src = MemfdRegion::new(c"tierbench-src", len)?;
        let mut dst = MemfdRegion::new(c"tierbench-dst", len)?;
        SplitMix64::new(seed).fill(src.as_mut_slice());
        dst.as_mut_slice().fill(0);
        Ok(Self { src, dst })
    }

    /// Bytes in each region.
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// The whole batch as one range (for the contiguous parallel copy).
    pub fn whole(&mut self) -> CopyRange {
        CopyRange::new(self.src.as_ptr(), self.dst.as_mut_ptr(), self.len())
    }

    /// The batch cut into `range_size`-byte ranges (same offset in source
    /// and destination), in an order shuffled with `seed`: migration
    /// batches are scattered frames, not one sequential stream. A tail
    /// shorter than `range_size` becomes a shorter last range.
    pub fn shuffled_ranges(&mut self, range_size: usize, seed: u64) -> Vec<CopyRange> {
        let range_size = range_size.max(1);
        let (src, dst, len) = (self.src.as_ptr(), self.dst.as_mut_ptr(), self.len());
        let mut ranges: Vec<CopyRange> = (0..len)
            .step_by(range_size)
            .map(|offset| {
                // Address arithmetic only; `offset < len` keeps both inside
                // their mappings.
                CopyRange::new(
                    src.wrapping_add(offset),
                    dst.wrapping_add(offset),
                    range_size.min(len - offset),
                )
            })
            .collect();
        SplitMix64::new(seed).shuffle(&mut ranges);
        ranges
    }

    /// Zeroes the destination (before a copy whose result is checked).
    pub fn clear_destination(&mut self) {
        self.dst.as_mut_slice().fill(0);
    }

    /// Offset of the first byte where destination and source differ.
    pub fn first_difference(&self) -> Option<usize> {
        let (src, dst) = (self.src.as_slice(), self.dst.as_slice());
        if src == dst {
            return None;
        }
        src.iter().zip(dst).position(|(a, b)| a != b)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ranges_cover_the_batch_once_in_shuffled_order() {
        let mut buffers = Buffers::new(64 * 4096, 1).unwrap();
        let base = buffers.whole();
        let ranges = buffers.shuffled_ranges(4096, 9);
        assert_eq!(ranges.len(), 64);
        let offsets: Vec<usize> = ranges
            .iter()
            .map(|r| r.src as usize - base.src as usize)
            .collect();
        for (r, off) in ranges.iter().zip(&offsets) {
            assert_eq!(r.dst as usize - base.dst as usize, *off);
            assert_eq!(r.len, 4096);
        }
        let unique: HashSet<usize> = offsets.iter().copied().collect();
        assert_eq!(unique.len(), 64);
        assert!(offsets.windows(2).any(|w| w[1] < w[0]), "not shuffled");
        assert_eq!(buffers.shuffled_ranges(4096, 9), ranges, "seeded");
    }

    #[test]
    fn short_tail_becomes_a_short_range() {
        let mut buffers = Buffers::new(10_000, 1).unwrap();
        let total: usize = buffers.shuffled_ranges(4096, 2).iter().map(|r| r.len).sum();
        assert_eq!(total, 10_000);
    }

    #[test]
    fn difference_is_found_and_cleared() {
        let mut buffers = Buffers::new(8192, 5).unwrap();
        assert_eq!(buffers.first_difference().map(|o| o < 8), Some(true));
        let whole = buffers.whole();
        // SAFETY: two distinct live mappings of `whole.len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(whole.src, whole.dst, whole.len) };
        assert_eq!(buffers.first_difference(), None);
        buffers.clear_destination();
        assert!(buffers.first_difference().is_some());
    }
}

//! Guest RAM cut into frames, numbered across RAM regions in order, the
//! same numbering as guest-memory's `FrameTable` (which the oracle does not
//! depend on): region `r`'s frame `i` covers `[gpa_r + i × frame_size,
//! gpa_r + (i + 1) × frame_size)`.

use guest_abi::GpaRange;
use thiserror::Error;

/// Invalid RAM layouts.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameMapError {
    /// The frame size is zero.
    #[error("frame size is zero")]
    ZeroFrameSize,
    /// A region's length is not a whole number of frames.
    #[error("RAM region {gpa:#x}+{len:#x} is not a multiple of the frame size {frame_size:#x}")]
    PartialFrame {
        /// Region start.
        gpa: u64,
        /// Region length.
        len: u64,
        /// The frame size.
        frame_size: u64,
    },
    /// Regions overlap, are out of order or run past the address space.
    #[error("RAM region {gpa:#x}+{len:#x} overlaps or precedes the one before, or overflows")]
    Order {
        /// Region start.
        gpa: u64,
        /// Region length.
        len: u64,
    },
}

/// Frame numbering over RAM regions.
#[derive(Clone, Debug)]
pub(crate) struct FrameMap {
    frame_size: u64,
    regions: Vec<GpaRange>,
    /// Index of each region's first frame.
    first_frames: Vec<usize>,
    frames: usize,
}

impl FrameMap {
    /// The numbering of `ram` (sorted by address, disjoint) in frames of
    /// `frame_size` bytes.
    pub(crate) fn new(ram: &[GpaRange], frame_size: u64) -> Result<Self, FrameMapError> {
        if frame_size == 0 {
            return Err(FrameMapError::ZeroFrameSize);
        }
        let mut first_frames = Vec::with_capacity(ram.len());
        let mut frames = 0usize;
        let mut previous_end = 0u64;
        for (i, region) in ram.iter().enumerate() {
            let (gpa, len) = (region.start, region.len);
            let in_order = i == 0 || gpa >= previous_end;
            let Some(end) = gpa.checked_add(len).filter(|_| in_order) else {
                return Err(FrameMapError::Order { gpa, len });
            };
            if len % frame_size != 0 {
                return Err(FrameMapError::PartialFrame {
                    gpa,
                    len,
                    frame_size,
                });
            }
            previous_end = end;
            first_frames.push(frames);
            frames +=
                usize::try_from(len / frame_size).map_err(|_| FrameMapError::Order { gpa, len })?;
        }
        Ok(FrameMap {
            frame_size,
            regions: ram.to_vec(),
            first_frames,
            frames,
        })
    }

    /// Number of frames.
    pub(crate) fn frames(&self) -> usize {
        self.frames
    }

    /// Bytes of `[start, start + len)` that lie in RAM.
    pub(crate) fn bytes_in_ram(&self, start: u64, len: u64) -> u64 {
        let end = start.saturating_add(len);
        self.regions
            .iter()
            .map(|region| {
                end.min(region.end())
                    .saturating_sub(start.max(region.start))
            })
            .sum()
    }

    /// Calls `visit(frame, bytes)` for every frame overlapping `[start,
    /// start + len)`, with the bytes they share.
    pub(crate) fn for_each_overlap(&self, start: u64, len: u64, mut visit: impl FnMut(usize, u64)) {
        let end = start.saturating_add(len);
        for (region, &first_frame) in self.regions.iter().zip(&self.first_frames) {
            let lo = start.max(region.start);
            let hi = end.min(region.end());
            if lo >= hi {
                continue;
            }
            let first = (lo - region.start) / self.frame_size;
            let last = (hi - 1 - region.start) / self.frame_size;
            for i in first..=last {
                let frame_start = region.start + i * self.frame_size;
                let frame_end = frame_start + self.frame_size;
                let bytes = hi.min(frame_end) - lo.max(frame_start);
                // i < the region's frames, so this is a valid frame index.
                visit(first_frame + i as usize, bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FS: u64 = 0x1000;

    fn range(start: u64, len: u64) -> GpaRange {
        GpaRange { start, len }
    }

    fn overlaps(map: &FrameMap, start: u64, len: u64) -> (Vec<(usize, u64)>, u64) {
        let mut seen = Vec::new();
        map.for_each_overlap(start, len, |f, b| seen.push((f, b)));
        (seen, map.bytes_in_ram(start, len))
    }

    #[test]
    fn numbers_frames_across_regions_in_order() {
        let map = FrameMap::new(&[range(0, 3 * FS), range(1 << 32, 2 * FS)], FS).unwrap();
        assert_eq!(map.frames(), 5);
        assert_eq!(overlaps(&map, 1 << 32, FS), (vec![(3, FS)], FS));
        assert_eq!(
            overlaps(&map, FS / 2, 2 * FS),
            (vec![(0, FS / 2), (1, FS), (2, FS / 2)], 2 * FS)
        );
        // The part in the hole between regions is not in RAM.
        assert_eq!(
            overlaps(&map, 3 * FS - 8, 16),
            (vec![(2, 8)], 8),
            "only the bytes before the hole"
        );
        assert_eq!(overlaps(&map, (1 << 32) + 2 * FS, FS), (vec![], 0));
    }

    #[test]
    fn adjacent_regions_are_one_span() {
        let map = FrameMap::new(&[range(0, 2 * FS), range(2 * FS, 2 * FS)], FS).unwrap();
        assert_eq!(overlaps(&map, FS, 2 * FS), (vec![(1, FS), (2, FS)], 2 * FS));
    }

    #[test]
    fn bad_layouts_are_rejected() {
        assert_eq!(
            FrameMap::new(&[range(0, FS)], 0).err(),
            Some(FrameMapError::ZeroFrameSize)
        );
        assert!(matches!(
            FrameMap::new(&[range(0, FS + 1)], FS),
            Err(FrameMapError::PartialFrame { .. })
        ));
        assert!(matches!(
            FrameMap::new(&[range(4 * FS, FS), range(0, FS)], FS),
            Err(FrameMapError::Order { .. })
        ));
        assert!(matches!(
            FrameMap::new(&[range(0, 2 * FS), range(FS, FS)], FS),
            Err(FrameMapError::Order { .. })
        ));
        assert!(matches!(
            FrameMap::new(&[range(u64::MAX - FS + 2, FS)], FS),
            Err(FrameMapError::Order { .. })
        ));
        assert_eq!(FrameMap::new(&[], FS).unwrap().frames(), 0);
    }
}

//! The frame table: guest RAM cut into frames, numbered across regions in
//! guest-physical order, with each frame's guest-physical and host-virtual
//! address. Fixed for the life of the VM (KVM memslots are static).

use serde::{Deserialize, Serialize};

use crate::ids::FrameId;

/// A RAM region and the host-virtual range that holds it (one KVM memslot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappedRegion {
    /// Guest-physical start address.
    pub gpa: u64,
    /// Length in bytes.
    pub len: u64,
    /// Host-virtual start address.
    pub host_addr: u64,
}

/// Frame index ↔ guest-physical address ↔ host-virtual address.
#[derive(Debug, Clone)]
pub struct FrameTable {
    frame_size: u64,
    regions: Vec<MappedRegion>,
    /// Index of each region's first frame.
    first_frames: Vec<usize>,
    count: usize,
}

impl FrameTable {
    /// A table over `regions` (sorted by `gpa`, lengths multiples of `frame_size`).
    pub(crate) fn new(frame_size: u64, regions: Vec<MappedRegion>) -> Self {
        let mut first_frames = Vec::with_capacity(regions.len());
        let mut count = 0;
        for region in &regions {
            first_frames.push(count);
            count += (region.len / frame_size) as usize;
        }
        Self {
            frame_size,
            regions,
            first_frames,
            count,
        }
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u64 {
        self.frame_size
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no frames.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The RAM regions with their host ranges.
    pub fn regions(&self) -> &[MappedRegion] {
        &self.regions
    }

    /// Index of the region holding `frame`.
    pub fn region_of(&self, frame: FrameId) -> Option<usize> {
        if frame.index() >= self.count {
            return None;
        }
        Some(
            self.first_frames
                .partition_point(|first| *first <= frame.index())
                - 1,
        )
    }

    /// Frame indices `[first, end)` of region `index`.
    pub fn frames_of_region(&self, index: usize) -> Option<std::ops::Range<usize>> {
        let first = *self.first_frames.get(index)?;
        let end = self
            .first_frames
            .get(index + 1)
            .copied()
            .unwrap_or(self.count);
        Some(first..end)
    }

    /// Guest-physical address of `frame`.
    pub fn gpa(&self, frame: FrameId) -> Option<u64> {
        let r = self.region_of(frame)?;
        Some(self.regions[r].gpa + self.offset_in_region(r, frame))
    }

    /// Host-virtual address of `frame`.
    pub fn host_addr(&self, frame: FrameId) -> Option<u64> {
        let r = self.region_of(frame)?;
        Some(self.regions[r].host_addr + self.offset_in_region(r, frame))
    }

    /// The frame holding guest-physical address `gpa`.
    pub fn frame_of_gpa(&self, gpa: u64) -> Option<FrameId> {
        self.find(gpa, |r| r.gpa)
    }

    /// The frame holding host-virtual address `addr`.
    pub fn frame_of_host_addr(&self, addr: u64) -> Option<FrameId> {
        self.find(addr, |r| r.host_addr)
    }

    /// Whether frames `[first, first + count)` exist and lie in one region
    /// (so their host range is contiguous).
    pub fn is_run(&self, first: FrameId, count: usize) -> bool {
        let Some(last) = first
            .index()
            .checked_add(count)
            .and_then(|end| end.checked_sub(1))
        else {
            return false;
        };
        count > 0
            && matches!((self.region_of(first), self.region_of(FrameId(last))), (Some(a), Some(b)) if a == b)
    }

    fn offset_in_region(&self, region: usize, frame: FrameId) -> u64 {
        (frame.index() - self.first_frames[region]) as u64 * self.frame_size
    }

    fn find(&self, addr: u64, start_of: impl Fn(&MappedRegion) -> u64) -> Option<FrameId> {
        self.regions.iter().enumerate().find_map(|(i, r)| {
            let start = start_of(r);
            (addr >= start && addr - start < r.len).then(|| {
                FrameId(self.first_frames[i] + ((addr - start) / self.frame_size) as usize)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FS: u64 = 0x20_0000;

    fn table() -> FrameTable {
        FrameTable::new(
            FS,
            vec![
                MappedRegion {
                    gpa: 0,
                    len: 3 * FS,
                    host_addr: 0x7000_0000_0000,
                },
                MappedRegion {
                    gpa: 1 << 32,
                    len: 2 * FS,
                    host_addr: 0x7100_0000_0000,
                },
            ],
        )
    }

    #[test]
    fn numbers_frames_across_regions() {
        let t = table();
        assert_eq!(t.len(), 5);
        assert_eq!(t.gpa(FrameId(2)), Some(2 * FS));
        assert_eq!(t.gpa(FrameId(3)), Some(1 << 32));
        assert_eq!(t.host_addr(FrameId(4)), Some(0x7100_0000_0000 + FS));
        assert_eq!(t.gpa(FrameId(5)), None);
        assert_eq!(t.frames_of_region(1), Some(3..5));
        assert_eq!(t.region_of(FrameId(2)), Some(0));
        assert_eq!(t.region_of(FrameId(3)), Some(1));
    }

    #[test]
    fn maps_addresses_back_to_frames() {
        let t = table();
        assert_eq!(t.frame_of_gpa(FS + 5), Some(FrameId(1)));
        assert_eq!(t.frame_of_gpa(3 * FS), None);
        assert_eq!(t.frame_of_gpa((1 << 32) + FS), Some(FrameId(4)));
        assert_eq!(t.frame_of_host_addr(0x7100_0000_0000), Some(FrameId(3)));
        assert_eq!(t.frame_of_host_addr(0x6fff_ffff_ffff), None);
    }

    #[test]
    fn runs_stay_inside_one_region() {
        let t = table();
        assert!(t.is_run(FrameId(0), 3));
        assert!(!t.is_run(FrameId(2), 2));
        assert!(t.is_run(FrameId(3), 2));
        assert!(!t.is_run(FrameId(4), 2));
        assert!(!t.is_run(FrameId(0), 0));
    }
}

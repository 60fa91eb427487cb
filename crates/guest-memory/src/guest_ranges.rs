//! The host-virtual ranges that hold guest RAM, one per RAM region: an
//! aligned `PROT_NONE` reservation each, with tier slots mapped over it
//! `MAP_SHARED|MAP_FIXED` (consecutive slots of one tier in one call), and
//! the non-owning vm-memory view of them.

use std::io;
use std::sync::Arc;

use vm_memory::{GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

use crate::backend::TierBackend;
use crate::error::Error;
use crate::frame_table::{FrameTable, MappedRegion};
use crate::gpa_range::GpaRange;
use crate::ids::FrameId;
use crate::mapping::{HostMapping, map_fixed_shared};
use crate::placement::{Location, PlacementMap};
use crate::runs::runs;

/// Reserved guest ranges and the vm-memory view over them.
///
/// On drop the ranges are unmapped — unless a clone of the view (or of one
/// of its regions) is still alive, in which case they are leaked rather
/// than left dangling under that clone.
#[derive(Debug)]
pub(crate) struct GuestRanges {
    memory: GuestMemoryMmap,
    /// Our references to the regions inside `memory`, to notice clones at drop.
    handles: Vec<Arc<GuestRegionMmap>>,
    reservations: Vec<HostMapping>,
    mapped: Vec<MappedRegion>,
}

impl GuestRanges {
    /// Reserves a range aligned to `frame_size` for each region (nothing
    /// mapped into them yet) and builds the vm-memory view.
    pub(crate) fn reserve(regions: &[GpaRange], frame_size: u64) -> Result<Self, Error> {
        let mut reservations = Vec::with_capacity(regions.len());
        let mut mapped = Vec::with_capacity(regions.len());
        for region in regions {
            let reserve_err = |source| Error::Reserve {
                gpa: region.gpa,
                len: region.len,
                source,
            };
            let too_big = || reserve_err(io::Error::from_raw_os_error(libc::ENOMEM));
            let len = usize::try_from(region.len).map_err(|_| too_big())?;
            let align = usize::try_from(frame_size).map_err(|_| too_big())?;
            let range = HostMapping::reserve_aligned(len, align).map_err(reserve_err)?;
            mapped.push(MappedRegion {
                gpa: region.gpa,
                len: region.len,
                host_addr: range.addr() as u64,
            });
            reservations.push(range);
        }
        let handles = vm_regions(&reservations, &mapped)?;
        let memory =
            GuestMemoryMmap::from_arc_regions(handles.clone()).map_err(Error::GuestRegions)?;
        Ok(Self {
            memory,
            handles,
            reservations,
            mapped,
        })
    }

    /// The regions with their host ranges.
    pub(crate) fn mapped(&self) -> &[MappedRegion] {
        &self.mapped
    }

    /// The vm-memory view.
    pub(crate) fn memory(&self) -> &GuestMemoryMmap {
        &self.memory
    }
}

impl Drop for GuestRanges {
    fn drop(&mut self) {
        // `memory` and `handles` hold one reference each; more means a clone
        // that would dangle, so keep the ranges mapped (leak them).
        let cloned = self
            .handles
            .iter()
            .any(|r| Arc::strong_count(r) > 2 || Arc::strong_count(&r.get_mmap()) > 2);
        if cloned {
            self.reservations.drain(..).for_each(std::mem::forget);
        }
    }
}

/// Maps every frame to its placement, one `mmap` per run of consecutive slots.
pub(crate) fn map_all(
    frames: &FrameTable,
    tiers: &[TierBackend],
    map: &PlacementMap,
) -> Result<(), Error> {
    for index in 0..frames.regions().len() {
        let Some(range) = frames.frames_of_region(index) else {
            continue;
        };
        let locations: Vec<Location> = range
            .clone()
            .filter_map(|frame| map.location(FrameId(frame)))
            .collect();
        for run in runs(&locations) {
            map_run(
                frames,
                tiers,
                FrameId(range.start + run.first),
                run.count,
                run.start,
            )?;
        }
    }
    Ok(())
}

/// Maps slots `start.slot..start.slot + count` of tier `start.tier` over the
/// host range of frames `first..first + count` in one `mmap(MAP_FIXED)`.
pub(crate) fn map_run(
    frames: &FrameTable,
    tiers: &[TierBackend],
    first: FrameId,
    count: usize,
    start: Location,
) -> Result<(), Error> {
    let tier = tiers
        .get(start.tier.index())
        .ok_or(Error::NoSuchTier(start.tier))?;
    if start
        .slot
        .checked_add(count)
        .is_none_or(|end| end > tier.slot_count())
    {
        return Err(Error::SlotsOutOfRange {
            tier: tier.name().to_owned(),
            slot: start.slot,
            count,
        });
    }
    let host = match frames.host_addr(first) {
        Some(host) if frames.is_run(first, count) => host,
        _ => {
            return Err(Error::NotARun {
                first: first.index(),
                count,
            });
        }
    };
    let frame_size = frames.frame_size();
    let map_err = |source| Error::MapFrames {
        first: first.index(),
        count,
        tier: tier.name().to_owned(),
        slot: start.slot,
        source,
    };
    // Both fit: they are within a region / tier whose length fits in usize.
    let len = count as u64 * frame_size;
    let offset = start.slot as u64 * frame_size;
    // SAFETY: `[host, host + len)` lies inside one of our guest-range
    // reservations (checked by `is_run`), which stay mapped for our whole
    // life; Rust code never holds references into guest memory (vm-memory
    // accesses it through volatile pointers), and MAP_FIXED replaces the
    // backing without a gap, so concurrent accessors see old or new pages.
    unsafe { map_fixed_shared(host as usize, len as usize, tier.fd(), offset) }.map_err(map_err)
}

/// Non-owning vm-memory regions over our guest ranges.
fn vm_regions(
    ranges: &[HostMapping],
    regions: &[MappedRegion],
) -> Result<Vec<Arc<GuestRegionMmap>>, Error> {
    ranges
        .iter()
        .zip(regions)
        .map(|(range, region)| {
            // SAFETY: `range` is a mapping of `range.len()` bytes present in
            // the process (a reservation that `TieredMemory::new` fills with
            // shared read-write tier slots before the view is reachable), kept
            // mapped while `GuestRanges` lives and leaked if a clone outlives it.
            let mmap = unsafe {
                MmapRegion::build_raw(
                    range.addr() as *mut u8,
                    range.len(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                )
            }
            .map_err(Error::GuestRegion)?;
            GuestRegionMmap::new(mmap, GuestAddress(region.gpa))
                .map(Arc::new)
                .ok_or(Error::RegionOverflow(region.gpa))
        })
        .collect()
}

//! The guest's physical memory map (the e820 table of a bzImage boot, the
//! memory map of a PVH boot): guest RAM as `guest_memory::ram_regions`
//! lays it out, less the BIOS hole below 1 MiB (where the ACPI tables
//! go), which is reserved. Tiers are invisible here: all RAM is one kind,
//! on one NUMA node.

use guest_abi::GpaRange;

use super::error::LinuxError;
use super::layout::{BIOS_HOLE_START, HIMEM_START};

/// What an entry of the map is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    /// Usable RAM (e820 type 1).
    Ram,
    /// Reserved, not for the kernel's allocator (e820 type 2).
    Reserved,
}

impl MemoryKind {
    /// The e820 (and PVH memory map) type number.
    pub const fn e820_type(self) -> u32 {
        match self {
            MemoryKind::Ram => 1,
            MemoryKind::Reserved => 2,
        }
    }
}

/// One range of the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryMapEntry {
    /// First guest-physical address.
    pub addr: u64,
    /// Length in bytes.
    pub size: u64,
    /// What it is.
    pub kind: MemoryKind,
}

impl MemoryMapEntry {
    /// One past the last address.
    pub fn end(&self) -> u64 {
        self.addr + self.size
    }
}

/// The map of `ram`, sorted by address: RAM below the BIOS hole, the hole
/// (reserved), RAM from 1 MiB on. Guest RAM must cover the first 2 MiB
/// (the boot structures, the hole and room above it).
pub fn memory_map(ram: &[GpaRange]) -> Result<Vec<MemoryMapEntry>, LinuxError> {
    let total = ram.iter().map(|r| r.len).sum();
    let covers_boot_area = ram
        .iter()
        .any(|r| r.start == 0 && r.end() >= 2 * HIMEM_START);
    if !covers_boot_area {
        return Err(LinuxError::RamTooSmall(total));
    }
    let mut map = Vec::new();
    for r in ram {
        let (start, end) = (r.start, r.end());
        if start < BIOS_HOLE_START {
            map.push(entry(start, end.min(BIOS_HOLE_START), MemoryKind::Ram));
        }
        if end > HIMEM_START {
            map.push(entry(start.max(HIMEM_START), end, MemoryKind::Ram));
        }
    }
    map.push(entry(BIOS_HOLE_START, HIMEM_START, MemoryKind::Reserved));
    map.sort_by_key(|e| e.addr);
    Ok(map)
}

fn entry(start: u64, end: u64, kind: MemoryKind) -> MemoryMapEntry {
    MemoryMapEntry {
        addr: start,
        size: end - start,
        kind,
    }
}

/// The end of the RAM entry that starts at 1 MiB: the kernel, the
/// initramfs and the 32-bit boot pointers all live below it.
pub fn low_ram_end(map: &[MemoryMapEntry]) -> u64 {
    map.iter()
        .find(|e| e.kind == MemoryKind::Ram && e.addr == HIMEM_START)
        .map_or(HIMEM_START, MemoryMapEntry::end)
}

#[cfg(test)]
mod tests {
    use guest_memory::{GIB, MIB};

    use super::*;
    use crate::linux::layout::ACPI_START;

    fn ram(size: u64) -> Vec<GpaRange> {
        guest_memory::ram_regions(size)
            .iter()
            .map(|r| GpaRange {
                start: r.gpa,
                len: r.len,
            })
            .collect()
    }

    #[test]
    fn small_guest_has_low_ram_the_hole_and_ram_above_1m() {
        let map = memory_map(&ram(512 * MIB)).unwrap();
        assert_eq!(
            map,
            [
                entry(0, 0x9_fc00, MemoryKind::Ram),
                entry(0x9_fc00, 0x10_0000, MemoryKind::Reserved),
                entry(0x10_0000, 512 * MIB, MemoryKind::Ram),
            ]
        );
        assert_eq!(low_ram_end(&map), 512 * MIB);
    }

    #[test]
    fn large_guest_has_ram_above_4g_and_nothing_in_the_mmio_hole() {
        let map = memory_map(&ram(6 * GIB)).unwrap();
        assert_eq!(map.len(), 4);
        assert_eq!(map[2], entry(0x10_0000, 3 * GIB, MemoryKind::Ram));
        assert_eq!(map[3], entry(4 * GIB, 7 * GIB, MemoryKind::Ram));
        assert_eq!(low_ram_end(&map), 3 * GIB);
        // RAM in the map is exactly guest RAM less the 0x9fc00..1M hole.
        let ram_bytes: u64 = map
            .iter()
            .filter(|e| e.kind == MemoryKind::Ram)
            .map(|e| e.size)
            .sum();
        assert_eq!(ram_bytes, 6 * GIB - (0x10_0000 - 0x9_fc00));
        for pair in map.windows(2) {
            assert!(pair[0].end() <= pair[1].addr, "{pair:?}");
        }
    }

    #[test]
    fn the_acpi_area_is_reserved() {
        let map = memory_map(&ram(64 * MIB)).unwrap();
        let acpi = map
            .iter()
            .find(|e| e.addr <= ACPI_START && ACPI_START < e.end())
            .unwrap();
        assert_eq!(acpi.kind, MemoryKind::Reserved);
        assert_eq!(acpi.end(), HIMEM_START);
    }

    #[test]
    fn ram_smaller_than_2m_is_refused() {
        assert!(matches!(
            memory_map(&ram(MIB)),
            Err(LinuxError::RamTooSmall(_))
        ));
        assert!(memory_map(&ram(2 * MIB)).is_ok());
    }
}

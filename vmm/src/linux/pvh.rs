//! The PVH boot structures of an ELF vmlinux: `hvm_start_info` (version 1)
//! with the command line, the initramfs as the one module, the memory map
//! and the ACPI RSDP address.

use linux_loader::start_info::{
    XEN_HVM_START_MAGIC_VALUE, hvm_memmap_table_entry, hvm_modlist_entry, hvm_start_info,
};
use vm_memory::ByteValued;

use super::error::LinuxError;
use super::layout::{PVH_MEMMAP_GPA, PVH_MEMMAP_MAX, PVH_MODLIST_GPA};
use super::memory_map::MemoryMapEntry;

/// The start info version with the memory map.
const START_INFO_VERSION: u32 = 1;

/// What the start info points to.
#[derive(Clone, Copy, Debug)]
pub struct StartInfoInputs<'a> {
    /// Guest-physical address of the NUL-terminated command line.
    pub cmdline_addr: u64,
    /// The initramfs as (address, size), if there is one.
    pub initramfs: Option<(u64, u64)>,
    /// The memory map.
    pub memory_map: &'a [MemoryMapEntry],
    /// The ACPI RSDP, once the VMM writes ACPI tables.
    pub acpi_rsdp: Option<u64>,
}

/// The PVH structures, as bytes for their fixed addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PvhStructures {
    /// `hvm_start_info`, for [`super::layout::START_INFO_GPA`].
    pub start_info: Vec<u8>,
    /// The memory map, for [`PVH_MEMMAP_GPA`].
    pub memmap: Vec<u8>,
    /// The module list, for [`PVH_MODLIST_GPA`] (empty without an
    /// initramfs).
    pub modlist: Vec<u8>,
}

/// Builds the start info, memory map and module list.
pub fn structures(inputs: &StartInfoInputs<'_>) -> Result<PvhStructures, LinuxError> {
    let map = inputs.memory_map;
    if map.len() > PVH_MEMMAP_MAX {
        return Err(LinuxError::TooManyMemoryMapEntries(
            map.len(),
            PVH_MEMMAP_MAX,
        ));
    }
    let memmap: Vec<u8> = map
        .iter()
        .flat_map(|e| {
            hvm_memmap_table_entry {
                addr: e.addr,
                size: e.size,
                type_: e.kind.e820_type(),
                reserved: 0,
            }
            .as_slice()
            .to_vec()
        })
        .collect();
    let modlist = match inputs.initramfs {
        Some((paddr, size)) => hvm_modlist_entry {
            paddr,
            size,
            cmdline_paddr: 0,
            reserved: 0,
        }
        .as_slice()
        .to_vec(),
        None => Vec::new(),
    };
    let info = hvm_start_info {
        magic: XEN_HVM_START_MAGIC_VALUE,
        version: START_INFO_VERSION,
        flags: 0,
        nr_modules: u32::from(inputs.initramfs.is_some()),
        modlist_paddr: if inputs.initramfs.is_some() {
            PVH_MODLIST_GPA
        } else {
            0
        },
        cmdline_paddr: inputs.cmdline_addr,
        rsdp_paddr: inputs.acpi_rsdp.unwrap_or(0),
        memmap_paddr: PVH_MEMMAP_GPA,
        memmap_entries: map.len() as u32,
        reserved: 0,
    };
    Ok(PvhStructures {
        start_info: info.as_slice().to_vec(),
        memmap,
        modlist,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::memory_map::memory_map;
    use guest_abi::GpaRange;

    fn u32_at(b: &[u8], off: usize) -> u32 {
        u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
    }

    fn u64_at(b: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
    }

    #[test]
    fn start_info_points_at_the_cmdline_module_and_memory_map() {
        let map = memory_map(&[GpaRange {
            start: 0,
            len: 256 << 20,
        }])
        .unwrap();
        let s = structures(&StartInfoInputs {
            cmdline_addr: 0x2_0000,
            initramfs: Some((0xf00_0000, 0x4000)),
            memory_map: &map,
            acpi_rsdp: None,
        })
        .unwrap();
        let info = &s.start_info;
        assert_eq!(info.len(), 56);
        assert_eq!(u32_at(info, 0), 0x336e_c578);
        assert_eq!(u32_at(info, 4), 1);
        assert_eq!(u32_at(info, 12), 1, "one module");
        assert_eq!(u64_at(info, 16), PVH_MODLIST_GPA);
        assert_eq!(u64_at(info, 24), 0x2_0000);
        assert_eq!(u64_at(info, 32), 0, "no RSDP yet");
        assert_eq!(u64_at(info, 40), PVH_MEMMAP_GPA);
        assert_eq!(u32_at(info, 48), 3);
        assert_eq!(
            (u64_at(&s.modlist, 0), u64_at(&s.modlist, 8)),
            (0xf00_0000, 0x4000)
        );
        assert_eq!(s.memmap.len(), 3 * 24);
        // Second entry: the reserved BIOS hole.
        assert_eq!(u64_at(&s.memmap, 24), 0x9_fc00);
        assert_eq!(u32_at(&s.memmap, 24 + 16), 2);
        assert_eq!(u64_at(&s.memmap, 48), 0x10_0000);
        assert_eq!(u64_at(&s.memmap, 56), (256 << 20) - 0x10_0000);
    }

    #[test]
    fn no_initramfs_means_no_modules() {
        let map = memory_map(&[GpaRange {
            start: 0,
            len: 64 << 20,
        }])
        .unwrap();
        let s = structures(&StartInfoInputs {
            cmdline_addr: 0x2_0000,
            initramfs: None,
            memory_map: &map,
            acpi_rsdp: Some(0xe_0000),
        })
        .unwrap();
        assert_eq!(u32_at(&s.start_info, 12), 0);
        assert_eq!(u64_at(&s.start_info, 16), 0);
        assert_eq!(u64_at(&s.start_info, 32), 0xe_0000);
        assert!(s.modlist.is_empty());
    }
}

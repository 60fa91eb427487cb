//! The zero page (`struct boot_params`) of a bzImage boot: the image's
//! setup header with what the loader fills in (loader type, command line,
//! initramfs), the e820 memory map and the ACPI RSDP address.

use linux_loader::bootparam::{
    E820_MAX_ENTRIES_ZEROPAGE, boot_e820_entry, boot_params, setup_header,
};

use super::error::LinuxError;
use super::memory_map::MemoryMapEntry;

/// `type_of_loader` of a boot loader without an assigned id.
pub const LOADER_TYPE_UNDEFINED: u8 = 0xff;

/// What the zero page tells the kernel beyond its own setup header.
#[derive(Clone, Copy, Debug)]
pub struct ZeroPageInputs<'a> {
    /// Where the protected-mode code was loaded.
    pub load_addr: u64,
    /// Guest-physical address of the NUL-terminated command line.
    pub cmdline_addr: u64,
    /// The initramfs as (address, size), if there is one.
    pub initramfs: Option<(u64, u64)>,
    /// The memory map.
    pub memory_map: &'a [MemoryMapEntry],
    /// The ACPI RSDP, once the VMM writes ACPI tables.
    pub acpi_rsdp: Option<u64>,
}

/// Builds the zero page from the kernel's setup `header`.
pub fn zero_page(
    header: &setup_header,
    inputs: &ZeroPageInputs<'_>,
) -> Result<boot_params, LinuxError> {
    let map = inputs.memory_map;
    if map.len() > E820_MAX_ENTRIES_ZEROPAGE {
        return Err(LinuxError::TooManyMemoryMapEntries(
            map.len(),
            E820_MAX_ENTRIES_ZEROPAGE,
        ));
    }
    let low32 = |what: &str, value: u64| {
        u32::try_from(value).map_err(|_| {
            LinuxError::BadBzImage(format!(
                "{what} {value:#x} does not fit the 32-bit boot field"
            ))
        })
    };
    let mut params = boot_params::default();
    let mut hdr = *header;
    hdr.type_of_loader = LOADER_TYPE_UNDEFINED;
    hdr.code32_start = low32("load address", inputs.load_addr)?;
    hdr.cmd_line_ptr = low32("command line address", inputs.cmdline_addr)?;
    let (image, size) = inputs.initramfs.unwrap_or((0, 0));
    hdr.ramdisk_image = low32("initramfs address", image)?;
    hdr.ramdisk_size = low32("initramfs size", size)?;
    params.hdr = hdr;
    for (slot, e) in params.e820_table.iter_mut().zip(map) {
        *slot = boot_e820_entry {
            addr: e.addr,
            size: e.size,
            r#type: e.kind.e820_type(),
        };
    }
    params.e820_entries = map.len() as u8;
    params.acpi_rsdp_addr = inputs.acpi_rsdp.unwrap_or(0);
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::memory_map::{MemoryKind, memory_map};
    use guest_abi::GpaRange;
    use vm_memory::ByteValued;

    fn header() -> setup_header {
        let image = crate::linux::loader::tests::tiny_bzimage(4096, 0x300_0000);
        let mut h = setup_header::default();
        h.as_mut_slice()
            .copy_from_slice(&image[0x1f1..0x1f1 + std::mem::size_of::<setup_header>()]);
        h
    }

    #[test]
    fn zero_page_carries_the_header_the_pointers_and_the_e820_map() {
        let map = memory_map(&[GpaRange {
            start: 0,
            len: 512 << 20,
        }])
        .unwrap();
        let params = zero_page(
            &header(),
            &ZeroPageInputs {
                load_addr: 0x100_0000,
                cmdline_addr: 0x2_0000,
                initramfs: Some((0x1f00_0000, 0x12345)),
                memory_map: &map,
                acpi_rsdp: Some(0xe_0000),
            },
        )
        .unwrap();
        let hdr = params.hdr;
        assert_eq!(hdr.type_of_loader, 0xff);
        assert_eq!({ hdr.header }, 0x5372_6448);
        assert_eq!({ hdr.cmd_line_ptr }, 0x2_0000);
        assert_eq!({ hdr.ramdisk_image }, 0x1f00_0000);
        assert_eq!({ hdr.ramdisk_size }, 0x12345);
        assert_eq!({ hdr.code32_start }, 0x100_0000);
        assert_eq!({ hdr.cmdline_size }, 2047);
        assert_eq!({ params.acpi_rsdp_addr }, 0xe_0000);
        assert_eq!(params.e820_entries, 3);
        let table = params.e820_table;
        let e: Vec<(u64, u64, u32)> = table[..3]
            .iter()
            .map(|e| (e.addr, e.size, e.r#type))
            .collect();
        assert_eq!(
            e,
            [
                (0, 0x9_fc00, 1),
                (0x9_fc00, 0x10_0000 - 0x9_fc00, 2),
                (0x10_0000, (512 << 20) - 0x10_0000, 1)
            ]
        );
        // The zero page is exactly one page, header at 0x1f1, e820 at 0x2d0.
        let bytes = params.as_slice();
        assert_eq!(bytes.len(), 4096);
        assert_eq!(&bytes[0x202..0x206], b"HdrS");
        assert_eq!(bytes[0x1e8], 3);
        assert_eq!(
            u32::from_le_bytes(bytes[0x2d0 + 16..0x2d0 + 20].try_into().unwrap()),
            1
        );
    }

    #[test]
    fn no_initramfs_and_no_acpi_leave_their_fields_zero() {
        let map = [MemoryMapEntry {
            addr: 0,
            size: 1 << 30,
            kind: MemoryKind::Ram,
        }];
        let params = zero_page(
            &header(),
            &ZeroPageInputs {
                load_addr: 0x100_0000,
                cmdline_addr: 0x2_0000,
                initramfs: None,
                memory_map: &map,
                acpi_rsdp: None,
            },
        )
        .unwrap();
        let hdr = params.hdr;
        assert_eq!(({ hdr.ramdisk_image }, { hdr.ramdisk_size }), (0, 0));
        assert_eq!({ params.acpi_rsdp_addr }, 0);
    }

    #[test]
    fn an_oversized_map_or_a_pointer_above_4g_is_an_error() {
        let entry = MemoryMapEntry {
            addr: 0,
            size: 4096,
            kind: MemoryKind::Ram,
        };
        let big = vec![entry; E820_MAX_ENTRIES_ZEROPAGE + 1];
        let inputs = ZeroPageInputs {
            load_addr: 0x100_0000,
            cmdline_addr: 0x2_0000,
            initramfs: None,
            memory_map: &big,
            acpi_rsdp: None,
        };
        assert!(matches!(
            zero_page(&header(), &inputs),
            Err(LinuxError::TooManyMemoryMapEntries(129, 128))
        ));
        let high = ZeroPageInputs {
            initramfs: Some((5 << 30, 4096)),
            memory_map: &big[..1],
            ..inputs
        };
        assert!(zero_page(&header(), &high).is_err());
    }
}

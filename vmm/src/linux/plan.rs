//! A Linux boot, planned and checked before the VM exists (the kernel's
//! format and entry, where it and the initramfs go, the command line and
//! the memory map), then written into guest memory.

use vm_memory::{ByteValued, Bytes, GuestAddress, GuestMemoryMmap};

use guest_abi::GpaRange;

use super::LinuxBoot;
use super::boot_params::{self, ZeroPageInputs};
use super::cmdline;
use super::error::LinuxError;
use super::layout::{
    CMDLINE_GPA, GDT_GPA, HIMEM_START, PAGE_TABLES_GPA, PVH_MEMMAP_GPA, PVH_MODLIST_GPA,
    START_INFO_GPA, ZERO_PAGE_GPA,
};
use super::loader::{KernelEntry, KernelImage};
use super::memory_map::{self, MemoryMapEntry};
use super::pvh::{self, StartInfoInputs};
use crate::arch::linux_regs::LinuxEntry;
use crate::arch::linux_tables::{self, CodeMode};

const PAGE: u64 = 4096;

/// A checked Linux boot, ready to be written into guest memory.
#[derive(Debug)]
pub struct LinuxPlan {
    kernel: Vec<u8>,
    initramfs: Option<Vec<u8>>,
    cmdline: Vec<u8>,
    memory_map: Vec<MemoryMapEntry>,
    initramfs_addr: Option<u64>,
    format: &'static str,
}

fn read(what: &'static str, path: &std::path::Path) -> Result<Vec<u8>, LinuxError> {
    std::fs::read(path).map_err(|source| LinuxError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

impl LinuxPlan {
    /// Reads the files of `boot` and plans it over guest RAM `ram`.
    pub fn new(boot: &LinuxBoot, ram: &[GpaRange]) -> Result<Self, LinuxError> {
        let kernel = read("kernel", &boot.kernel)?;
        let initramfs = match &boot.initramfs {
            Some(path) => {
                let bytes = read("initramfs", path)?;
                if bytes.is_empty() {
                    return Err(LinuxError::EmptyInitramfs(path.clone()));
                }
                Some(bytes)
            }
            None => None,
        };
        Self::from_bytes(kernel, initramfs, &boot.cmdline, ram)
    }

    /// Plans booting `kernel` with `initramfs` and `cmdline` over `ram`.
    pub fn from_bytes(
        kernel: Vec<u8>,
        initramfs: Option<Vec<u8>>,
        cmdline: &str,
        ram: &[GpaRange],
    ) -> Result<Self, LinuxError> {
        let map = memory_map::memory_map(ram)?;
        let low_end = memory_map::low_ram_end(&map);
        let image = KernelImage::parse(&kernel)?;
        let (start, end) = image.memory();
        if start < HIMEM_START || end > low_end {
            return Err(LinuxError::KernelTooBig {
                start,
                end,
                ram_start: HIMEM_START,
                ram_end: low_end,
            });
        }
        let cmdline = cmdline::encode(cmdline, image.cmdline_max())?;
        let initramfs_addr = match &initramfs {
            Some(bytes) => Some(place_initramfs(
                bytes.len() as u64,
                end,
                image.initramfs_limit().min(low_end),
            )?),
            None => None,
        };
        let format = image.format();
        Ok(LinuxPlan {
            kernel,
            initramfs,
            cmdline,
            memory_map: map,
            initramfs_addr,
            format,
        })
    }

    /// The kernel's format, for messages.
    pub fn format(&self) -> &'static str {
        self.format
    }

    /// The memory map the guest gets.
    pub fn memory_map(&self) -> &[MemoryMapEntry] {
        &self.memory_map
    }

    /// Where the initramfs goes, as (address, size).
    pub fn initramfs(&self) -> Option<(u64, u64)> {
        Some((self.initramfs_addr?, self.initramfs.as_ref()?.len() as u64))
    }

    /// Loads the kernel and writes the command line, the initramfs and the
    /// boot structures into `mem`; returns how the bootstrap vCPU enters.
    /// `acpi_rsdp` is the RSDP's address once ACPI tables are written.
    pub fn write(
        &self,
        mem: &GuestMemoryMmap,
        acpi_rsdp: Option<u64>,
    ) -> Result<LinuxEntry, LinuxError> {
        let write = |what, gpa: u64, bytes: &[u8]| {
            mem.write_slice(bytes, GuestAddress(gpa))
                .map_err(|source| LinuxError::Write { what, source })
        };
        let image = KernelImage::parse(&self.kernel)?;
        let entry = image.load(mem)?;
        write("command line", CMDLINE_GPA, &self.cmdline)?;
        if let (Some(addr), Some(bytes)) = (self.initramfs_addr, &self.initramfs) {
            write("initramfs", addr, bytes)?;
        }
        match entry {
            KernelEntry::Linux64 { rip, header } => {
                let load_addr = u64::from(header.code32_start);
                let params = boot_params::zero_page(
                    &header,
                    &ZeroPageInputs {
                        load_addr,
                        cmdline_addr: CMDLINE_GPA,
                        initramfs: self.initramfs(),
                        memory_map: &self.memory_map,
                        acpi_rsdp,
                    },
                )?;
                write("zero page", ZERO_PAGE_GPA, params.as_slice())?;
                write(
                    "boot GDT",
                    GDT_GPA,
                    &linux_tables::gdt_bytes(CodeMode::Long),
                )?;
                write(
                    "page tables",
                    PAGE_TABLES_GPA,
                    &linux_tables::identity_tables(PAGE_TABLES_GPA),
                )?;
                Ok(LinuxEntry::Long64 {
                    rip,
                    zero_page: ZERO_PAGE_GPA,
                    page_tables: PAGE_TABLES_GPA,
                    gdt: GDT_GPA,
                })
            }
            KernelEntry::Pvh { eip } => {
                let s = pvh::structures(&StartInfoInputs {
                    cmdline_addr: CMDLINE_GPA,
                    initramfs: self.initramfs(),
                    memory_map: &self.memory_map,
                    acpi_rsdp,
                })?;
                write("PVH start info", START_INFO_GPA, &s.start_info)?;
                write("PVH memory map", PVH_MEMMAP_GPA, &s.memmap)?;
                write("PVH module list", PVH_MODLIST_GPA, &s.modlist)?;
                write(
                    "boot GDT",
                    GDT_GPA,
                    &linux_tables::gdt_bytes(CodeMode::Protected32),
                )?;
                Ok(LinuxEntry::Pvh {
                    eip,
                    start_info: START_INFO_GPA,
                    gdt: GDT_GPA,
                })
            }
        }
    }
}

/// The initramfs goes as high as it may (below `limit`), page aligned,
/// above the kernel's memory (`kernel_end`).
fn place_initramfs(size: u64, kernel_end: u64, limit: u64) -> Result<u64, LinuxError> {
    let low = kernel_end.next_multiple_of(PAGE);
    let too_big = || LinuxError::InitramfsTooBig {
        size,
        low,
        high: limit,
    };
    let addr = limit.checked_sub(size).ok_or_else(too_big)? / PAGE * PAGE;
    if addr < low {
        return Err(too_big());
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::loader::tests::{tiny_bzimage, tiny_vmlinux};
    use vm_memory::GuestMemoryBackend;

    const MIB: u64 = 1 << 20;

    fn ram(size: u64) -> Vec<GpaRange> {
        vec![GpaRange {
            start: 0,
            len: size,
        }]
    }

    fn memory(size: u64) -> GuestMemoryMmap {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), size as usize)]).unwrap()
    }

    #[test]
    fn initramfs_goes_high_page_aligned_and_above_the_kernel() {
        let plan = LinuxPlan::from_bytes(
            tiny_bzimage(8192, 0x300_0000),
            Some(vec![7u8; 10_000]),
            "console=ttyS0",
            &ram(256 * MIB),
        )
        .unwrap();
        let (addr, size) = plan.initramfs().unwrap();
        assert_eq!(size, 10_000);
        assert_eq!(addr % PAGE, 0);
        assert!(addr + size <= 256 * MIB);
        assert!(addr + size > 256 * MIB - PAGE - 10_000);
        assert_eq!(plan.format(), "bzImage");
    }

    #[test]
    fn initramfs_respects_initrd_addr_max() {
        let mut image = tiny_bzimage(8192, 0x300_0000);
        image[0x22c..0x230].copy_from_slice(&(0x800_0000u32 - 1).to_le_bytes());
        let plan =
            LinuxPlan::from_bytes(image, Some(vec![1u8; 4096]), "", &ram(512 * MIB)).unwrap();
        assert_eq!(plan.initramfs().unwrap().0, 0x800_0000 - PAGE);
    }

    #[test]
    fn a_kernel_too_big_for_ram_is_refused() {
        // Loaded at 16 MiB, needs 48 MiB to decompress: 32 MiB is too small.
        let err = LinuxPlan::from_bytes(tiny_bzimage(8192, 0x300_0000), None, "", &ram(32 * MIB))
            .unwrap_err();
        assert!(
            matches!(
                err,
                LinuxError::KernelTooBig {
                    end: 0x400_0000,
                    ram_end: 0x200_0000,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn an_initramfs_that_does_not_fit_is_refused() {
        let err = LinuxPlan::from_bytes(
            tiny_bzimage(8192, 0x300_0000),
            Some(vec![0u8; 20 * MIB as usize]),
            "",
            &ram(80 * MIB),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                LinuxError::InitramfsTooBig {
                    low: 0x400_0000,
                    high: 0x500_0000,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_command_line_longer_than_the_kernel_takes_is_refused() {
        let long = "x".repeat(2048);
        assert!(matches!(
            LinuxPlan::from_bytes(tiny_bzimage(8192, 0x100_0000), None, &long, &ram(64 * MIB)),
            Err(LinuxError::CmdlineTooLong { max: 2047, .. })
        ));
        assert!(matches!(
            LinuxPlan::from_bytes(
                tiny_vmlinux(0x100_0000, 0x1000, true),
                None,
                &long,
                &ram(64 * MIB)
            ),
            Err(LinuxError::CmdlineTooLong { max: 2047, .. })
        ));
    }

    #[test]
    fn unreadable_files_and_non_kernels_are_refused() {
        let boot = LinuxBoot {
            kernel: "/nonexistent/vmlinuz".into(),
            initramfs: None,
            cmdline: String::new(),
        };
        let e = LinuxPlan::new(&boot, &ram(64 * MIB)).unwrap_err();
        assert!(
            e.to_string()
                .contains("reading kernel /nonexistent/vmlinuz"),
            "{e}"
        );
        assert!(matches!(
            LinuxPlan::from_bytes(b"#!/bin/sh\n".to_vec(), None, "", &ram(64 * MIB)),
            Err(LinuxError::NotAKernel)
        ));
    }

    #[test]
    fn a_bzimage_boot_writes_kernel_zero_page_cmdline_and_tables() {
        let mut image = tiny_bzimage(8192, 0x100_0000);
        let setup = 5 * 512;
        image[setup..setup + 4].copy_from_slice(b"KERN");
        let mem = memory(64 * MIB);
        let plan = LinuxPlan::from_bytes(
            image,
            Some(b"INITRD".to_vec()),
            "marker=abc123",
            &ram(64 * MIB),
        )
        .unwrap();
        let entry = plan.write(&mem, None).unwrap();
        assert_eq!(
            entry,
            LinuxEntry::Long64 {
                rip: 0x100_0200,
                zero_page: ZERO_PAGE_GPA,
                page_tables: PAGE_TABLES_GPA,
                gdt: GDT_GPA,
            }
        );
        let mut buf = [0u8; 4];
        mem.read_slice(&mut buf, GuestAddress(0x100_0000)).unwrap();
        assert_eq!(&buf, b"KERN");
        let mut line = [0u8; 14];
        mem.read_slice(&mut line, GuestAddress(CMDLINE_GPA))
            .unwrap();
        assert_eq!(&line, b"marker=abc123\0");
        let (addr, _) = plan.initramfs().unwrap();
        let mut rd = [0u8; 6];
        mem.read_slice(&mut rd, GuestAddress(addr)).unwrap();
        assert_eq!(&rd, b"INITRD");
        let mut zp = vec![0u8; 4096];
        mem.read_slice(&mut zp, GuestAddress(ZERO_PAGE_GPA))
            .unwrap();
        assert_eq!(&zp[0x202..0x206], b"HdrS");
        assert_eq!(zp[0x210], 0xff, "type_of_loader");
        assert_eq!(
            u32::from_le_bytes(zp[0x228..0x22c].try_into().unwrap()),
            CMDLINE_GPA as u32
        );
        assert_eq!(
            u32::from_le_bytes(zp[0x218..0x21c].try_into().unwrap()),
            addr as u32
        );
        assert_eq!(zp[0x1e8], 3, "e820 entries");
        assert!(mem.last_addr().0 >= 64 * MIB - 1);
    }

    #[test]
    fn a_pvh_boot_writes_the_start_info() {
        let mem = memory(64 * MIB);
        let plan = LinuxPlan::from_bytes(
            tiny_vmlinux(0x100_0000, 0x1000, true),
            None,
            "console=ttyS0",
            &ram(64 * MIB),
        )
        .unwrap();
        assert_eq!(plan.format(), "ELF (PVH)");
        let entry = plan.write(&mem, None).unwrap();
        assert_eq!(
            entry,
            LinuxEntry::Pvh {
                eip: 0x100_0000,
                start_info: START_INFO_GPA,
                gdt: GDT_GPA,
            }
        );
        let magic: u32 = mem.read_obj(GuestAddress(START_INFO_GPA)).unwrap();
        assert_eq!(magic, 0x336e_c578);
        let cmdline: u64 = mem.read_obj(GuestAddress(START_INFO_GPA + 24)).unwrap();
        assert_eq!(cmdline, CMDLINE_GPA);
        let first: u8 = mem.read_obj(GuestAddress(0x100_0000)).unwrap();
        assert_eq!(first, 0x90, "the segment was loaded");
    }
}

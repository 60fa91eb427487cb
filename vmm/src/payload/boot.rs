//! The boot plan of a payload guest: where the image, the vCPU stacks and
//! the free data area go, and writing all boot-time structures (GDT, TSS,
//! page tables, boot info, argument string, image) into guest memory.

use thiserror::Error;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use guest_abi::{ABI_VERSION, BootInfo, GpaRange, MAX_ARGS_LEN, MAX_RANGES};

use crate::arch::gdt;
use crate::arch::layout::{ARGS_GPA, BOOT_INFO_GPA, STOP_FLAG_GPA, TSS_GPA, VCPU_STACK_SIZE};
use crate::arch::paging::{PageTables, PagingError};
use crate::payload::elf::PayloadImage;

const HUGE: u64 = 2 << 20;

/// Errors planning or writing the boot state.
#[derive(Debug, Error)]
pub enum BootError {
    /// The argument string is too long.
    #[error("argument string is {0} bytes (at most {MAX_ARGS_LEN})")]
    ArgsTooLong(usize),
    /// The stacks do not fit after the image.
    #[error("no room for {vcpus} vCPU stacks after the payload image (ends at {image_end:#x})")]
    NoRoomForStacks {
        /// vCPUs.
        vcpus: u32,
        /// End of the image.
        image_end: u64,
    },
    /// More RAM ranges than the boot info describes.
    #[error("guest RAM has {0} ranges (at most {MAX_RANGES})")]
    TooManyRanges(usize),
    /// Page tables could not be built.
    #[error(transparent)]
    Paging(#[from] PagingError),
    /// Writing guest memory failed.
    #[error("writing {what} to guest memory")]
    Write {
        /// What was being written.
        what: &'static str,
        /// The error.
        #[source]
        source: vm_memory::GuestMemoryError,
    },
}

/// Everything decided before the first vCPU runs.
#[derive(Debug)]
pub struct BootPlan {
    /// Boot info as the guest will see it.
    pub info: BootInfo,
    /// Top of each vCPU's stack.
    pub stack_tops: Vec<u64>,
    page_tables: PageTables,
}

impl BootPlan {
    /// Plans a boot of `image` with `vcpus` vCPUs over `ram`.
    pub fn new(
        image: &PayloadImage<'_>,
        ram: &[GpaRange],
        vcpus: u32,
        args: &str,
        tsc_khz: u64,
    ) -> Result<Self, BootError> {
        if args.len() > MAX_ARGS_LEN {
            return Err(BootError::ArgsTooLong(args.len()));
        }
        if ram.len() > MAX_RANGES {
            return Err(BootError::TooManyRanges(ram.len()));
        }
        let page_tables = PageTables::identity(ram)?;
        let image_end = image.end();
        let stacks_start = image_end.next_multiple_of(4096);
        let stacks_end = stacks_start + u64::from(vcpus) * VCPU_STACK_SIZE;
        // The stacks must lie in the same RAM range as the image, in mapped
        // (whole 2 MiB) pages.
        let home = ram
            .iter()
            .find(|r| r.start <= stacks_start && stacks_start < r.end())
            .filter(|r| stacks_end <= r.end() / HUGE * HUGE)
            .ok_or(BootError::NoRoomForStacks { vcpus, image_end })?;
        let stack_tops = (1..=u64::from(vcpus))
            .map(|i| stacks_start + i * VCPU_STACK_SIZE)
            .collect();

        let mut info = BootInfo {
            version: ABI_VERSION,
            vcpu_count: vcpus,
            tsc_khz,
            args_gpa: ARGS_GPA,
            args_len: args.len() as u64,
            stop_gpa: STOP_FLAG_GPA,
            ..Default::default()
        };
        for (slot, r) in info.ram.iter_mut().zip(ram) {
            *slot = *r;
        }
        info.ram_count = ram.len() as u32;
        let mut free = Vec::new();
        for r in ram {
            let start = if std::ptr::eq(r, home) {
                stacks_end
            } else {
                r.start
            };
            let (start, end) = (start.next_multiple_of(HUGE), r.end() / HUGE * HUGE);
            if end > start {
                free.push(GpaRange {
                    start,
                    len: end - start,
                });
            }
        }
        for (slot, r) in info.free.iter_mut().zip(&free) {
            *slot = *r;
        }
        info.free_count = free.len() as u32;
        Ok(BootPlan {
            info,
            stack_tops,
            page_tables,
        })
    }

    /// Bytes of free RAM the payload may use, in the first free range.
    pub fn first_free_bytes(&self) -> u64 {
        self.info.free().first().map_or(0, |r| r.len)
    }

    /// Writes the image, tables, boot info and arguments to guest memory.
    pub fn write(
        &self,
        mem: &GuestMemoryMmap,
        image: &PayloadImage<'_>,
        args: &str,
    ) -> Result<(), BootError> {
        let write = |what, gpa: u64, bytes: &[u8]| {
            mem.write_slice(bytes, GuestAddress(gpa))
                .map_err(|source| BootError::Write { what, source })
        };
        write("GDT", gdt::base(), &gdt::table_bytes())?;
        write("TSS", TSS_GPA, &gdt::tss_bytes())?;
        write("page tables", PageTables::base(), self.page_tables.bytes())?;
        write("boot info", BOOT_INFO_GPA, &self.info.encode())?;
        write("stop word", STOP_FLAG_GPA, &0u64.to_le_bytes())?;
        write("arguments", ARGS_GPA, args.as_bytes())?;
        for seg in &image.segments {
            let data = &image.bytes[seg.file_range.clone()];
            write("payload segment", seg.gpa, data)?;
            let bss = seg.mem_size - data.len() as u64;
            if bss > 0 {
                write(
                    "payload bss",
                    seg.gpa + data.len() as u64,
                    &vec![0u8; bss as usize],
                )?;
            }
        }
        let top = self.stack_tops.last().copied().unwrap_or(0);
        let bottom = self.stack_tops.first().map_or(0, |t| t - VCPU_STACK_SIZE);
        write("stacks", bottom, &vec![0u8; (top - bottom) as usize])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::elf::{parse, tests::tiny_elf};

    #[test]
    fn free_ranges_follow_the_stacks_and_are_aligned() {
        let ram = [
            GpaRange {
                start: 0,
                len: 3 << 30,
            },
            GpaRange {
                start: 4 << 30,
                len: 1 << 30,
            },
        ];
        let elf = tiny_elf(0x40_0000, &[0x90; 100]);
        let img = parse(&elf, &ram).unwrap();
        let plan = BootPlan::new(&img, &ram, 4, "hotset", 0).unwrap();
        assert_eq!(plan.stack_tops.len(), 4);
        assert!(plan.stack_tops[0] - VCPU_STACK_SIZE >= img.end());
        let free = plan.info.free();
        assert_eq!(free.len(), 2);
        assert!(free[0].start >= *plan.stack_tops.last().unwrap());
        assert_eq!(free[0].start % HUGE, 0);
        assert_eq!(free[0].end(), 3 << 30);
        assert_eq!(free[1], ram[1]);
    }

    #[test]
    fn too_many_stacks_is_an_error() {
        let ram = [GpaRange {
            start: 0,
            len: 8 << 20,
        }];
        let elf = tiny_elf(0x40_0000, &[0x90; 100]);
        let img = parse(&elf, &ram).unwrap();
        assert!(matches!(
            BootPlan::new(&img, &ram, 64, "", 0),
            Err(BootError::NoRoomForStacks { .. })
        ));
    }

    #[test]
    fn long_arguments_are_an_error() {
        let ram = [GpaRange {
            start: 0,
            len: 8 << 20,
        }];
        let elf = tiny_elf(0x40_0000, &[0x90; 100]);
        let img = parse(&elf, &ram).unwrap();
        let args = "x".repeat(MAX_ARGS_LEN + 1);
        assert!(matches!(
            BootPlan::new(&img, &ram, 1, &args, 0),
            Err(BootError::ArgsTooLong(_))
        ));
    }
}

//! Identity page tables for payload guests: every 2 MiB page that lies fully
//! inside guest RAM is mapped user-accessible and writable at virtual =
//! guest-physical; everything else (the MMIO hole, a partial tail page) is
//! left unmapped, so a stray access faults and ends the VM.

use thiserror::Error;

use guest_abi::GpaRange;

use super::layout::{PAGE_TABLES_END, PAGE_TABLES_GPA};

const PAGE: u64 = 4096;
const HUGE: u64 = 2 << 20;
const GIB: u64 = 1 << 30;
const PDPT_SPAN: u64 = 512 * GIB;
const PRESENT: u64 = 1;
const WRITABLE: u64 = 1 << 1;
const USER: u64 = 1 << 2;
const PAGE_SIZE_BIT: u64 = 1 << 7;

/// Errors building page tables.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PagingError {
    /// Guest RAM reaches too high for the page-table area below 4 MiB.
    #[error(
        "payload guests support guest-physical addresses up to {max_gib} GiB; RAM ends at {end_gib} GiB"
    )]
    TooMuchMemory {
        /// Highest supported end of RAM in GiB.
        max_gib: u64,
        /// Configured end of RAM in GiB.
        end_gib: u64,
    },
}

/// Page tables ready to be written to guest memory at [`PageTables::base`].
#[derive(Debug)]
pub struct PageTables {
    bytes: Vec<u8>,
}

impl PageTables {
    /// Builds identity tables covering `ram`.
    pub fn identity(ram: &[GpaRange]) -> Result<Self, PagingError> {
        let top = ram.iter().map(GpaRange::end).max().unwrap_or(0);
        let pdpts = top.div_ceil(PDPT_SPAN).max(1);
        let pds = top.div_ceil(GIB).max(1);
        let pages = 1 + pdpts + pds;
        let max_pds = (PAGE_TABLES_END - PAGE_TABLES_GPA) / PAGE - 1 - 2;
        if PAGE_TABLES_GPA + pages * PAGE > PAGE_TABLES_END {
            return Err(PagingError::TooMuchMemory {
                max_gib: max_pds,
                end_gib: top.div_ceil(GIB),
            });
        }
        let mut bytes = vec![0u8; (pages * PAGE) as usize];
        let pdpt_gpa = |i: u64| PAGE_TABLES_GPA + (1 + i) * PAGE;
        let pd_gpa = |i: u64| PAGE_TABLES_GPA + (1 + pdpts + i) * PAGE;
        let mut put = |table_gpa: u64, index: u64, entry: u64| {
            let off = (table_gpa - PAGE_TABLES_GPA + index * 8) as usize;
            bytes[off..off + 8].copy_from_slice(&entry.to_le_bytes());
        };
        for i in 0..pdpts {
            put(PAGE_TABLES_GPA, i, pdpt_gpa(i) | PRESENT | WRITABLE | USER);
        }
        for i in 0..pds {
            put(
                pdpt_gpa(i / 512),
                i % 512,
                pd_gpa(i) | PRESENT | WRITABLE | USER,
            );
        }
        for r in ram {
            let mut gpa = r.start.next_multiple_of(HUGE);
            while gpa + HUGE <= r.end() {
                put(
                    pd_gpa(gpa / GIB),
                    (gpa % GIB) / HUGE,
                    gpa | PRESENT | WRITABLE | USER | PAGE_SIZE_BIT,
                );
                gpa += HUGE;
            }
        }
        Ok(PageTables { bytes })
    }

    /// Guest-physical address of the PML4 (the value for CR3).
    pub const fn base() -> u64 {
        PAGE_TABLES_GPA
    }

    /// The tables' bytes, to be written at [`PageTables::base`].
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Walks the tables like the MMU: the physical address `va` maps to.
    pub fn translate(&self, va: u64) -> Option<u64> {
        let entry = |table: u64, index: u64| -> Option<u64> {
            let off = usize::try_from(table.checked_sub(PAGE_TABLES_GPA)? + index * 8).ok()?;
            let raw = self.bytes.get(off..off + 8)?;
            let e = u64::from_le_bytes(raw.try_into().ok()?);
            (e & PRESENT != 0).then_some(e)
        };
        let pml4e = entry(PAGE_TABLES_GPA, (va >> 39) & 511)?;
        let pdpte = entry(pml4e & !0xfff, (va >> 30) & 511)?;
        let pde = entry(pdpte & !0xfff, (va >> 21) & 511)?;
        (pde & PAGE_SIZE_BIT != 0)
            .then_some((pde & !(HUGE - 1) & ((1 << 52) - 1)) | (va & (HUGE - 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, len: u64) -> GpaRange {
        GpaRange { start, len }
    }

    #[test]
    fn maps_ram_identity_and_leaves_holes() {
        let ram = [r(0, 3 * GIB), r(4 * GIB, 2 * GIB)];
        let pt = PageTables::identity(&ram).unwrap();
        for va in [0, 0x1234, 4 << 20, 3 * GIB - 1, 4 * GIB, 6 * GIB - 8] {
            assert_eq!(pt.translate(va), Some(va), "va {va:#x}");
        }
        assert_eq!(pt.translate(3 * GIB), None);
        assert_eq!(pt.translate(6 * GIB), None);
    }

    #[test]
    fn partial_tail_page_is_unmapped() {
        let pt = PageTables::identity(&[r(0, 64 * HUGE + PAGE)]).unwrap();
        assert_eq!(pt.translate(64 * HUGE - 1), Some(64 * HUGE - 1));
        assert_eq!(pt.translate(64 * HUGE), None);
    }

    #[test]
    fn large_memory_spans_several_pdpts() {
        let pt = PageTables::identity(&[r(0, 3 * GIB), r(4 * GIB, 600 * GIB)]).unwrap();
        assert_eq!(pt.translate(600 * GIB), Some(600 * GIB));
    }

    #[test]
    fn too_much_memory_is_an_error() {
        let err = PageTables::identity(&[r(0, 2048 * GIB)]).unwrap_err();
        assert!(matches!(
            err,
            PagingError::TooMuchMemory { end_gib: 2048, .. }
        ));
    }
}

//! Host page frame numbers of this process's pages, from
//! `/proc/self/pagemap`: what a physical-address monitor (DAMON `paddr`)
//! needs to watch guest pages. The kernel shows PFNs only to
//! `CAP_SYS_ADMIN`; without it every PFN reads as zero, which
//! [`Pagemap::pfn`] reports as an error rather than as "not present".

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use thiserror::Error;

const PAGE: u64 = 4096;
/// Bit 63: the page is present in RAM.
const PRESENT: u64 = 1 << 63;
/// Bits 0–54: the PFN when present.
const PFN_MASK: u64 = (1 << 55) - 1;

/// Errors reading the page map.
#[derive(Debug, Error)]
pub enum PagemapError {
    /// `/proc/self/pagemap` could not be opened.
    #[error("opening /proc/self/pagemap")]
    Open(#[source] io::Error),
    /// An entry could not be read.
    #[error("reading /proc/self/pagemap at page {addr:#x}")]
    Read {
        /// The virtual address asked for.
        addr: u64,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A present page with PFN 0: the kernel hides PFNs from this process.
    #[error("/proc/self/pagemap hides page frame numbers (needs CAP_SYS_ADMIN)")]
    Hidden,
}

/// This process's page map.
#[derive(Debug)]
pub struct Pagemap {
    file: File,
}

impl Pagemap {
    /// Opens `/proc/self/pagemap`.
    pub fn open() -> Result<Self, PagemapError> {
        let file = File::open("/proc/self/pagemap").map_err(PagemapError::Open)?;
        Ok(Pagemap { file })
    }

    /// The PFN of the page holding virtual address `addr`, `None` when no
    /// page is mapped there now.
    pub fn pfn(&self, addr: u64) -> Result<Option<u64>, PagemapError> {
        let mut entry = [0u8; 8];
        self.file
            .read_exact_at(&mut entry, addr / PAGE * 8)
            .map_err(|source| PagemapError::Read { addr, source })?;
        let entry = u64::from_ne_bytes(entry);
        if entry & PRESENT == 0 {
            return Ok(None);
        }
        match entry & PFN_MASK {
            0 => Err(PagemapError::Hidden),
            pfn => Ok(Some(pfn)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_touched_page_has_a_pfn_and_an_untouched_one_none() {
        let map = Pagemap::open().unwrap();
        let len = 4 * PAGE as usize;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let base = p as u64;
        // SAFETY: the first page lies inside the mapping made above.
        unsafe { (p as *mut u8).write_volatile(1) };
        assert_eq!(map.pfn(base + 2 * PAGE).unwrap(), None);
        match map.pfn(base) {
            Ok(Some(pfn)) => assert!(is_root() && pfn > 0),
            Err(PagemapError::Hidden) => assert!(!is_root()),
            other => panic!("unexpected {other:?}"),
        }
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p, len) };
    }
}

//! This process's page-table entries, from `/proc/self/pagemap`: whether
//! a range has any page mapped (the remap migrator write-protects only
//! frames that do), and host page frame numbers, which a physical-address
//! monitor (DAMON `paddr`) needs to watch guest pages. The kernel shows
//! PFNs only to `CAP_SYS_ADMIN`; without it every PFN reads as zero,
//! which [`Pagemap::pfn`] reports as an error rather than as "not
//! present". Presence needs no privilege.

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

    /// Whether any 4 KiB page of `[start, start + len)` (page-aligned) has
    /// a page-table entry mapping a page now. One read of 8 bytes per page.
    pub fn any_present(&self, start: u64, len: u64) -> Result<bool, PagemapError> {
        const CHUNK: usize = 512;
        let mut entries = [0u8; CHUNK * 8];
        let (first, end) = (start / PAGE, (start + len).div_ceil(PAGE));
        let mut page = first;
        while page < end {
            let n = ((end - page) as usize).min(CHUNK);
            let buf = &mut entries[..n * 8];
            self.file
                .read_exact_at(buf, page * 8)
                .map_err(|source| PagemapError::Read {
                    addr: page * PAGE,
                    source,
                })?;
            let present = buf.chunks_exact(8).any(|e| {
                <[u8; 8]>::try_from(e).is_ok_and(|e| u64::from_ne_bytes(e) & PRESENT != 0)
            });
            if present {
                return Ok(true);
            }
            page += n as u64;
        }
        Ok(false)
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

    /// A fresh private anonymous mapping of `len` bytes, nothing touched;
    /// the caller unmaps it.
    fn anonymous(len: usize) -> *mut libc::c_void {
        // SAFETY: a new mapping at an address the kernel picks.
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
        p
    }

    #[test]
    fn a_touched_page_has_a_pfn_and_an_untouched_one_none() {
        let map = Pagemap::open().unwrap();
        let len = 4 * PAGE as usize;
        let p = anonymous(len);
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

    #[test]
    fn any_present_sees_one_mapped_page_in_a_range() {
        let map = Pagemap::open().unwrap();
        // Over one read's worth of entries, so the chunking is exercised.
        let pages = 1100;
        let len = pages * PAGE as usize;
        let p = anonymous(len);
        let base = p as u64;
        assert!(!map.any_present(base, len as u64).unwrap());
        // SAFETY: page 1050 lies inside the mapping made above.
        unsafe { (p as *mut u8).add(1050 * PAGE as usize).write_volatile(1) };
        assert!(map.any_present(base, len as u64).unwrap());
        assert!(map.any_present(base + 1050 * PAGE, PAGE).unwrap());
        assert!(!map.any_present(base, 1050 * PAGE).unwrap());
        assert!(!map.any_present(base + 1051 * PAGE, 49 * PAGE).unwrap());
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p, len) };
    }
}

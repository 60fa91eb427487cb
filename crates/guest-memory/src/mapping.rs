//! Host virtual memory mappings: an owned mapping that is unmapped on drop,
//! aligned address-space reservations, and fixed shared file mappings placed
//! inside a reservation.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr;

/// A range of host virtual memory this process mapped and owns; unmapped on
/// drop. Addresses are kept as integers: the owner decides who may touch it.
#[derive(Debug)]
pub(crate) struct HostMapping {
    addr: usize,
    len: usize,
}

impl HostMapping {
    /// Maps `len` bytes of `fd` from `offset`, shared and read-write.
    pub(crate) fn map_shared(fd: BorrowedFd<'_>, len: usize, offset: u64) -> io::Result<Self> {
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a fresh mapping at an address of the kernel's choosing
        // (no MAP_FIXED) cannot alias anything existing.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            addr: addr as usize,
            len,
        })
    }

    /// Reserves `len` bytes of address space (inaccessible, no memory
    /// committed) starting at a multiple of `align` (a power of two).
    pub(crate) fn reserve_aligned(len: usize, align: usize) -> io::Result<Self> {
        let padded = len
            .checked_add(align)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: a fresh PROT_NONE anonymous mapping at an address of the
        // kernel's choosing cannot alias anything existing.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                padded,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base as usize;
        let start = base.next_multiple_of(align);
        let end = start + len;
        // Trim the padding on both sides; both pieces are page-aligned
        // because `base`, `start` and `len` are.
        for (piece, piece_len) in [(base, start - base), (end, base + padded - end)] {
            if piece_len > 0 {
                // SAFETY: the piece lies in the reservation made above, which
                // nothing else refers to.
                unsafe { libc::munmap(piece as *mut libc::c_void, piece_len) };
            }
        }
        Ok(Self { addr: start, len })
    }

    /// Start address.
    pub(crate) fn addr(&self) -> usize {
        self.addr
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Faults in every page for writing, reporting failure (e.g. no hugepage
    /// left) as an error instead of a later SIGBUS.
    pub(crate) fn populate_write(&self) -> io::Result<()> {
        // SAFETY: MADV_POPULATE_WRITE only faults in pages of this mapping,
        // which we own; it does not change their contents.
        let rc = unsafe {
            libc::madvise(
                self.addr as *mut libc::c_void,
                self.len,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for HostMapping {
    fn drop(&mut self) {
        // SAFETY: the range was mapped by this object and is unmapped once;
        // whatever was mapped over parts of it with MAP_FIXED goes with it.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// Maps `len` bytes of `fd` from `offset` shared and read-write exactly at
/// `addr`, replacing whatever is mapped there in one step.
///
/// # Safety
///
/// `[addr, addr + len)` must lie inside a mapping the caller owns and whose
/// contents no Rust reference points into (guest memory, accessed only
/// through volatile accesses or by the guest).
pub(crate) unsafe fn map_fixed_shared(
    addr: usize,
    len: usize,
    fd: BorrowedFd<'_>,
    offset: u64,
) -> io::Result<()> {
    let offset =
        libc::off_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: the caller guarantees the range is theirs to replace; MAP_FIXED
    // swaps the backing without leaving the range unmapped in between.
    let got = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd.as_raw_fd(),
            offset,
        )
    };
    if got == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservation_is_aligned_and_sized() {
        let align = 1 << 30;
        let r = HostMapping::reserve_aligned(3 << 21, align).unwrap();
        assert_eq!(r.addr() % align, 0);
        assert_eq!(r.len(), 3 << 21);
    }
}

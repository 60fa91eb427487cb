//! `MemfdRegion`: a memfd-backed `MAP_SHARED` mapping, the same kind of
//! memory a guest tier is, faulted in before anything is timed.

use std::ffi::CStr;
use std::io;
use std::ptr::{self, NonNull};
use std::slice;

use thiserror::Error;

/// Why a region could not be made.
#[derive(Debug, Error)]
pub enum MemoryError {
    /// A zero-length region was asked for.
    #[error("region length must not be zero")]
    ZeroLength,
    /// `memfd_create` failed.
    #[error("memfd_create")]
    Create(#[source] io::Error),
    /// `ftruncate` failed (length too large for the fd, or no memory).
    #[error("ftruncate memfd to {len} bytes")]
    Resize {
        /// The length asked for.
        len: usize,
        /// The error from `ftruncate`.
        #[source]
        source: io::Error,
    },
    /// `mmap` failed.
    #[error("mmap {len} bytes of memfd")]
    Map {
        /// The length asked for.
        len: usize,
        /// The error from `mmap`.
        #[source]
        source: io::Error,
    },
}

/// A shared, read-write mapping of a fresh memfd; unmapped on drop.
#[derive(Debug)]
pub struct MemfdRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region owns its mapping exclusively; moving it to another
// thread moves that ownership. Shared references only hand out `&[u8]`.
unsafe impl Send for MemfdRegion {}
// SAFETY: `&MemfdRegion` only allows reads (`as_slice`, `as_ptr`); writes
// need `&mut` or the caller's own synchronisation through raw pointers.
unsafe impl Sync for MemfdRegion {}

impl MemfdRegion {
    /// Creates a memfd named `name` of `len` bytes and maps all of it
    /// `MAP_SHARED | MAP_POPULATE`. The fd is closed once mapped.
    pub fn new(name: &CStr, len: usize) -> Result<Self, MemoryError> {
        if len == 0 {
            return Err(MemoryError::ZeroLength);
        }
        // SAFETY: `name` is NUL-terminated; the flags are valid.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(MemoryError::Create(io::Error::last_os_error()));
        }
        let mapped = map_whole(fd, len);
        // SAFETY: `fd` is ours and used nowhere else; the mapping (if any)
        // keeps the memory alive without it.
        unsafe { libc::close(fd) };
        Ok(Self { ptr: mapped?, len })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: regions are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// First byte, for building copy ranges.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// First byte, writable, for building copy ranges.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The whole region.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes and lives as long as
        // `self`; writers need `&mut self` or raw pointers whose users
        // guarantee they do not race with this borrow.
        unsafe { slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The whole region, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access
        // exclusive.
        unsafe { slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// Sizes `fd` to `len` bytes and maps it shared and populated.
fn map_whole(fd: libc::c_int, len: usize) -> Result<NonNull<u8>, MemoryError> {
    let resize = |source| MemoryError::Resize { len, source };
    let size = libc::off_t::try_from(len)
        .map_err(|_| resize(io::Error::from_raw_os_error(libc::EFBIG)))?;
    // SAFETY: `fd` is a valid memfd.
    if unsafe { libc::ftruncate(fd, size) } != 0 {
        return Err(resize(io::Error::last_os_error()));
    }
    // SAFETY: a new mapping placed by the kernel over the whole memfd; it
    // aliases nothing in this process.
    let addr = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(MemoryError::Map {
            len,
            source: io::Error::last_os_error(),
        });
    }
    NonNull::new(addr.cast::<u8>()).ok_or_else(|| MemoryError::Map {
        len,
        source: io::Error::from_raw_os_error(libc::EFAULT),
    })
}

impl Drop for MemfdRegion {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no borrow of it
        // outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_a_writable_zeroed_region() {
        let mut region = MemfdRegion::new(c"bench-test", 3 * 4096 + 5).unwrap();
        assert_eq!(region.len(), 3 * 4096 + 5);
        assert!(region.as_slice().iter().all(|&b| b == 0));
        region.as_mut_slice().fill(0xA5);
        assert!(region.as_slice().iter().all(|&b| b == 0xA5));
    }

    #[test]
    fn refuses_zero_length() {
        assert!(matches!(
            MemfdRegion::new(c"bench-test", 0),
            Err(MemoryError::ZeroLength)
        ));
    }

    #[test]
    fn regions_are_separate_memory() {
        let mut a = MemfdRegion::new(c"a", 4096).unwrap();
        let b = MemfdRegion::new(c"b", 4096).unwrap();
        a.as_mut_slice().fill(1);
        assert!(b.as_slice().iter().all(|&x| x == 0));
    }
}

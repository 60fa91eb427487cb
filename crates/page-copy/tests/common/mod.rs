//! Helpers shared by the integration tests: real memfd-backed mappings
//! (like tier backings), deterministic random data, the engine matrix.

#![allow(dead_code)] // each test binary uses a different subset

use std::ptr;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use page_copy::{CopyEngine, CopyMode, CpuCopy, MIN_CHUNK_SIZE, ThreadedConfig, ThreadedCopy};

pub const KIB: usize = 1024;
pub const MIB: usize = 1024 * KIB;

/// A shared memfd mapping, faulted in.
pub struct Region {
    ptr: *mut u8,
    len: usize,
    map_len: usize,
}

impl Region {
    pub fn new(len: usize) -> Self {
        let map_len = len.max(1).next_multiple_of(4096);
        // SAFETY: the name is NUL-terminated; flags are valid.
        let fd = unsafe { libc::memfd_create(c"page-copy-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: fd is the memfd just created.
        let rc = unsafe { libc::ftruncate(fd, map_len as libc::off_t) };
        assert_eq!(rc, 0, "ftruncate: {}", std::io::Error::last_os_error());
        // SAFETY: fresh shared mapping of the whole memfd, placed by the kernel.
        let ptr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        assert_ne!(
            ptr,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: fd is ours; the mapping keeps the memory alive.
        unsafe { libc::close(fd) };
        Self {
            ptr: ptr.cast(),
            len,
            map_len,
        }
    }

    /// A region of `len` bytes filled with random bytes from `seed`.
    pub fn random(len: usize, seed: u64) -> Self {
        let mut region = Self::new(len);
        fill_random(region.as_mut_slice(), seed);
        region
    }

    /// A region of `len` bytes filled with `byte`.
    pub fn filled(len: usize, byte: u8) -> Self {
        let mut region = Self::new(len);
        region.as_mut_slice().fill(byte);
        region
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Address of byte `offset` (<= len).
    pub fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset <= self.len);
        self.ptr.wrapping_add(offset)
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is len bytes, readable, alive while self is.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.map_len) };
    }
}

// SAFETY: a Region owns its mapping; moving it between threads is fine and
// shared access only reads.
unsafe impl Send for Region {}
// SAFETY: see `Send`.
unsafe impl Sync for Region {}

/// Fills `buf` with xorshift64* output (8 bytes per step: fast in debug).
pub fn fill_random(buf: &mut [u8], seed: u64) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut chunks = buf.chunks_exact_mut(8);
    for chunk in &mut chunks {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        chunk.copy_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    for byte in chunks.into_remainder() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        *byte = (state >> 56) as u8;
    }
}

/// Every engine configuration worth checking for correctness: both modes,
/// one to three participants, tiny and default chunks.
pub fn all_engines() -> Vec<Box<dyn CopyEngine>> {
    let mut engines: Vec<Box<dyn CopyEngine>> = Vec::new();
    for mode in [CopyMode::Memcpy, CopyMode::NonTemporal] {
        engines.push(Box::new(CpuCopy::new(mode)));
        for workers in 1..=3 {
            for chunk_size in [MIN_CHUNK_SIZE, 256 * KIB] {
                let config = ThreadedConfig {
                    workers,
                    pin: false,
                    chunk_size,
                    mode,
                };
                engines.push(Box::new(ThreadedCopy::new(config).unwrap()));
            }
        }
    }
    engines
}

/// Runs `f` on another thread; panics if it takes longer than `limit`.
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .expect("operation did not finish in time")
}

//! `KernelCopy`: the host-kernel copy offload. Batches go to
//! `/dev/tiercopy` (`host-kernel/tiercopy`), whose module pins the pages
//! and copies each range with kernel threads or a DMA engine channel,
//! falling back to the CPU per range where DMA fails. The ABI is
//! `host-kernel/tiercopy/include/uapi/linux/tiercopy.h`; the constants
//! here are checked against that header by a test.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

use crate::copy_engine::CopyEngine;
use crate::error::CopyError;
use crate::range::{CopyRange, validate};
use crate::stats::CopyStats;

/// Path of the host-kernel copy offload device (`host-kernel/tiercopy`).
pub const KERNEL_DEVICE: &str = "/dev/tiercopy";

/// `TIERCOPY_ABI_VERSION`.
pub const TIERCOPY_ABI_VERSION: u32 = 1;
/// `TIERCOPY_MAX_RANGES`: most ranges per ioctl.
pub const TIERCOPY_MAX_RANGES: usize = 512;
/// `TIERCOPY_MAX_BATCH_BYTES`: most bytes per ioctl.
pub const TIERCOPY_MAX_BATCH_BYTES: u64 = 1 << 30;
/// `TIERCOPY_IOC_COPY`: `_IOWR(0xB7, 0x01, struct tiercopy_batch)`.
pub const TIERCOPY_IOC_COPY: u64 =
    (3 << 30) | ((size_of::<TiercopyBatch>() as u64) << 16) | (0xb7 << 8) | 0x01;

/// Which back end the module copies with (`TIERCOPY_MODE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelMode {
    /// DMA where it wins (large ranges), kernel threads elsewhere.
    #[default]
    Auto,
    /// Kernel threads only.
    Threads,
    /// DMA for every range, the CPU where DMA fails.
    Dma,
}

impl KernelMode {
    /// The ABI's mode value.
    pub fn abi(self) -> u32 {
        match self {
            KernelMode::Auto => 0,
            KernelMode::Threads => 1,
            KernelMode::Dma => 2,
        }
    }

    /// The mode's name in an engine spec (`kernel:NAME`).
    pub fn name(self) -> &'static str {
        match self {
            KernelMode::Auto => "auto",
            KernelMode::Threads => "threads",
            KernelMode::Dma => "dma",
        }
    }
}

/// `struct tiercopy_range`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TiercopyRange {
    /// Source user address.
    pub src: u64,
    /// Destination user address.
    pub dst: u64,
    /// Bytes.
    pub len: u64,
    /// Out: 0 or a negative errno.
    pub status: i32,
    /// Out: `TIERCOPY_BACKEND_*` that copied it.
    pub backend: u32,
}

/// `struct tiercopy_batch`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TiercopyBatch {
    /// `sizeof(struct tiercopy_batch)`.
    pub size: u32,
    /// `TIERCOPY_ABI_VERSION`.
    pub version: u32,
    /// The mode.
    pub flags: u32,
    /// Ranges in the array.
    pub nr_ranges: u32,
    /// User address of the range array.
    pub ranges: u64,
    /// Out: bytes copied.
    pub copied: u64,
}

/// Copies batches through `/dev/tiercopy`.
#[derive(Debug)]
pub struct KernelCopy {
    device: File,
    mode: KernelMode,
    name: String,
}

impl KernelCopy {
    /// Opens the offload device at `path` (normally [`KERNEL_DEVICE`]).
    pub fn open(path: &Path, mode: KernelMode) -> Result<Self, CopyError> {
        let device = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => CopyError::Unavailable(format!(
                    "kernel copy engine: {} not found (load host-kernel/tiercopy)",
                    path.display()
                )),
                _ => CopyError::KernelOpen {
                    path: path.display().to_string(),
                    source: e,
                },
            })?;
        Ok(KernelCopy {
            device,
            mode,
            name: format!("kernel:{}", mode.name()),
        })
    }

    /// Opens [`KERNEL_DEVICE`].
    pub fn new(mode: KernelMode) -> Result<Self, CopyError> {
        Self::open(Path::new(KERNEL_DEVICE), mode)
    }

    /// The back end mode.
    pub fn mode(&self) -> KernelMode {
        self.mode
    }

    /// One ioctl over `ranges` (within the ABI's limits): every range gets
    /// a status. A batch refused as a whole is an error.
    fn submit(&self, ranges: &mut [TiercopyRange]) -> Result<(), CopyError> {
        let mut batch = TiercopyBatch {
            size: size_of::<TiercopyBatch>() as u32,
            version: TIERCOPY_ABI_VERSION,
            flags: self.mode.abi(),
            nr_ranges: ranges.len() as u32,
            ranges: ranges.as_mut_ptr() as u64,
            copied: 0,
        };
        // SAFETY: the device fd is open for `self`'s life; `batch` is a
        // valid `struct tiercopy_batch` whose range array points at
        // `ranges` (`nr_ranges` entries, written back by the kernel),
        // which outlives the call; the addresses in the ranges are the
        // caller's promise of `CopyEngine::copy`.
        let rc = unsafe {
            libc::ioctl(
                self.device.as_raw_fd(),
                TIERCOPY_IOC_COPY as libc::c_ulong,
                &mut batch,
            )
        };
        if rc < 0 {
            return Err(CopyError::KernelBatch(io::Error::last_os_error()));
        }
        Ok(())
    }
}

/// The batch as ABI ranges of at most [`TIERCOPY_MAX_BATCH_BYTES`] each,
/// tagged with the index of the range each came from; empty ranges left
/// out.
fn pieces(ranges: &[CopyRange]) -> Vec<(usize, TiercopyRange)> {
    let max = TIERCOPY_MAX_BATCH_BYTES as usize;
    let mut out = Vec::with_capacity(ranges.len());
    for (index, r) in ranges.iter().enumerate() {
        let mut done = 0;
        while done < r.len {
            let len = (r.len - done).min(max);
            out.push((
                index,
                TiercopyRange {
                    src: r.src as u64 + done as u64,
                    dst: r.dst as u64 + done as u64,
                    len: len as u64,
                    ..TiercopyRange::default()
                },
            ));
            done += len;
        }
    }
    out
}

/// Cuts `pieces` into ioctl batches within the ABI's range and byte
/// limits: the end of each batch.
fn batch_ends(pieces: &[(usize, TiercopyRange)]) -> Vec<usize> {
    let mut ends = Vec::new();
    let (mut count, mut bytes) = (0usize, 0u64);
    for (i, (_, p)) in pieces.iter().enumerate() {
        if count == TIERCOPY_MAX_RANGES || bytes + p.len > TIERCOPY_MAX_BATCH_BYTES {
            ends.push(i);
            (count, bytes) = (0, 0);
        }
        count += 1;
        bytes += p.len;
    }
    if count > 0 {
        ends.push(pieces.len());
    }
    ends
}

impl CopyEngine for KernelCopy {
    fn name(&self) -> &str {
        &self.name
    }

    unsafe fn copy(&self, ranges: &[CopyRange]) -> Result<CopyStats, CopyError> {
        let start = Instant::now();
        let bytes = validate(ranges)?;
        let mut pieces = pieces(ranges);
        let mut begin = 0;
        for end in batch_ends(&pieces) {
            let mut todo: Vec<usize> = (begin..end).collect();
            // A signal ends a long batch early: the ranges it did not
            // start come back EINTR and go again.
            while !todo.is_empty() {
                let mut abi: Vec<TiercopyRange> = todo.iter().map(|&i| pieces[i].1).collect();
                match self.submit(&mut abi) {
                    Err(CopyError::KernelBatch(e)) if e.kind() == io::ErrorKind::Interrupted => {
                        continue;
                    }
                    other => other?,
                }
                let mut again = Vec::new();
                for (&i, r) in todo.iter().zip(&abi) {
                    pieces[i].1 = *r;
                    match r.status {
                        0 => {}
                        s if s == -libc::EINTR => again.push(i),
                        s => {
                            return Err(CopyError::KernelRange {
                                index: pieces[i].0,
                                source: io::Error::from_raw_os_error(-s),
                            });
                        }
                    }
                }
                todo = again;
            }
            begin = end;
        }
        Ok(CopyStats {
            bytes,
            elapsed: start.elapsed(),
            chunks: pieces.len(),
            per_worker_chunks: vec![pieces.len()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::uapi_defines;
    use uapi_defines::number;

    /// The `#define`s of the kernel side's header.
    fn header_defines() -> std::collections::HashMap<String, String> {
        uapi_defines::defines(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../host-kernel/tiercopy/include/uapi/linux/tiercopy.h"
        ))
    }

    #[test]
    fn constants_match_the_kernel_header() {
        let d = header_defines();
        assert_eq!(
            number(&d, "TIERCOPY_ABI_VERSION"),
            u64::from(TIERCOPY_ABI_VERSION)
        );
        assert_eq!(
            number(&d, "TIERCOPY_MAX_RANGES"),
            TIERCOPY_MAX_RANGES as u64
        );
        assert_eq!(
            number(&d, "TIERCOPY_MAX_BATCH_BYTES"),
            TIERCOPY_MAX_BATCH_BYTES
        );
        for mode in [KernelMode::Auto, KernelMode::Threads, KernelMode::Dma] {
            let name = format!("TIERCOPY_MODE_{}", mode.name().to_uppercase());
            assert_eq!(number(&d, &name), u64::from(mode.abi()), "{name}");
        }
        assert_eq!(
            d.get("TIERCOPY_IOC_COPY").map(String::as_str),
            Some("_IOWR(0xB7, 0x01, struct tiercopy_batch)")
        );
        assert_eq!(size_of::<TiercopyRange>(), 32);
        assert_eq!(size_of::<TiercopyBatch>(), 32);
        assert_eq!(TIERCOPY_IOC_COPY, 0xc020_b701);
    }

    #[test]
    fn batches_keep_within_the_abi_limits() {
        let mib = 1usize << 20;
        // 3 GiB in one range, and 600 small ones.
        let mut ranges = vec![CopyRange::new(
            0x1000 as *const u8,
            0x1_0000_0000 as *mut u8,
            3 << 30,
        )];
        for i in 0..600usize {
            let at = 0x10_0000_0000usize + i * 2 * mib;
            ranges.push(CopyRange::new(at as *const u8, (at + mib) as *mut u8, mib));
        }
        ranges.push(CopyRange::new(0x2000 as *const u8, 0x3000 as *mut u8, 0));
        let p = pieces(&ranges);
        assert_eq!(
            p.len(),
            3 + 600,
            "the big range in 1 GiB pieces, the empty one left out"
        );
        assert!(p[..3].iter().all(|(i, r)| *i == 0 && r.len == 1 << 30));
        assert_eq!(p[1].1.src, 0x1000 + (1 << 30));
        let ends = batch_ends(&p);
        let mut begin = 0;
        for &end in &ends {
            let batch = &p[begin..end];
            assert!(!batch.is_empty() && batch.len() <= TIERCOPY_MAX_RANGES);
            assert!(batch.iter().map(|(_, r)| r.len).sum::<u64>() <= TIERCOPY_MAX_BATCH_BYTES);
            begin = end;
        }
        assert_eq!(begin, p.len());
    }

    #[test]
    fn an_absent_device_says_what_to_load() {
        let err =
            KernelCopy::open(Path::new("/dev/tiercopy-absent"), KernelMode::Auto).unwrap_err();
        assert_eq!(
            err.to_string(),
            "copy engine unavailable: kernel copy engine: /dev/tiercopy-absent not found (load \
             host-kernel/tiercopy)"
        );
    }
}

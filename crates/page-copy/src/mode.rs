//! `CopyMode`: how the bytes of one piece are moved (libc memcpy or
//! non-temporal stores), shared by the single-thread and threaded engines.

use std::fmt;
use std::ptr;

use crate::nontemporal;

/// The instruction-level copy strategy.
///
/// The default is `NonTemporal`: migration destinations are cold (not in
/// any cache), so streaming stores save the read-for-ownership of every
/// destination line and leave the caches to the guest. Measured with
/// `cargo bench -p page-copy` (64 MiB batches between two memfd mappings,
/// 2-core EPYC dev machine shared with other builds, range of criterion's
/// estimates over three runs), it won every single-thread comparison and 8
/// of 9 two-thread ones:
///
/// | ranges | cpu/memcpy    | cpu/nt         | threads:2/memcpy | threads:2/nt   |
/// |--------|---------------|----------------|------------------|----------------|
/// | 4 KiB  | 4.8–7.0 GiB/s | 7.7–9.6 GiB/s  | 5.6–11.3 GiB/s   | 9.5–13.4 GiB/s |
/// | 64 KiB | 5.5–7.0 GiB/s | 8.7–10.5 GiB/s | 6.6–10.2 GiB/s   | 9.4–11.7 GiB/s |
/// | 2 MiB  | 5.9–6.9 GiB/s | 9.5–13.6 GiB/s | 7.3–9.6 GiB/s    | 8.8–13.9 GiB/s |
///
/// An interleaved single-thread loop (2 MiB pieces, 15 rounds) gave means
/// of 6.9–7.6 GiB/s for memcpy, 8.9–10.9 for SSE2 streaming stores and
/// 10.5–12.7 for AVX ones; `rep movsb` matched memcpy. On a 2-core Xeon
/// dev machine (300 MiB L3) the same holds once the AVX loop copies four
/// pages at once (see `nontemporal`): `tierbench copy`, 256 MiB in 2 MiB
/// ranges, two threads, 12.8–13.8 GB/s memcpy against 20.1–22.7 nt; a
/// live migration copied with memcpy ran at 0.49–0.53× of the best copy
/// where nt, still one page at a time, ran at 0.70–0.80× (idle guest,
/// 64- and 512-frame batches, two runs each). The
/// flip side: a frame just promoted is not in the cache when the guest
/// next reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CopyMode {
    /// `ptr::copy_nonoverlapping`, i.e. the libc `memcpy`.
    Memcpy,
    /// Streaming stores (AVX `vmovntdq`, SSE2 `movntdq` without AVX) that
    /// bypass the cache, then `sfence`: no read-for-ownership of the
    /// destination and no eviction of the caller's working set. Falls back
    /// to memcpy off x86-64 and for pieces under 256 bytes.
    #[default]
    NonTemporal,
}

impl CopyMode {
    /// Short name used in engine names: `memcpy` or `nt`.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyMode::Memcpy => "memcpy",
            CopyMode::NonTemporal => "nt",
        }
    }

    /// Copies `len` bytes from `src` to `dst` with this mode.
    ///
    /// # Safety
    ///
    /// `src` is readable and `dst` writable for `len` bytes and the two do
    /// not overlap.
    pub(crate) unsafe fn copy(self, src: *const u8, dst: *mut u8, len: usize) {
        match self {
            // SAFETY: the caller guarantees validity and non-overlap.
            CopyMode::Memcpy => unsafe { ptr::copy_nonoverlapping(src, dst, len) },
            // SAFETY: same contract as this function.
            CopyMode::NonTemporal => unsafe { nontemporal::copy(src, dst, len) },
        }
    }
}

impl fmt::Display for CopyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

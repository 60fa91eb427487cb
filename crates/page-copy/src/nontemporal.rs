//! Non-temporal (cache-bypassing) memory copy for large pieces: AVX
//! streaming stores when the CPU has AVX, SSE2 ones otherwise.

use std::ptr;

/// Pieces shorter than this are copied with memcpy: streaming stores only
/// pay off once whole cache lines are written.
const MIN_STREAM_LEN: usize = 256;

/// Copies `len` bytes with streaming stores and ends with `sfence`, so the
/// bytes are globally visible before any later store (e.g. the release
/// store that reports a chunk done).
///
/// AVX (32-byte `vmovntdq`) measured 10–20 % faster than SSE2 (16-byte
/// `movntdq`) on the 2-core EPYC dev machine, 64 MiB in 256 KiB and 2 MiB
/// pieces: 10.5–12.7 vs 8.8–10.9 GiB/s mean (memcpy: 6.9–7.6 GiB/s).
///
/// # Safety
///
/// `src` is readable and `dst` writable for `len` bytes and the two do not
/// overlap.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    if len < MIN_STREAM_LEN {
        // SAFETY: the caller guarantees validity and non-overlap.
        unsafe { ptr::copy_nonoverlapping(src, dst, len) };
    } else if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: same contract; AVX was detected at run time.
        unsafe { copy_avx(src, dst, len) };
    } else {
        // SAFETY: same contract; SSE2 is part of the x86-64 baseline.
        unsafe { copy_sse2(src, dst, len) };
    }
}

/// Off x86-64 there is no portable streaming store: plain memcpy.
///
/// # Safety
///
/// `src` is readable and `dst` writable for `len` bytes and the two do not
/// overlap.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller guarantees validity and non-overlap.
    unsafe { ptr::copy_nonoverlapping(src, dst, len) }
}

/// AVX body: 128 bytes per step, destination aligned to 32.
///
/// # Safety
///
/// As `copy`, and the CPU supports AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn copy_avx(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};

    // SAFETY: the caller's contract covers `len` bytes at both pointers.
    let (mut s, mut d, mut left) = unsafe { copy_head(src, dst, len, 32) };
    while left >= 128 {
        // SAFETY: 128 bytes remain at `s` and `d`; loads are unaligned
        // (`loadu`), `d` is 32-byte aligned (head copy, then 128-byte
        // steps); AVX is enabled for this function.
        unsafe {
            let a = _mm256_loadu_si256(s.cast::<__m256i>());
            let b = _mm256_loadu_si256(s.add(32).cast::<__m256i>());
            let c = _mm256_loadu_si256(s.add(64).cast::<__m256i>());
            let e = _mm256_loadu_si256(s.add(96).cast::<__m256i>());
            _mm256_stream_si256(d.cast::<__m256i>(), a);
            _mm256_stream_si256(d.add(32).cast::<__m256i>(), b);
            _mm256_stream_si256(d.add(64).cast::<__m256i>(), c);
            _mm256_stream_si256(d.add(96).cast::<__m256i>(), e);
            s = s.add(128);
            d = d.add(128);
        }
        left -= 128;
    }
    // SAFETY: `left` bytes remain at `s` and `d`.
    unsafe { copy_tail(s, d, left) };
}

/// SSE2 body: 64 bytes per step, destination aligned to 16.
///
/// # Safety
///
/// As `copy`.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_sse2(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};

    // SAFETY: the caller's contract covers `len` bytes at both pointers.
    let (mut s, mut d, mut left) = unsafe { copy_head(src, dst, len, 16) };
    while left >= 64 {
        // SAFETY: 64 bytes remain at `s` and `d`; loads are unaligned
        // (`loadu`), `d` is 16-byte aligned (head copy, then 64-byte steps);
        // SSE2 is part of the x86-64 baseline.
        unsafe {
            let a = _mm_loadu_si128(s.cast::<__m128i>());
            let b = _mm_loadu_si128(s.add(16).cast::<__m128i>());
            let c = _mm_loadu_si128(s.add(32).cast::<__m128i>());
            let e = _mm_loadu_si128(s.add(48).cast::<__m128i>());
            _mm_stream_si128(d.cast::<__m128i>(), a);
            _mm_stream_si128(d.add(16).cast::<__m128i>(), b);
            _mm_stream_si128(d.add(32).cast::<__m128i>(), c);
            _mm_stream_si128(d.add(48).cast::<__m128i>(), e);
            s = s.add(64);
            d = d.add(64);
        }
        left -= 64;
    }
    // SAFETY: `left` bytes remain at `s` and `d`.
    unsafe { copy_tail(s, d, left) };
}

/// Copies the bytes before the first `align`-aligned destination address
/// with memcpy; returns the advanced pointers and the bytes left.
///
/// # Safety
///
/// As `copy`.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_head(
    src: *const u8,
    dst: *mut u8,
    len: usize,
    align: usize,
) -> (*const u8, *mut u8, usize) {
    let head = dst.align_offset(align).min(len);
    // SAFETY: head <= len, so both pointers stay in the caller's ranges.
    unsafe {
        ptr::copy_nonoverlapping(src, dst, head);
        (src.add(head), dst.add(head), len - head)
    }
}

/// Copies the last bytes with memcpy, then fences the streaming stores.
///
/// # Safety
///
/// As `copy`.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_tail(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::_mm_sfence;

    // SAFETY: the caller's contract covers `len` bytes at both pointers.
    unsafe { ptr::copy_nonoverlapping(src, dst, len) };
    // SAFETY: `sfence` has no operands; SSE is part of the x86-64 baseline.
    // It orders the weakly-ordered streaming stores before later stores.
    unsafe { _mm_sfence() };
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    type CopyFn = unsafe fn(*const u8, *mut u8, usize);

    fn check(copy: CopyFn) {
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [
            0, 1, 15, 16, 63, 64, 127, 128, 255, 256, 257, 300, 1000, 4000,
        ] {
            for src_off in [0, 1, 8, 15, 31] {
                for dst_off in [0, 1, 9, 15, 17, 31] {
                    let n = len.min(src.len() - src_off);
                    let mut dst = vec![0xAAu8; src.len() + 64];
                    // SAFETY: src_off + n <= src.len() and dst_off + n <
                    // dst.len(); the two vectors are distinct allocations.
                    unsafe { copy(src.as_ptr().add(src_off), dst.as_mut_ptr().add(dst_off), n) };
                    assert_eq!(&dst[dst_off..dst_off + n], &src[src_off..src_off + n]);
                    assert!(dst[..dst_off].iter().all(|&b| b == 0xAA));
                    assert!(dst[dst_off + n..].iter().all(|&b| b == 0xAA));
                }
            }
        }
    }

    #[test]
    fn dispatching_copy_is_exact() {
        check(copy);
    }

    #[test]
    fn sse2_copy_is_exact() {
        check(copy_sse2);
    }

    #[test]
    fn avx_copy_is_exact() {
        if std::arch::is_x86_feature_detected!("avx") {
            check(copy_avx);
        }
    }
}

//! The C memory functions the compiler may call. The payload links with
//! `-nostdlib`, so nothing else provides them. Copies and fills use
//! `rep movsb`/`rep stosb` (fast on every CPU with ERMSB, and opaque to the
//! optimiser, so they can never turn into calls to themselves); compares use
//! volatile byte loops for the same reason. The System V ABI guarantees
//! RFLAGS.DF = 0 on entry.

use core::arch::asm;
use core::ptr::read_volatile;

/// Copies `n` bytes from `src` to `dest` (no overlap).
///
/// # Safety
/// `src` readable and `dest` writable for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller guarantees both ranges; rep movsb copies exactly
    // rcx bytes forward from rsi to rdi.
    unsafe {
        asm!(
            "rep movsb",
            inout("rcx") n => _,
            inout("rdi") dest => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags)
        );
    }
    dest
}

/// Copies `n` bytes from `src` to `dest`; the ranges may overlap.
///
/// # Safety
/// `src` readable and `dest` writable for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memmove(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dest as usize).wrapping_sub(src as usize) >= n {
        // dest is below src, or the ranges do not overlap: forward is safe.
        // SAFETY: as for memcpy; forward copying reads each source byte
        // before it can be overwritten.
        return unsafe { memcpy(dest, src, n) };
    }
    // SAFETY: the caller guarantees both ranges (n > 0 here since the
    // difference is below n); with DF set, rep movsb copies backwards from
    // the last byte, so overlapping source bytes are read before they are
    // overwritten. DF is cleared again before returning.
    unsafe {
        asm!(
            "std",
            "rep movsb",
            "cld",
            inout("rcx") n => _,
            inout("rdi") dest.add(n - 1) => _,
            inout("rsi") src.add(n - 1) => _,
            options(nostack)
        );
    }
    dest
}

/// Fills `n` bytes at `dest` with the low byte of `c`.
///
/// # Safety
/// `dest` writable for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memset(dest: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller guarantees the range; rep stosb stores al rcx times.
    unsafe {
        asm!(
            "rep stosb",
            inout("rcx") n => _,
            inout("rdi") dest => _,
            in("al") c as u8,
            options(nostack, preserves_flags)
        );
    }
    dest
}

/// Compares `n` bytes; the sign of the first difference, or 0.
///
/// # Safety
/// Both pointers readable for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: i < n and the caller guarantees n readable bytes each;
        // volatile keeps the loop from being recognised as memcmp.
        let (x, y) = unsafe { (read_volatile(a.add(i)), read_volatile(b.add(i))) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

/// Like [`memcmp`], but only zero versus non-zero matters.
///
/// # Safety
/// Both pointers readable for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: same contract as memcmp.
    unsafe { memcmp(a, b, n) }
}

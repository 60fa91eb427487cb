//! The `CopyEngine` trait every engine implements.

use std::fmt;
use std::panic;
use std::thread;

use crate::error::CopyError;
use crate::range::CopyRange;
use crate::stats::CopyStats;

/// Copies batches of byte ranges (guest frames) from one mapping to another.
pub trait CopyEngine: Send + Sync + fmt::Debug {
    /// Short name for logs and metrics, e.g. `cpu/memcpy` or `threads:4:pin/nt`.
    fn name(&self) -> &str;

    /// Copies every range of the batch and returns when all bytes are in
    /// place (or the copy failed).
    ///
    /// The engines of this crate reject null pointers, lengths above
    /// `isize::MAX`, address wrap-around and overlaps between a destination
    /// and any other range before anything is copied; zero-length ranges
    /// are skipped.
    ///
    /// # Safety
    ///
    /// For the whole call, every range's `src` is readable and `dst`
    /// writable for `len` bytes; no two ranges' destinations overlap and no
    /// source overlaps a destination; no other thread writes the sources or
    /// accesses the destinations (the migrator write-protects them).
    unsafe fn copy(&self, ranges: &[CopyRange]) -> Result<CopyStats, CopyError>;

    /// Copies the batch like [`copy`](Self::copy) and runs `beside` once
    /// meanwhile (also when the copy fails, even before it starts), on a
    /// CPU the copy leaves: work that must not wait for the copy nor keep
    /// the engine idle (a migration pipeline protects the next sub-batch
    /// and remaps the last one). Returns once both are done; a panic in
    /// `beside` is raised again after the copy finished. The stats'
    /// elapsed time spans both. `beside` must not copy with this engine:
    /// an engine may serve one batch at a time (the pool does), and the
    /// batch in flight is the caller's.
    ///
    /// By default `beside` runs on a thread of its own (or first, on the
    /// calling thread, where no thread can be started), which suits
    /// engines whose caller waits for the copy (the kernel's). An engine
    /// whose caller copies too overrides this, so that the work never
    /// waits for a CPU the copy holds.
    ///
    /// # Safety
    ///
    /// As for [`copy`](Self::copy).
    unsafe fn copy_beside(
        &self,
        ranges: &[CopyRange],
        beside: &(dyn Fn() + Sync),
    ) -> Result<CopyStats, CopyError> {
        // SAFETY: the caller upholds `copy`'s contract for this call.
        unsafe { copy_beside_on_thread(self, ranges, beside) }
    }
}

/// [`CopyEngine::copy_beside`] with `beside` on a thread of its own while
/// `engine` copies on the calling thread.
///
/// # Safety
///
/// As for [`CopyEngine::copy`].
pub(crate) unsafe fn copy_beside_on_thread<E: CopyEngine + ?Sized>(
    engine: &E,
    ranges: &[CopyRange],
    beside: &(dyn Fn() + Sync),
) -> Result<CopyStats, CopyError> {
    thread::scope(|s| {
        let side = thread::Builder::new()
            .name("copy-beside".to_owned())
            .spawn_scoped(s, beside);
        let Ok(side) = side else {
            beside();
            // SAFETY: the caller upholds `copy`'s contract for this call.
            return unsafe { engine.copy(ranges) };
        };
        // SAFETY: the caller upholds `copy`'s contract for this call.
        let copied = unsafe { engine.copy(ranges) };
        if let Err(payload) = side.join() {
            panic::resume_unwind(payload);
        }
        copied
    })
}

#[cfg(test)]
mod tests {
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::cpu::CpuCopy;

    #[test]
    fn by_default_the_work_runs_once_and_its_panic_follows_the_copy() {
        let src: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let range = CopyRange::new(src.as_ptr(), dst.as_mut_ptr(), src.len());
        let runs = AtomicUsize::new(0);
        let beside = || {
            runs.fetch_add(1, Ordering::SeqCst);
        };
        // SAFETY: both vectors live across the call and are distinct.
        let stats = unsafe { CpuCopy::default().copy_beside(&[range], &beside) }.unwrap();
        assert_eq!(
            (runs.load(Ordering::SeqCst), stats.bytes),
            (1, src.len() as u64)
        );
        assert!(dst == src);

        let mut dst = vec![0u8; src.len()];
        let range = CopyRange::new(src.as_ptr(), dst.as_mut_ptr(), src.len());
        let beside = || panic!("injected panic beside the copy");
        // SAFETY: both vectors live across the call and are distinct.
        let caught = panic::catch_unwind(AssertUnwindSafe(|| unsafe {
            CpuCopy::default().copy_beside(&[range], &beside)
        }));
        assert!(caught.is_err());
        assert!(dst == src, "the copy finished before the panic went on");
    }
}

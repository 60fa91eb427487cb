//! The two baselines every engine is compared with, measured in the same
//! run: a plain `memcpy` loop over the batch's ranges on one thread, and
//! the machine's best parallel copy (N threads each copying one contiguous
//! share of the whole batch, for every N, with memcpy and non-temporal
//! stores: static shares have no coordination cost, so this is the
//! simplest fastest copy the machine can do).

use std::io;
use std::ptr;
use std::thread;
use std::time::{Duration, Instant};

use thiserror::Error;

use page_copy::{CopyEngine, CopyError, CopyMode, CopyRange, CopyStats, CpuCopy};

use super::start_line::{FinishGuard, StartLine};

/// Why a parallel baseline run failed.
#[derive(Debug, Error)]
pub enum BaselineError {
    /// The OS refused a copy thread.
    #[error("spawn parallel copy thread {index}")]
    Spawn {
        /// Index of the thread.
        index: usize,
        /// The error from `std::thread::Builder::spawn_scoped`.
        #[source]
        source: io::Error,
    },
    /// A copy thread's copy was refused.
    #[error("parallel copy thread {index}")]
    Copy {
        /// Index of the thread.
        index: usize,
        /// The copy error.
        #[source]
        source: CopyError,
    },
    /// A copy thread panicked.
    #[error("parallel copy thread {index} panicked")]
    Panicked {
        /// Index of the thread.
        index: usize,
    },
}

/// Copies every range with `ptr::copy_nonoverlapping` on the calling
/// thread and returns the time it took.
///
/// # Safety
///
/// Every range's source is readable and destination writable for its
/// length, and no destination overlaps any other range, for the call.
pub unsafe fn memcpy_loop(ranges: &[CopyRange]) -> Duration {
    let start = Instant::now();
    for range in ranges {
        // SAFETY: the caller guarantees validity and non-overlap.
        unsafe { ptr::copy_nonoverlapping(range.src, range.dst, range.len) };
    }
    start.elapsed()
}

/// Cuts `whole` into `threads` contiguous shares of whole 4 KiB pages
/// (the last one takes the rest); shares may be empty when the range has
/// fewer pages than threads.
pub fn shares(whole: CopyRange, threads: usize) -> Vec<CopyRange> {
    const PAGE: usize = 4096;
    let threads = threads.max(1);
    let per_share = whole.len.div_ceil(threads).next_multiple_of(PAGE);
    (0..threads)
        .map(|i| {
            let start = (i * per_share).min(whole.len);
            let end = ((i + 1) * per_share).min(whole.len);
            let end = if i + 1 == threads { whole.len } else { end };
            CopyRange::new(
                whole.src.wrapping_add(start),
                whole.dst.wrapping_add(start),
                end - start,
            )
        })
        .collect()
}

/// Copies `whole` with `threads` threads, each copying one contiguous
/// share with `mode` (through `CpuCopy`, the single-thread engine): the
/// calling thread copies the first share and `threads - 1` helpers the
/// others. Returns the time from the moment every helper was running
/// until the last share was copied (spawning and joining not included).
///
/// # Safety
///
/// `whole.src` is readable and `whole.dst` writable for `whole.len` bytes,
/// they do not overlap, and nothing else accesses them during the call.
pub unsafe fn parallel_copy(
    whole: CopyRange,
    threads: usize,
    mode: CopyMode,
) -> Result<Duration, BaselineError> {
    let engine = CpuCopy::new(mode);
    let parts = shares(whole, threads);
    let (own, helpers) = parts
        .split_first()
        .map_or((whole, &[][..]), |(first, rest)| (*first, rest));
    let line = StartLine::default();
    thread::scope(|scope| {
        let mut handles = Vec::with_capacity(helpers.len());
        for (i, &share) in helpers.iter().enumerate() {
            let (engine, line) = (&engine, &line);
            let spawned = thread::Builder::new()
                .name(format!("tierbench-par-{}", i + 1))
                .spawn_scoped(scope, move || {
                    let _finished = FinishGuard(line);
                    if !line.arrive_and_wait() {
                        return Ok(CopyStats::default());
                    }
                    // SAFETY: shares are disjoint parts of `whole`, which
                    // the caller guarantees valid and unshared.
                    unsafe { engine.copy(&[share]) }
                });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(source) => {
                    // Send the started helpers home; the scope joins them.
                    line.abort();
                    return Err(BaselineError::Spawn {
                        index: i + 1,
                        source,
                    });
                }
            }
        }
        line.wait_ready(handles.len());
        let start = Instant::now();
        line.go();
        // SAFETY: as for the helpers' shares.
        let own_copy = unsafe { engine.copy(&[own]) };
        line.wait_done(handles.len());
        let elapsed = start.elapsed();
        // Join every helper before reporting anything: the scope would
        // panic on an unjoined panicked thread.
        let joined: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        own_copy.map_err(|source| BaselineError::Copy { index: 0, source })?;
        for (i, outcome) in joined.into_iter().enumerate() {
            let index = i + 1;
            match outcome {
                Ok(copied) => copied.map_err(|source| BaselineError::Copy { index, source })?,
                Err(_) => return Err(BaselineError::Panicked { index }),
            };
        }
        Ok(elapsed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffers(len: usize) -> (Vec<u8>, Vec<u8>) {
        let src: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
        (src, vec![0; len])
    }

    #[test]
    fn shares_are_contiguous_page_multiples_covering_everything() {
        let whole = CopyRange::new(
            0x10_0000 as *const u8,
            0x90_0000 as *mut u8,
            10 * 4096 + 100,
        );
        let parts = shares(whole, 3);
        assert_eq!(parts.len(), 3);
        let mut next = whole.src as usize;
        for part in &parts {
            assert_eq!(part.src as usize, next);
            assert_eq!(
                part.dst as usize - whole.dst as usize,
                next - whole.src as usize
            );
            next += part.len;
        }
        assert_eq!(next - whole.src as usize, whole.len);
        assert!(parts[..2].iter().all(|p| p.len % 4096 == 0));
    }

    #[test]
    fn more_threads_than_pages_gives_empty_shares() {
        let whole = CopyRange::new(0x1000 as *const u8, 0x9000 as *mut u8, 4096);
        let parts = shares(whole, 4);
        assert_eq!(parts.iter().map(|p| p.len).sum::<usize>(), 4096);
        assert_eq!(parts.iter().filter(|p| p.len == 0).count(), 3);
    }

    #[test]
    fn parallel_copy_copies_everything() {
        for mode in [CopyMode::Memcpy, CopyMode::NonTemporal] {
            for threads in 1..=3 {
                let (src, mut dst) = buffers(5 * 4096 + 33);
                let whole = CopyRange::new(src.as_ptr(), dst.as_mut_ptr(), src.len());
                // SAFETY: two distinct live buffers of `len` bytes.
                let elapsed = unsafe { parallel_copy(whole, threads, mode) }.unwrap();
                assert!(elapsed > Duration::ZERO);
                assert!(dst == src, "{mode} with {threads} threads");
            }
        }
    }

    #[test]
    fn memcpy_loop_copies_every_range() {
        let (src, mut dst) = buffers(3 * 4096);
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let ranges: Vec<CopyRange> = [2, 0, 1]
            .iter()
            .map(|&i| CopyRange::new(s.wrapping_add(i * 4096), d.wrapping_add(i * 4096), 4096))
            .collect();
        // SAFETY: disjoint pages of two distinct live buffers.
        unsafe { memcpy_loop(&ranges) };
        assert!(dst == src);
    }
}

//! Panic handling of the pool, via the test-only panic hook, and work run
//! beside a copy.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::*;

const MIB: usize = 1024 * 1024;

/// Runs `f` on another thread and fails the test if it takes longer than
/// `limit` (a hang would otherwise stall the whole test binary).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).expect("operation hung")
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Copies `src` into a fresh buffer with `engine`.
fn copy_vec(engine: &ThreadedCopy, src: &[u8]) -> (Result<CopyStats, CopyError>, Vec<u8>) {
    let mut dst = vec![0u8; src.len()];
    let range = CopyRange::new(src.as_ptr(), dst.as_mut_ptr(), src.len());
    // SAFETY: both vectors live across the call and are distinct.
    let result = unsafe { engine.copy(&[range]) };
    (result, dst)
}

#[test]
fn caller_panic_is_reported_and_pool_survives() {
    within(Duration::from_secs(20), || {
        let engine = ThreadedCopy::new(ThreadedConfig::with_workers(2)).unwrap();
        engine.inject_panic_in_worker(Some(0));
        // One chunk: copied inline by the caller, which panics.
        let src = pattern(64 * 1024, 1);
        let (result, _) = copy_vec(&engine, &src);
        match result {
            Err(CopyError::WorkerPanicked { worker, message }) => {
                assert_eq!(worker, 0);
                assert!(message.contains("injected panic"), "{message}");
            }
            other => panic!("expected a panic report, got {other:?}"),
        }
        engine.inject_panic_in_worker(None);
        let src = pattern(2 * MIB, 2);
        let (result, dst) = copy_vec(&engine, &src);
        assert_eq!(result.unwrap().bytes, src.len() as u64);
        assert!(dst == src);
    });
}

#[test]
fn pool_thread_panic_is_reported_and_pool_survives() {
    within(Duration::from_secs(30), || {
        let config = ThreadedConfig {
            chunk_size: MIN_CHUNK_SIZE,
            ..ThreadedConfig::with_workers(2)
        };
        let engine = ThreadedCopy::new(config).unwrap();
        engine.inject_panic_in_worker(Some(1));
        // The caller waits for the pool thread to claim a chunk, so the
        // injected panic happens whatever the scheduler does.
        engine.hold_caller_for_workers(1);
        let src = pattern(2 * MIB, 3);
        let (result, _) = copy_vec(&engine, &src);
        match result {
            Err(CopyError::WorkerPanicked { worker, .. }) => assert_eq!(worker, 1),
            other => panic!("expected the pool thread's panic, got {other:?}"),
        }
        engine.hold_caller_for_workers(0);
        engine.inject_panic_in_worker(None);
        for seed in 0..10 {
            let src = pattern(2 * MIB, seed);
            let (result, dst) = copy_vec(&engine, &src);
            assert_eq!(result.unwrap().chunks, 512);
            assert!(dst == src);
        }
        drop(engine);
    });
}

/// Waits, at most 30 s, until the buffer at `dst` holds `src`'s byte at
/// one of `offsets`; returns whether it did. Reads are volatile: another
/// thread copies into the buffer meanwhile.
fn wait_until_copied(src: &[u8], dst: usize, offsets: &[usize]) -> bool {
    let limit = Instant::now() + Duration::from_secs(30);
    while Instant::now() < limit {
        // SAFETY: every offset lies inside the destination buffer, which
        // lives across the copy.
        let landed = |&at: &usize| unsafe { (dst as *const u8).add(at).read_volatile() == src[at] };
        if offsets.iter().any(landed) {
            return true;
        }
        thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn work_beside_runs_once_while_the_pool_copies() {
    within(Duration::from_secs(60), || {
        let config = ThreadedConfig {
            chunk_size: MIN_CHUNK_SIZE,
            ..ThreadedConfig::with_workers(2)
        };
        let engine = ThreadedCopy::new(config).unwrap();
        let src = pattern(8 * MIB, 7);
        let mut dst = vec![0u8; src.len()];
        let dst_at = dst.as_ptr() as usize;
        let runs = AtomicUsize::new(0);
        let saw_pool = AtomicBool::new(false);
        // The work waits for the pool thread to copy a chunk (the last
        // byte of any), so it must run once the pool has the batch: run
        // before that, on the caller, it would wait in vain.
        let chunk_ends: Vec<usize> = (MIN_CHUNK_SIZE - 1..src.len())
            .step_by(MIN_CHUNK_SIZE)
            .collect();
        let beside = || {
            runs.fetch_add(1, Ordering::SeqCst);
            saw_pool.store(
                wait_until_copied(&src, dst_at, &chunk_ends),
                Ordering::SeqCst,
            );
        };
        let range = CopyRange::new(src.as_ptr(), dst.as_mut_ptr(), src.len());
        // SAFETY: both vectors live across the call and are distinct.
        let stats = unsafe { engine.copy_beside(&[range], &beside) }.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(
            saw_pool.load(Ordering::SeqCst),
            "the pool copied while the work ran"
        );
        assert!(stats.per_worker_chunks[1] > 0);
        assert_eq!(stats.bytes, src.len() as u64);
        assert!(dst == src);
    });
}

#[test]
fn a_panic_beside_is_raised_after_the_whole_copy() {
    within(Duration::from_secs(30), || {
        let engine = ThreadedCopy::new(ThreadedConfig::with_workers(2)).unwrap();
        let src = pattern(8 * MIB, 9);
        let mut dst = vec![0u8; src.len()];
        let range = CopyRange::new(src.as_ptr(), dst.as_mut_ptr(), src.len());
        let beside = || panic!("injected panic beside the copy");
        // SAFETY: both vectors live across the call and are distinct.
        let caught = panic::catch_unwind(AssertUnwindSafe(|| unsafe {
            engine.copy_beside(&[range], &beside)
        }));
        let payload = caught.expect_err("the panic is raised");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"injected panic beside the copy")
        );
        assert!(dst == src, "the copy finished before the panic went on");
        let src = pattern(2 * MIB, 10);
        let (result, dst) = copy_vec(&engine, &src);
        assert_eq!(result.unwrap().bytes, src.len() as u64);
        assert!(dst == src);
    });
}

#[test]
fn without_pool_threads_the_work_runs_beside_on_a_thread() {
    within(Duration::from_secs(60), || {
        let engine = ThreadedCopy::new(ThreadedConfig::with_workers(1)).unwrap();
        let src = pattern(8 * MIB, 11);
        let mut dst = vec![0u8; src.len()];
        let dst_at = dst.as_ptr() as usize;
        let done = AtomicBool::new(false);
        // The caller copies every byte: the work sees the last one land
        // only if it runs on another thread meanwhile.
        let beside = || {
            done.store(
                wait_until_copied(&src, dst_at, &[src.len() - 1]),
                Ordering::SeqCst,
            )
        };
        let range = CopyRange::new(src.as_ptr(), dst.as_mut_ptr(), src.len());
        // SAFETY: both vectors live across the call and are distinct.
        unsafe { engine.copy_beside(&[range], &beside) }.unwrap();
        assert!(
            done.load(Ordering::SeqCst),
            "the work ran while the copy did"
        );
        assert!(dst == src);
    });
}

#[test]
fn the_work_beside_runs_once_when_the_batch_is_refused() {
    for workers in [1, 2] {
        let engine = ThreadedCopy::new(ThreadedConfig::with_workers(workers)).unwrap();
        let mut dst = vec![0u8; 2 * MIB];
        let null_source = CopyRange::new(std::ptr::null(), dst.as_mut_ptr(), dst.len());
        let runs = AtomicUsize::new(0);
        let beside = || {
            runs.fetch_add(1, Ordering::SeqCst);
        };
        // SAFETY: the batch is refused before anything is copied.
        let result = unsafe { engine.copy_beside(&[null_source], &beside) };
        assert!(matches!(result, Err(CopyError::Range(_))), "{result:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{workers} workers");
    }
}

//! Panic handling of the pool, via the test-only panic hook.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

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

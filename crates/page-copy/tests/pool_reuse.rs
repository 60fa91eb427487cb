//! The pool is created once and reused: 1000 calls, no thread per call.
//! Alone in its test binary so that the process's thread count is stable.

mod common;

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use page_copy::{CopyEngine, CopyRange, ThreadedConfig, ThreadedCopy};

use common::{KIB, Region};

fn thread_count() -> usize {
    fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn one_pool_serves_a_thousand_calls() {
    let config = ThreadedConfig {
        chunk_size: 64 * KIB,
        ..ThreadedConfig::with_workers(3)
    };
    let engine = ThreadedCopy::new(config).unwrap();
    // The pool copies in every call (the hook has the caller wait for it):
    // the reuse is shown whatever the scheduler does.
    engine.hold_caller_for_workers(1);
    let threads = thread_count();
    let len = 512 * KIB;
    let mut src = Region::random(len, 77);
    let mut dst = Region::new(len);
    let mut pool_chunks = 0;
    for call in 0..1000u64 {
        // New content at every chunk start, stale destination.
        for chunk in src.as_mut_slice().chunks_mut(64 * KIB) {
            chunk[..8].copy_from_slice(&call.to_le_bytes());
        }
        dst.as_mut_slice().fill(0);
        let range = CopyRange::new(src.ptr(), dst.ptr(), len);
        // SAFETY: two live, distinct regions of `len` bytes.
        let stats = unsafe { engine.copy(&[range]) }.unwrap();
        assert_eq!(stats.chunks, 8);
        assert!(
            stats.per_worker_chunks[1..].iter().any(|&c| c > 0),
            "call {call}: the pool copied nothing: {:?}",
            stats.per_worker_chunks
        );
        pool_chunks += stats.per_worker_chunks[1..].iter().sum::<usize>();
        assert!(dst.as_slice() == src.as_slice(), "call {call}");
        assert_eq!(
            thread_count(),
            threads,
            "call {call} changed the thread count"
        );
    }
    assert!(pool_chunks > 0, "pool threads never copied in 1000 calls");
    drop(engine);
    // Drop joins the pool threads, but a joined thread stays listed in
    // /proc/self/task until the kernel reaps it, a moment after the join
    // returns: wait for the listing to catch up (bounded, so a thread
    // Drop really left behind fails the test).
    let deadline = Instant::now() + Duration::from_secs(30);
    while thread_count() > threads - 2 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(thread_count(), threads - 2, "Drop left pool threads behind");
}

//! Behaviour of the worker pool: splitting, concurrency, pinning, Drop.

mod common;

use std::mem;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use page_copy::{
    CopyEngine, CopyError, CopyMode, CopyRange, DEFAULT_CHUNK_SIZE, MIN_CHUNK_SIZE, PoolError,
    ThreadedConfig, ThreadedCopy,
};

use common::{KIB, MIB, Region, within};

/// CPUs this process may use, from `sched_getaffinity`.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: all-zero is a valid empty cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(rc, 0);
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: cpu < CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

fn copy_region(engine: &dyn CopyEngine, src: &Region, dst: &Region) -> page_copy::CopyStats {
    let range = CopyRange::new(src.ptr(), dst.ptr(), src.len());
    // SAFETY: two live, distinct regions of the same length.
    unsafe { engine.copy(&[range]) }.unwrap()
}

#[test]
fn one_range_is_split_across_all_workers() {
    // One range, as a frame is: 2 MiB is 8 chunks, copied in about
    // 200 µs by the optimized loop, which can be over before a parked
    // worker wakes on a loaded 2-core machine (CI saw it). 32 MiB gives
    // the workers milliseconds to join; the split is the same code.
    const LEN: usize = 32 * MIB;
    for workers in [2, 3] {
        let engine = ThreadedCopy::new(ThreadedConfig::with_workers(workers)).unwrap();
        let src = Region::random(LEN, workers as u64);
        let dst = Region::new(LEN);
        // Which threads get chunks is up to the scheduler: the hook has
        // the caller keep one chunk and wait for the pool to copy, so the
        // split shows however busy the host is.
        engine.hold_caller_for_workers(workers - 1);
        let stats = copy_region(&engine, &src, &dst);
        assert_eq!(stats.chunks, LEN / DEFAULT_CHUNK_SIZE);
        assert_eq!(stats.per_worker_chunks.len(), workers);
        assert_eq!(stats.per_worker_chunks.iter().sum::<usize>(), stats.chunks);
        assert!(dst.as_slice() == src.as_slice());
        assert!(
            stats.participants() > 1,
            "workers={workers}: only one thread copied: {:?}",
            stats.per_worker_chunks
        );
    }
}

#[test]
fn single_worker_and_single_chunk_batches_run_inline() {
    let engine = ThreadedCopy::new(ThreadedConfig::with_workers(1)).unwrap();
    assert!(engine.worker_cpus().is_empty());
    let src = Region::random(2 * MIB, 1);
    let dst = Region::new(2 * MIB);
    let stats = copy_region(&engine, &src, &dst);
    assert_eq!(stats.per_worker_chunks, vec![8]);
    assert!(dst.as_slice() == src.as_slice());

    let engine = ThreadedCopy::new(ThreadedConfig::with_workers(2)).unwrap();
    let src = Region::random(64 * KIB, 2);
    let dst = Region::new(64 * KIB);
    let stats = copy_region(&engine, &src, &dst);
    assert_eq!(stats.per_worker_chunks, vec![1, 0]);
    assert!(dst.as_slice() == src.as_slice());
}

#[test]
fn two_callers_share_one_engine() {
    within(Duration::from_secs(60), || {
        let engine = Arc::new(
            ThreadedCopy::new(ThreadedConfig {
                chunk_size: 64 * KIB,
                ..ThreadedConfig::with_workers(2)
            })
            .unwrap(),
        );
        let callers: Vec<_> = (0..2u64)
            .map(|caller| {
                let engine = Arc::clone(&engine);
                thread::spawn(move || {
                    let mut src = Region::random(MIB + 3, caller + 10);
                    let dst = Region::new(MIB + 3);
                    for call in 0..100u64 {
                        src.as_mut_slice()[..8].copy_from_slice(&(call ^ caller).to_le_bytes());
                        let stats = copy_region(engine.as_ref(), &src, &dst);
                        assert_eq!(stats.bytes, (MIB + 3) as u64);
                        assert!(
                            dst.as_slice() == src.as_slice(),
                            "caller {caller} call {call}"
                        );
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
    });
}

#[test]
fn pinned_workers_run_on_one_cpu_each() {
    let cpus = allowed_cpus();
    for mode in [CopyMode::Memcpy, CopyMode::NonTemporal] {
        let config = ThreadedConfig {
            workers: 4,
            pin: true,
            chunk_size: DEFAULT_CHUNK_SIZE,
            mode,
        };
        let engine = ThreadedCopy::new(config).unwrap();
        let worker_cpus = engine.worker_cpus();
        assert_eq!(worker_cpus.len(), 3);
        for (i, got) in worker_cpus.iter().enumerate() {
            let index = i + 1;
            assert_eq!(got, &vec![cpus[index % cpus.len()]], "worker {index}");
        }
        let src = Region::random(4 * MIB, 5);
        let dst = Region::new(4 * MIB);
        copy_region(&engine, &src, &dst);
        assert!(dst.as_slice() == src.as_slice());
    }
}

#[test]
fn unpinned_workers_keep_the_process_affinity() {
    let engine = ThreadedCopy::new(ThreadedConfig::with_workers(3)).unwrap();
    let cpus = allowed_cpus();
    assert_eq!(engine.worker_cpus(), vec![cpus.clone(), cpus]);
}

#[test]
fn drop_joins_workers_without_hanging() {
    within(Duration::from_secs(20), || {
        for workers in [1, 2, 4, 8] {
            for pin in [false, true] {
                // Unused pool.
                drop(
                    ThreadedCopy::new(ThreadedConfig {
                        pin,
                        ..ThreadedConfig::with_workers(workers)
                    })
                    .unwrap(),
                );
                // Used pool.
                let engine = ThreadedCopy::new(ThreadedConfig {
                    pin,
                    chunk_size: MIN_CHUNK_SIZE,
                    ..ThreadedConfig::with_workers(workers)
                })
                .unwrap();
                let src = Region::random(MIB, 3);
                let dst = Region::new(MIB);
                copy_region(&engine, &src, &dst);
                drop(engine);
            }
        }
    });
}

#[test]
fn bad_configurations_are_rejected() {
    let err = ThreadedCopy::new(ThreadedConfig::with_workers(0)).unwrap_err();
    assert!(matches!(err, PoolError::ZeroWorkers), "{err:?}");
    let config = ThreadedConfig {
        chunk_size: MIN_CHUNK_SIZE - 1,
        ..ThreadedConfig::with_workers(2)
    };
    let err = ThreadedCopy::new(config).unwrap_err();
    assert!(matches!(err, PoolError::ChunkTooSmall(4095)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "chunk size 4095 is below the 4096-byte minimum"
    );
    let wrapped: CopyError = err.into();
    assert!(matches!(wrapped, CopyError::Pool(_)));
}

#[test]
fn names_describe_the_configuration() {
    let config = ThreadedConfig {
        workers: 2,
        pin: true,
        chunk_size: DEFAULT_CHUNK_SIZE,
        mode: CopyMode::NonTemporal,
    };
    assert_eq!(
        ThreadedCopy::new(config).unwrap().name(),
        "threads:2:pin/nt"
    );
    let config = ThreadedConfig {
        pin: false,
        mode: CopyMode::Memcpy,
        ..config
    };
    assert_eq!(
        ThreadedCopy::new(config).unwrap().name(),
        "threads:2/memcpy"
    );
}

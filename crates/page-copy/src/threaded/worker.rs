//! Pool threads: startup (optional pinning), the wait-for-job loop, and the
//! dispatch slot the caller publishes jobs in.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};

use super::affinity;
use super::job::{Job, lock};
use super::pool_error::PoolError;

/// What the caller hands the pool threads.
#[derive(Debug, Default)]
struct Dispatch {
    /// Bumped for every published job, so a thread runs each job once.
    epoch: u64,
    job: Option<Arc<Job>>,
    shutdown: bool,
}

/// State shared by a `ThreadedCopy` and its threads.
#[derive(Debug, Default)]
pub(super) struct Shared {
    dispatch: Mutex<Dispatch>,
    wake: Condvar,
}

impl Shared {
    /// Makes `job` the current job and wakes every pool thread.
    pub(super) fn publish(&self, job: Arc<Job>) {
        let mut dispatch = lock(&self.dispatch);
        dispatch.epoch += 1;
        dispatch.job = Some(job);
        self.wake.notify_all();
    }

    /// Drops the pool's reference to the finished job. Threads that wake
    /// late still find every chunk claimed and do nothing.
    pub(super) fn retract(&self) {
        lock(&self.dispatch).job = None;
    }

    /// Tells every thread to exit.
    pub(super) fn shutdown(&self) {
        lock(&self.dispatch).shutdown = true;
        self.wake.notify_all();
    }
}

/// A started pool thread.
#[derive(Debug)]
pub(super) struct Worker {
    pub(super) handle: JoinHandle<()>,
    /// CPUs the thread may run on, read by the thread after pinning.
    pub(super) cpus: Vec<usize>,
}

/// Starts pool thread `index` (>= 1; 0 is the caller), pinned to `cpu` if
/// given, and waits until it is running (or failed to pin).
pub(super) fn spawn(
    shared: &Arc<Shared>,
    index: usize,
    cpu: Option<usize>,
) -> Result<Worker, PoolError> {
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let shared = Arc::clone(shared);
    let handle = thread::Builder::new()
        .name(format!("page-copy-{index}"))
        .spawn(move || {
            let started = start(index, cpu);
            let ok = started.is_ok();
            // The constructor waits on the receiver; if it is gone the pool
            // is being torn down and the thread just exits below.
            let _ = ready_tx.send(started);
            if ok {
                run(&shared, index);
            }
        })
        .map_err(|source| PoolError::Spawn { index, source })?;
    match ready_rx.recv() {
        Ok(Ok(cpus)) => Ok(Worker { handle, cpus }),
        Ok(Err(err)) => {
            let _ = handle.join();
            Err(err)
        }
        Err(_) => {
            let _ = handle.join();
            Err(PoolError::StartupLost { index })
        }
    }
}

/// Thread start: pin if asked, then report the CPUs the thread can use.
fn start(index: usize, cpu: Option<usize>) -> Result<Vec<usize>, PoolError> {
    if let Some(cpu) = cpu {
        affinity::pin_current_thread(cpu).map_err(|source| PoolError::Pin {
            index,
            cpu,
            source,
        })?;
    }
    affinity::current_cpus().map_err(|source| PoolError::Affinity { source })
}

/// Sleeps until a new job is published, helps with it, repeats; returns on
/// shutdown.
fn run(shared: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        let job = {
            let mut dispatch = lock(&shared.dispatch);
            loop {
                if dispatch.shutdown {
                    return;
                }
                if dispatch.epoch != seen {
                    seen = dispatch.epoch;
                    break dispatch.job.clone();
                }
                dispatch = shared
                    .wake
                    .wait(dispatch)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        if let Some(job) = job {
            job.run(index);
        }
    }
}

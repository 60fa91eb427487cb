//! The memory workload: maps the buffer, runs one pinned worker per share through the
//! write / check-and-rewrite / verify rounds, and collects what each worker saw.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use std::{io, ptr, slice, thread};

use super::pattern::{Mismatches, Sweep, round_key, split_shares, sweep};
use super::settings::Settings;

/// Seed mixed into every word value ("tierviso").
const SEED: u64 = 0x7469_6572_7669_736f;

/// Why the workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("cannot map {mib} MiB")]
    Map {
        mib: u64,
        #[source]
        source: io::Error,
    },
    #[error("cannot start worker thread")]
    Spawn(#[source] io::Error),
    #[error("worker thread died")]
    Worker,
}

/// What one worker thread did.
#[derive(Debug)]
pub struct ThreadReport {
    /// Write rounds completed (round 1 plus every check-and-rewrite round).
    pub rounds: u64,
    /// Words in the thread's share.
    pub words: usize,
    pub mismatches: Mismatches,
}

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(mib: u64) -> Result<Self, WorkloadError> {
        let map_err = |source| WorkloadError::Map { mib, source };
        let len =
            usize::try_from(mib << 20).map_err(|_| map_err(io::ErrorKind::OutOfMemory.into()))?;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; it aliases nothing.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(map_err(io::Error::last_os_error()));
        }
        Ok(Self { addr, len })
    }

    fn words(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is readable, writable, page-aligned and `len` bytes long while
        // `self` lives, and the returned borrow is tied to `&mut self`.
        unsafe { slice::from_raw_parts_mut(self.addr.cast::<u64>(), self.len / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `addr`/`len` describe a mapping this value owns and nothing borrows any more.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// Pins the calling thread to `cpu`; failure only costs placement, so it is ignored.
fn pin_to_cpu(cpu: usize) {
    // SAFETY: an all-zero `cpu_set_t` is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid `cpu_set_t`; CPU_SET ignores CPUs beyond its size.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is valid for `size_of::<cpu_set_t>()` bytes; pid 0 is the calling thread.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
}

/// One worker: round 1 writes, later rounds check the previous round and rewrite until the
/// deadline or `stop` (at least two rounds), then a final check. After each write round it
/// checks the first `hot_words` of its share `read_rounds` times (reads only). Stops after a
/// sweep with mismatches and prints the kept ones.
fn worker(
    index: usize,
    words: &mut [u64],
    base: u64,
    (read_rounds, hot_words): (u64, usize),
    deadline: Instant,
    stop: &AtomicBool,
) -> ThreadReport {
    let thread = index as u64;
    let mut mismatches = Mismatches::default();
    let mut rounds = 0;
    let mut previous = None;
    loop {
        let key = round_key(rounds + 1, thread, SEED);
        let step = Sweep {
            check: previous,
            write: Some(key),
        };
        let mut failed = sweep(words, base, step, &mut mismatches) > 0;
        let hot = hot_words.min(words.len());
        for _ in 0..read_rounds {
            if failed || stop.load(Ordering::SeqCst) {
                break;
            }
            let read = Sweep {
                check: Some(key),
                write: None,
            };
            failed = sweep(&mut words[..hot], base, read, &mut mismatches) > 0;
        }
        rounds += 1;
        previous = Some(key);
        let over = Instant::now() >= deadline || stop.load(Ordering::SeqCst);
        if failed || (rounds >= 2 && over) {
            break;
        }
    }
    if mismatches.errors == 0 {
        sweep(
            words,
            base,
            Sweep {
                check: previous,
                write: None,
            },
            &mut mismatches,
        );
    }
    for m in &mismatches.first {
        say!(
            "mismatch thread={index} offset={:#x} expected={:#x} got={:#x}",
            m.offset,
            m.expected,
            m.got
        );
    }
    ThreadReport {
        rounds,
        words: words.len(),
        mismatches,
    }
}

/// Maps the buffer and runs one worker per share for `settings.seconds`, or until `stop`
/// (each worker doing at least two rounds).
pub fn run_workload(
    settings: &Settings,
    stop: &AtomicBool,
) -> Result<Vec<ThreadReport>, WorkloadError> {
    let mut mapping = Mapping::new(settings.mib)?;
    let deadline = Instant::now() + Duration::from_secs(settings.seconds);
    let mut rest = mapping.words();
    let shares = split_shares(rest.len(), settings.threads);
    let hot_words = match settings.hot_mib {
        0 => usize::MAX,
        mib => usize::try_from((mib << 20) / 8).unwrap_or(usize::MAX) / settings.threads.max(1),
    };
    let reads = (settings.read_rounds, hot_words);
    thread::scope(|scope| {
        let mut handles = Vec::with_capacity(shares.len());
        for (index, share) in shares.into_iter().enumerate() {
            let (words, tail) = std::mem::take(&mut rest).split_at_mut(share.len());
            rest = tail;
            let cpu = index % settings.cpus.max(1);
            let base = share.start as u64 * 8;
            let handle = thread::Builder::new()
                .name(format!("guest-worker-{index}"))
                .spawn_scoped(scope, move || {
                    pin_to_cpu(cpu);
                    worker(index, words, base, reads, deadline, stop)
                })
                .map_err(WorkloadError::Spawn)?;
            handles.push(handle);
        }
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| WorkloadError::Worker))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_passes_on_real_memory() {
        let settings = Settings {
            mib: 2,
            seconds: 0,
            threads: 3,
            cpus: 2,
            read_rounds: 2,
            hot_mib: 1,
        };
        let reports = run_workload(&settings, &AtomicBool::new(false)).unwrap();
        assert_eq!(reports.len(), 3);
        assert_eq!(reports.iter().map(|r| r.words).sum::<usize>(), 2 << 17);
        assert!(
            reports
                .iter()
                .all(|r| r.rounds >= 2 && r.mismatches.errors == 0)
        );
    }
}

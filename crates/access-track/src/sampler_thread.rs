//! The thread that drives a [`WindowSampler`] on the clock: a window opens
//! every period and stays open for the sampler's current window length;
//! the tracker's `collect()` takes the counts gathered since its last call
//! without waiting, so sampling goes on while the engine plans and
//! migrates.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cpu_time::thread_cpu_time;
use crate::window_sampler::{FrameCounts, PageProbe, SamplerReport, WindowSampler};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the thread and the tracker share.
#[derive(Debug, Default)]
struct Shared {
    counts: Option<FrameCounts>,
    report: SamplerReport,
    /// The first error since the last collect.
    error: Option<BoxError>,
}

/// A running sampler thread; stops on drop.
#[derive(Debug)]
pub(crate) struct SamplerThread {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl SamplerThread {
    /// Starts `sampler` over `probe` on a thread named `name`.
    pub fn start<P>(name: &str, mut sampler: WindowSampler, mut probe: P) -> std::io::Result<Self>
    where
        P: PageProbe + Send + 'static,
    {
        let shared = Arc::new(Mutex::new(Shared {
            report: sampler.report(),
            ..Shared::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, halt) = (shared.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let period = sampler.settings().period();
                let mut next = Instant::now();
                while !halt.load(Ordering::SeqCst) {
                    let result = sampler.run_window(&mut probe, |w| sleep(&halt, w));
                    sampler.set_cpu_ns(thread_cpu_time().map_or(0, |t| t.as_nanos() as u64));
                    {
                        let mut shared = s.lock().unwrap_or_else(PoisonError::into_inner);
                        match result {
                            Ok(()) => merge(&mut shared.counts, sampler.take_counts()),
                            Err(e) => {
                                shared.error.get_or_insert_with(|| Box::new(e));
                            }
                        }
                        shared.report = sampler.report();
                    }
                    next += period;
                    let now = Instant::now();
                    // Behind (a busy host): skip the missed windows
                    // rather than run them back to back.
                    if next < now {
                        next = now;
                    }
                    sleep(&halt, next - now);
                }
            })?;
        Ok(SamplerThread {
            shared,
            stop,
            handle: Some(handle),
        })
    }

    /// The counts since the last take (`None`: no window finished), and the
    /// first error since then.
    pub fn take(&self) -> (Option<FrameCounts>, Option<BoxError>) {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        (shared.counts.take(), shared.error.take())
    }

    /// The sampler's totals as of its last window.
    pub fn report(&self) -> SamplerReport {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .report
    }
}

impl Drop for SamplerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            // A panic in the thread has nothing left to clean: armed pages
            // stay write-protected until the next harvest, like any page.
            let _ = h.join();
        }
    }
}

/// Adds `more` into `into`.
fn merge(into: &mut Option<FrameCounts>, more: FrameCounts) {
    match into {
        None => *into = Some(more),
        Some(c) => {
            for (a, b) in c.looks.iter_mut().zip(&more.looks) {
                *a = a.saturating_add(*b);
            }
            for (a, b) in c.hits.iter_mut().zip(&more.hits) {
                *a = a.saturating_add(*b);
            }
        }
    }
}

/// Sleeps `d` unless told to stop (the drop unparks the thread).
fn sleep(halt: &AtomicBool, d: Duration) {
    let deadline = Instant::now() + d;
    loop {
        let now = Instant::now();
        if now >= deadline || halt.load(Ordering::SeqCst) {
            return;
        }
        std::thread::park_timeout(deadline - now);
    }
}

//! The thread that drives a [`WindowSampler`] on the clock: a window opens
//! every period and stays open for the sampler's current window length;
//! the tracker's `collect()` takes the counts gathered since its last call
//! without waiting, so sampling goes on while the engine plans and
//! migrates.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::cpu_time::thread_cpu_time;
use crate::stoppable::StoppableThread;
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
    _thread: StoppableThread,
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
        let s = shared.clone();
        let thread = StoppableThread::spawn(name, move |halt| {
            let period = sampler.settings().period();
            let mut next = Instant::now();
            while !halt.stopping() {
                let result =
                    sampler.run_window(&mut probe, |w| halt.sleep_until(Instant::now() + w));
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
                halt.sleep_until(next);
            }
        })?;
        Ok(SamplerThread {
            shared,
            _thread: thread,
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

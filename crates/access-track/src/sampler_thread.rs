//! The thread that drives a [`WindowSampler`] on the clock: a window opens
//! every period and is peeked at until the next one opens, each peek's
//! evidence handed over at once;
//! the tracker's `collect()` takes the counts gathered since its last call
//! without waiting, so sampling goes on while the engine plans and
//! migrates.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::cpu_time::thread_cpu_time;
use crate::sample::{AccessSample, Coverage, TrackerError};
use crate::stoppable::{StopFlag, StoppableThread};
use crate::window_sampler::{
    Credit, FrameCounts, PageProbe, SamplerReport, WindowClock, WindowSampler,
};

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
            let frames = sampler.frames();
            let mut next = Instant::now();
            while !halt.stopping() {
                let mut clock = RealClock {
                    halt: &halt,
                    start: Instant::now(),
                    shared: &s,
                    frames,
                };
                let result = sampler.run_window(&mut probe, &mut clock);
                sampler.set_cpu_ns(thread_cpu_time().map_or(0, |t| t.as_nanos() as u64));
                {
                    let mut shared = s.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Err(e) = result {
                        shared.error.get_or_insert_with(|| Box::new(e));
                    }
                    shared.report = sampler.report();
                }
                // A window peeks until the period's end, so the next one
                // normally starts at once; after an error (the window cut
                // short) this waits out the period instead of spinning,
                // and a busy host's late windows are not run back to back.
                next += period;
                let now = Instant::now();
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

    /// Puts the counts since the last call into `sample` (its frames'
    /// hits as pages accessed, also as pages written when `writes`; its
    /// looks as the coverage: none at all when no peek credited any), or
    /// returns the first error since then as `tracker`'s.
    pub fn fill(
        &self,
        tracker: &str,
        sample: &mut AccessSample,
        writes: bool,
    ) -> Result<(), TrackerError> {
        let (counts, error) = {
            let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            (shared.counts.take(), shared.error.take())
        };
        if let Some(e) = error {
            return Err(TrackerError::collect(tracker, e));
        }
        let observed = match counts {
            Some(c) => {
                if writes {
                    sample.dirty.clone_from(&c.hits);
                }
                sample.accessed = c.hits;
                c.looks
            }
            None => vec![0; sample.frames()],
        };
        sample.coverage = Coverage::PerFrame(observed);
        Ok(())
    }

    /// The sampler's totals as of its last window.
    pub fn report(&self) -> SamplerReport {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .report
    }
}

/// Real time, cut short when the thread is asked to stop; hands each
/// peek's credits to the tracker at once.
struct RealClock<'a> {
    halt: &'a StopFlag,
    start: Instant,
    shared: &'a Mutex<Shared>,
    frames: usize,
}

impl WindowClock for RealClock<'_> {
    fn start(&mut self) {
        self.start = Instant::now();
    }

    fn wait_until(&mut self, offset: Duration) -> Duration {
        self.halt.sleep_until(self.start + offset);
        self.start.elapsed()
    }

    fn now(&mut self) -> Duration {
        self.start.elapsed()
    }

    fn peeked(&mut self, credits: &mut Vec<Credit>) {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        shared
            .counts
            .get_or_insert_with(|| FrameCounts::new(self.frames))
            .add(credits);
        credits.clear();
    }
}

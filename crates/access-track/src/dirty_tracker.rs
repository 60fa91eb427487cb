//! The `dirty-log` tracker: how often the guest writes each frame's pages,
//! read through the dirty log's single owner so the pre-copy migrator's
//! bits are not stolen. Writes only: a frame that is only read leaves no
//! evidence here (fault sampling sees reads).
//!
//! Arming a page (clearing its bit) write-protects it, and the guest's next
//! write to it takes a fault. By default the tracker therefore arms a
//! fixed budget of pages per second, whatever the guest's RAM: a
//! [`WindowSampler`] thread arms pages every period (200 ms by default),
//! the same number in every DAMON-style region, peeks at them at growing
//! offsets until the next period, and counts per frame the window-long
//! stretches (a few milliseconds, adaptive) that looked at one of its
//! pages until its first write, and how many ended in that write: a
//! frequency, where one bit per page and interval would mark nearly every
//! page of a busy guest. `collect()`
//! takes the counts gathered since its last call and never waits. Full
//! coverage (every page, the whole interval) is available for tests and
//! short measurements.

use std::sync::Arc;
use std::time::Instant;

use guest_memory::migrate::DirtySource;
use guest_memory::{FrameId, GpaRange, TieredMemory};

use crate::dirty_log::{DirtyConsumer, KvmDirtyLog};
use crate::dirty_probe::DirtyProbe;
use crate::sample::{AccessSample, AccessTracker, TrackerError, TrackerStatus};
use crate::sampler_thread::SamplerThread;
use crate::sampling_settings::SamplingSettings;
use crate::window_sampler::{SamplerReport, WindowSampler};

const PAGE: u64 = 4096;

/// Which pages the tracker observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirtyCoverage {
    /// Every page of every frame, every interval.
    Full,
    /// Windows of sampled pages on a fixed budget.
    Windowed(SamplingSettings),
}

/// How the tracker observes.
#[derive(Debug)]
enum Mode {
    Full {
        consumer: DirtyConsumer,
        /// All RAM.
        all: Vec<GpaRange>,
        pages: Vec<u64>,
    },
    Windowed(SamplerThread),
}

/// The dirty-log tracker of one VM.
#[derive(Debug)]
pub struct DirtyLogTracker {
    memory: Arc<TieredMemory>,
    coverage: DirtyCoverage,
    mode: Mode,
    last: Instant,
}

impl DirtyLogTracker {
    /// A tracker reading `log` for the RAM of `memory` with the windowed
    /// sampler at `settings` (valid: see [`SamplingSettings::validate`]).
    pub fn new(
        log: &KvmDirtyLog,
        memory: Arc<TieredMemory>,
        settings: SamplingSettings,
    ) -> std::io::Result<Self> {
        Self::with_coverage(log, memory, DirtyCoverage::Windowed(settings))
    }

    /// A tracker with the given coverage (windowed coverage starts the
    /// sampler thread, which stops when the tracker is dropped).
    pub fn with_coverage(
        log: &KvmDirtyLog,
        memory: Arc<TieredMemory>,
        coverage: DirtyCoverage,
    ) -> std::io::Result<Self> {
        let consumer = log.subscribe();
        let mode = match coverage {
            DirtyCoverage::Full => Mode::Full {
                consumer,
                all: memory
                    .regions()
                    .iter()
                    .map(|r| GpaRange::new(r.gpa, r.len))
                    .collect(),
                pages: Vec::new(),
            },
            DirtyCoverage::Windowed(settings) => {
                let pages_per_frame = (memory.frame_size() / PAGE).max(1);
                let seed = Instant::now().elapsed().as_nanos() as u64 ^ memory.frame_count() as u64;
                let sampler =
                    WindowSampler::new(memory.frame_count(), pages_per_frame, settings, seed);
                let probe = DirtyProbe::new(consumer, memory.clone());
                Mode::Windowed(SamplerThread::start("dirty-sampler", sampler, probe)?)
            }
        };
        Ok(DirtyLogTracker {
            memory,
            coverage,
            mode,
            last: Instant::now(),
        })
    }

    /// The coverage in use.
    pub fn coverage(&self) -> DirtyCoverage {
        self.coverage
    }
}

impl AccessTracker for DirtyLogTracker {
    fn name(&self) -> &str {
        "dirty-log"
    }

    fn collect(&mut self) -> Result<AccessSample, TrackerError> {
        let frames = self.memory.frames();
        let now = Instant::now();
        let mut sample = AccessSample::for_memory(&self.memory, now - self.last)?;
        match &mut self.mode {
            Mode::Full {
                consumer,
                all,
                pages,
            } => {
                pages.clear();
                if let Err(e) = consumer.take(all, pages) {
                    return Err(TrackerError::collect(self.name(), e));
                }
                if let Mode::Full { pages, .. } = &self.mode {
                    for &gpa in pages {
                        if let Some(f) = frames.frame_of_gpa(gpa).map(FrameId::index) {
                            sample.dirty[f] = sample.dirty[f].saturating_add(1);
                            sample.accessed[f] = sample.accessed[f].saturating_add(1);
                        }
                    }
                }
            }
            Mode::Windowed(thread) => thread.fill("dirty-log", &mut sample, true)?,
        }
        self.last = now;
        Ok(sample)
    }

    fn status(&self) -> TrackerStatus {
        let mut limitations =
            vec!["dirty-log: sees writes only; frames the guest only reads look cold".into()];
        if let DirtyCoverage::Windowed(s) = self.coverage {
            limitations.push(format!(
                "dirty-log: samples {} pages/s in windows every {} us",
                s.budget_pages_per_sec, s.window_period_us
            ));
        }
        TrackerStatus {
            sees_reads: false,
            sees_writes: true,
            limitations,
        }
    }

    fn sampler_report(&self) -> Option<SamplerReport> {
        match &self.mode {
            Mode::Windowed(thread) => Some(thread.report()),
            Mode::Full { .. } => None,
        }
    }
}

//! The `dirty-log` tracker: per interval, the 4 KiB pages of each frame
//! that KVM saw written (EPT/NPT dirty bits; shadow-page-table write
//! faults under PVM), read through the dirty log's single owner so the
//! pre-copy migrator's bits are not stolen. Writes only: a frame that is
//! only read leaves no evidence here (fault sampling sees reads).
//!
//! Re-arming a page (clearing its bit) write-protects it, and the guest's
//! next write to it takes a fault: re-arming every page each interval cost
//! a write-heavy guest most of its throughput on the development machines
//! (docs/benchmarks.md). By default the tracker therefore observes a
//! sample: each `collect()` arms a block of [`DEFAULT_SAMPLE_PAGES`] pages
//! per frame (at an offset that rotates each interval and differs between
//! frames, so every page is observed in turn), waits a short window
//! ([`DEFAULT_WINDOW`]) and reads which of them were written. The faults
//! scale with the sample; the short window makes the evidence a measure of
//! write frequency (a page written every few milliseconds shows, one
//! written a few times a second mostly does not), where a whole interval
//! would mark nearly every page of a busy guest. The read after the window
//! is a peek: it leaves the bits in KVM, so the pages written stay
//! writable and a page the guest keeps writing faults once per interval,
//! not again right after the window. Pages outside the sample keep their
//! bit set in KVM and stay writable. Full coverage (every page,
//! the whole interval) is available for tests and short measurements.

use std::sync::Arc;
use std::time::{Duration, Instant};

use guest_memory::FrameId;
use guest_memory::GpaRange;
use guest_memory::TieredMemory;
use guest_memory::migrate::DirtySource;

use crate::dirty_log::{DirtyConsumer, KvmDirtyLog};
use crate::sample::{AccessSample, AccessTracker, Coverage, TrackerError, TrackerStatus};

const PAGE: u64 = 4096;

/// Pages per frame observed each interval by default: few enough that the
/// write faults they cause stay a few percent of a busy guest's time, and
/// enough that a frame's ranking settles within a few intervals.
pub const DEFAULT_SAMPLE_PAGES: u32 = 16;
/// How long a sample is observed by default.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(20);

/// Which pages the tracker observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirtyCoverage {
    /// Every page of every frame, every interval.
    Full,
    /// A rotating block of `pages` pages per frame, observed for `window`
    /// at each collect.
    Sample {
        /// Pages per frame.
        pages: u32,
        /// How long `collect()` observes them (it blocks that long).
        window: Duration,
    },
}

/// The dirty-log tracker of one VM.
#[derive(Debug)]
pub struct DirtyLogTracker {
    consumer: DirtyConsumer,
    memory: Arc<TieredMemory>,
    coverage: DirtyCoverage,
    /// All RAM (full coverage; empty when sampling).
    all: Vec<GpaRange>,
    /// Intervals collected (rotates the sample).
    round: u64,
    last: Instant,
    pages: Vec<u64>,
}

impl DirtyLogTracker {
    /// A tracker reading `log` for the RAM of `memory`, sampling
    /// [`DEFAULT_SAMPLE_PAGES`] pages per frame for [`DEFAULT_WINDOW`] per
    /// interval.
    pub fn new(log: &KvmDirtyLog, memory: Arc<TieredMemory>) -> Self {
        let coverage = DirtyCoverage::Sample {
            pages: DEFAULT_SAMPLE_PAGES,
            window: DEFAULT_WINDOW,
        };
        Self::with_coverage(log, memory, coverage)
    }

    /// A tracker with the given coverage. A sample of at least a frame's
    /// pages is full coverage.
    pub fn with_coverage(
        log: &KvmDirtyLog,
        memory: Arc<TieredMemory>,
        coverage: DirtyCoverage,
    ) -> Self {
        let pages_per_frame = (memory.frame_size() / PAGE).max(1);
        let coverage = match coverage {
            DirtyCoverage::Sample { pages, .. }
                if pages > 0 && u64::from(pages) < pages_per_frame =>
            {
                coverage
            }
            _ => DirtyCoverage::Full,
        };
        let all = match coverage {
            DirtyCoverage::Full => memory
                .regions()
                .iter()
                .map(|r| GpaRange::new(r.gpa, r.len))
                .collect(),
            DirtyCoverage::Sample { .. } => Vec::new(),
        };
        DirtyLogTracker {
            consumer: log.subscribe(),
            memory,
            coverage,
            all,
            round: 0,
            last: Instant::now(),
            pages: Vec::new(),
        }
    }

    /// The coverage in use.
    pub fn coverage(&self) -> DirtyCoverage {
        self.coverage
    }

    /// The block of `k` pages of every frame observed in interval `round`.
    fn sample_spans(&self, k: u32, round: u64) -> Vec<GpaRange> {
        let frames = self.memory.frames();
        let pages_per_frame = (frames.frame_size() / PAGE).max(1);
        let k = u64::from(k);
        let blocks = (pages_per_frame / k).max(1);
        (0..frames.len())
            .filter_map(|f| {
                let block = block_of(f, round, blocks);
                frames
                    .gpa(FrameId(f))
                    .map(|g| GpaRange::new(g + block * k * PAGE, k * PAGE))
            })
            .collect()
    }

    fn collect_error(&self, e: impl std::error::Error + Send + Sync + 'static) -> TrackerError {
        TrackerError::Collect {
            tracker: self.name().to_owned(),
            source: Box::new(e),
        }
    }
}

/// The block (of `blocks`) of frame `frame` observed in interval `round`:
/// consecutive rounds walk every block, and neighbouring frames are at
/// different blocks in the same round.
fn block_of(frame: usize, round: u64, blocks: u64) -> u64 {
    round.wrapping_add(frame as u64 * 7) % blocks.max(1)
}

impl AccessTracker for DirtyLogTracker {
    fn name(&self) -> &str {
        "dirty-log"
    }

    fn collect(&mut self) -> Result<AccessSample, TrackerError> {
        let frames = self.memory.frames();
        let pages_per_frame = (frames.frame_size() / PAGE).max(1) as u32;
        self.pages.clear();
        let coverage = match self.coverage {
            DirtyCoverage::Full => {
                self.consumer
                    .take(&self.all, &mut self.pages)
                    .map_err(|e| self.collect_error(e))?;
                Coverage::Full
            }
            DirtyCoverage::Sample { pages, window } => {
                // Arming drops the sample's old bits (set since whenever),
                // so what the take reads was written inside the window.
                self.round = self.round.wrapping_add(1);
                let sample = self.sample_spans(pages, self.round);
                self.consumer
                    .reset(&sample)
                    .map_err(|e| self.collect_error(e))?;
                std::thread::sleep(window);
                self.consumer
                    .peek(&sample, &mut self.pages)
                    .map_err(|e| self.collect_error(e))?;
                Coverage::Fraction(f64::from(pages) / f64::from(pages_per_frame))
            }
        };
        let now = Instant::now();
        let mut sample = AccessSample::new(frames.len(), pages_per_frame, now - self.last)?;
        self.last = now;
        sample.coverage = coverage;
        for &gpa in &self.pages {
            if let Some(f) = frames.frame_of_gpa(gpa).map(FrameId::index) {
                sample.dirty[f] = sample.dirty[f].saturating_add(1);
                sample.accessed[f] = sample.accessed[f].saturating_add(1);
            }
        }
        Ok(sample)
    }

    fn status(&self) -> TrackerStatus {
        let mut limitations =
            vec!["dirty-log: sees writes only; frames the guest only reads look cold".into()];
        if let DirtyCoverage::Sample { pages, window } = self.coverage {
            limitations.push(format!(
                "dirty-log: observes a rotating sample of {pages} pages per frame for {} ms \
                 per interval",
                window.as_millis()
            ));
        }
        TrackerStatus {
            sees_reads: false,
            sees_writes: true,
            limitations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_of_every_frame_is_observed_in_turn() {
        let blocks = 32;
        for frame in [0usize, 1, 5, 1000] {
            let mut seen: Vec<u64> = (0..blocks).map(|r| block_of(frame, r, blocks)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..blocks).collect::<Vec<_>>(), "frame {frame}");
        }
        assert_ne!(block_of(0, 3, blocks), block_of(1, 3, blocks));
        assert_eq!(block_of(9, 4, 0), 0);
    }
}

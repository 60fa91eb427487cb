//! What a tracker reports each interval ([`AccessSample`]) and the trait
//! every tracker implements ([`AccessTracker`]).
//!
//! These types live here, below the tiering engine, so that trackers can
//! implement the trait without depending on the engine; the engine is
//! handed trackers as `Box<dyn AccessTracker>` and never learns how a
//! sample was gathered (KVM dirty log, userfaultfd sampling, A bits).

use std::time::Duration;

use thiserror::Error;

use guest_memory::TieredMemory;

use crate::window_sampler::SamplerReport;

/// Most 4 KiB pages per frame a sample can count (counts are `u16`): frames
/// up to 128 MiB. 1 GiB frames would need wider counts.
pub const MAX_PAGES_PER_FRAME: u32 = u16::MAX as u32;

/// Errors in the shape of a sample.
#[derive(Debug, Error, PartialEq)]
pub enum SampleError {
    /// `pages_per_frame` is 0 or does not fit the `u16` counts.
    #[error("pages per frame {pages} not in 1..={MAX_PAGES_PER_FRAME}")]
    PagesPerFrame {
        /// The value given.
        pages: u32,
    },
    /// `accessed`, `dirty` and the per-frame coverage differ in length.
    #[error("{what} has {len} entries for {frames} frames")]
    Length {
        /// Which array.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The number of frames (`accessed.len()`).
        frames: usize,
    },
    /// A coverage fraction outside `[0, 1]` or not finite.
    #[error("coverage fraction {fraction} not in [0, 1]")]
    Fraction {
        /// The value given.
        fraction: f64,
    },
}

/// Which pages a tracker looked at during the interval. Evidence of a frame
/// is scaled by `pages_per_frame / observed pages` to estimate the whole
/// frame; a frame with nothing observed carries no evidence at all (which is
/// not the same as evidence of no access).
#[derive(Clone, Debug, PartialEq)]
pub enum Coverage {
    /// Every page of every frame (dirty log, access log).
    Full,
    /// The same share of every frame's pages, in `[0, 1]`.
    Fraction(f64),
    /// Pages observed in each frame (fault sampling with rotating frames),
    /// or page-windows for a windowed sampler, which may look at a page in
    /// many windows: values above `pages_per_frame` mean evidence gathered
    /// over several windows, and the counts are then per window on
    /// average.
    PerFrame(Vec<u16>),
}

/// One interval of access evidence, per frame, as a struct of arrays.
///
/// `accessed[f]` counts the observed 4 KiB pages of frame `f` seen accessed
/// in any way (a write is an access too; consumers use
/// `max(accessed, dirty)`, so a tracker that sees only writes may leave
/// `accessed` at 0). `dirty[f]` counts the observed pages seen written.
/// Counts above the observed pages are clamped by consumers.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessSample {
    /// 4 KiB pages per frame (512 for 2 MiB frames).
    pub pages_per_frame: u32,
    /// How long the interval lasted.
    pub interval: Duration,
    /// Pages seen accessed, per frame.
    pub accessed: Vec<u16>,
    /// Pages seen written, per frame.
    pub dirty: Vec<u16>,
    /// Which pages were observed.
    pub coverage: Coverage,
}

impl AccessSample {
    /// An all-zero sample with full coverage.
    pub fn new(
        frames: usize,
        pages_per_frame: u32,
        interval: Duration,
    ) -> Result<Self, SampleError> {
        let sample = AccessSample {
            pages_per_frame,
            interval,
            accessed: vec![0; frames],
            dirty: vec![0; frames],
            coverage: Coverage::Full,
        };
        sample.validate()?;
        Ok(sample)
    }

    /// An all-zero sample over the frames of `memory` (its 4 KiB pages
    /// per frame), full coverage: what every tracker's `collect()` fills.
    pub fn for_memory(memory: &TieredMemory, interval: Duration) -> Result<Self, SampleError> {
        let pages = u32::try_from((memory.frame_size() / 4096).max(1)).unwrap_or(u32::MAX);
        Self::new(memory.frame_count(), pages, interval)
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.accessed.len()
    }

    /// Zeroes every count and sets a new interval, keeping the allocations
    /// (and the coverage, whose per-frame counts are zeroed too), so a
    /// tracker can reuse one sample.
    pub fn clear(&mut self, interval: Duration) {
        self.interval = interval;
        self.accessed.fill(0);
        self.dirty.fill(0);
        if let Coverage::PerFrame(observed) = &mut self.coverage {
            observed.fill(0);
        }
    }

    /// Share of `frame`'s pages observed, in `[0, 1]`; `None` if there is
    /// no such frame.
    pub fn observed_fraction(&self, frame: usize) -> Option<f64> {
        let pages = f64::from(self.pages_per_frame);
        self.observed(frame).map(|o| o.min(pages) / pages)
    }

    /// Pages of `frame` observed, or page-windows for a windowed sampler
    /// (then possibly more than the frame's pages); `None` if there is no
    /// such frame. The counts of the frame are out of this many.
    pub fn observed(&self, frame: usize) -> Option<f64> {
        if frame >= self.frames() {
            return None;
        }
        let pages = f64::from(self.pages_per_frame);
        Some(match &self.coverage {
            Coverage::Full => pages,
            Coverage::Fraction(f) => f.clamp(0.0, 1.0) * pages,
            Coverage::PerFrame(observed) => f64::from(*observed.get(frame)?),
        })
    }

    /// Checks the shape (lengths, page count, fraction range); constant
    /// time, the counts themselves are not read.
    pub fn validate(&self) -> Result<(), SampleError> {
        if !(1..=MAX_PAGES_PER_FRAME).contains(&self.pages_per_frame) {
            return Err(SampleError::PagesPerFrame {
                pages: self.pages_per_frame,
            });
        }
        let frames = self.frames();
        let lengths = [
            ("dirty", Some(self.dirty.len())),
            (
                "coverage",
                match &self.coverage {
                    Coverage::PerFrame(observed) => Some(observed.len()),
                    _ => None,
                },
            ),
        ];
        for (what, len) in lengths {
            if let Some(len) = len.filter(|&len| len != frames) {
                return Err(SampleError::Length { what, len, frames });
            }
        }
        if let Coverage::Fraction(fraction) = self.coverage {
            if !(0.0..=1.0).contains(&fraction) {
                return Err(SampleError::Fraction { fraction });
            }
        }
        Ok(())
    }
}

/// What a tracker can and cannot see on this host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackerStatus {
    /// Whether reads leave evidence (A bits, fault sampling).
    pub sees_reads: bool,
    /// Whether writes leave evidence.
    pub sees_writes: bool,
    /// What the tracker could not do, one line each, naming the tracker
    /// (e.g. "access-log: host kernel lacks KVM_GET_ACCESS_LOG").
    pub limitations: Vec<String>,
}

/// Errors of collecting a sample.
#[derive(Debug, Error)]
pub enum TrackerError {
    /// The tracker's mechanism failed.
    #[error("{tracker}: collecting a sample")]
    Collect {
        /// The tracker's name.
        tracker: String,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The tracker produced a malformed sample.
    #[error("malformed access sample")]
    Sample(#[from] SampleError),
}

impl TrackerError {
    /// A failed `collect()` of the tracker named `tracker`.
    pub fn collect(tracker: &str, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        TrackerError::Collect {
            tracker: tracker.to_owned(),
            source: e.into(),
        }
    }
}

/// A source of per-interval access evidence. The engine calls
/// [`collect`](AccessTracker::collect) once per interval from its own
/// thread; each call reports what happened since the previous one.
pub trait AccessTracker: Send {
    /// Short name (`dirty-log`, `fault-sample`, `access-log`).
    fn name(&self) -> &str;

    /// The evidence gathered since the last call.
    fn collect(&mut self) -> Result<AccessSample, TrackerError>;

    /// What this tracker sees and what it could not do on this host.
    fn status(&self) -> TrackerStatus;

    /// The windowed sampler's totals, for trackers that have one.
    fn sampler_report(&self) -> Option<SamplerReport> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn new_sample_is_zero_with_full_coverage() {
        let s = AccessSample::new(3, 512, SEC).unwrap();
        assert_eq!(s.frames(), 3);
        assert_eq!(s.accessed, vec![0; 3]);
        assert_eq!(s.observed_fraction(2), Some(1.0));
        assert_eq!(s.observed_fraction(3), None);
    }

    #[test]
    fn page_count_must_fit_the_counts() {
        assert_eq!(
            AccessSample::new(1, 0, SEC),
            Err(SampleError::PagesPerFrame { pages: 0 })
        );
        // 1 GiB frames: 262144 pages do not fit u16 counts.
        assert!(AccessSample::new(1, 262_144, SEC).is_err());
        assert!(AccessSample::new(1, MAX_PAGES_PER_FRAME, SEC).is_ok());
    }

    #[test]
    fn mismatched_lengths_and_fractions_are_rejected() {
        let mut s = AccessSample::new(4, 512, SEC).unwrap();
        s.dirty.pop();
        assert_eq!(
            s.validate(),
            Err(SampleError::Length {
                what: "dirty",
                len: 3,
                frames: 4
            })
        );
        s.dirty.push(0);
        s.coverage = Coverage::PerFrame(vec![1; 5]);
        assert!(matches!(
            s.validate(),
            Err(SampleError::Length {
                what: "coverage",
                ..
            })
        ));
        for bad in [f64::NAN, -0.1, 1.5, f64::INFINITY] {
            s.coverage = Coverage::Fraction(bad);
            assert!(s.validate().is_err(), "{bad}");
        }
        s.coverage = Coverage::Fraction(0.25);
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s.observed_fraction(0), Some(0.25));
    }

    #[test]
    fn per_frame_coverage_is_a_share_of_the_frame() {
        let mut s = AccessSample::new(3, 512, SEC).unwrap();
        s.coverage = Coverage::PerFrame(vec![0, 128, 9999]);
        assert_eq!(s.observed_fraction(0), Some(0.0));
        assert_eq!(s.observed_fraction(1), Some(0.25));
        assert_eq!(s.observed_fraction(2), Some(1.0));
    }

    #[test]
    fn clear_zeroes_counts_and_keeps_allocations() {
        let mut s = AccessSample::new(2, 512, SEC).unwrap();
        s.accessed[0] = 7;
        s.dirty[1] = 3;
        s.coverage = Coverage::PerFrame(vec![16, 16]);
        s.clear(2 * SEC);
        assert_eq!(s.interval, 2 * SEC);
        assert_eq!(s.accessed, vec![0, 0]);
        assert_eq!(s.dirty, vec![0, 0]);
        assert_eq!(s.coverage, Coverage::PerFrame(vec![0, 0]));
    }
}

//! The `combined` tracker: several trackers (dirty log and fault sampling)
//! collected together, their evidence merged per frame.
//!
//! Merge, per frame: each tracker's counts are scaled to the whole frame
//! by the share of it that tracker observed (trackers that observed
//! nothing of the frame are left out); the merged frame counts as observed
//! as far as the tracker that observed most of it, and its accessed and
//! written pages are the **largest** estimates of any tracker (union
//! semantics, not a sum: both trackers see the same writes, and adding
//! them would count a write twice). So a frame the dirty log saw written
//! and the sampler saw read is hot by both, a frame only read is hot by
//! the sampler, and a frame that either tracker saw busier wins that
//! tracker's figure.

use thiserror::Error;

use crate::sample::{AccessSample, AccessTracker, Coverage, TrackerError, TrackerStatus};
use crate::window_sampler::SamplerReport;

/// Samples that cannot be merged.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CombineError {
    /// No samples.
    #[error("nothing to combine")]
    Empty,
    /// Samples of different frame counts or frame sizes.
    #[error(
        "sample {index} has {frames} frames of {pages} pages, the first {want_frames} of {want_pages}"
    )]
    Shape {
        /// Position of the odd sample.
        index: usize,
        /// Its frames.
        frames: usize,
        /// Its pages per frame.
        pages: u32,
        /// Frames of the first sample.
        want_frames: usize,
        /// Pages per frame of the first sample.
        want_pages: u32,
    },
}

/// Merges samples of the same interval (see the module docs).
pub fn combine(samples: &[AccessSample]) -> Result<AccessSample, CombineError> {
    let first = samples.first().ok_or(CombineError::Empty)?;
    let (frames, ppf) = (first.frames(), first.pages_per_frame);
    for (index, s) in samples.iter().enumerate() {
        if s.frames() != frames || s.pages_per_frame != ppf || s.validate().is_err() {
            return Err(CombineError::Shape {
                index,
                frames: s.frames(),
                pages: s.pages_per_frame,
                want_frames: frames,
                want_pages: ppf,
            });
        }
    }
    let pages = f64::from(ppf);
    let full = samples.iter().all(|s| s.coverage == Coverage::Full);
    let mut out = AccessSample {
        pages_per_frame: ppf,
        interval: samples.iter().map(|s| s.interval).max().unwrap_or_default(),
        accessed: vec![0; frames],
        dirty: vec![0; frames],
        coverage: Coverage::Full,
    };
    let mut observed_out = vec![0u16; frames];
    for (f, observed_f) in observed_out.iter_mut().enumerate() {
        let (mut observed, mut accessed, mut dirty) = (0.0f64, 0.0f64, 0.0f64);
        for s in samples {
            let seen = s.observed(f).unwrap_or(0.0);
            if seen < 1.0 {
                continue;
            }
            let scale = pages / seen;
            let a = f64::from(s.accessed[f].max(s.dirty[f])).min(seen);
            let d = f64::from(s.dirty[f]).min(seen);
            observed = observed.max(seen);
            accessed = accessed.max(a * scale);
            dirty = dirty.max(d * scale);
        }
        // Back from whole-frame estimates to counts over the observed pages.
        let share = observed / pages;
        *observed_f = observed.round().min(f64::from(u16::MAX)) as u16;
        out.accessed[f] = (accessed * share).round().min(observed) as u16;
        out.dirty[f] = (dirty * share).round().min(observed) as u16;
    }
    if !full {
        out.coverage = Coverage::PerFrame(observed_out);
    }
    Ok(out)
}

/// Several trackers collected together; named `combined`.
#[derive(Debug)]
pub struct CombinedTracker {
    trackers: Vec<Box<dyn AccessTracker>>,
}

impl std::fmt::Debug for dyn AccessTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl CombinedTracker {
    /// The union of `trackers` (at least one).
    pub fn new(trackers: Vec<Box<dyn AccessTracker>>) -> Self {
        CombinedTracker { trackers }
    }

    /// The trackers combined.
    pub fn trackers(&self) -> &[Box<dyn AccessTracker>] {
        &self.trackers
    }
}

impl AccessTracker for CombinedTracker {
    fn name(&self) -> &str {
        "combined"
    }

    fn collect(&mut self) -> Result<AccessSample, TrackerError> {
        let samples = self
            .trackers
            .iter_mut()
            .map(|t| t.collect())
            .collect::<Result<Vec<_>, _>>()?;
        combine(&samples).map_err(|e| TrackerError::Collect {
            tracker: "combined".into(),
            source: Box::new(e),
        })
    }

    fn status(&self) -> TrackerStatus {
        let mut status = TrackerStatus::default();
        for t in &self.trackers {
            let s = t.status();
            status.sees_reads |= s.sees_reads;
            status.sees_writes |= s.sees_writes;
            status.limitations.extend(s.limitations);
        }
        status
    }

    fn sampler_report(&self) -> Option<SamplerReport> {
        self.trackers.iter().find_map(|t| t.sampler_report())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn sample(accessed: &[u16], dirty: &[u16], coverage: Coverage) -> AccessSample {
        AccessSample {
            pages_per_frame: 512,
            interval: Duration::from_millis(200),
            accessed: accessed.to_vec(),
            dirty: dirty.to_vec(),
            coverage,
        }
    }

    #[test]
    fn union_takes_the_larger_whole_frame_estimate() {
        // Dirty log: frame 0 written on 100 pages, frame 1 nothing.
        let dl = sample(&[0, 0, 0], &[100, 0, 0], Coverage::Full);
        // Sampler watched 64 pages of frames 0 and 1, none of frame 2:
        // frame 0 touched on 32 (half the frame), frame 1 on 16 (a quarter).
        let fs = sample(
            &[32, 16, 0],
            &[0, 0, 0],
            Coverage::PerFrame(vec![64, 64, 0]),
        );
        let c = combine(&[dl, fs]).unwrap();
        assert_eq!(c.coverage, Coverage::PerFrame(vec![512, 512, 512]));
        assert_eq!(c.accessed, [256, 128, 0], "half and a quarter of the frame");
        assert_eq!(c.dirty, [100, 0, 0], "written pages from the dirty log");
    }

    #[test]
    fn same_evidence_twice_is_not_counted_twice() {
        let a = sample(&[10], &[10], Coverage::Full);
        let c = combine(&[a.clone(), a.clone()]).unwrap();
        assert_eq!(c, a);
    }

    #[test]
    fn frames_nobody_observed_stay_unobserved() {
        let fs = sample(&[3, 0], &[1, 0], Coverage::PerFrame(vec![8, 0]));
        let c = combine(&[fs.clone(), fs]).unwrap();
        assert_eq!(c.coverage, Coverage::PerFrame(vec![8, 0]));
        assert_eq!((c.accessed[0], c.dirty[0]), (3, 1));
    }

    #[test]
    fn mismatched_samples_are_refused() {
        let a = sample(&[0, 0], &[0, 0], Coverage::Full);
        let b = sample(&[0], &[0], Coverage::Full);
        assert!(matches!(
            combine(&[a, b]),
            Err(CombineError::Shape { index: 1, .. })
        ));
        assert_eq!(combine(&[]), Err(CombineError::Empty));
    }
}

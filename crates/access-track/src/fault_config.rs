//! Settings of the fault sampler: how many 4 KiB pages it zaps, how they
//! are spread over frames and time, and how long a zapped page is watched.

use std::time::Duration;

use thiserror::Error;

/// Invalid fault-sampler settings.
#[derive(Debug, Error, PartialEq)]
pub enum FaultConfigError {
    /// A count is zero.
    #[error("{what} must be at least 1")]
    Zero {
        /// Which setting.
        what: &'static str,
    },
    /// A duration is zero, or the watch window is longer than a round.
    #[error("watch window {window:?} must be non-zero and at most the round {round:?}")]
    Window {
        /// The watch window.
        window: Duration,
        /// The round.
        round: Duration,
    },
    /// The interval is shorter than a round.
    #[error("interval {interval:?} is shorter than a round {round:?}")]
    Interval {
        /// The interval.
        interval: Duration,
        /// The round.
        round: Duration,
    },
}

/// How many pages the sampler zaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleBudget {
    /// Every frame gets this many pages (one contiguous run at a random
    /// offset, capped at the frame) once per `interval`: rounds take the
    /// frames in turn, so every frame is seen each interval.
    PagesPerFrame(u32),
    /// This many pages per second over all frames, in visits of
    /// `visit_pages` pages; frames are taken in turn, so each is seen
    /// every `frames × visit_pages / budget` seconds.
    PagesPerSecond(u64),
}

/// Fault-sampler settings.
///
/// The sampler works in rounds of `round`: it zaps one run of pages in
/// each of the round's frames, counts the runs' pages touched within
/// `window`, then maps the untouched ones back (one `UFFDIO_CONTINUE` per
/// run, no fault). A page touched within the window counts as accessed:
/// for a page accessed at rate λ that happens with probability
/// `1 − e^(−λ·window)`, about λ·window for cold pages, so the counts
/// estimate access frequency, not just "touched at all", until pages are
/// hot enough to be touched within every window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultSampleConfig {
    /// How many pages to zap.
    pub budget: SampleBudget,
    /// The tracker's collection interval (the period of
    /// [`SampleBudget::PagesPerFrame`]).
    pub interval: Duration,
    /// Pages per frame visit with [`SampleBudget::PagesPerSecond`].
    pub visit_pages: u32,
    /// How long a zapped page is watched.
    pub window: Duration,
    /// Period of the rounds.
    pub round: Duration,
    /// Seed of the run offsets.
    pub seed: u64,
}

impl Default for FaultSampleConfig {
    /// 4 pages per frame per 200 ms interval, 8 ms watch window, 10 ms
    /// rounds: what the KVM tests validate (see docs/tracking.md for what
    /// it costs, and why more pages per round is not better here).
    fn default() -> Self {
        FaultSampleConfig {
            budget: SampleBudget::PagesPerFrame(4),
            interval: Duration::from_millis(200),
            visit_pages: 4,
            window: Duration::from_millis(8),
            round: Duration::from_millis(10),
            seed: 0x5a4d_504c_4552,
        }
    }
}

impl FaultSampleConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), FaultConfigError> {
        match self.budget {
            SampleBudget::PagesPerFrame(0) => {
                return Err(FaultConfigError::Zero {
                    what: "pages per frame",
                });
            }
            SampleBudget::PagesPerSecond(0) => {
                return Err(FaultConfigError::Zero {
                    what: "pages per second",
                });
            }
            _ => {}
        }
        if self.visit_pages == 0 {
            return Err(FaultConfigError::Zero {
                what: "visit pages",
            });
        }
        if self.window.is_zero() || self.window > self.round {
            return Err(FaultConfigError::Window {
                window: self.window,
                round: self.round,
            });
        }
        if self.interval < self.round {
            return Err(FaultConfigError::Interval {
                interval: self.interval,
                round: self.round,
            });
        }
        Ok(())
    }

    /// Pages per visit and frames per round for `frames` frames of
    /// `pages_per_frame` pages.
    pub fn plan(&self, frames: usize, pages_per_frame: u32) -> (u32, usize) {
        let round = self.round.as_secs_f64();
        match self.budget {
            SampleBudget::PagesPerFrame(n) => {
                let rounds = (self.interval.as_secs_f64() / round).floor().max(1.0);
                (
                    n.min(pages_per_frame),
                    (frames as f64 / rounds).ceil() as usize,
                )
            }
            SampleBudget::PagesPerSecond(b) => {
                let visit = self.visit_pages.min(pages_per_frame);
                let per_round = (b as f64 * round / f64::from(visit)).ceil() as usize;
                (visit, per_round.clamp(1, frames.max(1)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_sees_every_frame_each_interval() {
        let c = FaultSampleConfig::default();
        assert_eq!(c.validate(), Ok(()));
        // 20 rounds per interval: 256 frames in rounds of 13.
        assert_eq!(c.plan(256, 512), (4, 13));
    }

    #[test]
    fn budget_per_second_sets_frames_per_round() {
        let c = FaultSampleConfig {
            budget: SampleBudget::PagesPerSecond(64_000),
            visit_pages: 32,
            ..Default::default()
        };
        // 640 pages per 10 ms round in visits of 32 pages.
        assert_eq!(c.plan(1000, 512), (32, 20));
        assert_eq!(c.plan(5, 512), (32, 5), "at most every frame once");
        assert_eq!(c.plan(5, 16), (16, 5), "visits fit the frame");
    }

    #[test]
    fn bad_settings_are_rejected() {
        let ok = FaultSampleConfig::default();
        for bad in [
            FaultSampleConfig {
                budget: SampleBudget::PagesPerFrame(0),
                ..ok
            },
            FaultSampleConfig {
                budget: SampleBudget::PagesPerSecond(0),
                ..ok
            },
            FaultSampleConfig {
                visit_pages: 0,
                ..ok
            },
            FaultSampleConfig {
                window: Duration::ZERO,
                ..ok
            },
            FaultSampleConfig {
                window: Duration::from_millis(20),
                ..ok
            },
            FaultSampleConfig {
                interval: Duration::from_millis(5),
                ..ok
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}

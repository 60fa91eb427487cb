//! The heat model: per frame, decayed access evidence, an estimate of the
//! frame's distinct hot 4 KiB pages and whether its accesses recur, updated
//! from one tracker sample per interval.
//!
//! State is a few arrays (struct of arrays); an update is one pass over
//! them and the sample, with no allocation: 512 Ki frames (1 TiB of 2 MiB
//! frames) update in about 3 ms on one core of the development machine
//! (`cargo bench -p tiering`).

use std::time::Duration;

use thiserror::Error;

use access_track::{AccessSample, Coverage, MAX_PAGES_PER_FRAME, SampleError};

use crate::heat_settings::{HeatSettings, HeatSettingsError};

/// Most frames a model holds (the harness ranks frame indices as `u32`:
/// `oracle::ranking`).
const MAX_FRAMES: usize = u32::MAX as usize;

/// Errors of the heat model.
#[derive(Debug, Error, PartialEq)]
pub enum HeatError {
    /// The settings are invalid.
    #[error("invalid heat settings")]
    Config(#[from] HeatSettingsError),
    /// More frames than a model ranks.
    #[error("{frames} frames exceed the {MAX_FRAMES} a heat model holds")]
    TooManyFrames {
        /// Frames asked for.
        frames: usize,
    },
    /// `pages_per_frame` is 0 or too large for sample counts.
    #[error("pages per frame {pages} not in 1..={MAX_PAGES_PER_FRAME}")]
    PagesPerFrame {
        /// The value given.
        pages: u32,
    },
    /// The sample is malformed.
    #[error("malformed access sample")]
    Sample(#[from] SampleError),
    /// The sample covers a different number of frames.
    #[error("sample has {sample} frames, the heat model {model}")]
    FrameCount {
        /// Frames in the sample.
        sample: usize,
        /// Frames in the model.
        model: usize,
    },
    /// The sample counts pages of a different frame size.
    #[error("sample has {sample} pages per frame, the heat model {model}")]
    SamplePages {
        /// Pages per frame of the sample.
        sample: u32,
        /// Pages per frame of the model.
        model: u32,
    },
}

/// Heat and hot-page estimates of a fixed set of frames.
///
/// Per interval, a frame's observed pages are split into pages written
/// (`dirty`) and pages only read (`max(accessed, dirty) - dirty`), both
/// scaled up by `pages_per_frame / observed` when the tracker sampled
/// (counts above the observed pages are clamped, each class on its own, so
/// more evidence of either kind never cools a frame). A windowed tracker
/// observes pages in many short windows, so `observed` counts page-windows
/// and may exceed the frame's pages: the scaled evidence is then pages
/// touched per window, a frequency. Then
///
/// * heat ← heat × decay + `read_weight` × read + `write_weight` × written
///   (a decayed sum: a frame touched at a steady rate settles at
///   rate / (1 − decay));
/// * hot pages ← hot pages × decay + (1 − decay) × touched (a decayed
///   average: the number of the frame's pages touched per interval, in
///   `[0, pages_per_frame]`);
///
/// * variance ← variance × decay² + scale² × n × (`read_weight`² ×
///   p̃_read (1 − p̃_read) + `write_weight`² × p̃_written (1 −
///   p̃_written)), with n the pages (or page-windows) observed and p̃ =
///   (count + ½ + n × r̄) / (2n + 1), r̄ the frame's decayed average
///   ratio of that class before this interval: the heat's binomial
///   sampling variance, which the planner's significance test reads
///   ([`heat_sd`](HeatModel::heat_sd)). The half-count keeps a frame seen
///   in few windows uncertain even when every look agreed, and a frame
///   whose pages are caught in every window (saturated) certain once it
///   was looked at often. The ratio is pulled halfway to the frame's
///   history because an interval's own ratio is at its most extreme
///   exactly when it is an outlier: a cold frame whose six sampled pages
///   all happened to be caught in their first look (one interval in a few
///   thousand) read as p̃ = 0.93, so its heat jumped sixfold with a
///   variance that called the jump certain, and it displaced an equally
///   cold fast frame about once a minute;
///
/// with decay = 2^(−interval / half-life). A frame the tracker did not
/// observe at all in an interval keeps its values: nothing is known of it,
/// so rotating samplers and large sampling regions do not cool frames
/// merely for not looking at them. When it is observed again after `g`
/// unseen seconds, the unseen time is taken to have gone like the interval
/// now observed: the old values decay over `g + interval` and the new
/// evidence counts for every interval of it (weight `(1 − decay_g) / (1 −
/// decay)`, its variance by the square: one observation, not several), so
/// a frame seen rarely follows a change as fast as one seen every
/// interval.
///
/// A frame also records whether it **recurs**: whether, at its last
/// sighting (an observation that caught any page touched), the look before
/// also caught one, or the sighting before came within one half-life
/// ([`recurring`](HeatModel::recurring)). Two looks in a row count however
/// far apart they were, so a frame a sparse sampler looks at every few
/// seconds (a large guest's wide regions) can recur too. Heat
/// alone cannot tell a frame written once (a guest zeroing or
/// initialising its memory) from one that has just begun a steady rate;
/// the planner promotes only recurring frames (as the kernel's NUMA
/// balancing migrates a page only on its second hint fault from a node),
/// so a one-off burst costs no copy.
#[derive(Clone, Debug)]
pub struct HeatModel {
    config: HeatSettings,
    pages_per_frame: u32,
    heat: Vec<f64>,
    variance: Vec<f64>,
    hot_pages: Vec<f64>,
    /// Decayed average hit ratio per frame, `[read, written]` (the r̄ of
    /// the variance).
    ratios: Vec<[f32; 2]>,
    /// Seconds since each frame was last observed (0 when it was observed
    /// in the last update).
    unseen: Vec<f32>,
    /// Seconds since each frame was last seen touched (infinite before).
    since_hit: Vec<f32>,
    /// Whether each frame recurs (above).
    recurring: Vec<bool>,
    /// Whether each frame's last observation caught a touch.
    last_look_hit: Vec<bool>,
    /// `pages_per_frame / n` for `n` observed pages (index 0 unused), so
    /// sampled updates multiply instead of divide.
    scale_of_observed: Vec<f64>,
    updates: u64,
}

impl HeatModel {
    /// A model of `frames` frames of `pages_per_frame` 4 KiB pages, all cold.
    pub fn new(
        frames: usize,
        pages_per_frame: u32,
        config: HeatSettings,
    ) -> Result<Self, HeatError> {
        config.validate()?;
        if frames > MAX_FRAMES {
            return Err(HeatError::TooManyFrames { frames });
        }
        if !(1..=MAX_PAGES_PER_FRAME).contains(&pages_per_frame) {
            return Err(HeatError::PagesPerFrame {
                pages: pages_per_frame,
            });
        }
        let pages = f64::from(pages_per_frame);
        let scale_of_observed = (0..=u32::from(u16::MAX))
            .map(|n| if n == 0 { 0.0 } else { pages / f64::from(n) })
            .collect();
        Ok(HeatModel {
            config,
            pages_per_frame,
            heat: vec![0.0; frames],
            variance: vec![0.0; frames],
            hot_pages: vec![0.0; frames],
            ratios: vec![[0.0; 2]; frames],
            unseen: vec![0.0; frames],
            since_hit: vec![f32::INFINITY; frames],
            recurring: vec![false; frames],
            last_look_hit: vec![false; frames],
            scale_of_observed,
            updates: 0,
        })
    }

    /// Folds one interval's sample in.
    pub fn update(&mut self, sample: &AccessSample) -> Result<(), HeatError> {
        sample.validate()?;
        if sample.frames() != self.len() {
            return Err(HeatError::FrameCount {
                sample: sample.frames(),
                model: self.len(),
            });
        }
        if sample.pages_per_frame != self.pages_per_frame {
            return Err(HeatError::SamplePages {
                sample: sample.pages_per_frame,
                model: self.pages_per_frame,
            });
        }
        let step = Step::new(&self.config, sample, self.pages_per_frame);
        // One loop per coverage kind, each with its own `look` (per frame:
        // `Some((observed, scale))` when the tracker looked), so the
        // per-frame loop carries no match.
        match &sample.coverage {
            Coverage::Full => self.fold(&step, sample, |_| Some((step.pages, 1.0))),
            Coverage::Fraction(fraction) => {
                let observed = fraction * step.pages;
                let scale = step.pages / observed;
                // A share so small that scaling overflows is no observation.
                let look = (observed > 0.0 && scale.is_finite()).then_some((observed, scale));
                self.fold(&step, sample, |_| look);
            }
            Coverage::PerFrame(observed) => {
                let scales = std::mem::take(&mut self.scale_of_observed);
                self.fold(&step, sample, |frame| {
                    let n = observed[frame];
                    (n > 0).then(|| (f64::from(n), scales[usize::from(n)]))
                });
                self.scale_of_observed = scales;
            }
        }
        self.updates += 1;
        Ok(())
    }

    /// Folds `sample`'s counts into every frame that `look` says was
    /// observed; the others only age.
    #[inline(always)]
    fn fold(
        &mut self,
        step: &Step,
        sample: &AccessSample,
        look: impl Fn(usize) -> Option<(f64, f64)>,
    ) {
        let interval = sample.interval.as_secs_f32();
        let window = self.config.half_life_secs() as f32;
        let frames = self
            .heat
            .iter_mut()
            .zip(self.variance.iter_mut())
            .zip(self.hot_pages.iter_mut().zip(self.ratios.iter_mut()))
            .zip(self.unseen.iter_mut())
            .zip(
                self.since_hit
                    .iter_mut()
                    .zip(self.recurring.iter_mut().zip(self.last_look_hit.iter_mut())),
            )
            .zip(sample.accessed.iter().zip(&sample.dirty));
        for (
            frame,
            (
                ((((heat, var), (hot, ratios)), unseen), (since_hit, (recurring, last_hit))),
                (&accessed, &dirty),
            ),
        ) in frames.enumerate()
        {
            *since_hit += interval;
            let Some((observed, scale)) = look(frame) else {
                *unseen += interval;
                continue;
            };
            let pace = step.pace(std::mem::take(unseen));
            step.apply(
                [heat, var, hot],
                ratios,
                pace,
                [accessed, dirty],
                observed,
                scale,
            );
            let hit = accessed.max(dirty) > 0;
            if hit {
                *recurring = *last_hit || *since_hit <= window;
                *since_hit = 0.0;
            }
            *last_hit = hit;
        }
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.heat.len()
    }

    /// Whether the model has no frames.
    pub fn is_empty(&self) -> bool {
        self.heat.is_empty()
    }

    /// 4 KiB pages per frame.
    pub fn pages_per_frame(&self) -> u32 {
        self.pages_per_frame
    }

    /// The settings in use.
    pub fn config(&self) -> &HeatSettings {
        &self.config
    }

    /// Changes the settings from the next update on (policy changes at run
    /// time); the evidence gathered so far is kept.
    pub fn set_config(&mut self, config: HeatSettings) -> Result<(), HeatError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Samples folded in so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Heat of `frame`.
    pub fn heat(&self, frame: usize) -> Option<f64> {
        self.heat.get(frame).copied()
    }

    /// Standard deviation of `frame`'s heat from sampling alone (0 for a
    /// frame never seen accessed).
    pub fn heat_sd(&self, frame: usize) -> Option<f64> {
        self.variance.get(frame).map(|v| v.sqrt())
    }

    /// Sampling variance of every frame's heat, by frame index.
    pub fn variances(&self) -> &[f64] {
        &self.variance
    }

    /// Estimated distinct 4 KiB pages of `frame` touched per interval.
    pub fn hot_pages(&self, frame: usize) -> Option<f64> {
        self.hot_pages.get(frame).copied()
    }

    /// Heat of every frame, by frame index.
    pub fn heats(&self) -> &[f64] {
        &self.heat
    }

    /// Whether each frame recurs: at its last sighting, the look before
    /// also caught a touch or the sighting before came within one
    /// half-life (as set then), by frame index.
    pub fn recurring(&self) -> &[bool] {
        &self.recurring
    }

    /// Hot-page estimate of every frame, by frame index.
    pub fn hot_page_counts(&self) -> &[f64] {
        &self.hot_pages
    }
}

/// The constants of one update.
struct Step {
    /// The settings (for the decay over an unseen gap).
    config: HeatSettings,
    /// The interval's length.
    interval: Duration,
    decay: f64,
    /// `decay²`: how much of the old variance survives.
    decay_sq: f64,
    /// `1 - decay`: the share of the newest interval in the hot-page average.
    gain: f64,
    read_weight: f64,
    write_weight: f64,
    /// Pages per frame.
    pages: f64,
}

impl Step {
    fn new(config: &HeatSettings, sample: &AccessSample, pages_per_frame: u32) -> Self {
        let decay = config.decay(sample.interval);
        Step {
            config: *config,
            interval: sample.interval,
            decay,
            decay_sq: decay * decay,
            gain: 1.0 - decay,
            read_weight: config.read_weight,
            write_weight: config.write_weight,
            pages: f64::from(pages_per_frame),
        }
    }

    /// How a frame last observed `unseen` seconds before this interval
    /// catches up.
    #[inline(always)]
    fn pace(&self, unseen: f32) -> Pace {
        if unseen <= 0.0 {
            return Pace {
                decay: self.decay,
                decay_sq: self.decay_sq,
                weight: 1.0,
                gain: self.gain,
            };
        }
        let decay = self
            .config
            .decay(self.interval + Duration::from_secs_f32(unseen));
        let weight = if self.gain > 0.0 {
            (1.0 - decay) / self.gain
        } else {
            1.0
        };
        Pace {
            decay,
            decay_sq: decay * decay,
            weight,
            gain: 1.0 - decay,
        }
    }

    /// Folds one frame's `[accessed, dirty]` counts into its `[heat,
    /// variance, hot pages]` and its `[read, written]` ratios: `observed`
    /// pages or page-windows (> 0) were looked at, `scale` = pages /
    /// `observed` (finite). Counts above `observed` (an inconsistent
    /// tracker) are clamped per class, so more reads or more writes never
    /// lower the heat.
    #[inline(always)]
    fn apply(
        &self,
        [heat, var, hot]: [&mut f64; 3],
        ratios: &mut [f32; 2],
        pace: Pace,
        [accessed, dirty]: [u16; 2],
        observed: f64,
        scale: f64,
    ) {
        let touched = accessed.max(dirty);
        let read = f64::from(touched - dirty).min(observed);
        let written = f64::from(dirty).min(observed);
        let touched = f64::from(touched).min(observed);
        let evidence = self.read_weight * read + self.write_weight * written;
        // The class's ratio, pulled halfway to the frame's history (the
        // model's doc says why).
        let binomial = |count: f64, history: f32| {
            let p = (count + 0.5 + observed * f64::from(history)) / (2.0 * observed + 1.0);
            observed * p * (1.0 - p)
        };
        let spread = self.read_weight * self.read_weight * binomial(read, ratios[0])
            + self.write_weight * self.write_weight * binomial(written, ratios[1]);
        let w = pace.weight * scale;
        *heat = *heat * pace.decay + w * evidence;
        *var = *var * pace.decay_sq + w * w * spread;
        *hot = *hot * pace.decay + pace.gain * (scale * touched);
        for (ratio, count) in ratios.iter_mut().zip([read, written]) {
            *ratio = (f64::from(*ratio) * pace.decay + pace.gain * count / observed) as f32;
        }
    }
}

/// The decay and weight of one frame's update.
#[derive(Clone, Copy)]
struct Pace {
    /// Share of the old heat kept.
    decay: f64,
    /// Share of the old variance kept.
    decay_sq: f64,
    /// Intervals' worth of weight the new evidence gets.
    weight: f64,
    /// Share of the new evidence in the hot-page average.
    gain: f64,
}

//! The heat model's settings, one type for the engine, the policy JSON and
//! the benchmarks: how much a read and a write count, how fast old evidence
//! fades, and their validation.
//!
//! A frame's heat is the decayed sum, over intervals, of
//! `read_weight × pages read + write_weight × pages written` (estimated
//! over the whole frame). Evidence loses half its weight every half-life,
//! so a frame whose accesses stop falls below a frame whose accesses start
//! at the same rate after a little more than one half-life.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Invalid heat settings.
#[derive(Debug, Error, PartialEq)]
pub enum HeatSettingsError {
    /// A weight is negative or not finite.
    #[error("{which} weight {value} is not a finite non-negative number")]
    Weight {
        /// `read` or `write`.
        which: &'static str,
        /// The value given.
        value: f64,
    },
    /// The half-life is not a finite positive number of seconds.
    #[error("half-life {value} s is not a finite positive number")]
    HalfLife {
        /// The value given, in seconds.
        value: f64,
    },
}

/// The heat model's settings as the policy spells them.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeatSettings {
    /// Weight of a 4 KiB page seen read.
    pub read_weight: f64,
    /// Weight of a 4 KiB page seen written.
    pub write_weight: f64,
    /// Milliseconds after which evidence counts half.
    pub half_life_ms: u64,
}

impl Default for HeatSettings {
    /// Reads 1, writes 2 (writes are the expensive access on slow tiers:
    /// PMEM and CXL write bandwidth is a fraction of their read bandwidth),
    /// half-life 500 ms (1 s converged a shifted normal distribution's
    /// boundary in up to 3.4 s; docs/benchmarks.md, "Tiering policy"):
    /// what the engine runs unless a policy says otherwise.
    fn default() -> Self {
        HeatSettings {
            read_weight: 1.0,
            write_weight: 2.0,
            half_life_ms: 500,
        }
    }
}

impl HeatSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), HeatSettingsError> {
        for (which, value) in [("read", self.read_weight), ("write", self.write_weight)] {
            if !value.is_finite() || value < 0.0 {
                return Err(HeatSettingsError::Weight { which, value });
            }
        }
        let half_life = self.half_life_secs();
        if !half_life.is_finite() || half_life <= 0.0 {
            return Err(HeatSettingsError::HalfLife { value: half_life });
        }
        Ok(())
    }

    /// The half-life in seconds.
    pub fn half_life_secs(&self) -> f64 {
        self.half_life_ms as f64 / 1000.0
    }

    /// Factor that old evidence keeps over `interval`: `2^(-interval /
    /// half-life)`, in `[0, 1]` (1 for a zero-length interval).
    pub fn decay(&self, interval: Duration) -> f64 {
        (-interval.as_secs_f64() / self.half_life_secs()).exp2()
    }

    /// Heat in a unit a person can picture: the 4 KiB pages of a frame
    /// (writes counting `write_weight`, reads `read_weight`) that must be
    /// seen touched in every `interval` for the frame's heat to settle at
    /// `heat` (a steady rate `r` settles at `r / (1 - decay)`). `None` for a
    /// zero interval, where heat never settles.
    pub fn pages_per_interval(&self, heat: f64, interval: Duration) -> Option<f64> {
        let gain = 1.0 - self.decay(interval);
        (gain > 0.0).then_some(heat * gain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_converts_to_the_pages_that_sustain_it() {
        let s = HeatSettings::default();
        let interval = Duration::from_millis(200);
        // A frame that has 40 pages touched every interval settles at
        // 40 / (1 - decay); converting back gives 40.
        let settled = 40.0 / (1.0 - s.decay(interval));
        let pages = s.pages_per_interval(settled, interval).unwrap();
        assert!((pages - 40.0).abs() < 1e-9, "{pages}");
        // One half-life per interval: half the heat is new each time.
        let halves = HeatSettings {
            half_life_ms: 200,
            ..s
        };
        assert_eq!(halves.pages_per_interval(100.0, interval), Some(50.0));
        assert_eq!(s.pages_per_interval(100.0, Duration::ZERO), None);
    }

    #[test]
    fn default_is_valid() {
        assert_eq!(HeatSettings::default().validate(), Ok(()));
    }

    #[test]
    fn bad_weights_and_half_lives_are_rejected() {
        for bad in [f64::NAN, -1.0, f64::INFINITY] {
            let write = HeatSettings {
                write_weight: bad,
                ..Default::default()
            };
            let read = HeatSettings {
                read_weight: bad,
                ..Default::default()
            };
            for (name, c) in [("write", write), ("read", read)] {
                assert!(matches!(
                    c.validate(),
                    Err(HeatSettingsError::Weight { which, .. }) if which == name
                ));
            }
        }
        // Whole milliseconds: zero is the only half-life that is not a
        // finite positive number.
        let c = HeatSettings {
            half_life_ms: 0,
            ..Default::default()
        };
        assert!(matches!(
            c.validate(),
            Err(HeatSettingsError::HalfLife { .. })
        ));
    }

    #[test]
    fn decay_halves_per_half_life() {
        let c = HeatSettings {
            half_life_ms: 1500,
            ..Default::default()
        };
        assert_eq!(c.decay(Duration::ZERO), 1.0);
        assert!((c.decay(Duration::from_millis(1500)) - 0.5).abs() < 1e-12);
        assert!((c.decay(Duration::from_secs(3)) - 0.25).abs() < 1e-12);
        assert_eq!(c.decay(Duration::MAX), 0.0);
    }
}

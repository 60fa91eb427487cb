//! Settings of the heat model: how much a read and a write count, and how
//! fast old evidence fades.

use std::time::Duration;

use thiserror::Error;

/// Invalid heat settings.
#[derive(Debug, Error, PartialEq)]
pub enum HeatConfigError {
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
        /// The value given.
        value: f64,
    },
}

/// Heat settings.
///
/// A frame's heat is the decayed sum, over intervals, of
/// `read_weight × pages read + write_weight × pages written` (estimated
/// over the whole frame). Evidence loses half its weight every
/// `half_life_secs`, so a frame whose accesses stop falls below a frame
/// whose accesses start at the same rate after a little more than one
/// half-life.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeatConfig {
    /// Weight of a page seen read (accessed but not written).
    pub read_weight: f64,
    /// Weight of a page seen written.
    pub write_weight: f64,
    /// Seconds after which evidence counts half.
    pub half_life_secs: f64,
}

impl Default for HeatConfig {
    /// Reads 1, writes 2 (writes are the expensive access on slow tiers:
    /// PMEM and CXL write bandwidth is a fraction of their read bandwidth),
    /// half-life 2 s.
    fn default() -> Self {
        HeatConfig {
            read_weight: 1.0,
            write_weight: 2.0,
            half_life_secs: 2.0,
        }
    }
}

impl HeatConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), HeatConfigError> {
        for (which, value) in [("read", self.read_weight), ("write", self.write_weight)] {
            if !value.is_finite() || value < 0.0 {
                return Err(HeatConfigError::Weight { which, value });
            }
        }
        if !self.half_life_secs.is_finite() || self.half_life_secs <= 0.0 {
            return Err(HeatConfigError::HalfLife {
                value: self.half_life_secs,
            });
        }
        Ok(())
    }

    /// Factor that old evidence keeps over `interval`: `2^(-interval /
    /// half-life)`, in `[0, 1]` (1 for a zero-length interval).
    pub fn decay(&self, interval: Duration) -> f64 {
        (-interval.as_secs_f64() / self.half_life_secs).exp2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        assert_eq!(HeatConfig::default().validate(), Ok(()));
    }

    #[test]
    fn bad_weights_and_half_lives_are_rejected() {
        for bad in [f64::NAN, -1.0, f64::INFINITY] {
            let c = HeatConfig {
                write_weight: bad,
                ..Default::default()
            };
            assert!(matches!(
                c.validate(),
                Err(HeatConfigError::Weight { which: "write", .. })
            ));
            let c = HeatConfig {
                read_weight: bad,
                ..Default::default()
            };
            assert!(matches!(
                c.validate(),
                Err(HeatConfigError::Weight { which: "read", .. })
            ));
        }
        for bad in [0.0, -2.0, f64::NAN, f64::INFINITY] {
            let c = HeatConfig {
                half_life_secs: bad,
                ..Default::default()
            };
            assert!(matches!(
                c.validate(),
                Err(HeatConfigError::HalfLife { .. })
            ));
        }
    }

    #[test]
    fn decay_halves_per_half_life() {
        let c = HeatConfig {
            half_life_secs: 1.5,
            ..Default::default()
        };
        assert_eq!(c.decay(Duration::ZERO), 1.0);
        assert!((c.decay(Duration::from_millis(1500)) - 0.5).abs() < 1e-12);
        assert!((c.decay(Duration::from_secs(3)) - 0.25).abs() < 1e-12);
        assert_eq!(c.decay(Duration::MAX), 0.0);
    }
}

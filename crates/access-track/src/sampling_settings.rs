//! The windowed sampler's settings, one type for the trackers, the policy
//! JSON and the benchmarks: the cost budget (pages armed per second), how
//! often a sampling window opens, and the bounds the window length adapts
//! within.
//!
//! Every window arms `budget × period` 4 KiB pages, spread over the
//! regions; the guest pays for an armed page only if it writes it before
//! the next window re-arms it (one write-protect fault), and for each
//! window once
//! (the TLB flush that re-arming ends in, which kicks every vCPU), so the
//! budget and the period bound the guest's cost whatever its RAM size.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Fewest regions the sampler keeps (DAMON's default minimum).
pub const MIN_REGIONS: usize = 10;
/// Shortest window accepted: below it the ioctls around a window take
/// longer than the window.
pub const MIN_WINDOW_US: u32 = 100;

/// Invalid sampling settings.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SamplingSettingsError {
    /// The budget does not afford [`MIN_REGIONS`] pages per window.
    #[error(
        "budget {budget} pages/s with a window every {period_us} us affords {regions} pages \
         per window, fewer than {MIN_REGIONS}"
    )]
    Budget {
        /// Pages per second asked for.
        budget: u32,
        /// The window period in microseconds.
        period_us: u32,
        /// Pages per window that affords.
        regions: u64,
    },
    /// The window bounds are not `MIN_WINDOW_US <= min <= max <= period`.
    #[error(
        "window bounds {min_us}..={max_us} us must lie in {MIN_WINDOW_US}..={period_us} us \
         (the period)"
    )]
    Window {
        /// Shortest window.
        min_us: u32,
        /// Longest window.
        max_us: u32,
        /// The period.
        period_us: u32,
    },
}

/// How the windowed sampler spends its budget.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingSettings {
    /// 4 KiB pages armed per second, all windows together: the tracker's
    /// cost budget, independent of guest RAM size.
    pub budget_pages_per_sec: u32,
    /// Microseconds from one window's start to the next.
    pub window_period_us: u32,
    /// Shortest window the sampler adapts down to, in microseconds.
    pub min_window_us: u32,
    /// Longest window the sampler adapts up to, in microseconds (at most
    /// the period).
    pub max_window_us: u32,
}

impl Default for SamplingSettings {
    /// 8 Ki pages/s in windows opening every 200 ms (1638 pages each),
    /// each window between 0.5 ms and the whole period long
    /// (docs/tracking.md). The guest pays one write fault per armed page
    /// it writes before the next window re-arms it, and one TLB-flush
    /// kick per window: 16 Ki pages/s cost a guest 2–4.5 %. At the same
    /// budget, windows every 200 ms look at twice the distinct pages of
    /// windows every 100 ms (the pages stay through an aggregation), which
    /// a wide hot set like pmbench's needs. The window's length costs
    /// nothing: it is the unit the sampler dates first writes in, peeking
    /// until the period's end, so every page armed gives evidence for the
    /// whole period (a slow guest, an emulated host's, is caught at all
    /// only over a long stretch).
    fn default() -> Self {
        SamplingSettings {
            budget_pages_per_sec: 8_192,
            window_period_us: 200_000,
            min_window_us: 500,
            max_window_us: 200_000,
        }
    }
}

impl SamplingSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), SamplingSettingsError> {
        let SamplingSettings {
            budget_pages_per_sec: budget,
            window_period_us: period_us,
            min_window_us: min_us,
            max_window_us: max_us,
        } = *self;
        if !(MIN_WINDOW_US <= min_us && min_us <= max_us && max_us <= period_us) {
            return Err(SamplingSettingsError::Window {
                min_us,
                max_us,
                period_us,
            });
        }
        let regions = self.pages_per_window();
        if regions < MIN_REGIONS as u64 {
            return Err(SamplingSettingsError::Budget {
                budget,
                period_us,
                regions,
            });
        }
        Ok(())
    }

    /// Pages armed per window: the budget over the windows per second.
    pub fn pages_per_window(&self) -> u64 {
        u64::from(self.budget_pages_per_sec) * u64::from(self.window_period_us) / 1_000_000
    }

    /// Time between window starts.
    pub fn period(&self) -> Duration {
        Duration::from_micros(u64::from(self.window_period_us))
    }

    /// These settings on a clock slowed `factor` times: periods and windows
    /// `factor` times longer, the budget per second `factor` times smaller,
    /// so each window arms as many pages. A guest sampled this way looks
    /// like a guest `factor` times faster sampled with the originals.
    pub fn slowed(&self, factor: u32) -> Self {
        let factor = factor.max(1);
        SamplingSettings {
            budget_pages_per_sec: self.budget_pages_per_sec / factor,
            window_period_us: self.window_period_us.saturating_mul(factor),
            min_window_us: self.min_window_us.saturating_mul(factor),
            max_window_us: self.max_window_us.saturating_mul(factor),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_arms_hundreds_of_pages_per_window() {
        let s = SamplingSettings::default();
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s.pages_per_window(), 1638);
    }

    #[test]
    fn bad_bounds_and_small_budgets_are_rejected() {
        let d = SamplingSettings::default();
        for bad in [
            SamplingSettings {
                min_window_us: 50,
                ..d
            },
            SamplingSettings {
                min_window_us: 20_000,
                max_window_us: 10_000,
                ..d
            },
            SamplingSettings {
                max_window_us: 300_000,
                ..d
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(SamplingSettingsError::Window { .. })),
                "{bad:?}"
            );
        }
        let poor = SamplingSettings {
            budget_pages_per_sec: 20,
            ..d
        };
        assert_eq!(
            poor.validate(),
            Err(SamplingSettingsError::Budget {
                budget: 20,
                period_us: 200_000,
                regions: 4
            })
        );
    }

    #[test]
    fn a_slowed_clock_arms_as_many_pages_per_window() {
        let d = SamplingSettings::default();
        let s = d.slowed(4);
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s.pages_per_window(), d.pages_per_window());
        assert_eq!(s.period(), 4 * d.period());
        assert_eq!(d.slowed(0), d);
    }
}

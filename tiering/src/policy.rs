//! A VM's tiering policy: the operator's knobs, their JSON form and their
//! validation as a whole against the VM they are meant for.
//!
//! A policy is checked before it takes effect and either applies in full
//! or not at all ([`TieringPolicy::validate`]); `docs/policy.md` explains
//! every knob.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use access_track::{SamplingSettings, SamplingSettingsError};
use guest_memory::GpaRange;

pub use crate::heat_settings::HeatSettings;
use crate::heat_settings::HeatSettingsError;

/// Shortest engine interval.
pub const MIN_INTERVAL_MS: u64 = 10;
/// Longest engine interval.
pub const MAX_INTERVAL_MS: u64 = 60_000;
/// Highest rate limit accepted, in MB/s (1 TB/s: a typo guard, not a
/// hardware limit).
pub const MAX_RATE_MBPS: f64 = 1_000_000.0;
/// Most pinned ranges per policy.
pub const MAX_PINS: usize = 64;
/// Highest significance accepted (standard deviations).
pub const MAX_SIGNIFICANCE: f64 = 20.0;

/// Errors of a policy: what is wrong, naming the field.
#[derive(Debug, Error, PartialEq)]
pub enum PolicyError {
    /// `fast_quota.min_bytes` above `fast_quota.max_bytes`.
    #[error("fast_quota: min_bytes {min} above max_bytes {max}")]
    QuotaOrder {
        /// The minimum.
        min: u64,
        /// The maximum.
        max: u64,
    },
    /// `fast_quota.max_bytes` above what the fast tier holds.
    #[error("fast_quota: max_bytes {max} above the fast tier's capacity of {capacity} bytes")]
    QuotaAboveCapacity {
        /// The maximum asked for.
        max: u64,
        /// The fast tier's capacity.
        capacity: u64,
    },
    /// The quota would leave more frames than the slower tiers can hold.
    #[error(
        "fast_quota: max_bytes {max} below {least} bytes: the slower tiers hold only the rest of guest RAM"
    )]
    QuotaBelowSlowCapacity {
        /// The maximum asked for.
        max: u64,
        /// Guest RAM less what the slower tiers hold.
        least: u64,
    },
    /// The quota leaves no room for the frames pinned on the fast tier.
    #[error("fast_quota: max_bytes {max} below the {pinned} bytes pinned on the fast tier")]
    QuotaBelowPinned {
        /// The maximum asked for.
        max: u64,
        /// Bytes of pinned frames on the fast tier.
        pinned: u64,
    },
    /// The headroom is not below the quota.
    #[error("headroom_bytes {headroom} must be below fast_quota.max_bytes {max}")]
    Headroom {
        /// The headroom asked for.
        headroom: u64,
        /// The quota.
        max: u64,
    },
    /// A rate limit is not a positive finite number up to [`MAX_RATE_MBPS`].
    #[error("{field}: {value} is not a rate in (0, {MAX_RATE_MBPS}] MB/s")]
    Rate {
        /// `promote_rate_mbps` or `demote_rate_mbps`.
        field: &'static str,
        /// The value given.
        value: f64,
    },
    /// A manual threshold is not a finite number ≥ 0.
    #[error("threshold.heat: {0} is not a finite heat >= 0")]
    Threshold(f64),
    /// The significance is not in `[0, MAX_SIGNIFICANCE]`.
    #[error("significance: {0} not in [0, {MAX_SIGNIFICANCE}]")]
    Significance(f64),
    /// The interval is out of range.
    #[error("interval_ms: {0} not in {MIN_INTERVAL_MS}..={MAX_INTERVAL_MS}")]
    Interval(u64),
    /// The heat settings are invalid.
    #[error("heat: {0}")]
    Heat(#[source] HeatSettingsError),
    /// The sampling settings are invalid.
    #[error("sampling: {0}")]
    Sampling(#[source] SamplingSettingsError),
    /// The tracker is not one this VM offers.
    #[error("tracker: unknown tracker '{name}' (this VM offers: {offered})")]
    UnknownTracker {
        /// The name given.
        name: String,
        /// The names the VM offers, comma-separated.
        offered: String,
    },
    /// Too many pinned ranges.
    #[error("pinned: {0} ranges, at most {MAX_PINS}")]
    TooManyPins(usize),
    /// A pinned range is empty, wraps, or lies outside guest RAM.
    #[error("pinned[{index}]: [{gpa:#x}, +{len:#x}) is empty or not inside guest RAM")]
    PinOutside {
        /// Position in `pinned`.
        index: usize,
        /// Start.
        gpa: u64,
        /// Length.
        len: u64,
    },
    /// Two pinned ranges overlap.
    #[error("pinned[{first}] and pinned[{second}] overlap")]
    PinsOverlap {
        /// Position of one range.
        first: usize,
        /// Position of the other.
        second: usize,
    },
}

/// The fast-tier quota of a VM.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastQuota {
    /// Fast-tier bytes the VM keeps even when its frames are cold (a
    /// reservation); the engine promotes the hottest frames up to it.
    #[serde(default)]
    pub min_bytes: u64,
    /// Fast-tier bytes the VM may use at most.
    pub max_bytes: u64,
}

/// How the hot threshold is set.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Threshold {
    /// Recomputed every interval: the heat of the coldest frame the quota
    /// (less the headroom) would hold if it held the hottest frames,
    /// raised further when more slow frames pass it than the promotion
    /// rate limit lets through.
    Auto,
    /// A fixed heat a frame must exceed to be promoted.
    Manual {
        /// The heat (units: [`HeatSettings`]).
        heat: f64,
    },
}

/// A guest-physical range whose frames never move (e.g. memory a device
/// DMAs to). A frame partly inside is pinned whole.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedRange {
    /// First guest-physical byte.
    pub gpa: u64,
    /// Length in bytes (> 0).
    pub len: u64,
}

impl PinnedRange {
    /// The end (exclusive), `None` if it overflows.
    pub fn end(&self) -> Option<u64> {
        self.gpa.checked_add(self.len)
    }
}

/// Everything the engine does for one VM, changeable while the VM runs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TieringPolicy {
    /// The access tracker, by name.
    #[serde(default = "default_tracker")]
    pub tracker: String,
    /// Engine interval in milliseconds.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
    /// Fast-tier quota.
    pub fast_quota: FastQuota,
    /// Most MB/s (10^6 bytes) promoted.
    #[serde(default = "default_rate")]
    pub promote_rate_mbps: f64,
    /// Most MB/s demoted (quota enforcement may exceed it to meet a
    /// rebalance deadline).
    #[serde(default = "default_rate")]
    pub demote_rate_mbps: f64,
    /// The hot threshold.
    #[serde(default = "default_threshold")]
    pub threshold: Threshold,
    /// Fast-tier bytes kept free under the quota, so promotions need not
    /// wait for demotions.
    #[serde(default)]
    pub headroom_bytes: u64,
    /// A slow frame displaces a fast one only if its heat leads the fast
    /// one's by this many standard deviations of the two estimates, on top
    /// of the lead that chance alone gives the extremes of the frames that
    /// could take part (`docs/policy.md`), in `[0, MAX_SIGNIFICANCE]`.
    #[serde(default = "default_significance")]
    pub significance: f64,
    /// A frame moved is not moved again for this long (quota enforcement
    /// aside).
    #[serde(default = "default_min_residency_ms")]
    pub min_residency_ms: u64,
    /// Swap a hot slow frame with a cold fast one when the quota is full.
    #[serde(default = "default_true")]
    pub exchange: bool,
    /// Guest-physical ranges that never move.
    #[serde(default)]
    pub pinned: Vec<PinnedRange>,
    /// Heat model settings.
    #[serde(default)]
    pub heat: HeatSettings,
    /// How the tracker spends its sampling budget.
    #[serde(default)]
    pub sampling: SamplingSettings,
}

fn default_tracker() -> String {
    "dirty-log".into()
}

fn default_interval_ms() -> u64 {
    200
}

fn default_rate() -> f64 {
    256.0
}

fn default_threshold() -> Threshold {
    Threshold::Auto
}

fn default_significance() -> f64 {
    2.0
}

fn default_min_residency_ms() -> u64 {
    2000
}

fn default_true() -> bool {
    true
}

/// What a policy is validated against: the VM it is for.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyLimits {
    /// Bytes of one frame.
    pub frame_size: u64,
    /// The fast tier's capacity in bytes.
    pub fast_capacity: u64,
    /// What the slower tiers hold together, in bytes: a quota must leave
    /// no more of guest RAM than this off the fast tier.
    pub slow_capacity: u64,
    /// Guest RAM ranges, `(gpa, len)`.
    pub ram: Vec<GpaRange>,
    /// Trackers the VM offers, by name.
    pub trackers: Vec<String>,
}

impl TieringPolicy {
    /// The default policy with a fast-tier quota of `max_bytes`.
    pub fn with_quota(max_bytes: u64) -> Self {
        TieringPolicy {
            tracker: default_tracker(),
            interval_ms: default_interval_ms(),
            fast_quota: FastQuota {
                min_bytes: 0,
                max_bytes,
            },
            promote_rate_mbps: default_rate(),
            demote_rate_mbps: default_rate(),
            threshold: default_threshold(),
            headroom_bytes: 0,
            significance: default_significance(),
            min_residency_ms: default_min_residency_ms(),
            exchange: true,
            pinned: Vec::new(),
            heat: HeatSettings::default(),
            sampling: SamplingSettings::default(),
        }
    }

    /// This policy on a clock slowed `speed` times, which a guest sees as
    /// running `speed` times faster: intervals, sampling windows, the heat
    /// half-life and the residency `speed` times longer, sampling budget
    /// and rate limits `speed` times smaller. What the engine sees of a
    /// guest in one interval is then what it would see of a guest `speed`
    /// times faster under the original policy (`tierbench policy`).
    pub fn at_guest_speed(&self, speed: u32) -> TieringPolicy {
        let s = speed.max(1);
        let f = f64::from(s);
        TieringPolicy {
            interval_ms: self.interval_ms.saturating_mul(u64::from(s)),
            promote_rate_mbps: self.promote_rate_mbps / f,
            demote_rate_mbps: self.demote_rate_mbps / f,
            min_residency_ms: self.min_residency_ms.saturating_mul(u64::from(s)),
            heat: HeatSettings {
                half_life_ms: self.heat.half_life_ms.saturating_mul(u64::from(s)),
                ..self.heat
            },
            sampling: self.sampling.slowed(s),
            ..self.clone()
        }
    }

    /// The engine interval.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// Checks every field and their combination against `limits`, first
    /// error wins. Pins are checked against RAM here; against the fast
    /// tier's contents when the engine applies the policy.
    pub fn validate(&self, limits: &PolicyLimits) -> Result<(), PolicyError> {
        if !limits.trackers.contains(&self.tracker) {
            return Err(PolicyError::UnknownTracker {
                name: self.tracker.clone(),
                offered: limits.trackers.join(", "),
            });
        }
        if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&self.interval_ms) {
            return Err(PolicyError::Interval(self.interval_ms));
        }
        let FastQuota {
            min_bytes: min,
            max_bytes: max,
        } = self.fast_quota;
        if min > max {
            return Err(PolicyError::QuotaOrder { min, max });
        }
        if max > limits.fast_capacity {
            return Err(PolicyError::QuotaAboveCapacity {
                max,
                capacity: limits.fast_capacity,
            });
        }
        let ram: u64 = limits.ram.iter().map(|r| r.len).sum();
        let least = ram.saturating_sub(limits.slow_capacity);
        if max < least {
            return Err(PolicyError::QuotaBelowSlowCapacity { max, least });
        }
        if self.headroom_bytes > 0 && self.headroom_bytes >= max {
            return Err(PolicyError::Headroom {
                headroom: self.headroom_bytes,
                max,
            });
        }
        for (field, value) in [
            ("promote_rate_mbps", self.promote_rate_mbps),
            ("demote_rate_mbps", self.demote_rate_mbps),
        ] {
            if !(value.is_finite() && value > 0.0 && value <= MAX_RATE_MBPS) {
                return Err(PolicyError::Rate { field, value });
            }
        }
        if let Threshold::Manual { heat } = self.threshold
            && !(heat.is_finite() && heat >= 0.0)
        {
            return Err(PolicyError::Threshold(heat));
        }
        if !(self.significance.is_finite() && (0.0..=MAX_SIGNIFICANCE).contains(&self.significance))
        {
            return Err(PolicyError::Significance(self.significance));
        }
        self.heat.validate().map_err(PolicyError::Heat)?;
        self.sampling.validate().map_err(PolicyError::Sampling)?;
        self.validate_pins(&limits.ram)
    }

    fn validate_pins(&self, ram: &[GpaRange]) -> Result<(), PolicyError> {
        if self.pinned.len() > MAX_PINS {
            return Err(PolicyError::TooManyPins(self.pinned.len()));
        }
        for (index, pin) in self.pinned.iter().enumerate() {
            let inside = pin.len > 0
                && pin
                    .end()
                    .is_some_and(|end| ram.iter().any(|r| pin.gpa >= r.gpa && end <= r.end()));
            if !inside {
                return Err(PolicyError::PinOutside {
                    index,
                    gpa: pin.gpa,
                    len: pin.len,
                });
            }
        }
        for (first, a) in self.pinned.iter().enumerate() {
            for (offset, b) in self.pinned[first + 1..].iter().enumerate() {
                // Both ends exist: checked above.
                let (a_end, b_end) = (a.gpa + a.len, b.gpa + b.len);
                if a.gpa < b_end && b.gpa < a_end {
                    return Err(PolicyError::PinsOverlap {
                        first,
                        second: first + 1 + offset,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn limits() -> PolicyLimits {
        PolicyLimits {
            frame_size: 2 * MIB,
            fast_capacity: 128 * MIB,
            slow_capacity: 480 * MIB,
            ram: vec![GpaRange::new(0, 512 * MIB)],
            trackers: vec!["dirty-log".into(), "fault-sample".into()],
        }
    }

    fn valid() -> TieringPolicy {
        TieringPolicy::with_quota(64 * MIB)
    }

    fn rejects(change: impl FnOnce(&mut TieringPolicy)) -> PolicyError {
        let mut p = valid();
        change(&mut p);
        p.validate(&limits()).unwrap_err()
    }

    #[test]
    fn default_policy_is_valid() {
        valid().validate(&limits()).unwrap();
    }

    #[test]
    fn quota_must_be_ordered_and_fit_the_tier() {
        // 512 MiB of RAM, 480 MiB on the slower tiers: at least 32 MiB
        // stays on the fast tier.
        assert_eq!(
            rejects(|p| p.fast_quota.max_bytes = 16 * MIB),
            PolicyError::QuotaBelowSlowCapacity {
                max: 16 * MIB,
                least: 32 * MIB
            }
        );
        assert_eq!(
            rejects(|p| p.fast_quota.max_bytes = 256 * MIB),
            PolicyError::QuotaAboveCapacity {
                max: 256 * MIB,
                capacity: 128 * MIB
            }
        );
        assert!(matches!(
            rejects(|p| p.fast_quota.min_bytes = 100 * MIB),
            PolicyError::QuotaOrder { .. }
        ));
        assert!(matches!(
            rejects(|p| p.headroom_bytes = 64 * MIB),
            PolicyError::Headroom { .. }
        ));
    }

    #[test]
    fn rates_must_be_positive_and_finite() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 2e6] {
            assert!(matches!(
                rejects(|p| p.promote_rate_mbps = bad),
                PolicyError::Rate {
                    field: "promote_rate_mbps",
                    ..
                }
            ));
            assert!(matches!(
                rejects(|p| p.demote_rate_mbps = bad),
                PolicyError::Rate {
                    field: "demote_rate_mbps",
                    ..
                }
            ));
        }
    }

    #[test]
    fn unknown_tracker_names_the_offered_ones() {
        let e = rejects(|p| p.tracker = "a-bits".into());
        assert_eq!(
            e.to_string(),
            "tracker: unknown tracker 'a-bits' (this VM offers: dirty-log, fault-sample)"
        );
    }

    #[test]
    fn pins_must_be_inside_ram_and_disjoint() {
        let pin = |gpa, len| PinnedRange { gpa, len };
        assert!(matches!(
            rejects(|p| p.pinned = vec![pin(0, 0)]),
            PolicyError::PinOutside { index: 0, .. }
        ));
        assert!(matches!(
            rejects(|p| p.pinned = vec![pin(510 * MIB, 4 * MIB)]),
            PolicyError::PinOutside { .. }
        ));
        assert!(matches!(
            rejects(|p| p.pinned = vec![pin(u64::MAX - 1, 4)]),
            PolicyError::PinOutside { .. }
        ));
        assert_eq!(
            rejects(|p| p.pinned = vec![pin(0, 4 * MIB), pin(8 * MIB, MIB), pin(3 * MIB, MIB)]),
            PolicyError::PinsOverlap {
                first: 0,
                second: 2
            }
        );
        let mut ok = valid();
        ok.pinned = vec![pin(0, 4 * MIB), pin(4 * MIB, 4 * MIB)];
        ok.validate(&limits()).unwrap();
    }

    #[test]
    fn other_fields_are_range_checked() {
        assert_eq!(rejects(|p| p.interval_ms = 0), PolicyError::Interval(0));
        assert_eq!(
            rejects(|p| p.significance = -0.1),
            PolicyError::Significance(-0.1)
        );
        assert!(matches!(
            rejects(|p| p.sampling.budget_pages_per_sec = 1),
            PolicyError::Sampling(_)
        ));
        assert_eq!(
            rejects(|p| p.threshold = Threshold::Manual { heat: -1.0 }),
            PolicyError::Threshold(-1.0)
        );
        assert!(matches!(
            rejects(|p| p.heat.half_life_ms = 0),
            PolicyError::Heat(_)
        ));
    }

    #[test]
    fn a_faster_guest_is_a_slower_clock() {
        let p = valid();
        let fast = p.at_guest_speed(4);
        fast.validate(&limits()).unwrap();
        assert_eq!(fast.interval_ms, 4 * p.interval_ms);
        assert_eq!(fast.heat.half_life_ms, 4 * p.heat.half_life_ms);
        assert_eq!(fast.promote_rate_mbps, p.promote_rate_mbps / 4.0);
        assert_eq!(fast.sampling, p.sampling.slowed(4));
        assert_eq!(fast.fast_quota, p.fast_quota);
        assert_eq!(p.at_guest_speed(1), p);
    }

    #[test]
    fn json_form_has_defaults_and_refuses_unknown_fields() {
        let p: TieringPolicy =
            serde_json::from_str(r#"{"fast_quota": {"max_bytes": 67108864}}"#).unwrap();
        assert_eq!(p, valid());
        let manual: TieringPolicy = serde_json::from_str(
            r#"{"fast_quota": {"max_bytes": 1}, "threshold": {"mode": "manual", "heat": 5}}"#,
        )
        .unwrap();
        assert_eq!(manual.threshold, Threshold::Manual { heat: 5.0 });
        for bad in [
            r#"{"fast_quota": {"max_bytes": 1}, "quota": 1}"#,
            r#"{"fast_quota": {"max_bytes": -1}}"#,
            r#"{"fast_quota": {"max_bytes": 18446744073709551616}}"#,
            r#"{"fast_quota": {"max_bytes": 1, "maxbytes": 2}}"#,
            r#"{"fast_quota": {"max_bytes": 1}, "threshold": {"mode": "sometimes"}}"#,
            r#"{}"#,
        ] {
            assert!(serde_json::from_str::<TieringPolicy>(bad).is_err(), "{bad}");
        }
    }
}

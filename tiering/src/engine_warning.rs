//! Plain warnings an operator can act on, read from the engine's
//! counters: shown in the run report, `tierctl stats` and `/metrics`.

use serde::{Deserialize, Serialize};

use guest_memory::{TierProfile, TierUsage, format_size};

use crate::policy::FastQuota;

/// One condition worth an operator's attention.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EngineWarning {
    /// The estimated hot set (the fewest hottest frames holding 90 % of
    /// the heat) is larger than the fast-tier quota: the fast tier can
    /// hold only part of it, and where the rest is alike the engine holds
    /// still rather than trade frames of equal heat.
    HotSetExceedsQuota {
        /// The estimated hot set, bytes.
        hot_set_bytes: u64,
        /// The fast-tier quota, bytes.
        quota_bytes: u64,
    },
    /// The fastest and the slowest tier measure (or are declared) alike:
    /// moving frames between them cannot make the guest faster, so all
    /// the engine spends (tracker faults and CPU, copies, write stalls) is
    /// cost without benefit.
    TiersAlike {
        /// The fast tier's read latency, nanoseconds.
        fast_latency_ns: u64,
        /// The fast tier's read bandwidth, bytes per second.
        fast_bandwidth: u64,
        /// The slowest tier's read latency, nanoseconds.
        slow_latency_ns: u64,
        /// The slowest tier's read bandwidth, bytes per second.
        slow_bandwidth: u64,
    },
}

impl EngineWarning {
    /// Every kind's name, as serialized (the `/metrics` label).
    pub const KINDS: [&'static str; 2] = ["hot-set-exceeds-quota", "tiers-alike"];

    /// Its kind's name.
    pub fn kind(&self) -> &'static str {
        match self {
            EngineWarning::HotSetExceedsQuota { .. } => Self::KINDS[0],
            EngineWarning::TiersAlike { .. } => Self::KINDS[1],
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            EngineWarning::HotSetExceedsQuota {
                hot_set_bytes,
                quota_bytes,
            } => format!(
                "the hot set (~{}) is larger than the fast-tier quota ({}): the fast tier holds \
                 only part of it; a larger quota would serve more of the guest's accesses",
                format_size(*hot_set_bytes),
                format_size(*quota_bytes)
            ),
            EngineWarning::TiersAlike {
                fast_latency_ns,
                fast_bandwidth,
                slow_latency_ns,
                slow_bandwidth,
            } => {
                let profile = |read_latency_ns, read_bandwidth| {
                    TierProfile {
                        read_latency_ns,
                        read_bandwidth,
                    }
                    .describe()
                };
                format!(
                    "the tiers read alike (fast {}, slow {}): moving frames between them cannot \
                     speed the guest up, so the engine's cost buys nothing; run without tiering, \
                     or declare the tiers' profiles if they emulate different memory",
                    profile(*fast_latency_ns, *fast_bandwidth),
                    profile(*slow_latency_ns, *slow_bandwidth)
                )
            }
        }
    }

    /// The warnings for an estimated hot set of `hot_set_bytes` under
    /// `quota` on `tiers`, fastest first (the engine's counters of the
    /// same names).
    pub fn of(
        hot_set_bytes: u64,
        quota: Option<FastQuota>,
        tiers: &[TierUsage],
    ) -> Vec<EngineWarning> {
        let mut warnings = Vec::new();
        let profile = |t: Option<&TierUsage>| t.and_then(|t| t.speed.profile().copied());
        if tiers.len() > 1
            && let (Some(fast), Some(slow)) = (profile(tiers.first()), profile(tiers.last()))
            && fast.alike(&slow)
        {
            warnings.push(EngineWarning::TiersAlike {
                fast_latency_ns: fast.read_latency_ns,
                fast_bandwidth: fast.read_bandwidth,
                slow_latency_ns: slow.read_latency_ns,
                slow_bandwidth: slow.read_bandwidth,
            });
        }
        if let Some(quota) = quota
            && hot_set_bytes > quota.max_bytes
        {
            warnings.push(EngineWarning::HotSetExceedsQuota {
                hot_set_bytes,
                quota_bytes: quota.max_bytes,
            });
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use guest_memory::TierSpeed;

    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_hot_set_beyond_the_quota_is_named() {
        let quota = Some(FastQuota {
            min_bytes: 0,
            max_bytes: 512 * MIB,
        });
        assert!(
            EngineWarning::of(512 * MIB, quota, &[]).is_empty(),
            "fits exactly"
        );
        let w = EngineWarning::of(1164 * MIB, quota, &[]);
        assert_eq!(
            w,
            [EngineWarning::HotSetExceedsQuota {
                hot_set_bytes: 1164 * MIB,
                quota_bytes: 512 * MIB
            }]
        );
        assert_eq!(w[0].kind(), "hot-set-exceeds-quota");
        assert!(
            w[0].describe().starts_with(
                "the hot set (~1.14 GiB) is larger than the fast-tier quota (512 MiB)"
            )
        );
        assert_eq!(
            serde_json::to_value(w[0]).unwrap()["kind"],
            "hot-set-exceeds-quota"
        );
        // No quota known: nothing to compare with.
        assert!(EngineWarning::of(1164 * MIB, None, &[]).is_empty());
    }

    fn tier(name: &str, speed: TierSpeed) -> TierUsage {
        TierUsage {
            name: name.into(),
            capacity_frames: 8,
            used_frames: 8,
            speed,
        }
    }

    fn declared(read_latency_ns: u64, read_bandwidth: u64) -> TierSpeed {
        TierSpeed::Declared {
            profile: TierProfile {
                read_latency_ns,
                read_bandwidth,
            },
        }
    }

    #[test]
    fn tiers_that_read_alike_are_named() {
        let alike = [
            tier("dram", declared(210, 20 << 30)),
            tier("cxl", declared(215, 19 << 30)),
        ];
        let w = EngineWarning::of(0, None, &alike);
        assert_eq!(
            w,
            [EngineWarning::TiersAlike {
                fast_latency_ns: 210,
                fast_bandwidth: 20 << 30,
                slow_latency_ns: 215,
                slow_bandwidth: 19 << 30,
            }]
        );
        assert_eq!(w[0].kind(), "tiers-alike");
        assert!(
            w[0].describe()
                .starts_with("the tiers read alike (fast 210 ns, 20 GiB/s, slow 215 ns, 19 GiB/s)"),
            "{}",
            w[0].describe()
        );
        // A real CXL tier: no warning. The middle tier does not matter.
        let differ = [
            tier("dram", declared(100, 20 << 30)),
            tier("mid", declared(100, 20 << 30)),
            tier("cxl", declared(250, 8 << 30)),
        ];
        assert!(EngineWarning::of(0, None, &differ).is_empty());
        // Unknown speeds: nothing to compare.
        let unknown = [
            tier("dram", declared(100, 20 << 30)),
            tier(
                "pmem",
                TierSpeed::Unknown {
                    reason: "file".into(),
                },
            ),
        ];
        assert!(EngineWarning::of(0, None, &unknown).is_empty());
        assert!(
            EngineWarning::of(0, None, &alike[..1]).is_empty(),
            "one tier"
        );
    }
}

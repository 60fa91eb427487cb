//! Plain warnings an operator can act on, read from the engine's
//! counters: shown in the run report, `tierctl stats` and `/metrics`.

use serde::{Deserialize, Serialize};

use guest_memory::format_size;

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
}

impl EngineWarning {
    /// Every kind's name, as serialized (the `/metrics` label).
    pub const KINDS: [&'static str; 1] = ["hot-set-exceeds-quota"];

    /// Its kind's name.
    pub fn kind(&self) -> &'static str {
        match self {
            EngineWarning::HotSetExceedsQuota { .. } => Self::KINDS[0],
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
        }
    }

    /// The warnings for an estimated hot set of `hot_set_bytes` under
    /// `quota` (the engine's counters of the same names).
    pub fn of(hot_set_bytes: u64, quota: Option<FastQuota>) -> Vec<EngineWarning> {
        let mut warnings = Vec::new();
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
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_hot_set_beyond_the_quota_is_named() {
        let quota = Some(FastQuota {
            min_bytes: 0,
            max_bytes: 512 * MIB,
        });
        assert!(
            EngineWarning::of(512 * MIB, quota).is_empty(),
            "fits exactly"
        );
        let w = EngineWarning::of(1164 * MIB, quota);
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
        assert!(EngineWarning::of(1164 * MIB, None).is_empty());
    }
}

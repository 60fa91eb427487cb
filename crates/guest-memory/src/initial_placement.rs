//! Initial placement policies: which tier each frame starts on.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How frames are spread over the tiers when the VM is created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Fill tier 0 up to its capacity, then tier 1, and so on.
    #[default]
    FastFirst,
    /// Fill the last (slowest) tier first, then the one before it, and so on.
    SlowFirst,
    /// Deal frames round-robin over the tiers, skipping full ones.
    Interleave,
}

/// An unknown placement name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown placement '{0}' (expected fast-first, slow-first or interleave)")]
pub struct PlacementParseError(pub String);

impl FromStr for Placement {
    type Err = PlacementParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "fast-first" => Ok(Self::FastFirst),
            "slow-first" => Ok(Self::SlowFirst),
            "interleave" => Ok(Self::Interleave),
            other => Err(PlacementParseError(other.to_owned())),
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::FastFirst => "fast-first",
            Self::SlowFirst => "slow-first",
            Self::Interleave => "interleave",
        })
    }
}

impl Placement {
    /// The tier of each of `frame_count` frames, given each tier's capacity in
    /// frames; `None` if the tiers cannot hold all frames.
    pub fn assign(self, frame_count: usize, capacities: &[usize]) -> Option<Vec<usize>> {
        if capacities
            .iter()
            .try_fold(0usize, |a, c| a.checked_add(*c))?
            < frame_count
        {
            return None;
        }
        let mut tiers = Vec::with_capacity(frame_count);
        match self {
            Self::FastFirst => {
                fill_in_order(&mut tiers, frame_count, capacities, 0..capacities.len())
            }
            Self::SlowFirst => fill_in_order(
                &mut tiers,
                frame_count,
                capacities,
                (0..capacities.len()).rev(),
            ),
            Self::Interleave => deal_round_robin(&mut tiers, frame_count, capacities),
        }
        Some(tiers)
    }
}

fn fill_in_order(
    out: &mut Vec<usize>,
    frame_count: usize,
    capacities: &[usize],
    order: impl Iterator<Item = usize>,
) {
    for tier in order {
        let take = capacities[tier].min(frame_count - out.len());
        out.extend(std::iter::repeat_n(tier, take));
    }
}

fn deal_round_robin(out: &mut Vec<usize>, frame_count: usize, capacities: &[usize]) {
    let mut left = capacities.to_vec();
    let mut next = 0;
    while out.len() < frame_count {
        // The caller checked total capacity, so some tier has room.
        let Some(tier) = (0..left.len())
            .map(|i| (next + i) % left.len())
            .find(|t| left[*t] > 0)
        else {
            return;
        };
        left[tier] -= 1;
        out.push(tier);
        next = tier + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_names() {
        for (text, p) in [
            ("fast-first", Placement::FastFirst),
            ("slow-first", Placement::SlowFirst),
            ("interleave", Placement::Interleave),
        ] {
            assert_eq!(text.parse::<Placement>(), Ok(p));
            assert_eq!(p.to_string(), text);
        }
        assert_eq!(
            "random".parse::<Placement>(),
            Err(PlacementParseError("random".into()))
        );
    }

    #[test]
    fn fast_first_fills_tier_zero_first() {
        assert_eq!(
            Placement::FastFirst.assign(5, &[3, 4]),
            Some(vec![0, 0, 0, 1, 1])
        );
        assert_eq!(Placement::FastFirst.assign(2, &[3, 4]), Some(vec![0, 0]));
    }

    #[test]
    fn slow_first_fills_last_tier_first() {
        assert_eq!(
            Placement::SlowFirst.assign(5, &[3, 2]),
            Some(vec![1, 1, 0, 0, 0])
        );
        assert_eq!(
            Placement::SlowFirst.assign(3, &[2, 2, 2]),
            Some(vec![2, 2, 1])
        );
    }

    #[test]
    fn interleave_deals_round_robin_and_skips_full_tiers() {
        assert_eq!(
            Placement::Interleave.assign(4, &[4, 4]),
            Some(vec![0, 1, 0, 1])
        );
        assert_eq!(
            Placement::Interleave.assign(7, &[1, 4, 2]),
            Some(vec![0, 1, 2, 1, 2, 1, 1])
        );
    }

    #[test]
    fn too_little_capacity_is_none() {
        for p in [
            Placement::FastFirst,
            Placement::SlowFirst,
            Placement::Interleave,
        ] {
            assert_eq!(p.assign(8, &[3, 4]), None);
            assert_eq!(p.assign(7, &[3, 4]).map(|v| v.len()), Some(7));
        }
    }
}

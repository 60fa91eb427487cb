//! A leg of a soak run: `Leg`, which of the three legs it is (its protocol
//! and tiers), and `LegTotals`, what its driver counted.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::scenario::Protocol;
use super::settings::LEGS;

/// One leg of a soak run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Leg {
    /// Plain remap moves; both tiers have room for all of RAM.
    Remap,
    /// Pre-copy moves; both tiers have room for all of RAM.
    RemapPrecopy,
    /// Both tiers exactly full: every move is half of a swap.
    Exchange,
}

impl Leg {
    /// The legs in run order.
    pub const ALL: [Leg; LEGS] = [Leg::Remap, Leg::RemapPrecopy, Leg::Exchange];

    /// `remap`, `remap-precopy`, `exchange`.
    pub fn name(self) -> &'static str {
        match self {
            Leg::Remap => "remap",
            Leg::RemapPrecopy => "remap-precopy",
            Leg::Exchange => "exchange",
        }
    }

    /// The migrator protocol of the leg.
    pub fn protocol(self) -> Protocol {
        match self {
            Leg::Remap | Leg::Exchange => Protocol::Remap,
            Leg::RemapPrecopy => Protocol::RemapPrecopy,
        }
    }

    /// Whether both tiers are full.
    pub fn full_tiers(self) -> bool {
        self == Leg::Exchange
    }

    /// Whether the leg's tiers are preallocated. The plain leg's are, so
    /// its frames are held by minor faults (only frames with pages mapped
    /// are write-protected); the other legs allocate on demand, so their
    /// frames are write-protected whole and their released slots must give
    /// their memory back.
    pub fn preallocated(self) -> bool {
        self == Leg::Remap
    }
}

/// What one leg's driver counted.
#[derive(Debug, Clone, Default)]
pub struct LegTotals {
    /// Batches run.
    pub batches: u64,
    /// Frames moved.
    pub moved: u64,
    /// Of them, frames that swapped with another.
    pub exchanged: u64,
    /// Moves aborted (a batch with one is an error, so 0 in a result).
    pub aborted: u64,
    /// Pre-copy re-copied pages.
    pub recopied_pages: u64,
    /// Wall time from the first batch to the last.
    pub elapsed: Duration,
    /// Every write stall.
    pub stalls: Vec<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legs_cover_both_protocols_and_exchange() {
        let names: Vec<&str> = Leg::ALL.iter().map(|l| l.name()).collect();
        assert_eq!(names, ["remap", "remap-precopy", "exchange"]);
        assert_eq!(Leg::Exchange.protocol(), Protocol::Remap);
        assert_eq!(Leg::RemapPrecopy.protocol(), Protocol::RemapPrecopy);
        assert!(Leg::Exchange.full_tiers());
        assert!(!Leg::Remap.full_tiers());
        assert_eq!(
            serde_json::to_string(&Leg::RemapPrecopy).unwrap(),
            "\"remap-precopy\""
        );
    }
}

//! The identities of guest memory that cross crate boundaries: a guest
//! frame ([`FrameId`]) and a tier of the VM's tier list ([`TierId`]).
//!
//! Both are indices underneath (frame `n` is the `n`th frame of guest RAM,
//! tier `t` the `t`th tier, fastest first), and serialise as the bare
//! number, so wire formats and messages read as before. Slots stay plain
//! indices: a slot means something only within its tier.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A guest frame: its index in guest RAM, counted from the lowest
/// guest-physical address.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct FrameId(pub usize);

/// A tier: its index in the VM's tier list, which is ordered fastest first.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct TierId(pub usize);

impl FrameId {
    /// The frame's index, for indexing per-frame tables.
    pub const fn index(self) -> usize {
        self.0
    }
}

impl TierId {
    /// The fastest tier.
    pub const FAST: TierId = TierId(0);

    /// The tier's index, for indexing per-tier tables.
    pub const fn index(self) -> usize {
        self.0
    }
}

impl From<usize> for FrameId {
    fn from(index: usize) -> Self {
        FrameId(index)
    }
}

impl From<usize> for TierId {
    fn from(index: usize) -> Self {
        TierId(index)
    }
}

impl fmt::Display for FrameId {
    /// The bare index, so messages read "frame 3".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Display for TierId {
    /// The bare index, so messages read "tier 1".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_display_as_the_bare_index() {
        assert_eq!(format!("frame {}", FrameId(3)), "frame 3");
        assert_eq!(format!("tier {}", TierId::from(1)), "tier 1");
        assert_eq!(TierId::FAST.index(), 0);
    }
}

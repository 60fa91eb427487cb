//! The placement map: for every guest frame, the tier and slot that back it.
//! It is the single source of truth for where frames live; tier occupancy is
//! derived from it. A reverse index (slot → frame) is kept alongside so that
//! "who lives in this slot" is cheap; both are only changed together here.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ids::{FrameId, TierId};

/// Where a frame lives: a tier and a slot within that tier.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    /// The tier ([`TierId::FAST`] first).
    pub tier: TierId,
    /// Slot within the tier; byte offset in the tier backing = `slot * frame_size`.
    pub slot: usize,
}

impl Location {
    /// Slot `slot` of tier `tier`.
    pub const fn new(tier: TierId, slot: usize) -> Self {
        Location { tier, slot }
    }
}

/// Slot `slot` of tier number `tier` (unit tests spell locations so).
#[cfg(test)]
pub(crate) fn loc(tier: usize, slot: usize) -> Location {
    Location::new(TierId(tier), slot)
}

impl std::fmt::Debug for Location {
    /// As the derived form would with bare indices, so messages that show a
    /// location (`PlacementError::NotAt`) read as before the ids.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Location")
            .field("tier", &self.tier.index())
            .field("slot", &self.slot)
            .finish()
    }
}

/// Why a placement change was refused. Nothing is changed when it is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlacementError {
    /// The frame index is beyond the guest's frames.
    #[error("frame {0} out of range")]
    FrameOutOfRange(FrameId),
    /// The location names a tier or slot that does not exist.
    #[error("no slot {slot} in tier {tier}")]
    NoSuchSlot {
        /// The tier.
        tier: TierId,
        /// Slot index.
        slot: usize,
    },
    /// The frame is not where the caller thought it was.
    #[error("frame {frame} is at {actual:?}, not {expected:?}")]
    NotAt {
        /// The frame.
        frame: FrameId,
        /// Where the caller expected it.
        expected: Location,
        /// Where it is.
        actual: Location,
    },
    /// The destination slot already backs another frame.
    #[error("slot {slot} of tier {tier} already backs frame {frame}")]
    SlotTaken {
        /// The tier.
        tier: TierId,
        /// Slot index.
        slot: usize,
        /// The frame living there.
        frame: FrameId,
    },
}

/// Frame → location map with its slot → frame reverse index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementMap {
    frames: Vec<Location>,
    owners: Vec<Vec<Option<FrameId>>>,
    used: Vec<usize>,
}

/// An owned copy of the placement map taken at one instant.
pub type PlacementSnapshot = PlacementMap;

impl PlacementMap {
    /// Builds the map for tiers with `slot_counts` slots from each frame's
    /// location; refuses out-of-range locations and slots used twice.
    pub fn new(slot_counts: &[usize], locations: Vec<Location>) -> Result<Self, PlacementError> {
        let mut owners: Vec<Vec<Option<FrameId>>> =
            slot_counts.iter().map(|n| vec![None; *n]).collect();
        let mut used = vec![0; slot_counts.len()];
        for (frame, loc) in locations.iter().enumerate() {
            let owner = owners
                .get_mut(loc.tier.index())
                .and_then(|t| t.get_mut(loc.slot))
                .ok_or(PlacementError::NoSuchSlot {
                    tier: loc.tier,
                    slot: loc.slot,
                })?;
            if let Some(other) = *owner {
                return Err(PlacementError::SlotTaken {
                    tier: loc.tier,
                    slot: loc.slot,
                    frame: other,
                });
            }
            *owner = Some(FrameId(frame));
            used[loc.tier.index()] += 1;
        }
        Ok(Self {
            frames: locations,
            owners,
            used,
        })
    }

    /// Number of guest frames.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Number of tiers.
    pub fn tier_count(&self) -> usize {
        self.owners.len()
    }

    /// Where `frame` lives.
    pub fn location(&self, frame: FrameId) -> Option<Location> {
        self.frames.get(frame.index()).copied()
    }

    /// All frames with their locations, in frame order.
    pub fn iter(&self) -> impl Iterator<Item = (FrameId, Location)> + '_ {
        (0..).map(FrameId).zip(self.frames.iter().copied())
    }

    /// The frame living in `loc`, if any (`None` for free, reserved or
    /// nonexistent slots).
    pub fn owner(&self, loc: Location) -> Option<FrameId> {
        self.owners
            .get(loc.tier.index())?
            .get(loc.slot)
            .copied()
            .flatten()
    }

    /// Number of frames living on `tier` (0 for an unknown tier).
    pub fn used_frames(&self, tier: TierId) -> usize {
        self.used.get(tier.index()).copied().unwrap_or(0)
    }

    /// Number of slots in `tier` (0 for an unknown tier).
    pub fn slot_count(&self, tier: TierId) -> usize {
        self.owners.get(tier.index()).map_or(0, Vec::len)
    }

    /// The frames living on `tier`, in frame order.
    pub fn frames_on(&self, tier: TierId) -> impl Iterator<Item = FrameId> + '_ {
        self.iter()
            .filter(move |(_, l)| l.tier == tier)
            .map(|(f, _)| f)
    }

    /// Moves `frame` from `from` to the free slot `to`. Nothing changes on error.
    pub fn relocate(
        &mut self,
        frame: FrameId,
        from: Location,
        to: Location,
    ) -> Result<(), PlacementError> {
        self.check_at(frame, from)?;
        self.check_slot(to)?;
        if let Some(other) = self.owner(to) {
            return Err(PlacementError::SlotTaken {
                tier: to.tier,
                slot: to.slot,
                frame: other,
            });
        }
        self.owners[from.tier.index()][from.slot] = None;
        self.owners[to.tier.index()][to.slot] = Some(frame);
        self.used[from.tier.index()] -= 1;
        self.used[to.tier.index()] += 1;
        self.frames[frame.index()] = to;
        Ok(())
    }

    /// Swaps the locations of frames `a` (now at `a_at`) and `b` (now at `b_at`).
    /// Nothing changes on error.
    pub fn exchange(
        &mut self,
        a: FrameId,
        a_at: Location,
        b: FrameId,
        b_at: Location,
    ) -> Result<(), PlacementError> {
        self.check_at(a, a_at)?;
        self.check_at(b, b_at)?;
        self.owners[a_at.tier.index()][a_at.slot] = Some(b);
        self.owners[b_at.tier.index()][b_at.slot] = Some(a);
        self.frames[a.index()] = b_at;
        self.frames[b.index()] = a_at;
        // Per-tier counts are unchanged: one frame left each slot, one arrived.
        Ok(())
    }

    fn check_at(&self, frame: FrameId, expected: Location) -> Result<(), PlacementError> {
        let actual = self
            .location(frame)
            .ok_or(PlacementError::FrameOutOfRange(frame))?;
        if actual != expected {
            return Err(PlacementError::NotAt {
                frame,
                expected,
                actual,
            });
        }
        Ok(())
    }

    fn check_slot(&self, loc: Location) -> Result<(), PlacementError> {
        if loc.slot >= self.slot_count(loc.tier) {
            return Err(PlacementError::NoSuchSlot {
                tier: loc.tier,
                slot: loc.slot,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(frame: usize) -> FrameId {
        FrameId(frame)
    }

    fn t(tier: usize) -> TierId {
        TierId(tier)
    }

    /// Recounts occupancy from the forward map and checks the reverse index.
    fn assert_consistent(map: &PlacementMap) {
        for tier in 0..map.tier_count() {
            assert_eq!(map.used_frames(t(tier)), map.frames_on(t(tier)).count());
        }
        for (frame, l) in map.iter() {
            assert_eq!(map.owner(l), Some(frame));
        }
        let owned: usize = (0..map.tier_count())
            .flat_map(|tr| (0..map.slot_count(t(tr))).map(move |s| loc(tr, s)))
            .filter(|l| map.owner(*l).is_some())
            .count();
        assert_eq!(owned, map.frame_count());
    }

    #[test]
    fn builds_and_answers_queries() {
        let map = PlacementMap::new(&[2, 3], vec![loc(0, 0), loc(1, 2), loc(0, 1)]).unwrap();
        assert_eq!(map.frame_count(), 3);
        assert_eq!(map.location(f(1)), Some(loc(1, 2)));
        assert_eq!(map.location(f(3)), None);
        assert_eq!(map.owner(loc(1, 2)), Some(f(1)));
        assert_eq!(map.owner(loc(1, 0)), None);
        assert_eq!(map.used_frames(t(0)), 2);
        assert_eq!(map.frames_on(t(0)).collect::<Vec<_>>(), vec![f(0), f(2)]);
        assert_consistent(&map);
    }

    #[test]
    fn refuses_bad_initial_maps() {
        assert_eq!(
            PlacementMap::new(&[1], vec![loc(0, 0), loc(0, 0)]),
            Err(PlacementError::SlotTaken {
                tier: t(0),
                slot: 0,
                frame: f(0)
            })
        );
        assert_eq!(
            PlacementMap::new(&[1], vec![loc(0, 1)]),
            Err(PlacementError::NoSuchSlot {
                tier: t(0),
                slot: 1
            })
        );
        assert_eq!(
            PlacementMap::new(&[1], vec![loc(1, 0)]),
            Err(PlacementError::NoSuchSlot {
                tier: t(1),
                slot: 0
            })
        );
    }

    #[test]
    fn relocate_moves_and_updates_counts() {
        let mut map = PlacementMap::new(&[2, 2], vec![loc(0, 0), loc(0, 1)]).unwrap();
        map.relocate(f(1), loc(0, 1), loc(1, 1)).unwrap();
        assert_eq!(map.location(f(1)), Some(loc(1, 1)));
        assert_eq!(map.owner(loc(0, 1)), None);
        assert_eq!((map.used_frames(t(0)), map.used_frames(t(1))), (1, 1));
        assert_consistent(&map);
    }

    #[test]
    fn relocate_refuses_and_changes_nothing() {
        let mut map = PlacementMap::new(&[2, 2], vec![loc(0, 0), loc(1, 0)]).unwrap();
        let before = map.clone();
        assert!(matches!(
            map.relocate(f(0), loc(0, 1), loc(1, 1)),
            Err(PlacementError::NotAt {
                frame: FrameId(0),
                ..
            })
        ));
        assert_eq!(
            map.relocate(f(0), loc(0, 0), loc(1, 0)),
            Err(PlacementError::SlotTaken {
                tier: t(1),
                slot: 0,
                frame: f(1)
            })
        );
        assert_eq!(
            map.relocate(f(0), loc(0, 0), loc(1, 2)),
            Err(PlacementError::NoSuchSlot {
                tier: t(1),
                slot: 2
            })
        );
        assert_eq!(
            map.relocate(f(5), loc(0, 0), loc(1, 1)),
            Err(PlacementError::FrameOutOfRange(f(5)))
        );
        assert_eq!(map, before);
    }

    #[test]
    fn exchange_swaps_two_frames() {
        let mut map = PlacementMap::new(&[1, 1], vec![loc(0, 0), loc(1, 0)]).unwrap();
        map.exchange(f(0), loc(0, 0), f(1), loc(1, 0)).unwrap();
        assert_eq!(map.location(f(0)), Some(loc(1, 0)));
        assert_eq!(map.location(f(1)), Some(loc(0, 0)));
        assert_consistent(&map);
        let before = map.clone();
        assert!(map.exchange(f(0), loc(0, 0), f(1), loc(1, 0)).is_err());
        assert_eq!(map, before);
    }
}

//! The placement map: for every guest frame, the tier and slot that back it.
//! It is the single source of truth for where frames live; tier occupancy is
//! derived from it. A reverse index (slot → frame) is kept alongside so that
//! "who lives in this slot" is cheap; both are only changed together here.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where a frame lives: a tier index and a slot within that tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    /// Index into the VM's tier list (0 = fastest).
    pub tier: usize,
    /// Slot within the tier; byte offset in the tier backing = `slot * frame_size`.
    pub slot: usize,
}

/// Why a placement change was refused. Nothing is changed when it is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlacementError {
    /// The frame index is beyond the guest's frames.
    #[error("frame {0} out of range")]
    FrameOutOfRange(usize),
    /// The location names a tier or slot that does not exist.
    #[error("no slot {slot} in tier {tier}")]
    NoSuchSlot {
        /// Tier index.
        tier: usize,
        /// Slot index.
        slot: usize,
    },
    /// The frame is not where the caller thought it was.
    #[error("frame {frame} is at {actual:?}, not {expected:?}")]
    NotAt {
        /// The frame.
        frame: usize,
        /// Where the caller expected it.
        expected: Location,
        /// Where it is.
        actual: Location,
    },
    /// The destination slot already backs another frame.
    #[error("slot {slot} of tier {tier} already backs frame {frame}")]
    SlotTaken {
        /// Tier index.
        tier: usize,
        /// Slot index.
        slot: usize,
        /// The frame living there.
        frame: usize,
    },
}

/// Frame → location map with its slot → frame reverse index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementMap {
    frames: Vec<Location>,
    owners: Vec<Vec<Option<usize>>>,
    used: Vec<usize>,
}

/// An owned copy of the placement map taken at one instant.
pub type PlacementSnapshot = PlacementMap;

impl PlacementMap {
    /// Builds the map for tiers with `slot_counts` slots from each frame's
    /// location; refuses out-of-range locations and slots used twice.
    pub fn new(slot_counts: &[usize], locations: Vec<Location>) -> Result<Self, PlacementError> {
        let mut owners: Vec<Vec<Option<usize>>> =
            slot_counts.iter().map(|n| vec![None; *n]).collect();
        let mut used = vec![0; slot_counts.len()];
        for (frame, loc) in locations.iter().enumerate() {
            let owner = owners
                .get_mut(loc.tier)
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
            *owner = Some(frame);
            used[loc.tier] += 1;
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
    pub fn location(&self, frame: usize) -> Option<Location> {
        self.frames.get(frame).copied()
    }

    /// All frames with their locations, in frame order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, Location)> + '_ {
        self.frames.iter().copied().enumerate()
    }

    /// The frame living in `loc`, if any (`None` for free, reserved or
    /// nonexistent slots).
    pub fn owner(&self, loc: Location) -> Option<usize> {
        self.owners.get(loc.tier)?.get(loc.slot).copied().flatten()
    }

    /// Number of frames living on `tier` (0 for an unknown tier).
    pub fn used_frames(&self, tier: usize) -> usize {
        self.used.get(tier).copied().unwrap_or(0)
    }

    /// Number of slots in `tier` (0 for an unknown tier).
    pub fn slot_count(&self, tier: usize) -> usize {
        self.owners.get(tier).map_or(0, Vec::len)
    }

    /// The frames living on `tier`, in frame order.
    pub fn frames_on(&self, tier: usize) -> impl Iterator<Item = usize> + '_ {
        self.iter()
            .filter(move |(_, l)| l.tier == tier)
            .map(|(f, _)| f)
    }

    /// Moves `frame` from `from` to the free slot `to`. Nothing changes on error.
    pub fn relocate(
        &mut self,
        frame: usize,
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
        self.owners[from.tier][from.slot] = None;
        self.owners[to.tier][to.slot] = Some(frame);
        self.used[from.tier] -= 1;
        self.used[to.tier] += 1;
        self.frames[frame] = to;
        Ok(())
    }

    /// Swaps the locations of frames `a` (now at `a_at`) and `b` (now at `b_at`).
    /// Nothing changes on error.
    pub fn exchange(
        &mut self,
        a: usize,
        a_at: Location,
        b: usize,
        b_at: Location,
    ) -> Result<(), PlacementError> {
        self.check_at(a, a_at)?;
        self.check_at(b, b_at)?;
        self.owners[a_at.tier][a_at.slot] = Some(b);
        self.owners[b_at.tier][b_at.slot] = Some(a);
        self.frames[a] = b_at;
        self.frames[b] = a_at;
        // Per-tier counts are unchanged: one frame left each slot, one arrived.
        Ok(())
    }

    fn check_at(&self, frame: usize, expected: Location) -> Result<(), PlacementError> {
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

    fn loc(tier: usize, slot: usize) -> Location {
        Location { tier, slot }
    }

    /// Recounts occupancy from the forward map and checks the reverse index.
    fn assert_consistent(map: &PlacementMap) {
        for tier in 0..map.tier_count() {
            assert_eq!(map.used_frames(tier), map.frames_on(tier).count());
        }
        for (frame, l) in map.iter() {
            assert_eq!(map.owner(l), Some(frame));
        }
        let owned: usize = (0..map.tier_count())
            .flat_map(|t| (0..map.slot_count(t)).map(move |s| loc(t, s)))
            .filter(|l| map.owner(*l).is_some())
            .count();
        assert_eq!(owned, map.frame_count());
    }

    #[test]
    fn builds_and_answers_queries() {
        let map = PlacementMap::new(&[2, 3], vec![loc(0, 0), loc(1, 2), loc(0, 1)]).unwrap();
        assert_eq!(map.frame_count(), 3);
        assert_eq!(map.location(1), Some(loc(1, 2)));
        assert_eq!(map.location(3), None);
        assert_eq!(map.owner(loc(1, 2)), Some(1));
        assert_eq!(map.owner(loc(1, 0)), None);
        assert_eq!(map.used_frames(0), 2);
        assert_eq!(map.frames_on(0).collect::<Vec<_>>(), vec![0, 2]);
        assert_consistent(&map);
    }

    #[test]
    fn refuses_bad_initial_maps() {
        assert_eq!(
            PlacementMap::new(&[1], vec![loc(0, 0), loc(0, 0)]),
            Err(PlacementError::SlotTaken {
                tier: 0,
                slot: 0,
                frame: 0
            })
        );
        assert_eq!(
            PlacementMap::new(&[1], vec![loc(0, 1)]),
            Err(PlacementError::NoSuchSlot { tier: 0, slot: 1 })
        );
        assert_eq!(
            PlacementMap::new(&[1], vec![loc(1, 0)]),
            Err(PlacementError::NoSuchSlot { tier: 1, slot: 0 })
        );
    }

    #[test]
    fn relocate_moves_and_updates_counts() {
        let mut map = PlacementMap::new(&[2, 2], vec![loc(0, 0), loc(0, 1)]).unwrap();
        map.relocate(1, loc(0, 1), loc(1, 1)).unwrap();
        assert_eq!(map.location(1), Some(loc(1, 1)));
        assert_eq!(map.owner(loc(0, 1)), None);
        assert_eq!((map.used_frames(0), map.used_frames(1)), (1, 1));
        assert_consistent(&map);
    }

    #[test]
    fn relocate_refuses_and_changes_nothing() {
        let mut map = PlacementMap::new(&[2, 2], vec![loc(0, 0), loc(1, 0)]).unwrap();
        let before = map.clone();
        assert!(matches!(
            map.relocate(0, loc(0, 1), loc(1, 1)),
            Err(PlacementError::NotAt { frame: 0, .. })
        ));
        assert_eq!(
            map.relocate(0, loc(0, 0), loc(1, 0)),
            Err(PlacementError::SlotTaken {
                tier: 1,
                slot: 0,
                frame: 1
            })
        );
        assert_eq!(
            map.relocate(0, loc(0, 0), loc(1, 2)),
            Err(PlacementError::NoSuchSlot { tier: 1, slot: 2 })
        );
        assert_eq!(
            map.relocate(5, loc(0, 0), loc(1, 1)),
            Err(PlacementError::FrameOutOfRange(5))
        );
        assert_eq!(map, before);
    }

    #[test]
    fn exchange_swaps_two_frames() {
        let mut map = PlacementMap::new(&[1, 1], vec![loc(0, 0), loc(1, 0)]).unwrap();
        map.exchange(0, loc(0, 0), 1, loc(1, 0)).unwrap();
        assert_eq!(map.location(0), Some(loc(1, 0)));
        assert_eq!(map.location(1), Some(loc(0, 0)));
        assert_consistent(&map);
        let before = map.clone();
        assert!(map.exchange(0, loc(0, 0), 1, loc(1, 0)).is_err());
        assert_eq!(map, before);
    }
}

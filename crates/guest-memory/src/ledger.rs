//! The slot ledger: the placement map together with each tier's slot
//! allocator, changed only together so they never disagree. A slot is
//! free, reserved (allocated, no frame — a migration destination or a source
//! waiting to be released) or owned (allocated and in the placement map).

use thiserror::Error;

use crate::placement::{Location, PlacementError, PlacementMap};
use crate::slots::{SlotAllocator, SlotError};

/// Why a ledger operation was refused. Nothing is changed when it is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LedgerError {
    /// The tier index does not exist.
    #[error("no tier {0}")]
    NoSuchTier(usize),
    /// The tier has fewer free slots than asked for.
    #[error("tier {tier} has {available} free slots, {wanted} wanted")]
    TierFull {
        /// Tier index.
        tier: usize,
        /// Free slots.
        available: usize,
        /// Slots asked for.
        wanted: usize,
    },
    /// The slot is not reserved (free, or nonexistent).
    #[error("slot {slot} of tier {tier} is not reserved")]
    NotReserved {
        /// Tier index.
        tier: usize,
        /// Slot index.
        slot: usize,
    },
    /// The slot still backs a frame.
    #[error("slot {slot} of tier {tier} still backs frame {frame}")]
    SlotInUse {
        /// Tier index.
        tier: usize,
        /// Slot index.
        slot: usize,
        /// The frame.
        frame: usize,
    },
    /// The placement map refused the change.
    #[error("placement map refused the change")]
    Placement(#[source] PlacementError),
    /// The allocator refused the change.
    #[error("slot allocator refused the change")]
    Slot(#[source] SlotError),
}

/// Placement map plus slot allocators.
#[derive(Debug)]
pub(crate) struct Ledger {
    map: PlacementMap,
    slots: Vec<SlotAllocator>,
}

impl Ledger {
    /// Places each frame on the tier given in `tier_of_frame`, taking slots
    /// in ascending order per tier (consecutive frames get consecutive slots).
    pub(crate) fn new(slot_counts: &[usize], tier_of_frame: &[usize]) -> Result<Self, LedgerError> {
        let mut slots: Vec<SlotAllocator> =
            slot_counts.iter().map(|n| SlotAllocator::new(*n)).collect();
        let mut locations = Vec::with_capacity(tier_of_frame.len());
        for &tier in tier_of_frame {
            let allocator = slots.get_mut(tier).ok_or(LedgerError::NoSuchTier(tier))?;
            let slot = allocator.allocate().ok_or(LedgerError::TierFull {
                tier,
                available: 0,
                wanted: 1,
            })?;
            locations.push(Location { tier, slot });
        }
        let map = PlacementMap::new(slot_counts, locations).map_err(LedgerError::Placement)?;
        Ok(Self { map, slots })
    }

    pub(crate) fn map(&self) -> &PlacementMap {
        &self.map
    }

    /// Allocated slots of `tier` that back no frame.
    pub(crate) fn reserved(&self, tier: usize) -> usize {
        self.slots
            .get(tier)
            .map_or(0, |s| s.allocated() - self.map.used_frames(tier))
    }

    /// Reserves `count` free slots of `tier`, all or none.
    pub(crate) fn reserve(
        &mut self,
        tier: usize,
        count: usize,
    ) -> Result<Vec<Location>, LedgerError> {
        let allocator = self
            .slots
            .get_mut(tier)
            .ok_or(LedgerError::NoSuchTier(tier))?;
        if allocator.available() < count {
            return Err(LedgerError::TierFull {
                tier,
                available: allocator.available(),
                wanted: count,
            });
        }
        (0..count)
            .map(|_| {
                let slot = allocator.allocate().ok_or(LedgerError::TierFull {
                    tier,
                    available: 0,
                    wanted: 1,
                })?;
                Ok(Location { tier, slot })
            })
            .collect()
    }

    /// Frees a reserved slot (one that backs no frame).
    pub(crate) fn release(&mut self, loc: Location) -> Result<(), LedgerError> {
        self.check_reserved(loc)?;
        self.slots[loc.tier]
            .free(loc.slot)
            .map_err(LedgerError::Slot)
    }

    /// Records that `frame` now lives in the reserved slot `to` instead of
    /// `from`; `from` stays reserved until [`Ledger::release`]d.
    pub(crate) fn commit_move(
        &mut self,
        frame: usize,
        from: Location,
        to: Location,
    ) -> Result<(), LedgerError> {
        self.check_reserved(to)?;
        self.map
            .relocate(frame, from, to)
            .map_err(LedgerError::Placement)
    }

    /// Records that frames `a` and `b` swapped slots.
    pub(crate) fn commit_exchange(
        &mut self,
        a: usize,
        a_at: Location,
        b: usize,
        b_at: Location,
    ) -> Result<(), LedgerError> {
        self.map
            .exchange(a, a_at, b, b_at)
            .map_err(LedgerError::Placement)
    }

    fn check_reserved(&self, loc: Location) -> Result<(), LedgerError> {
        let allocator = self
            .slots
            .get(loc.tier)
            .ok_or(LedgerError::NoSuchTier(loc.tier))?;
        if !allocator.is_allocated(loc.slot) {
            return Err(LedgerError::NotReserved {
                tier: loc.tier,
                slot: loc.slot,
            });
        }
        if let Some(frame) = self.map.owner(loc) {
            return Err(LedgerError::SlotInUse {
                tier: loc.tier,
                slot: loc.slot,
                frame,
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

    #[test]
    fn initial_slots_ascend_per_tier() {
        let ledger = Ledger::new(&[2, 3], &[1, 0, 1, 0]).unwrap();
        let locs: Vec<_> = ledger.map().iter().map(|(_, l)| l).collect();
        assert_eq!(locs, vec![loc(1, 0), loc(0, 0), loc(1, 1), loc(0, 1)]);
        assert_eq!(ledger.reserved(0), 0);
    }

    #[test]
    fn initial_overfill_is_an_error() {
        assert!(matches!(
            Ledger::new(&[1], &[0, 0]),
            Err(LedgerError::TierFull { tier: 0, .. })
        ));
        assert_eq!(
            Ledger::new(&[1], &[2]).unwrap_err(),
            LedgerError::NoSuchTier(2)
        );
    }

    #[test]
    fn migration_sequence_reserve_commit_release() {
        let mut ledger = Ledger::new(&[2, 2], &[0, 0]).unwrap();
        let dst = ledger.reserve(1, 1).unwrap()[0];
        assert_eq!(ledger.reserved(1), 1);
        ledger.commit_move(1, loc(0, 1), dst).unwrap();
        assert_eq!(ledger.map().location(1), Some(dst));
        // Source still reserved until released, so it cannot be handed out.
        assert_eq!(ledger.reserved(0), 1);
        assert_eq!(
            ledger.reserve(0, 1).unwrap_err(),
            LedgerError::TierFull {
                tier: 0,
                available: 0,
                wanted: 1
            }
        );
        ledger.release(loc(0, 1)).unwrap();
        assert_eq!(ledger.reserve(0, 1).unwrap(), vec![loc(0, 1)]);
    }

    #[test]
    fn refuses_unsafe_operations() {
        let mut ledger = Ledger::new(&[2, 2], &[0, 1]).unwrap();
        // Commit into a slot nobody reserved.
        assert_eq!(
            ledger.commit_move(0, loc(0, 0), loc(1, 1)),
            Err(LedgerError::NotReserved { tier: 1, slot: 1 })
        );
        // Release a slot that still backs a frame.
        assert_eq!(
            ledger.release(loc(1, 0)),
            Err(LedgerError::SlotInUse {
                tier: 1,
                slot: 0,
                frame: 1
            })
        );
        // Release a free slot.
        assert_eq!(
            ledger.release(loc(0, 1)),
            Err(LedgerError::NotReserved { tier: 0, slot: 1 })
        );
        // Reserve more than is free: nothing taken.
        assert!(matches!(
            ledger.reserve(1, 2),
            Err(LedgerError::TierFull { available: 1, .. })
        ));
        assert_eq!(ledger.reserve(1, 1).unwrap().len(), 1);
        assert_eq!(ledger.reserve(7, 1), Err(LedgerError::NoSuchTier(7)));
    }

    #[test]
    fn exchange_needs_no_free_slot() {
        let mut ledger = Ledger::new(&[1, 1], &[0, 1]).unwrap();
        ledger.commit_exchange(0, loc(0, 0), 1, loc(1, 0)).unwrap();
        assert_eq!(ledger.map().location(0), Some(loc(1, 0)));
        assert_eq!(ledger.map().location(1), Some(loc(0, 0)));
    }
}

//! The slot ledger: the placement map together with each tier's slot
//! allocator, changed only together so they never disagree. A slot is
//! free, reserved (allocated, no frame — a migration destination or a source
//! waiting to be released) or owned (allocated and in the placement map).
//!
//! With a shared backing (`Backing::SharedNuma`) every tier has one slot
//! per frame and a frame's slot is its own index on every tier: frames
//! change tier (NUMA node), never slot. Such a ledger is "fixed": a tier's
//! capacity is a quota below its slot count, and reservations name the frame.

use thiserror::Error;

use crate::ids::{FrameId, TierId};
use crate::placement::{Location, PlacementError, PlacementMap};
use crate::slots::{SlotAllocator, SlotError};

/// Why a ledger operation was refused. Nothing is changed when it is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LedgerError {
    /// The tier index does not exist.
    #[error("no tier {0}")]
    NoSuchTier(TierId),
    /// The tier has fewer free slots than asked for.
    #[error("tier {tier} has {available} free slots, {wanted} wanted")]
    TierFull {
        /// The tier.
        tier: TierId,
        /// Free slots.
        available: usize,
        /// Slots asked for.
        wanted: usize,
    },
    /// The slot is not reserved (free, or nonexistent).
    #[error("slot {slot} of tier {tier} is not reserved")]
    NotReserved {
        /// The tier.
        tier: TierId,
        /// Slot index.
        slot: usize,
    },
    /// The slot still backs a frame.
    #[error("slot {slot} of tier {tier} still backs frame {frame}")]
    SlotInUse {
        /// The tier.
        tier: TierId,
        /// Slot index.
        slot: usize,
        /// The frame.
        frame: FrameId,
    },
    /// The placement map refused the change.
    #[error("placement map refused the change")]
    Placement(#[source] PlacementError),
    /// The allocator refused the change.
    #[error("slot allocator refused the change")]
    Slot(#[source] SlotError),
    /// A slot operation that a fixed (shared-backing) ledger cannot do.
    #[error("slots are fixed to frames with a shared backing: frames change tier, not slot")]
    FixedSlots,
    /// The frame already has a destination reserved (a migration is moving it).
    #[error("frame {0} is already being moved")]
    InFlight(FrameId),
}

/// Placement map plus slot allocators.
#[derive(Debug)]
pub(crate) struct Ledger {
    map: PlacementMap,
    slots: Vec<SlotAllocator>,
    /// Fixed ledgers only: frames each tier may hold, reservations included.
    quotas: Option<Vec<usize>>,
}

impl Ledger {
    /// Places each frame on the tier given in `tier_of_frame`, taking slots
    /// in ascending order per tier (consecutive frames get consecutive slots).
    pub(crate) fn new(slot_counts: &[usize], tier_of_frame: &[usize]) -> Result<Self, LedgerError> {
        let mut slots: Vec<SlotAllocator> =
            slot_counts.iter().map(|n| SlotAllocator::new(*n)).collect();
        let mut locations = Vec::with_capacity(tier_of_frame.len());
        for &tier in tier_of_frame {
            let allocator = slots
                .get_mut(tier)
                .ok_or(LedgerError::NoSuchTier(TierId(tier)))?;
            let tier = TierId(tier);
            let slot = allocator.allocate().ok_or(LedgerError::TierFull {
                tier,
                available: 0,
                wanted: 1,
            })?;
            locations.push(Location { tier, slot });
        }
        let map = PlacementMap::new(slot_counts, locations).map_err(LedgerError::Placement)?;
        Ok(Self {
            map,
            slots,
            quotas: None,
        })
    }

    /// A fixed ledger: each tier has one slot per frame, frame `f` lives in
    /// slot `f` of tier `tier_of_frame[f]`, and tier `t` holds at most
    /// `quotas[t]` frames.
    pub(crate) fn fixed(quotas: &[usize], tier_of_frame: &[usize]) -> Result<Self, LedgerError> {
        let frames = tier_of_frame.len();
        let mut slots: Vec<SlotAllocator> =
            quotas.iter().map(|_| SlotAllocator::new(frames)).collect();
        let mut locations = Vec::with_capacity(frames);
        for (frame, &tier) in tier_of_frame.iter().enumerate() {
            let allocator = slots
                .get_mut(tier)
                .ok_or(LedgerError::NoSuchTier(TierId(tier)))?;
            let quota = quotas[tier];
            let tier = TierId(tier);
            if allocator.allocated() >= quota {
                return Err(LedgerError::TierFull {
                    tier,
                    available: 0,
                    wanted: 1,
                });
            }
            allocator.take(frame).map_err(LedgerError::Slot)?;
            locations.push(Location { tier, slot: frame });
        }
        let slot_counts = vec![frames; quotas.len()];
        let map = PlacementMap::new(&slot_counts, locations).map_err(LedgerError::Placement)?;
        Ok(Self {
            map,
            slots,
            quotas: Some(quotas.to_vec()),
        })
    }

    /// Fixed ledgers: reserves slot `frame` of `tier` for moving `frame`
    /// there, within the tier's quota unless `over_quota` (an exchange, whose
    /// partner leaves the tier in the same batch). Returns the frame's
    /// current location and the reserved one.
    pub(crate) fn reserve_frame(
        &mut self,
        frame: FrameId,
        tier: TierId,
        over_quota: bool,
    ) -> Result<(Location, Location), LedgerError> {
        let quota = match &self.quotas {
            Some(quotas) => *quotas
                .get(tier.index())
                .ok_or(LedgerError::NoSuchTier(tier))?,
            None => return Err(LedgerError::FixedSlots),
        };
        let from = self.map.location(frame).ok_or(LedgerError::Placement(
            PlacementError::FrameOutOfRange(frame),
        ))?;
        let to = Location {
            tier,
            slot: frame.index(),
        };
        let in_flight = (0..self.slots.len())
            .any(|t| t != from.tier.index() && self.slots[t].is_allocated(frame.index()));
        if in_flight {
            return Err(LedgerError::InFlight(frame));
        }
        let allocated = self.slots[tier.index()].allocated();
        if allocated >= quota && !over_quota {
            return Err(LedgerError::TierFull {
                tier,
                available: 0,
                wanted: 1,
            });
        }
        self.slots[tier.index()]
            .take(frame.index())
            .map_err(LedgerError::Slot)?;
        Ok((from, to))
    }

    /// Frames `tier` may hold (its slot count unless the ledger is fixed).
    pub(crate) fn quota(&self, tier: TierId) -> usize {
        match &self.quotas {
            Some(quotas) => quotas.get(tier.index()).copied().unwrap_or(0),
            None => self
                .slots
                .get(tier.index())
                .map_or(0, SlotAllocator::capacity),
        }
    }

    /// Allocated slots of `tier` (frames living there plus reservations).
    pub(crate) fn allocated(&self, tier: TierId) -> usize {
        self.slots
            .get(tier.index())
            .map_or(0, SlotAllocator::allocated)
    }

    pub(crate) fn map(&self) -> &PlacementMap {
        &self.map
    }

    /// Whether `loc` is allocated (backing a frame or reserved).
    pub(crate) fn is_allocated(&self, loc: Location) -> bool {
        self.slots
            .get(loc.tier.index())
            .is_some_and(|s| s.is_allocated(loc.slot))
    }

    /// Allocated slots of `tier` that back no frame.
    pub(crate) fn reserved(&self, tier: TierId) -> usize {
        self.slots
            .get(tier.index())
            .map_or(0, |s| s.allocated() - self.map.used_frames(tier))
    }

    /// The allocator of `tier`, for ledgers that hand out free slots (not
    /// fixed ones).
    fn free_slots(&mut self, tier: TierId) -> Result<&mut SlotAllocator, LedgerError> {
        if self.quotas.is_some() {
            return Err(LedgerError::FixedSlots);
        }
        self.slots
            .get_mut(tier.index())
            .ok_or(LedgerError::NoSuchTier(tier))
    }

    /// Reserves `count` free slots of `tier`, all or none.
    pub(crate) fn reserve(
        &mut self,
        tier: TierId,
        count: usize,
    ) -> Result<Vec<Location>, LedgerError> {
        let allocator = self.free_slots(tier)?;
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

    /// Reserves one free slot of `tier`: `preferred` if it is free.
    pub(crate) fn reserve_preferring(
        &mut self,
        tier: TierId,
        preferred: usize,
    ) -> Result<Location, LedgerError> {
        let slot = self
            .free_slots(tier)?
            .allocate_preferring(preferred)
            .ok_or(LedgerError::TierFull {
                tier,
                available: 0,
                wanted: 1,
            })?;
        Ok(Location { tier, slot })
    }

    /// Frees a reserved slot (one that backs no frame).
    pub(crate) fn release(&mut self, loc: Location) -> Result<(), LedgerError> {
        self.check_reserved(loc)?;
        self.slots[loc.tier.index()]
            .free(loc.slot)
            .map_err(LedgerError::Slot)
    }

    /// Records that `frame` now lives in the reserved slot `to` instead of
    /// `from`; `from` stays reserved until [`Ledger::release`]d.
    pub(crate) fn commit_move(
        &mut self,
        frame: FrameId,
        from: Location,
        to: Location,
    ) -> Result<(), LedgerError> {
        self.check_reserved(to)?;
        if self.quotas.is_some() && to.slot != frame.index() {
            return Err(LedgerError::FixedSlots);
        }
        self.map
            .relocate(frame, from, to)
            .map_err(LedgerError::Placement)
    }

    /// Records that frames `a` and `b` swapped slots.
    pub(crate) fn commit_exchange(
        &mut self,
        a: FrameId,
        a_at: Location,
        b: FrameId,
        b_at: Location,
    ) -> Result<(), LedgerError> {
        if self.quotas.is_some() {
            return Err(LedgerError::FixedSlots);
        }
        self.map
            .exchange(a, a_at, b, b_at)
            .map_err(LedgerError::Placement)
    }

    fn check_reserved(&self, loc: Location) -> Result<(), LedgerError> {
        let allocator = self
            .slots
            .get(loc.tier.index())
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
    use crate::placement::loc;

    #[test]
    fn initial_slots_ascend_per_tier() {
        let ledger = Ledger::new(&[2, 3], &[1, 0, 1, 0]).unwrap();
        let locs: Vec<_> = ledger.map().iter().map(|(_, l)| l).collect();
        assert_eq!(locs, vec![loc(1, 0), loc(0, 0), loc(1, 1), loc(0, 1)]);
        assert_eq!(ledger.reserved(TierId(0)), 0);
    }

    #[test]
    fn initial_overfill_is_an_error() {
        assert!(matches!(
            Ledger::new(&[1], &[0, 0]),
            Err(LedgerError::TierFull {
                tier: TierId(0),
                ..
            })
        ));
        assert_eq!(
            Ledger::new(&[1], &[2]).unwrap_err(),
            LedgerError::NoSuchTier(TierId(2))
        );
    }

    #[test]
    fn migration_sequence_reserve_commit_release() {
        let mut ledger = Ledger::new(&[2, 2], &[0, 0]).unwrap();
        let dst = ledger.reserve(TierId(1), 1).unwrap()[0];
        assert_eq!(ledger.reserved(TierId(1)), 1);
        ledger.commit_move(FrameId(1), loc(0, 1), dst).unwrap();
        assert_eq!(ledger.map().location(FrameId(1)), Some(dst));
        // Source still reserved until released, so it cannot be handed out.
        assert_eq!(ledger.reserved(TierId(0)), 1);
        assert_eq!(
            ledger.reserve(TierId(0), 1).unwrap_err(),
            LedgerError::TierFull {
                tier: TierId(0),
                available: 0,
                wanted: 1
            }
        );
        ledger.release(loc(0, 1)).unwrap();
        assert_eq!(ledger.reserve(TierId(0), 1).unwrap(), vec![loc(0, 1)]);
    }

    #[test]
    fn refuses_unsafe_operations() {
        let mut ledger = Ledger::new(&[2, 2], &[0, 1]).unwrap();
        // Commit into a slot nobody reserved.
        assert_eq!(
            ledger.commit_move(FrameId(0), loc(0, 0), loc(1, 1)),
            Err(LedgerError::NotReserved {
                tier: TierId(1),
                slot: 1
            })
        );
        // Release a slot that still backs a frame.
        assert_eq!(
            ledger.release(loc(1, 0)),
            Err(LedgerError::SlotInUse {
                tier: TierId(1),
                slot: 0,
                frame: FrameId(1)
            })
        );
        // Release a free slot.
        assert_eq!(
            ledger.release(loc(0, 1)),
            Err(LedgerError::NotReserved {
                tier: TierId(0),
                slot: 1
            })
        );
        // Reserve more than is free: nothing taken.
        assert!(matches!(
            ledger.reserve(TierId(1), 2),
            Err(LedgerError::TierFull { available: 1, .. })
        ));
        assert_eq!(ledger.reserve(TierId(1), 1).unwrap().len(), 1);
        assert_eq!(
            ledger.reserve(TierId(7), 1),
            Err(LedgerError::NoSuchTier(TierId(7)))
        );
    }

    #[test]
    fn fixed_ledger_keeps_each_frame_in_its_own_slot() {
        // 4 frames, quotas 2 and 3: frames 0,1 on tier 0, frames 2,3 on tier 1.
        let mut ledger = Ledger::fixed(&[2, 3], &[0, 0, 1, 1]).unwrap();
        assert_eq!(ledger.map().location(FrameId(3)), Some(loc(1, 3)));
        assert_eq!((ledger.quota(TierId(0)), ledger.quota(TierId(1))), (2, 3));
        assert_eq!(ledger.map().slot_count(TierId(0)), 4);
        let (from, to) = ledger.reserve_frame(FrameId(0), TierId(1), false).unwrap();
        assert_eq!((from, to), (loc(0, 0), loc(1, 0)));
        assert_eq!(ledger.reserved(TierId(1)), 1);
        // A second reservation for the same frame elsewhere is refused.
        assert_eq!(
            ledger.reserve_frame(FrameId(0), TierId(1), false),
            Err(LedgerError::InFlight(FrameId(0)))
        );
        ledger.commit_move(FrameId(0), from, to).unwrap();
        ledger.release(from).unwrap();
        assert_eq!(ledger.map().location(FrameId(0)), Some(loc(1, 0)));
        assert_eq!(
            (ledger.allocated(TierId(0)), ledger.allocated(TierId(1))),
            (1, 3)
        );
        // Tier 1 is at its quota: only an exchange may go over it.
        assert!(matches!(
            ledger.reserve_frame(FrameId(1), TierId(1), false),
            Err(LedgerError::TierFull {
                tier: TierId(1),
                ..
            })
        ));
        let (_, over) = ledger.reserve_frame(FrameId(1), TierId(1), true).unwrap();
        ledger.release(over).unwrap();
        // Generic reservations and slot swaps would break slot == frame.
        assert_eq!(ledger.reserve(TierId(0), 1), Err(LedgerError::FixedSlots));
        assert_eq!(
            ledger.commit_exchange(FrameId(0), loc(1, 0), FrameId(1), loc(0, 1)),
            Err(LedgerError::FixedSlots)
        );
        assert_eq!(
            ledger.reserve_frame(FrameId(9), TierId(0), false),
            Err(LedgerError::Placement(PlacementError::FrameOutOfRange(
                FrameId(9)
            )))
        );
        assert_eq!(
            ledger.reserve_frame(FrameId(0), TierId(5), false),
            Err(LedgerError::NoSuchTier(TierId(5)))
        );
    }

    #[test]
    fn fixed_ledger_refuses_an_initial_placement_over_quota() {
        assert!(matches!(
            Ledger::fixed(&[1, 3], &[0, 0, 1]),
            Err(LedgerError::TierFull {
                tier: TierId(0),
                ..
            })
        ));
        assert_eq!(
            Ledger::new(&[2], &[0])
                .unwrap()
                .reserve_frame(FrameId(0), TierId(0), false),
            Err(LedgerError::FixedSlots)
        );
    }

    #[test]
    fn exchange_needs_no_free_slot() {
        let mut ledger = Ledger::new(&[1, 1], &[0, 1]).unwrap();
        ledger
            .commit_exchange(FrameId(0), loc(0, 0), FrameId(1), loc(1, 0))
            .unwrap();
        assert_eq!(ledger.map().location(FrameId(0)), Some(loc(1, 0)));
        assert_eq!(ledger.map().location(FrameId(1)), Some(loc(0, 0)));
    }
}

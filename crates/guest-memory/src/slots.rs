//! Per-tier slot allocator. A tier's backing is cut into slots of one frame
//! each; a slot is either free or allocated (holding a frame, or reserved as
//! a migration destination). Free slots are kept on a free list.

use thiserror::Error;

/// Why a slot could not be freed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SlotError {
    /// The slot index is beyond the tier's capacity.
    #[error("slot {slot} out of range (tier has {count} slots)")]
    OutOfRange {
        /// The slot asked for.
        slot: usize,
        /// Slots in the tier.
        count: usize,
    },
    /// The slot is already free.
    #[error("slot {0} is not allocated")]
    NotAllocated(usize),
    /// The slot is already allocated.
    #[error("slot {0} is already allocated")]
    AlreadyAllocated(usize),
}

/// Free-list allocator over the slots `0..count` of one tier.
#[derive(Debug, Clone)]
pub struct SlotAllocator {
    allocated: Vec<bool>,
    /// Stack of free slots; the lowest free slot is on top after creation so
    /// that fresh allocations come out in ascending order (long runs to map).
    free: Vec<usize>,
    /// Index of each free slot in `free` (`NOT_FREE` for allocated slots),
    /// so that [`SlotAllocator::take`] is O(1).
    position: Vec<usize>,
}

/// `position` of an allocated slot.
const NOT_FREE: usize = usize::MAX;

impl SlotAllocator {
    /// An allocator with `count` free slots.
    pub fn new(count: usize) -> Self {
        Self {
            allocated: vec![false; count],
            free: (0..count).rev().collect(),
            position: (0..count).map(|slot| count - 1 - slot).collect(),
        }
    }

    /// Takes a free slot, or `None` if the tier is full.
    pub fn allocate(&mut self) -> Option<usize> {
        let slot = self.free.pop()?;
        self.allocated[slot] = true;
        self.position[slot] = NOT_FREE;
        Some(slot)
    }

    /// Takes `preferred` if it is free, else any free slot; `None` if the
    /// tier is full. Handing consecutive frames consecutive slots lets a
    /// migration map them with one `mmap`.
    pub fn allocate_preferring(&mut self, preferred: usize) -> Option<usize> {
        match self.take(preferred) {
            Ok(()) => Some(preferred),
            Err(_) => self.allocate(),
        }
    }

    /// Takes the free slot `slot`. The free list's order is not kept.
    pub fn take(&mut self, slot: usize) -> Result<(), SlotError> {
        let at = match self.position.get(slot) {
            None => {
                return Err(SlotError::OutOfRange {
                    slot,
                    count: self.capacity(),
                });
            }
            Some(&NOT_FREE) => return Err(SlotError::AlreadyAllocated(slot)),
            Some(&at) => at,
        };
        self.free.swap_remove(at);
        if let Some(&moved) = self.free.get(at) {
            self.position[moved] = at;
        }
        self.position[slot] = NOT_FREE;
        self.allocated[slot] = true;
        Ok(())
    }

    /// Returns `slot` to the free list.
    pub fn free(&mut self, slot: usize) -> Result<(), SlotError> {
        match self.allocated.get_mut(slot) {
            None => Err(SlotError::OutOfRange {
                slot,
                count: self.capacity(),
            }),
            Some(false) => Err(SlotError::NotAllocated(slot)),
            Some(flag) => {
                *flag = false;
                self.position[slot] = self.free.len();
                self.free.push(slot);
                Ok(())
            }
        }
    }

    /// Whether `slot` is allocated (false for out-of-range slots).
    pub fn is_allocated(&self, slot: usize) -> bool {
        self.allocated.get(slot).copied().unwrap_or(false)
    }

    /// Number of slots in the tier.
    pub fn capacity(&self) -> usize {
        self.allocated.len()
    }

    /// Number of allocated slots.
    pub fn allocated(&self) -> usize {
        self.capacity() - self.free.len()
    }

    /// Number of free slots.
    pub fn available(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_in_ascending_order_until_full() {
        let mut slots = SlotAllocator::new(3);
        assert_eq!(slots.allocate(), Some(0));
        assert_eq!(slots.allocate(), Some(1));
        assert_eq!(slots.allocate(), Some(2));
        assert_eq!(slots.allocate(), None);
        assert_eq!(slots.allocated(), 3);
        assert_eq!(slots.available(), 0);
    }

    #[test]
    fn freed_slots_are_reused() {
        let mut slots = SlotAllocator::new(2);
        let a = slots.allocate().unwrap();
        let _b = slots.allocate().unwrap();
        slots.free(a).unwrap();
        assert!(!slots.is_allocated(a));
        assert_eq!(slots.allocate(), Some(a));
        assert!(slots.is_allocated(a));
    }

    #[test]
    fn a_preferred_slot_is_taken_when_free_and_any_slot_otherwise() {
        let mut slots = SlotAllocator::new(4);
        assert_eq!(slots.allocate_preferring(2), Some(2));
        assert_eq!(slots.allocate_preferring(3), Some(3));
        let other = slots.allocate_preferring(3).unwrap();
        assert!(other < 2, "3 is taken: any free slot");
        assert_eq!(slots.allocate_preferring(9), Some(1 - other));
        assert_eq!(slots.allocate_preferring(0), None, "full");
        assert_eq!(slots.available(), 0);
    }

    #[test]
    fn rejects_double_free_and_out_of_range() {
        let mut slots = SlotAllocator::new(2);
        assert_eq!(slots.free(0), Err(SlotError::NotAllocated(0)));
        assert_eq!(
            slots.free(2),
            Err(SlotError::OutOfRange { slot: 2, count: 2 })
        );
        let s = slots.allocate().unwrap();
        slots.free(s).unwrap();
        assert_eq!(slots.free(s), Err(SlotError::NotAllocated(s)));
        assert_eq!(slots.available(), 2);
    }

    #[test]
    fn take_claims_a_given_slot_and_keeps_the_free_list_right() {
        let mut slots = SlotAllocator::new(5);
        slots.take(3).unwrap();
        slots.take(0).unwrap();
        assert_eq!(slots.take(3), Err(SlotError::AlreadyAllocated(3)));
        assert_eq!(
            slots.take(5),
            Err(SlotError::OutOfRange { slot: 5, count: 5 })
        );
        assert_eq!((slots.allocated(), slots.available()), (2, 3));
        slots.free(3).unwrap();
        slots.take(3).unwrap();
        // What is left to allocate is exactly the untaken slots, once each.
        let mut rest: Vec<usize> = std::iter::from_fn(|| slots.allocate()).collect();
        rest.sort_unstable();
        assert_eq!(rest, vec![1, 2, 4]);
        for slot in 0..5 {
            assert!(slots.is_allocated(slot));
        }
        slots.free(2).unwrap();
        slots.take(2).unwrap();
        assert_eq!(slots.available(), 0);
    }
}

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
}

/// Free-list allocator over the slots `0..count` of one tier.
#[derive(Debug, Clone)]
pub struct SlotAllocator {
    allocated: Vec<bool>,
    /// Stack of free slots; the lowest free slot is on top after creation so
    /// that fresh allocations come out in ascending order (long runs to map).
    free: Vec<usize>,
}

impl SlotAllocator {
    /// An allocator with `count` free slots.
    pub fn new(count: usize) -> Self {
        Self {
            allocated: vec![false; count],
            free: (0..count).rev().collect(),
        }
    }

    /// Takes a free slot, or `None` if the tier is full.
    pub fn allocate(&mut self) -> Option<usize> {
        let slot = self.free.pop()?;
        self.allocated[slot] = true;
        Some(slot)
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
}

//! Where guest RAM sits in the guest-physical address space (x86): below the
//! 3 GiB MMIO hole and, for the rest, from 4 GiB up. The hole holds device
//! MMIO, the LAPIC and the IOAPIC.

use crate::gpa_range::GpaRange;

/// Start of the MMIO hole; RAM below it is "low" RAM.
pub const MMIO_HOLE_START: u64 = 3 << 30;
/// End of the MMIO hole; RAM above 3 GiB continues here.
pub const HIGH_RAM_START: u64 = 4 << 30;

/// The RAM regions of a guest with `mem_size` bytes of RAM:
/// `[0, min(size, 3 GiB))` and, if more, `[4 GiB, 4 GiB + size - 3 GiB)`.
/// Empty for a zero size.
pub fn ram_regions(mem_size: u64) -> Vec<GpaRange> {
    let mut regions = Vec::with_capacity(2);
    let low = mem_size.min(MMIO_HOLE_START);
    if low > 0 {
        regions.push(GpaRange { gpa: 0, len: low });
    }
    if mem_size > low {
        regions.push(GpaRange {
            gpa: HIGH_RAM_START,
            len: mem_size - low,
        });
    }
    regions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::{GIB, MIB};

    #[test]
    fn small_guest_has_one_low_region() {
        assert_eq!(
            ram_regions(512 * MIB),
            vec![GpaRange {
                gpa: 0,
                len: 512 * MIB
            }]
        );
    }

    #[test]
    fn exactly_three_gib_fills_low_ram_only() {
        assert_eq!(
            ram_regions(3 * GIB),
            vec![GpaRange {
                gpa: 0,
                len: 3 * GIB
            }]
        );
    }

    #[test]
    fn large_guest_continues_above_the_hole() {
        let regions = ram_regions(6 * GIB);
        assert_eq!(
            regions,
            vec![
                GpaRange {
                    gpa: 0,
                    len: 3 * GIB
                },
                GpaRange {
                    gpa: 4 * GIB,
                    len: 3 * GIB
                },
            ]
        );
        assert_eq!(regions[1].end(), 7 * GIB);
        assert_eq!(regions.iter().map(|r| r.len).sum::<u64>(), 6 * GIB);
        // Between 3 and 4 GiB nothing: the hole.
        assert!(
            regions
                .iter()
                .all(|r| r.end() <= MMIO_HOLE_START || r.gpa >= HIGH_RAM_START)
        );
    }

    #[test]
    fn zero_size_has_no_regions() {
        assert!(ram_regions(0).is_empty());
    }
}

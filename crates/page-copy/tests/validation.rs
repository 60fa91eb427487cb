//! Bad batches are rejected by every engine before any byte is written.

mod common;

use std::ptr;

use page_copy::{CopyError, CopyRange, RangeError, Side};

use common::{KIB, Region, all_engines};

const GUARD: u8 = 0x5A;

/// Runs `ranges` (first one valid, a later one bad) on every engine and
/// checks the error and that the valid range was not copied either.
fn rejected_untouched(dst: &Region, ranges: &[CopyRange], check: impl Fn(&RangeError) -> bool) {
    for engine in all_engines() {
        // SAFETY: validation fails before any memory is accessed; the valid
        // ranges point into live regions anyway.
        let result = unsafe { engine.copy(ranges) };
        match result {
            Err(CopyError::Range(err)) => assert!(check(&err), "{}: {err:?}", engine.name()),
            other => panic!("{}: expected a range error, got {other:?}", engine.name()),
        }
        assert!(
            dst.as_slice().iter().all(|&b| b == GUARD),
            "{}: bytes were copied before validation failed",
            engine.name()
        );
    }
}

#[test]
fn null_pointers_are_rejected() {
    let src = Region::random(64 * KIB, 1);
    let dst = Region::filled(64 * KIB, GUARD);
    let good = CopyRange::new(src.ptr(), dst.ptr(), 4 * KIB);
    rejected_untouched(
        &dst,
        &[good, CopyRange::new(ptr::null(), dst.at(8 * KIB), 16)],
        |e| {
            *e == RangeError::Null {
                index: 1,
                side: Side::Src,
            }
        },
    );
    rejected_untouched(
        &dst,
        &[good, CopyRange::new(src.ptr(), ptr::null_mut(), 0)],
        |e| {
            *e == RangeError::Null {
                index: 1,
                side: Side::Dst,
            }
        },
    );
}

#[test]
fn wrapping_and_oversized_lengths_are_rejected() {
    let src = Region::random(64 * KIB, 2);
    let dst = Region::filled(64 * KIB, GUARD);
    let good = CopyRange::new(src.ptr(), dst.ptr(), 4 * KIB);
    let wraps = CopyRange::new(src.ptr(), usize::MAX as *mut u8, 2);
    rejected_untouched(&dst, &[good, wraps], |e| {
        *e == RangeError::Wraps {
            index: 1,
            side: Side::Dst,
        }
    });
    let huge = CopyRange::new(src.ptr(), dst.at(8 * KIB), usize::MAX);
    rejected_untouched(&dst, &[good, huge], |e| {
        matches!(e, RangeError::TooLong { index: 1, .. })
    });
}

#[test]
fn overlapping_ranges_are_rejected() {
    let src = Region::random(64 * KIB, 3);
    let dst = Region::filled(64 * KIB, GUARD);
    let good = CopyRange::new(src.ptr(), dst.ptr(), 4 * KIB);
    // Second destination overlaps the first one's last byte.
    let dst_dst = CopyRange::new(src.at(8 * KIB), dst.at(4 * KIB - 1), 16);
    rejected_untouched(&dst, &[good, dst_dst], |e| {
        matches!(
            e,
            RangeError::Overlap {
                other_side: Side::Dst,
                ..
            }
        )
    });
    // A source reading from the first range's destination.
    let src_in_dst = CopyRange::new(dst.at(KIB), dst.at(32 * KIB), 16);
    rejected_untouched(&dst, &[good, src_in_dst], |e| {
        matches!(e, RangeError::Overlap { .. })
    });
}

#[test]
fn errors_read_as_short_lowercase_messages() {
    let err = CopyError::Range(RangeError::Overlap {
        index: 2,
        other: 0,
        other_side: Side::Src,
    });
    assert_eq!(err.to_string(), "invalid copy batch");
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert_eq!(source, "range 2 destination overlaps range 0 source");
}

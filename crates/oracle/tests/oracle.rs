//! The oracle's probabilities, placements and errors through its public API.

use guest_abi::{AccessRange, GpaRange};
use oracle::{FrameMapError, Oracle, OracleError, precision_at_k};

const FS: u64 = 2 << 20;

fn ram(frames: u64) -> Vec<GpaRange> {
    vec![GpaRange {
        start: 0,
        len: frames * FS,
    }]
}

fn range(gpa: u64, len: u64, weight: f64, write_fraction: f64) -> AccessRange {
    AccessRange {
        gpa,
        len,
        weight,
        write_fraction,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn assert_probabilities(oracle: &Oracle, expected: &[f64]) {
    let got = oracle.access_probabilities();
    assert_eq!(got.len(), expected.len());
    for (f, (&g, &e)) in got.iter().zip(expected).enumerate() {
        assert!(close(g, e), "frame {f}: {g} != {e} (all: {got:?})");
    }
}

#[test]
fn a_range_over_partial_frames_spreads_by_overlap() {
    // Two frames' worth, from the middle of frame 1 to the middle of frame 3.
    let o = Oracle::new(&ram(6), FS, &[range(FS + FS / 2, 2 * FS, 1.0, 0.0)]).unwrap();
    assert_probabilities(&o, &[0.0, 0.25, 0.5, 0.25, 0.0, 0.0]);
    assert_eq!(o.access_probability(2), Some(0.5));
    assert_eq!(o.access_probability(6), None);

    // A range inside one frame puts everything there.
    let o = Oracle::new(&ram(4), FS, &[range(3 * FS + 4096, 4096, 2.0, 1.0)]).unwrap();
    assert_probabilities(&o, &[0.0, 0.0, 0.0, 1.0]);
}

#[test]
fn overlapping_ranges_add() {
    // Hotset: 90 % of accesses on frames 2..4, 10 % over all 8 frames.
    let o = Oracle::new(
        &ram(8),
        FS,
        &[range(2 * FS, 2 * FS, 0.9, 1.0), range(0, 8 * FS, 0.1, 1.0)],
    )
    .unwrap();
    let cold = 0.1 / 8.0;
    let hot = 0.45 + cold;
    assert_probabilities(&o, &[cold, cold, hot, hot, cold, cold, cold, cold]);
    assert!(close(o.access_probabilities().iter().sum(), 1.0));
    assert_eq!(o.top_k(2), vec![2, 3]);
}

#[test]
fn weights_are_relative() {
    let a = Oracle::new(
        &ram(4),
        FS,
        &[range(0, FS, 3.0, 0.0), range(FS, FS, 1.0, 0.0)],
    );
    let b = Oracle::new(
        &ram(4),
        FS,
        &[range(0, FS, 0.75, 0.0), range(FS, FS, 0.25, 0.0)],
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_probabilities(&a, &[0.75, 0.25, 0.0, 0.0]);
    assert_probabilities(&b, a.access_probabilities());
    // Zero weights and no ranges describe no accesses.
    let none = Oracle::new(&ram(2), FS, &[range(0, FS, 0.0, 0.0)]).unwrap();
    assert_eq!(none.access_probabilities(), &[0.0, 0.0]);
    assert_eq!(Oracle::new(&ram(2), FS, &[]).unwrap().frames(), 2);
}

#[test]
fn write_probability_follows_write_fractions() {
    let o = Oracle::new(
        &ram(2),
        FS,
        &[range(0, 2 * FS, 1.0, 0.5), range(FS, FS, 1.0, 0.0)],
    )
    .unwrap();
    // Frame 0: 0.25 of accesses, half writes; frame 1: 0.25 + 0.5, of
    // which 0.125 writes.
    assert_probabilities(&o, &[0.25, 0.75]);
    assert!(close(o.write_probability(0).unwrap(), 0.125));
    assert!(close(o.write_probability(1).unwrap(), 0.125));
    assert_eq!(o.write_probabilities().len(), 2);
}

#[test]
fn frames_are_numbered_across_ram_regions() {
    let regions = [
        GpaRange {
            start: 0,
            len: 2 * FS,
        },
        GpaRange {
            start: 1 << 32,
            len: 2 * FS,
        },
    ];
    let o = Oracle::new(&regions, FS, &[range((1 << 32) + FS, FS, 1.0, 0.0)]).unwrap();
    assert_probabilities(&o, &[0.0, 0.0, 0.0, 1.0]);
    // A range reaching into the hole between the regions is not in RAM.
    assert_eq!(
        Oracle::new(&regions, FS, &[range(FS, 2 * FS, 1.0, 0.0)]),
        Err(OracleError::OutsideRam {
            index: 0,
            gpa: FS,
            len: 2 * FS
        })
    );
}

#[test]
fn oracle_placement_earns_its_top_k() {
    // Zipf-like weights over 16 frames, one range per frame.
    let ranges: Vec<_> = (0..16u64)
        .map(|f| range(f * FS, FS, 1.0 / ((f * 7 % 16) + 1) as f64, 0.2))
        .collect();
    let o = Oracle::new(&ram(16), FS, &ranges).unwrap();
    for k in [0, 1, 4, 16, 20] {
        let top = o.top_k(k);
        assert_eq!(top.len(), k.min(16));
        let top_sum: f64 = top.iter().map(|&f| o.access_probability(f).unwrap()).sum();
        let placement = o.placement(k);
        assert_eq!(placement.iter().filter(|&&fast| fast).count(), k.min(16));
        assert!(
            close(o.dram_hit_ratio(&placement).unwrap(), top_sum),
            "k = {k}"
        );
        // No placement of k frames does better than the oracle's.
        let other: Vec<bool> = (0..16).map(|f| f < k).collect();
        assert!(o.dram_hit_ratio(&other).unwrap() <= top_sum + 1e-12);
        assert_eq!(precision_at_k(&top, &o.top_k(k)), 1.0);
    }
    assert!(close(o.dram_hit_ratio(&[true; 16]).unwrap(), 1.0));
    assert_eq!(
        o.dram_hit_ratio(&[true; 15]),
        Err(OracleError::PlacementLength {
            placement: 15,
            frames: 16
        })
    );
    // The hottest frame is the one with weight 1 (f * 7 % 16 == 0).
    assert_eq!(o.top_k(1), vec![0]);
}

#[test]
fn bad_descriptors_are_rejected() {
    let cases = [
        (range(0, FS, -1.0, 0.0), "negative weight"),
        (range(0, FS, f64::NAN, 0.0), "NaN weight"),
        (range(0, FS, f64::INFINITY, 0.0), "infinite weight"),
        (range(0, FS, 1.0, 1.5), "write fraction above 1"),
        (range(0, FS, 1.0, f64::NAN), "NaN write fraction"),
        (range(0, 0, 1.0, 0.0), "empty range"),
        (range(FS, 2 * FS, 1.0, 0.0), "past the end of RAM"),
        (range(u64::MAX - 10, 20, 1.0, 0.0), "wrapping range"),
    ];
    for (bad, what) in cases {
        let ranges = [range(0, FS, 1.0, 0.0), bad];
        let err = Oracle::new(&ram(2), FS, &ranges).expect_err(what);
        let index = match err {
            OracleError::Weight { index, .. }
            | OracleError::WriteFraction { index, .. }
            | OracleError::OutsideRam { index, .. } => index,
            other => panic!("{what}: {other}"),
        };
        assert_eq!(index, 1, "{what}");
    }
    assert_eq!(
        Oracle::new(&ram(2), 0, &[]),
        Err(OracleError::Layout(FrameMapError::ZeroFrameSize))
    );
}

//! Property: more evidence never makes a frame colder. Two models with the
//! same settings and history get one interval that differs only by extra
//! pages read or written in some frames; every frame of the second is at
//! least as hot afterwards, and stays so while both see the same samples.

use std::time::Duration;

use proptest::prelude::*;

use tiering::{AccessSample, Coverage, HeatModel, HeatSettings};

const PAGES: u32 = 512;

/// Per frame: pages read, pages written, extra pages read, extra written.
/// Each below 128, so the sums stay within a frame.
type FrameEvidence = (u16, u16, u16, u16);

fn sample(interval: Duration, counts: &[(u16, u16)], coverage: &Coverage) -> AccessSample {
    let mut s = AccessSample::new(counts.len(), PAGES, interval).unwrap();
    for (f, &(read, written)) in counts.iter().enumerate() {
        s.accessed[f] = read + written;
        s.dirty[f] = written;
    }
    s.coverage = coverage.clone();
    s
}

proptest! {
    #[test]
    fn heat_is_monotone_in_evidence(
        read_weight in 0.0f64..10.0,
        write_weight in 0.0f64..10.0,
        half_life_ms in 10u64..100_000,
        interval_ms in 0u64..10_000,
        history in prop::collection::vec(prop::collection::vec((0u16..256, 0u16..256), 16), 0..4),
        frames in prop::collection::vec((0u16..128, 0u16..128, 0u16..128, 0u16..128), 16),
        observed in prop::option::of(prop::collection::vec(0u16..=512, 16)),
        after in 0usize..3,
    ) {
        let config = HeatSettings { read_weight, write_weight, half_life_ms };
        let interval = Duration::from_millis(interval_ms);
        let coverage = observed.map_or(Coverage::Full, Coverage::PerFrame);
        let mut less = HeatModel::new(16, PAGES, config).unwrap();
        let mut more = HeatModel::new(16, PAGES, config).unwrap();
        for counts in &history {
            let s = sample(interval, counts, &Coverage::Full);
            less.update(&s).unwrap();
            more.update(&s).unwrap();
        }
        let base: Vec<(u16, u16)> = frames.iter().map(|&(r, w, _, _)| (r, w)).collect();
        let extra: Vec<(u16, u16)> = frames
            .iter()
            .map(|&(r, w, er, ew): &FrameEvidence| (r + er, w + ew))
            .collect();
        less.update(&sample(interval, &base, &coverage)).unwrap();
        more.update(&sample(interval, &extra, &coverage)).unwrap();
        for _ in 0..after {
            let s = sample(interval, &base, &Coverage::Full);
            less.update(&s).unwrap();
            more.update(&s).unwrap();
        }
        for f in 0..16 {
            let (l, m) = (less.heat(f).unwrap(), more.heat(f).unwrap());
            prop_assert!(l.is_finite() && m.is_finite());
            prop_assert!(m >= l, "frame {f}: heat {m} < {l}");
            prop_assert!(more.hot_pages(f).unwrap() >= less.hot_pages(f).unwrap());
        }
    }
}

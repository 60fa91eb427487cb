//! The rankings of a heat model's heats: the frames with the most
//! evidence rank first, and the coldest of a set are its least evidenced.

use std::time::Duration;

use oracle::ranking::{coldest_among, hottest, rank};
use tiering::{AccessSample, HeatModel, HeatSettings};

const PAGES: u32 = 512;

#[test]
fn ranking_picks_the_frames_with_the_most_evidence() {
    const FRAMES: usize = 500;
    let settings = HeatSettings {
        read_weight: 1.0,
        write_weight: 2.0,
        half_life_ms: 2000,
    };
    let mut m = HeatModel::new(FRAMES, PAGES, settings).unwrap();
    // Evidence of frame f: a permutation of 0..FRAMES (389 is prime), so
    // every frame has a distinct number of pages touched.
    let evidence = |f: usize| ((f * 389) % FRAMES) as u16;
    let mut sample = AccessSample::new(FRAMES, PAGES, Duration::from_secs(1)).unwrap();
    for f in 0..FRAMES {
        sample.accessed[f] = evidence(f);
    }
    for _ in 0..3 {
        m.update(&sample).unwrap();
    }
    let mut by_evidence: Vec<usize> = (0..FRAMES).collect();
    by_evidence.sort_by_key(|&f| (std::cmp::Reverse(evidence(f)), f));
    assert_eq!(hottest(m.heats(), 50), by_evidence[..50]);
    assert_eq!(rank(m.heats()), by_evidence);
    let top100 = hottest(m.heats(), 100);
    let mut coldest_of_top: Vec<usize> = by_evidence[90..100].to_vec();
    coldest_of_top.reverse();
    assert_eq!(
        coldest_among(m.heats(), &top100, 10).unwrap(),
        coldest_of_top
    );
}

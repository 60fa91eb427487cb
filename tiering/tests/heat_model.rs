//! Behaviour of the heat model through its public API: decay, weights,
//! the order of frames by heat, reaction to a phase shift, scaling of
//! sampled evidence, and degenerate inputs. (The harness's fast rankings,
//! `oracle::ranking`, are tested there: tiering, tests included, never
//! depends on the oracle.)

use std::time::Duration;

use tiering::{AccessSample, Coverage, HeatError, HeatModel, HeatSettings};

const PAGES: u32 = 512;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Every frame, hottest first, ties by the lower index: a plain full
/// sort, the reference order.
fn by_heat(m: &HeatModel) -> Vec<usize> {
    let heat = m.heats();
    let mut frames: Vec<usize> = (0..heat.len()).collect();
    frames.sort_by(|&a, &b| heat[b].total_cmp(&heat[a]).then(a.cmp(&b)));
    frames
}

/// The `k` hottest frames, hottest first.
fn hottest(m: &HeatModel, k: usize) -> Vec<usize> {
    by_heat(m).into_iter().take(k).collect()
}

/// A full-coverage sample of `frames` frames with `(frame, accessed, dirty)`
/// counts.
fn sample(frames: usize, interval: Duration, counts: &[(usize, u16, u16)]) -> AccessSample {
    let mut s = AccessSample::new(frames, PAGES, interval).unwrap();
    for &(frame, accessed, dirty) in counts {
        s.accessed[frame] = accessed;
        s.dirty[frame] = dirty;
    }
    s
}

fn model(frames: usize, read_weight: f64, write_weight: f64, half_life_secs: f64) -> HeatModel {
    let config = HeatSettings {
        read_weight,
        write_weight,
        half_life_ms: (half_life_secs * 1000.0).round() as u64,
    };
    HeatModel::new(frames, PAGES, config).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn decay_halves_evidence_after_one_half_life() {
    let mut m = model(2, 1.0, 1.0, 3.0);
    m.update(&sample(2, secs(1.0), &[(0, 100, 0)])).unwrap();
    assert!(close(m.heat(0).unwrap(), 100.0));
    let hot = m.hot_pages(0).unwrap();
    assert!(close(hot, 100.0 * (1.0 - (-1.0f64 / 3.0).exp2())));

    m.update(&sample(2, secs(3.0), &[])).unwrap();
    assert!(close(m.heat(0).unwrap(), 50.0));
    assert!(close(m.hot_pages(0).unwrap(), hot / 2.0));

    // Two intervals of half a half-life each decay like one half-life.
    m.update(&sample(2, secs(1.5), &[])).unwrap();
    m.update(&sample(2, secs(1.5), &[])).unwrap();
    assert!(close(m.heat(0).unwrap(), 25.0));
    assert_eq!(m.heat(1), Some(0.0));
    assert_eq!(m.updates(), 4);
}

#[test]
fn writes_weigh_as_configured() {
    let mut m = model(4, 1.0, 3.0, 2.0);
    m.update(&sample(
        4,
        secs(1.0),
        &[
            (0, 10, 0),  // 10 pages read
            (1, 10, 10), // 10 pages written (a write is an access)
            (2, 0, 10),  // 10 pages written, from a tracker that sees writes only
            (3, 10, 4),  // 6 read, 4 written
        ],
    ))
    .unwrap();
    assert_eq!(m.heats(), &[10.0, 30.0, 30.0, 18.0]);
    // Every page touched counts once towards the hot pages.
    assert_eq!(m.hot_pages(1), m.hot_pages(2));
    assert_eq!(m.hot_pages(0), m.hot_pages(3));

    m.set_config(HeatSettings {
        read_weight: 2.0,
        write_weight: 0.0,
        half_life_ms: 2000,
    })
    .unwrap();
    m.update(&sample(4, Duration::ZERO, &[(0, 1, 0), (1, 1, 1)]))
        .unwrap();
    assert_eq!(m.heats(), &[12.0, 30.0, 30.0, 18.0]);
}

#[test]
fn ranking_picks_the_frames_with_the_most_evidence() {
    const FRAMES: usize = 500;
    let mut m = model(FRAMES, 1.0, 2.0, 2.0);
    // Evidence of frame f: a permutation of 0..FRAMES (389 is prime), so
    // every frame has a distinct number of pages touched.
    let evidence = |f: usize| ((f * 389) % FRAMES) as u16;
    let counts: Vec<_> = (0..FRAMES).map(|f| (f, evidence(f), 0)).collect();
    for _ in 0..3 {
        m.update(&sample(FRAMES, secs(1.0), &counts)).unwrap();
    }
    let mut by_evidence: Vec<usize> = (0..FRAMES).collect();
    by_evidence.sort_by_key(|&f| (std::cmp::Reverse(evidence(f)), f));
    assert_eq!(hottest(&m, 50), by_evidence[..50]);
    assert_eq!(by_heat(&m), by_evidence);
}

#[test]
fn a_new_hot_set_overtakes_the_old_one_after_one_half_life() {
    const FRAMES: usize = 64;
    let (interval, half_life) = (1.0, 2.5);
    let mut m = model(FRAMES, 1.0, 1.0, half_life);
    let old: Vec<usize> = (0..10).collect();
    let new: Vec<usize> = (30..40).collect();
    let touch = |frames: &[usize]| -> Vec<(usize, u16, u16)> {
        frames.iter().map(|&f| (f, 200, 50)).collect()
    };
    // Long enough on the old set to be near steady state.
    for _ in 0..40 {
        m.update(&sample(FRAMES, secs(interval), &touch(&old)))
            .unwrap();
    }
    assert_eq!(hottest(&m, 10), old);
    // At an equal rate, the new set's heat (1 − dⁿ)·r/(1 − d) passes the
    // old set's dⁿ·r/(1 − d) once dⁿ < ½, i.e. after n > half-life /
    // interval intervals.
    let n = (half_life / interval).floor() as usize + 1;
    assert_eq!(n, 3);
    for i in 1..=n {
        m.update(&sample(FRAMES, secs(interval), &touch(&new)))
            .unwrap();
        let expected = if i < n { &old } else { &new };
        assert_eq!(&hottest(&m, 10), expected, "after {i} intervals");
    }
}

#[test]
fn sampled_evidence_is_scaled_to_the_whole_frame() {
    let mut full = model(3, 1.0, 2.0, 2.0);
    full.update(&sample(3, secs(1.0), &[(0, 64, 16), (1, 8, 0)]))
        .unwrap();

    // A quarter of every frame observed: a quarter of the counts.
    let mut fraction = model(3, 1.0, 2.0, 2.0);
    let mut s = sample(3, secs(1.0), &[(0, 16, 4), (1, 2, 0)]);
    s.coverage = Coverage::Fraction(0.25);
    fraction.update(&s).unwrap();

    // 128 of 512 pages observed in each frame.
    let mut per_frame = model(3, 1.0, 2.0, 2.0);
    s.coverage = Coverage::PerFrame(vec![128; 3]);
    per_frame.update(&s).unwrap();

    for f in 0..3 {
        for m in [&fraction, &per_frame] {
            assert!(close(m.heat(f).unwrap(), full.heat(f).unwrap()), "{f}");
            assert!(close(m.hot_pages(f).unwrap(), full.hot_pages(f).unwrap()));
        }
    }
    assert!(close(full.heat(0).unwrap(), 48.0 + 32.0));
}

#[test]
fn unobserved_frames_keep_their_heat() {
    let mut m = model(3, 1.0, 1.0, 1.0);
    m.update(&sample(
        3,
        secs(1.0),
        &[(0, 100, 0), (1, 100, 0), (2, 100, 0)],
    ))
    .unwrap();
    let before = m.heats().to_vec();
    let hot_before = m.hot_page_counts().to_vec();

    // Frame 0 not observed; frame 1 observed and idle; frame 2 observed
    // with 10 of 256 pages touched.
    let mut s = sample(3, secs(1.0), &[(0, 50, 0), (2, 10, 0)]);
    s.coverage = Coverage::PerFrame(vec![0, 256, 256]);
    m.update(&s).unwrap();
    assert_eq!(m.heat(0), Some(before[0]));
    assert_eq!(m.hot_pages(0), Some(hot_before[0]));
    assert!(close(m.heat(1).unwrap(), before[1] / 2.0));
    assert!(close(m.heat(2).unwrap(), before[2] / 2.0 + 20.0));

    s.coverage = Coverage::Fraction(0.0);
    let before = m.heats().to_vec();
    m.update(&s).unwrap();
    assert_eq!(m.heats(), before);
}

#[test]
fn counts_beyond_the_observed_pages_are_clamped() {
    let mut m = model(2, 1.0, 1.0, 1.0);
    m.update(&sample(
        2,
        Duration::MAX,
        &[(0, u16::MAX, u16::MAX), (1, 600, 0)],
    ))
    .unwrap();
    assert_eq!(m.heats(), &[512.0, 512.0]);
    assert_eq!(m.hot_page_counts(), &[512.0, 512.0]);
}

#[test]
fn hot_pages_settle_at_the_pages_touched_per_interval() {
    let mut m = model(1, 1.0, 1.0, 2.0);
    for _ in 0..60 {
        m.update(&sample(1, secs(1.0), &[(0, 100, 30)])).unwrap();
    }
    assert!((m.hot_pages(0).unwrap() - 100.0).abs() < 0.01);
    // The heat settles at rate / (1 − decay).
    let rate = 70.0 + 30.0;
    let settled = rate / (1.0 - (-0.5f64).exp2());
    assert!((m.heat(0).unwrap() - settled).abs() < 0.01 * settled);
}

#[test]
fn degenerate_samples_stay_finite() {
    let mut m = model(3, 1.0, 2.0, 0.001);
    // Zero-length intervals: nothing decays, evidence still counts.
    for _ in 0..3 {
        m.update(&sample(3, Duration::ZERO, &[(0, 5, 5)])).unwrap();
    }
    assert_eq!(m.heat(0), Some(30.0));
    assert_eq!(m.hot_pages(0), Some(0.0));
    // An interval of millions of half-lives; a vanishing sampled fraction.
    m.update(&sample(3, secs(1e6), &[])).unwrap();
    assert_eq!(m.heats(), &[0.0; 3]);
    let mut s = sample(3, secs(1.0), &[(1, 1, 0)]);
    s.coverage = Coverage::Fraction(1e-300);
    m.update(&s).unwrap();
    assert!(m.heats().iter().all(|h| h.is_finite()));
    assert!(close(m.heat(1).unwrap(), 512.0));
    // A share whose scale would overflow counts as nothing observed.
    s.coverage = Coverage::Fraction(1e-310);
    let before = m.heats().to_vec();
    m.update(&s).unwrap();
    assert_eq!(m.heats(), before);
    assert!(m.hot_page_counts().iter().all(|h| h.is_finite()));

    // A model of no frames.
    let mut empty = model(0, 1.0, 1.0, 1.0);
    empty.update(&sample(0, Duration::ZERO, &[])).unwrap();
    assert!(empty.is_empty());
    assert!(empty.heats().is_empty());
}

#[test]
fn mismatched_samples_and_bad_frames_are_errors() {
    let mut m = model(4, 1.0, 1.0, 1.0);
    assert_eq!(
        m.update(&sample(5, secs(1.0), &[])),
        Err(HeatError::FrameCount {
            sample: 5,
            model: 4
        })
    );
    let other = AccessSample::new(4, 256, secs(1.0)).unwrap();
    assert_eq!(
        m.update(&other),
        Err(HeatError::SamplePages {
            sample: 256,
            model: 512
        })
    );
    let mut bad = sample(4, secs(1.0), &[]);
    bad.coverage = Coverage::PerFrame(vec![1; 3]);
    assert!(matches!(m.update(&bad), Err(HeatError::Sample(_))));
    assert_eq!(m.updates(), 0);

    assert_eq!(m.heat(4), None);
    assert_eq!(m.hot_pages(4), None);

    let bad_config = HeatSettings {
        half_life_ms: 0,
        ..Default::default()
    };
    assert!(matches!(
        HeatModel::new(4, PAGES, bad_config),
        Err(HeatError::Config(_))
    ));
    assert!(matches!(
        m.set_config(bad_config),
        Err(HeatError::Config(_))
    ));
    assert_eq!(
        HeatModel::new(4, 0, HeatSettings::default()).err(),
        Some(HeatError::PagesPerFrame { pages: 0 })
    );
}

#[test]
fn a_frame_seen_rarely_follows_a_change_as_fast_as_one_seen_always() {
    // Both frames are written all over for a while, then not at all.
    // Frame 0 is observed every interval, frame 1 only every fifth (a
    // large sampling region): once it is seen again, its heat is where
    // frame 0's is, not five intervals behind.
    let mut m = model(2, 1.0, 1.0, 1.0);
    let seen = |both: bool, hits: u16| {
        let mut s = sample(2, secs(0.2), &[(0, hits, hits), (1, hits, hits)]);
        s.coverage = Coverage::PerFrame(vec![PAGES as u16, if both { PAGES as u16 } else { 0 }]);
        s
    };
    for _ in 0..20 {
        m.update(&seen(true, 512)).unwrap();
    }
    assert!(close(m.heat(0).unwrap(), m.heat(1).unwrap()));
    let hot = m.heat(0).unwrap();
    for _ in 0..4 {
        m.update(&seen(false, 0)).unwrap();
    }
    assert_eq!(m.heat(1).unwrap(), hot, "unseen: nothing known, kept");
    m.update(&seen(true, 0)).unwrap();
    // Unseen time is kept in f32: equal to a millionth.
    let (a, b) = (m.heat(0).unwrap(), m.heat(1).unwrap());
    assert!(
        (a - b).abs() <= 1e-6 * a,
        "{} against {}",
        m.heat(0).unwrap(),
        m.heat(1).unwrap()
    );
    assert!(
        m.heat(1).unwrap() < hot / 1.9,
        "a second of silence halves it"
    );
}

#[test]
fn a_frame_recurs_only_when_seen_touched_twice_within_a_half_life() {
    // Half-life 1 s, 200 ms intervals, every frame looked at every interval.
    // Frame 0: touched in two consecutive intervals. Frame 1: touched once
    // (a burst). Frame 2: touched twice, 1.4 s apart, with looks that
    // caught nothing between. Frame 3: never.
    let mut m = model(4, 1.0, 2.0, 1.0);
    let i = secs(0.2);
    m.update(&sample(4, i, &[(0, 10, 10), (1, 512, 512), (2, 5, 0)]))
        .unwrap();
    assert_eq!(m.recurring(), &[false, false, false, false]);
    m.update(&sample(4, i, &[(0, 10, 10)])).unwrap();
    assert_eq!(m.recurring(), &[true, false, false, false]);
    for _ in 0..6 {
        m.update(&sample(4, i, &[])).unwrap();
    }
    m.update(&sample(4, i, &[(2, 5, 0)])).unwrap();
    assert_eq!(m.recurring(), &[true, false, false, false]);
    // The burst frame stays the hottest-but-one of the four all along.
    assert!(m.heat(1).unwrap() > m.heat(2).unwrap());
    // Touched 400 ms after its last sighting, a look between catching
    // nothing: within the half-life, it recurs.
    m.update(&sample(4, i, &[])).unwrap();
    m.update(&sample(4, i, &[(2, 5, 0)])).unwrap();
    assert_eq!(m.recurring(), &[true, false, true, false]);
}

#[test]
fn two_looks_in_a_row_that_catch_a_touch_recur_however_far_apart() {
    // A sparse sampler looks at frame 0 once a second or so (a large
    // guest's wide regions): two looks in a row that both catch a touch
    // make it recur, though 1.2 s apart; a look that catches nothing
    // between two sightings that far apart does not.
    let mut m = model(1, 1.0, 1.0, 1.0);
    let i = secs(0.2);
    let look = |touched: u16| {
        let mut s = AccessSample::new(1, PAGES, i).unwrap();
        s.coverage = Coverage::PerFrame(vec![8]);
        s.accessed[0] = touched;
        s
    };
    let mut unseen = AccessSample::new(1, PAGES, i).unwrap();
    unseen.coverage = Coverage::PerFrame(vec![0]);
    let gap = |m: &mut HeatModel| {
        for _ in 0..5 {
            m.update(&unseen).unwrap();
        }
    };
    m.update(&look(8)).unwrap();
    assert_eq!(m.recurring(), &[false]);
    gap(&mut m);
    m.update(&look(0)).unwrap();
    gap(&mut m);
    m.update(&look(8)).unwrap();
    assert_eq!(m.recurring(), &[false]);
    gap(&mut m);
    m.update(&look(8)).unwrap();
    assert_eq!(m.recurring(), &[true]);
}

#[test]
fn one_outlying_interval_of_a_cold_frame_is_not_called_certain() {
    // Two equally cold frames under a windowed tracker: six sampled pages
    // each, written once in about 38 page-windows (p ≈ 0.16), for ten
    // seconds. Then one interval catches all six pages of frame 0 in their
    // first look (6 of 6: chance about 2 in 100 000). Its heat jumps; the
    // variance must say the jump is one noisy interval, not a hotter
    // frame: the lead stays below 4 standard deviations (3.4 here). With
    // the interval's own ratio as p (0.93: variance 0.4, where the ratio
    // pulled to the frame's history gives 1.5) it read as 4.4, and on top
    // of the other intervals' noise such a jump cleared the planner's bar
    // for an exchange among a few hundred cold frames (about 6).
    let interval = secs(0.2);
    let mut m = model(2, 1.0, 1.0, 0.5);
    let windowed = |looks: [u16; 2]| {
        let mut s = sample(2, interval, &[(0, 6, 6), (1, 6, 6)]);
        s.coverage = Coverage::PerFrame(looks.to_vec());
        s
    };
    for _ in 0..50 {
        m.update(&windowed([38, 38])).unwrap();
    }
    m.update(&windowed([6, 38])).unwrap();
    let lead = m.heat(0).unwrap() - m.heat(1).unwrap();
    let sd = (m.heat_sd(0).unwrap().powi(2) + m.heat_sd(1).unwrap().powi(2)).sqrt();
    assert!(
        lead > 0.0 && lead < 4.0 * sd,
        "lead {lead} = {} sd",
        lead / sd
    );
    // A frame that really turned hot still leads beyond doubt within a
    // few intervals.
    for _ in 0..4 {
        m.update(&windowed([6, 38])).unwrap();
    }
    let lead = m.heat(0).unwrap() - m.heat(1).unwrap();
    let sd = (m.heat_sd(0).unwrap().powi(2) + m.heat_sd(1).unwrap().powi(2)).sqrt();
    assert!(lead > 8.0 * sd, "lead {lead} = {} sd", lead / sd);
}

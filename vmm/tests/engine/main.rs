//! The tiering engine end to end (issue 5): hot frames follow the hot set
//! into the fast tier, a stable workload stops moving frames, a hot set
//! larger than the quota stays within the rate limits, rebalancing keeps
//! every write, and invalid policies change nothing.

mod rig;

use std::time::Duration;

use tiering::{EngineError, PinnedRange, PolicyError, RebalanceState, TieringPolicy};
use vmm::devices::hypercall::LogSink;
use vmm::migration::MigratorKind;
use vmm::vm::{Vm, VmError};

use rig::{FRAME, MIB, alone, config, run, vm, wait_for};

/// A 32 MiB hot set (16 frames) in a 384 MiB buffer, 90 % of accesses.
const HOTSET: &str = "hotset:size=384M,hot=32M,hot-frac=0.9";

/// 25 % of the 512 MiB guest.
const QUOTA: u64 = 128 * MIB;

#[test]
fn hot_frames_follow_the_hot_set_into_the_fast_tier() {
    let _one = alone();
    // The fast tier is exactly the quota and starts full of whatever
    // fast-first placement put there: every promotion is an exchange.
    // Phases of 8 s: the hot set moves in well under a second on a quiet
    // host; the margin is for a busy one (how fast is tierbench's job).
    // Each phase must bring its whole hot set into the fast tier at some
    // point; that it then stays there is `a_stable_workload_stops_moving_frames`'s
    // claim, judged over a longer phase (a busy host can starve the
    // engine for a moment at any given sample, not for a whole phase).
    let cfg = config(
        &format!("{HOTSET},phases=3,seconds=8"),
        QUOTA,
        TieringPolicy::with_quota(QUOTA),
    );
    let mut vm = vm(&cfg);
    let samples = run(&mut vm, |_, _| {});
    let stats = vm.engine().unwrap().stats();
    if std::env::var("ENGINE_DEBUG").is_ok() {
        eprintln!(
            "stages {:?} intervals {}",
            stats.stage_micros, stats.intervals
        );
        let at: Vec<u64> = stats.recent.iter().map(|r| r.at_ms).collect();
        eprintln!("interval ends (ms): {at:?}");
    }
    for phase in 0..3 {
        let last = samples
            .iter()
            .rfind(|s| s.phase == phase)
            .unwrap_or_else(|| panic!("phase {phase} sampled: {samples:?}"));
        assert!(last.at > 2.0, "phase {phase} sampled to its end: {last:?}");
        assert!(
            samples
                .iter()
                .any(|s| s.phase == phase && s.hot_fast == s.hot),
            "phase {phase}: every hot frame on the fast tier at some point: {samples:?}"
        );
        assert!(
            samples
                .iter()
                .filter(|s| s.phase == phase)
                .all(|s| s.fast <= (QUOTA / FRAME) as usize),
            "phase {phase}: the fast tier never held more than the quota: {samples:?}"
        );
    }
    assert!(stats.promotions.frames > 0, "{stats:?}");
    assert_eq!(stats.aborted, 0, "{stats:?}");
}

#[test]
fn a_stable_workload_stops_moving_frames() {
    let _one = alone();
    let cfg = config(
        &format!("{HOTSET},phases=1,seconds=70"),
        QUOTA,
        TieringPolicy::with_quota(QUOTA),
    );
    let mut vm = vm(&cfg);
    let samples = run(&mut vm, |_, _| {});
    let stats = vm.engine().unwrap().stats();
    let converged = samples
        .iter()
        .find(|s| s.hot_fast == s.hot)
        .expect("the hot set reached the fast tier");
    // Well under a second on a quiet host: the bound leaves the rest of
    // the phase to judge, however busy the host.
    assert!(converged.at < 10.0, "converged late: {converged:?}");
    // From 2 s after convergence to the phase's end, as far back as the
    // ring reaches (the last 300 intervals: about the last minute here),
    // timed by the intervals' own clock, not by their count.
    let phase_start_ms =
        stats.recent.last().unwrap().at_ms as f64 - samples.last().unwrap().at * 1000.0;
    let from_ms = phase_start_ms + (converged.at + 2.0) * 1000.0;
    let window: Vec<_> = stats
        .recent
        .iter()
        .filter(|r| r.at_ms as f64 >= from_ms)
        .collect();
    let seconds = match (window.first(), window.last()) {
        (Some(a), Some(b)) => (b.at_ms - a.at_ms) as f64 / 1000.0,
        _ => 0.0,
    };
    // A rate per minute, judged over a minute: under 1 % of the frames,
    // at most one exchange (issue 24). Measured here (2 cores,
    // 2026-11-27): none in seven runs, four of them beside a process
    // spinning on one core. Before the sampler dated a preempted peek's
    // touches to when it returned, and before a frame's variance pulled
    // an interval's ratio towards its history, four exchanges a minute
    // (3.1 %): each followed one interval that read all of a cold frame's
    // sampled pages touched in their first look (docs/tracking.md).
    assert!(seconds >= 55.0, "window of {seconds} s");
    let moved: usize = window.iter().map(|r| r.promoted + r.demoted).sum();
    let frames = vm.memory().frame_count() as f64;
    let per_minute = moved as f64 * 60.0 / seconds / frames;
    assert!(
        per_minute < 0.01,
        "{moved} frames moved in {seconds:.1} s after convergence: {:.2} % of frames per minute",
        per_minute * 100.0
    );
    let last = samples.last().unwrap();
    assert_eq!(last.hot_fast, last.hot, "{last:?}");
}

#[test]
fn a_hot_set_larger_than_the_quota_stays_within_the_rate_limits() {
    let _one = alone();
    // 192 MiB hot (96 frames) against a 64-frame quota, 64 MB/s each way.
    let mut policy = TieringPolicy::with_quota(QUOTA);
    policy.promote_rate_mbps = 64.0;
    policy.demote_rate_mbps = 64.0;
    let cfg = config(
        "hotset:size=384M,hot=192M,hot-frac=0.95,phases=1,seconds=10",
        QUOTA,
        policy.clone(),
    );
    let mut vm = vm(&cfg);
    let samples = run(&mut vm, |_, _| {});
    let stats = vm.engine().unwrap().stats();
    let cap = |mbps: f64| (mbps * 1e6 * policy.interval().as_secs_f64()).max(FRAME as f64);
    for r in &stats.recent {
        assert!(
            (r.promoted as u64 * FRAME) as f64 <= cap(policy.promote_rate_mbps)
                && (r.demoted as u64 * FRAME) as f64 <= cap(policy.demote_rate_mbps),
            "interval over the rate limit: {r:?}"
        );
    }
    // The fast tier ends up full of hot frames.
    let last = samples.last().unwrap();
    let quota_frames = (QUOTA / FRAME) as usize;
    assert!(
        last.hot_fast * 10 >= quota_frames * 9,
        "hot frames on the fast tier: {last:?}"
    );
    // No thrashing: once full of hot frames, hot frames do not trade
    // places with each other (the hysteresis): the last 5 s move less
    // than a tenth of the quota.
    let end_ms = stats.recent.last().unwrap().at_ms;
    let late: usize = stats
        .recent
        .iter()
        .filter(|r| r.at_ms + 5000 > end_ms)
        .map(|r| r.promoted + r.demoted)
        .sum();
    assert!(
        late * 10 < quota_frames,
        "{late} frames moved in the last 5 s"
    );
}

#[test]
fn rebalance_50_25_50_percent_keeps_every_write() {
    let _one = alone();
    let half = 256 * MIB;
    // Pre-copy: the rebalance moves frames while the guest writes them.
    let mut cfg = config(
        "hotset:size=384M,hot=32M,hot-frac=0.9,phases=3,seconds=10,verify=1",
        half,
        TieringPolicy::with_quota(half),
    );
    cfg.migration.migrator = MigratorKind::RemapPrecopy;
    let mut vm = vm(&cfg);
    let samples = run(&mut vm, |engine, state| {
        // Wait for the guest's first phase, then 50 % → 25 % → 50 %, each
        // with a deadline no busy host misses (a rebalance takes a second
        // or two here: pre-copy batches under this writer take ~150 ms per
        // interval, docs/policy.md; speed is tierbench's to measure).
        assert!(wait_for(Duration::from_secs(60), || !state
            .ground_truth()
            .is_empty()));
        for target in [QUOTA, half] {
            engine.rebalance(target, 12_000).unwrap();
            let done =
                wait_for(Duration::from_secs(15), || {
                    engine.stats().rebalance.as_ref().is_some_and(|r| {
                        r.target_bytes == target && r.state != RebalanceState::Running
                    })
                });
            let progress = engine.stats().rebalance.clone().unwrap();
            assert!(done, "rebalance to {target} still running: {progress:?}");
            assert_eq!(progress.state, RebalanceState::Done, "{progress:?}");
            assert!(progress.moved_frames > 0, "{progress:?}");
            assert!(progress.fast_bytes <= target, "{progress:?}");
        }
    });
    let stats = vm.engine().unwrap().stats();
    if std::env::var("ENGINE_DEBUG").is_ok() {
        eprintln!(
            "stages {:?} intervals {}",
            stats.stage_micros, stats.intervals
        );
    }
    assert_eq!(stats.aborted, 0, "{stats:?}");
    assert!(stats.demotions.frames >= 64, "{stats:?}");
    assert!(!samples.is_empty());
}

#[test]
fn invalid_policies_are_refused_and_the_old_one_stays() {
    let _one = alone();
    let cfg = config(
        &format!("{HOTSET},phases=1,seconds=1"),
        QUOTA,
        TieringPolicy::with_quota(QUOTA),
    );
    let vm = vm(&cfg);
    let engine = vm.engine().unwrap();
    let before = engine.policy();
    let refused = |change: &dyn Fn(&mut TieringPolicy)| -> EngineError {
        let mut p = before.clone();
        change(&mut p);
        let e = engine.set_policy(p).unwrap_err();
        assert_eq!(engine.policy(), before, "{e}");
        e
    };
    let e = refused(&|p| p.fast_quota.max_bytes = 2 * QUOTA);
    assert_eq!(
        e.to_string(),
        format!(
            "invalid policy: fast_quota: max_bytes {} above the fast tier's capacity of {QUOTA} bytes",
            2 * QUOTA
        )
    );
    for rate in [0.0, -5.0, f64::NAN] {
        let e = refused(&|p| p.promote_rate_mbps = rate);
        assert!(e.to_string().contains("promote_rate_mbps"), "{e}");
    }
    let e = refused(&|p| {
        p.pinned = vec![
            PinnedRange {
                gpa: 0,
                len: 4 * MIB,
            },
            PinnedRange {
                gpa: 2 * MIB,
                len: 4 * MIB,
            },
        ]
    });
    assert!(
        matches!(
            e,
            EngineError::Policy(PolicyError::PinsOverlap {
                first: 0,
                second: 1
            })
        ),
        "{e}"
    );
    let e = refused(&|p| p.tracker = "a-bits".into());
    assert_eq!(
        e.to_string(),
        "invalid policy: tracker: unknown tracker 'a-bits' (this VM offers: dirty-log, damon, damon+dirty-log, access-log, access-log+dirty-log)"
    );
    // Known, but this VM was not built ready for it.
    refused(&|p| p.tracker = "fault-sample".into());
    // Pinning more of the fast tier than the quota holds.
    let e = refused(&|p| {
        p.fast_quota.max_bytes = 8 * MIB;
        p.pinned = vec![PinnedRange {
            gpa: 0,
            len: 64 * MIB,
        }];
    });
    assert!(
        matches!(e, EngineError::Policy(PolicyError::QuotaBelowPinned { .. })),
        "{e}"
    );
    assert!(matches!(
        engine.rebalance(2 * QUOTA, 1000),
        Err(EngineError::Policy(PolicyError::QuotaAboveCapacity { .. }))
    ));
    assert!(matches!(
        engine.rebalance(QUOTA, 0),
        Err(EngineError::Deadline(0))
    ));
    assert_eq!(engine.policy(), before);
    // A valid change applies whole.
    let mut next = before.clone();
    next.promote_rate_mbps = 32.0;
    next.significance = 4.0;
    engine.set_policy(next.clone()).unwrap();
    assert_eq!(engine.policy(), next);
}

#[test]
fn tiering_without_a_migrator_is_refused_before_the_vm_starts() {
    let _one = alone();
    let mut cfg = config(HOTSET, QUOTA, TieringPolicy::with_quota(QUOTA));
    cfg.migration.migrator = MigratorKind::None;
    let log: LogSink = std::sync::Arc::new(|_, _| {});
    let e = Vm::new(&cfg, log.clone()).unwrap_err();
    assert!(matches!(e, VmError::TieringWithoutMigrator), "{e}");
    cfg.migration.migrator = MigratorKind::Remap;
    cfg.tiering = Some(TieringPolicy::with_quota(4 * QUOTA));
    let e = Vm::new(&cfg, log).unwrap_err();
    assert!(
        vmm::error_chain(&e).contains("above the fast tier's capacity"),
        "{}",
        vmm::error_chain(&e)
    );
}

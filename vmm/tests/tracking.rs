//! Tracking accuracy on real KVM: a `hotset` guest writes a hot set that
//! moves every phase; the dirty-log tracker feeds the heat model every
//! interval, and the model's top-K frames are compared with the oracle's
//! top-K for the phase (from the payload's ground truth; K = hot-set
//! frames). Precision must reach 0.9 within 3 intervals of the start and of
//! every phase shift.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use access_track::{AccessTracker, DirtyLogTracker};
use guest_abi::{AccessRange, GpaRange};
use guest_memory::{Placement, TierSpec};
use oracle::{Oracle, precision_at_k};
use tiering::{HeatConfig, HeatModel};
use vmm::devices::hypercall::LogSink;
use vmm::migration::MigrationConfig;
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd};

const MIB: u64 = 1 << 20;

fn tier(name: &str, size: u64) -> TierSpec {
    format!("name={name},backend=memfd,size={}M", size / MIB)
        .parse()
        .unwrap()
}

/// Per interval: (phase, precision of the heat model's top-K).
fn precision_per_interval(args: &str, hot_frames: usize, interval: Duration) -> Vec<(u64, f64)> {
    let memory = 512 * MIB;
    let config = VmConfig {
        vcpus: 2,
        memory: guest_memory::MemoryConfig {
            size: memory,
            frame_size: 2 * MIB,
            tiers: vec![tier("fast", memory), tier("slow", memory)],
            placement: Placement::FastFirst,
            ..Default::default()
        },
        payload: PayloadSource::Embedded,
        args: args.into(),
        timeout: Some(Duration::from_secs(120)),
        dirty_log_tracking: true,
        migration: MigrationConfig::default(),
    };
    let log: LogSink = Arc::new(|_, _| {});
    let mut vm = Vm::new(&config, log).unwrap();
    let mem = vm.memory().clone();
    let mut tracker = DirtyLogTracker::new(vm.dirty_log().unwrap(), mem.clone());
    let state = vm.state().clone();
    let ram: Vec<GpaRange> = mem
        .regions()
        .iter()
        .map(|r| GpaRange {
            start: r.gpa,
            len: r.len,
        })
        .collect();
    let results = Mutex::new(Vec::new());
    let done = std::sync::atomic::AtomicBool::new(false);
    let end = std::thread::scope(|s| {
        s.spawn(|| {
            let mut heat = HeatModel::new(
                mem.frame_count(),
                512,
                HeatConfig {
                    half_life_secs: interval.as_secs_f64(),
                    ..Default::default()
                },
            )
            .unwrap();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(interval);
                let sample = tracker.collect().unwrap();
                heat.update(&sample).unwrap();
                let Some(truth) = state.ground_truth().last().cloned() else {
                    continue;
                };
                let ranges: Vec<AccessRange> = truth
                    .ranges
                    .iter()
                    .map(|r| AccessRange {
                        gpa: r.gpa,
                        len: r.len,
                        weight: r.weight,
                        write_fraction: r.write_fraction,
                    })
                    .collect();
                let oracle = Oracle::new(&ram, 2 * MIB, &ranges).unwrap();
                let p = precision_at_k(&oracle.top_k(hot_frames), &heat.hottest(hot_frames));
                results.lock().unwrap().push((truth.phase, p));
            }
        });
        let end = vm.run(Duration::from_millis(100), &mut |_, _| {}).unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        end
    });
    assert_eq!(end, VmEnd::Success);
    results.into_inner().unwrap()
}

/// From the third interval of every phase on, precision is at least 0.9.
fn assert_tracks(results: &[(u64, f64)], phases: u64) {
    for phase in 0..phases {
        let ps: Vec<f64> = results
            .iter()
            .filter(|(p, _)| *p == phase)
            .map(|&(_, p)| p)
            .collect();
        assert!(
            ps.len() >= 4,
            "phase {phase}: too few intervals: {results:?}"
        );
        assert!(ps[2..].iter().all(|&p| p >= 0.9), "phase {phase}: {ps:?}");
    }
}

#[test]
fn dirty_log_finds_the_hotset_hot_set_and_follows_it() {
    let r = precision_per_interval(
        "hotset:size=384M,hot=32M,hot-frac=0.9,phases=3,seconds=1.5",
        16,
        Duration::from_millis(200),
    );
    assert_tracks(&r, 3);
}

/// Heat of the buffer's frames after a run of `args`, as the share of
/// buffer frames that look hot (any evidence).
fn hot_share(args: &str) -> f64 {
    let memory = 256 * MIB;
    let config = VmConfig {
        vcpus: 1,
        memory: guest_memory::MemoryConfig {
            size: memory,
            frame_size: 2 * MIB,
            tiers: vec![tier("fast", memory)],
            placement: Placement::FastFirst,
            ..Default::default()
        },
        payload: PayloadSource::Embedded,
        args: args.into(),
        timeout: Some(Duration::from_secs(60)),
        dirty_log_tracking: true,
        migration: MigrationConfig::default(),
    };
    let mut vm = Vm::new(&config, Arc::new(|_, _| {})).unwrap();
    let mem = vm.memory().clone();
    let free = vm.first_free_range().unwrap();
    let mut tracker = DirtyLogTracker::new(vm.dirty_log().unwrap(), mem.clone());
    // Warm-up writes every page once: start counting at phase 0. Dirty
    // bits outlive the guest, so the second harvest comes after the run.
    let state = vm.state().clone();
    std::thread::scope(|s| {
        let first = s.spawn(|| {
            while state.phase_starts().is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
            tracker.collect().unwrap();
        });
        assert_eq!(
            vm.run(Duration::from_millis(100), &mut |_, _| {}).unwrap(),
            VmEnd::Success
        );
        first.join().unwrap();
    });
    let heat = tracker.collect().unwrap();
    let first = mem.frames().frame_of_gpa(free.start).unwrap();
    let buffer = first..first + 64;
    buffer.clone().filter(|&f| heat.dirty[f] > 0).count() as f64 / buffer.len() as f64
}

#[test]
fn dirty_log_sees_writes_and_not_reads() {
    assert!(
        hot_share("stream:size=128M,op=write,phases=1,seconds=1") > 0.9,
        "writes are seen"
    );
    assert!(
        hot_share("stream:size=128M,op=read,phases=1,seconds=1") < 0.05,
        "reads leave no dirty bits"
    );
}

//! The dirty-log tracker on real KVM: a `hotset` guest writes a hot set
//! that moves every phase; the dirty-log tracker feeds the heat model every
//! interval, and the model's top-K frames are compared with the oracle's
//! top-K for the phase (from the payload's ground truth; K = hot-set
//! frames). Precision must reach 0.9 within 3 intervals of the start and of
//! every phase shift.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use access_track::{AccessTracker, DirtyCoverage, DirtyLogTracker};
use guest_abi::{AccessRange, GpaRange};
use guest_memory::Move;
use guest_memory::{Placement, TierSpec};
use oracle::{Oracle, precision_at_k};
use tiering::{HeatConfig, HeatModel};
use vmm::devices::hypercall::LogSink;
use vmm::migration::{MigrationConfig, MigratorKind};
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd};

const MIB: u64 = 1 << 20;

fn tier(name: &str, size: u64) -> TierSpec {
    format!("name={name},backend=memfd,size={}M", size / MIB)
        .parse()
        .unwrap()
}

/// Per interval: (phase, precision of the heat model's top-K). With a
/// `migrator`, random frames move between the tiers all along.
fn precision_per_interval(args: &str, hot_frames: usize, interval: Duration) -> Vec<(u64, f64)> {
    precision_while_migrating(args, hot_frames, interval, MigratorKind::None)
}

fn precision_while_migrating(
    args: &str,
    hot_frames: usize,
    interval: Duration,
    migrator: MigratorKind,
) -> Vec<(u64, f64)> {
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
        migration: MigrationConfig {
            migrator,
            ..Default::default()
        },
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
    let mover = vm.migrator().cloned();
    let moved = std::sync::atomic::AtomicUsize::new(0);
    let end = std::thread::scope(|s| {
        if let Some(m) = &mover {
            let (mem, done, moved) = (&mem, &done, &moved);
            s.spawn(move || {
                let mut rng = 0x1234_5678_9abc_def1u64;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let batch: Vec<Move> = (0..8)
                        .map(|_| {
                            rng ^= rng << 13;
                            rng ^= rng >> 7;
                            rng ^= rng << 17;
                            let frame = (rng % mem.frame_count() as u64) as usize;
                            Move {
                                frame,
                                to_tier: 1 - mem.location(frame).unwrap().tier,
                            }
                        })
                        .collect();
                    let r = m.migrate(&batch);
                    moved.fetch_add(r.moved, std::sync::atomic::Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
        }
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
    if mover.is_some() {
        assert!(
            moved.load(std::sync::atomic::Ordering::Relaxed) > 200,
            "frames moved while tracking"
        );
        mem.verify_backing().unwrap();
    }
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

/// Frames keep moving between tiers (remap and pre-copy, which shares the
/// dirty log with the tracker) while the tracker follows the hot set: a
/// write that waited on a migration is logged once, after it lands, and
/// the pre-copy migrator's harvests do not steal the tracker's bits.
#[test]
fn dirty_log_keeps_tracking_while_frames_migrate() {
    let _alone = crate::rig::alone();
    for migrator in [MigratorKind::Remap, MigratorKind::RemapPrecopy] {
        let r = precision_while_migrating(
            "hotset:size=384M,hot=32M,hot-frac=0.9,phases=2,seconds=1.5",
            16,
            Duration::from_millis(200),
            migrator,
        );
        assert_tracks(&r, 2);
    }
}

#[test]
fn dirty_log_finds_the_hotset_hot_set_and_follows_it() {
    let _alone = crate::rig::alone();
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
    // Full coverage: this reads what the log saw over the whole run.
    let mut tracker =
        DirtyLogTracker::with_coverage(vm.dirty_log().unwrap(), mem.clone(), DirtyCoverage::Full);
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
    let _alone = crate::rig::alone();
    assert!(
        hot_share("stream:size=128M,op=write,phases=1,seconds=1") > 0.9,
        "writes are seen"
    );
    assert!(
        hot_share("stream:size=128M,op=read,phases=1,seconds=1") < 0.05,
        "reads leave no dirty bits"
    );
}

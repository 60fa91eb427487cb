//! The dirty-log tracker on real KVM, at its default settings (a fixed
//! budget of pages armed in short windows over adaptive regions): it finds `hotset`'s hot set and `zipf`'s working set and follows phase
//! shifts, also while frames migrate; with full coverage it sees every
//! written page and no read one.

use std::sync::Arc;
use std::time::Duration;

use access_track::{AccessTracker, DirtyCoverage, DirtyLogTracker, TrackerKind};
use guest_memory::migrate::DirtySource;
use guest_memory::{Placement, TierSpec};
use vmm::migration::{MigrationConfig, MigratorKind};
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd};

use crate::rig::{HOTSET, MIB, Run, TopK, ZIPF, assert_tracks, run, zipf_top};

fn tier(name: &str, size: u64) -> TierSpec {
    format!("name={name},backend=memfd,size={}M", size / MIB)
        .parse()
        .unwrap()
}

#[test]
fn dirty_log_finds_the_hotset_hot_set_and_follows_it() {
    let _alone = crate::rig::alone();
    let o = run(&Run::new(HOTSET, TrackerKind::DirtyLog, TopK::Fixed(16)));
    assert_tracks(&o.precision, 2);
}

#[test]
fn dirty_log_finds_the_zipf_working_set() {
    let _alone = crate::rig::alone();
    let o = run(&Run::new(ZIPF, TrackerKind::DirtyLog, zipf_top()));
    assert_tracks(&o.precision, 2);
}

/// Frames keep moving between tiers (remap and pre-copy, which shares the
/// dirty log with the tracker) while the tracker follows the hot set: a
/// write that waited on a migration is logged once, after it lands, and
/// the pre-copy migrator's harvests do not steal the tracker's bits.
#[test]
fn dirty_log_keeps_tracking_while_frames_migrate() {
    let _alone = crate::rig::alone();
    for migrator in [MigratorKind::Remap, MigratorKind::RemapPrecopy] {
        let mut r = Run::new(HOTSET, TrackerKind::DirtyLog, TopK::Fixed(16));
        r.migrator = migrator;
        // 200 frames (400 MiB) a second, a rate no tiering policy asks
        // for: plain remap holds a hot frame's writers for its whole batch
        // copy, and at 8 frames per 10 ms the guest sat stalled through
        // several observation windows in a row (an empty sample is no
        // evidence, so the shift showed late).
        (r.batch, r.move_every) = (4, Duration::from_millis(20));
        let o = run(&r);
        assert_tracks(&o.precision, 2);
        o.assert_moved_in_every_phase(&format!("{migrator:?}"));
    }
}

/// A 1-vCPU VM of 256 MiB on one memfd tier with dirty logging on,
/// running the payload workload `args`.
fn logged_vm(args: &str) -> Vm {
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
        tiering: None,
        migration: MigrationConfig::default(),
    };
    Vm::new(&config, Arc::new(|_, _| {})).unwrap()
}

/// Heat of the buffer's frames after a run of the stream workload with
/// `op` over 128 MiB, as the share of buffer frames that look hot (any
/// evidence). The guest runs until a second consumer of the log has seen
/// 90 % of the buffer's frames written (or two minutes have passed), so a
/// write run holds its writes however the vCPU is scheduled; a read run
/// lasts one second, which reads cannot dirty.
fn hot_share(op: &str) -> f64 {
    let writes = op == "write";
    let seconds = if writes { 600 } else { 1 };
    let mut vm = logged_vm(&format!(
        "stream:size=128M,op={op},phases=1,seconds={seconds}"
    ));
    let mem = vm.memory().clone();
    let free = vm.first_free_range().unwrap();
    let log = vm.dirty_log().unwrap().clone();
    let witness = log.subscribe();
    let spans = [guest_memory::GpaRange::new(free.start, 128 * MIB)];
    // Full coverage: this reads what the log saw over the whole run.
    let mut tracker =
        DirtyLogTracker::with_coverage(&log, mem.clone(), DirtyCoverage::Full).unwrap();
    // Warm-up writes every page once: start counting at phase 0. Dirty
    // bits outlive the guest, so the second harvest comes after the run.
    let state = vm.state().clone();
    let stop = vm.stop_handle();
    std::thread::scope(|s| {
        let first = s.spawn(|| {
            while state.phase_starts().is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
            tracker.collect().unwrap();
            witness.reset(&spans).unwrap();
            let mut written = std::collections::HashSet::new();
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            while writes && written.len() < 58 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
                let mut pages = Vec::new();
                witness.take(&spans, &mut pages).unwrap();
                written.extend(pages.iter().map(|p| (p - free.start) / (2 * MIB)));
            }
            if writes {
                stop.request();
            }
        });
        assert_eq!(
            vm.run(Duration::from_millis(100), &mut |_, _| {}).unwrap(),
            VmEnd::Success
        );
        first.join().unwrap();
    });
    let heat = tracker.collect().unwrap();
    let first = mem.frames().frame_of_gpa(free.start).unwrap().index();
    let buffer = first..first + 64;
    buffer.clone().filter(|&f| heat.dirty[f] > 0).count() as f64 / buffer.len() as f64
}

#[test]
fn dirty_log_sees_writes_and_not_reads() {
    let _alone = crate::rig::alone();
    assert!(hot_share("write") > 0.9, "writes are seen");
    assert!(hot_share("read") < 0.05, "reads leave no dirty bits");
}

/// The sampled tracker's look after its window is a peek: the pages stay
/// armed-off (writable, their bits kept in KVM) and no other consumer of
/// the log loses a bit to it.
#[test]
fn a_peek_keeps_the_bits_in_kvm_for_every_consumer() {
    let _alone = crate::rig::alone();
    // The guest writes until the look below asks it to stop: the look
    // waits for the writes it needs, however the vCPU is scheduled.
    let mut vm = logged_vm("stream:size=128M,op=write,phases=1,seconds=600");
    let log = vm.dirty_log().unwrap().clone();
    let free = vm.first_free_range().unwrap();
    let spans = [guest_memory::GpaRange::new(free.start, 64 * MIB)];
    let (peeker, other) = (log.subscribe(), log.subscribe());
    let state = vm.state().clone();
    let stop = vm.stop_handle();
    std::thread::scope(|s| {
        let look = s.spawn(|| {
            while state.phase_starts().is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
            other.reset(&spans).unwrap();
            peeker.reset(&spans).unwrap();
            let (mut first, mut again, mut taken) = (Vec::new(), Vec::new(), Vec::new());
            // Peeks do not clear: the window grows until it holds enough.
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            while first.len() <= 64 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
                first.clear();
                peeker.peek(&spans, &mut first).unwrap();
            }
            peeker.peek(&spans, &mut again).unwrap();
            other.take(&spans, &mut taken).unwrap();
            stop.request();
            (first, again, taken)
        });
        assert_eq!(
            vm.run(Duration::from_millis(100), &mut |_, _| {}).unwrap(),
            VmEnd::Success
        );
        let (first, again, taken) = look.join().unwrap();
        assert!(first.len() > 64, "the window saw writes: {}", first.len());
        let missing = |later: &[u64]| first.iter().filter(|p| !later.contains(p)).count();
        assert_eq!(missing(&again), 0, "a second peek still sees every page");
        assert_eq!(
            missing(&taken),
            0,
            "the other consumer still gets every bit"
        );
    });
}

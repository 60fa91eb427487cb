//! Live migration under fire, without KVM: writer threads hammer a
//! sequence pattern through the guest mapping (the same host range vCPUs
//! use) while the remap migrator moves random frames between two tiers.
//! Every write is checked: each writer keeps the value it last wrote to
//! each of its words and checks it before the next write, and everything
//! is checked again at the end through the guest mapping and through the
//! tier backings. Zero lost or torn writes, for the plain and pre-copy
//! protocols, for exchange, and with failures injected at every step.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use guest_memory::migrate::{
    DirtyError, DirtySource, FaultInjection, GuardOptions, HostWriteLog, PrecopyConfig,
    RemapMigrator, Step, WriteGuard,
};
use guest_memory::{
    BatchOutcome, Location, Migrator, Move, MoveError, MoveStep, Placement, StepError, TieredMemory,
};
use guest_memory::{FrameId, GpaRange, TierId};
use page_copy::{CopyEngine, EngineSpec, engine_from_spec};

use crate::common::{config, memfd, read_host_u64, tier_mappings, vm_flags, write_host_u64};

const FRAME: u64 = 64 << 10;
const FRAMES: u64 = 64;
const WRITERS: u64 = 2;

struct Rig {
    mem: Arc<TieredMemory>,
    log: Arc<HostWriteLog>,
    migrator: RemapMigrator,
    guard: Option<Arc<WriteGuard>>,
}

fn rig(fast_frames: u64, slow_frames: u64, precopy: bool) -> Rig {
    rig_with(fast_frames, slow_frames, precopy, GuardOptions::default())
}

fn rig_with(fast_frames: u64, slow_frames: u64, precopy: bool, options: GuardOptions) -> Rig {
    rig_placed(
        fast_frames,
        slow_frames,
        precopy,
        options,
        Placement::Interleave,
    )
}

/// How the rig's two memfd tiers get their memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tiers {
    /// Page by page (holes until written; released slots punched out).
    OnDemand,
    /// All at creation (`prealloc=on`): the migrator holds frames by minor
    /// faults, write-protecting only frames with pages mapped.
    Preallocated,
}

fn rig_placed(
    fast_frames: u64,
    slow_frames: u64,
    precopy: bool,
    options: GuardOptions,
    placement: Placement,
) -> Rig {
    rig_built(
        (fast_frames, slow_frames),
        precopy,
        options,
        placement,
        Tiers::OnDemand,
    )
}

/// A rig on preallocated tiers each as large as guest RAM.
fn rig_prealloc(precopy: bool, options: GuardOptions) -> Rig {
    rig_built(
        (FRAMES, FRAMES),
        precopy,
        options,
        Placement::Interleave,
        Tiers::Preallocated,
    )
}

fn rig_built(
    (fast_frames, slow_frames): (u64, u64),
    precopy: bool,
    options: GuardOptions,
    placement: Placement,
    tiers: Tiers,
) -> Rig {
    let tier = |name: &str, frames: u64| {
        let spec = memfd(name, &format!("{}K", frames * FRAME / 1024));
        match tiers {
            Tiers::OnDemand => spec,
            Tiers::Preallocated => format!("{spec},prealloc=on").parse().unwrap(),
        }
    };
    let cfg = config(
        FRAMES * FRAME,
        FRAME,
        vec![tier("fast", fast_frames), tier("slow", slow_frames)],
        placement,
    );
    let mem = Arc::new(TieredMemory::new(&cfg).unwrap());
    let guard = Arc::new(WriteGuard::with_options(mem.regions(), options).unwrap());
    let log = Arc::new(HostWriteLog::new(FRAMES * FRAME));
    log.enable();
    let engine = two_thread_engine();
    let pre = precopy.then(|| PrecopyConfig::new(log.clone()));
    let migrator = RemapMigrator::new(mem.clone(), guard.clone(), engine, pre).unwrap();
    Rig {
        mem,
        log,
        migrator,
        guard: Some(guard),
    }
}

/// The copy engine every rig migrates with: two threads, unpinned.
fn two_thread_engine() -> Box<dyn CopyEngine> {
    engine_from_spec(&EngineSpec::Threads {
        workers: 2,
        pin: false,
    })
    .unwrap()
}

/// Words per frame a writer owns: every frame has words of every writer.
const WORDS: u64 = FRAMES * FRAME / 8;

fn word_addr(mem: &TieredMemory, word: u64) -> (u64, u64) {
    let gpa = word * 8;
    let frame = mem.frames().frame_of_gpa(gpa).unwrap();
    let off = gpa - mem.frames().gpa(frame).unwrap();
    (gpa, mem.frames().host_addr(frame).unwrap() + off)
}

/// Writes 0xfeed to word 0; returns its frame, the word's host address
/// and where the frame is.
fn fed_first_frame(rig: &Rig) -> (FrameId, u64, Location) {
    let (gpa, host) = word_addr(&rig.mem, 0);
    write_host_u64(host, 0xfeed);
    let frame = rig.mem.frames().frame_of_gpa(gpa).unwrap();
    (frame, host, rig.mem.location(frame).unwrap())
}

/// Runs writers until `stop`; returns each writer's expected values and
/// the number of checks done.
/// `ready` counts the writers that have finished their first round.
fn writers(
    rig: &Rig,
    stop: &AtomicBool,
    start: &Barrier,
    ready: &AtomicU64,
) -> Vec<(Vec<u64>, u64)> {
    thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let mem = &rig.mem;
                let log = &rig.log;
                s.spawn(move || {
                    let mine: Vec<u64> = (w..WORDS).step_by(WRITERS as usize).collect();
                    let mut expected = vec![0u64; mine.len()];
                    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ w;
                    let mut checks = 0;
                    start.wait();
                    let mut first = true;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..256 {
                            rng ^= rng << 13;
                            rng ^= rng >> 7;
                            rng ^= rng << 17;
                            let i = (rng % mine.len() as u64) as usize;
                            let (gpa, host) = word_addr(mem, mine[i]);
                            let got = read_host_u64(host);
                            assert_eq!(got, expected[i], "writer {w}: lost write at gpa {gpa:#x}");
                            let next = (w << 56) | ((expected[i] & 0xff_ffff_ffff_ffff) + 1);
                            log.write_section(gpa, 8, || write_host_u64(host, next));
                            expected[i] = next;
                            checks += 1;
                        }
                        if std::mem::take(&mut first) {
                            ready.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    (expected, checks)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Every word holds its writer's last value, read through the guest
/// mapping and through the tier view the placement map names.
fn verify_final(rig: &Rig, results: &[(Vec<u64>, u64)]) {
    for (w, (expected, _)) in results.iter().enumerate() {
        for (i, word) in (w as u64..WORDS).step_by(WRITERS as usize).enumerate() {
            let (gpa, host) = word_addr(&rig.mem, word);
            assert_eq!(read_host_u64(host), expected[i], "guest view, gpa {gpa:#x}");
            let frame = rig.mem.frames().frame_of_gpa(gpa).unwrap();
            let loc = rig.mem.location(frame).unwrap();
            let view = rig.mem.tiers()[loc.tier.index()]
                .slot_view_addr(loc.slot)
                .unwrap();
            let off = gpa - rig.mem.frames().gpa(frame).unwrap();
            assert_eq!(
                read_host_u64(view + off),
                expected[i],
                "backing of gpa {gpa:#x}"
            );
        }
    }
    rig.mem.verify_backing().unwrap();
    assert_eq!(
        rig.mem.leaked_slots().unwrap(),
        [],
        "released slots are punched out"
    );
    for t in 0..rig.mem.tiers().len() {
        assert_eq!(
            rig.mem.reserved_slots(TierId(t)),
            0,
            "no reservation left behind"
        );
    }
}

/// Runs writers while `drive` migrates; returns the migrators' totals.
/// Moves `frame` alone to the tier it is not on.
fn move_to_the_other_tier(rig: &Rig, frame: FrameId) -> BatchOutcome {
    let at = rig.mem.location(frame).unwrap();
    rig.migrator.migrate_moves(&[Move {
        frame,
        to_tier: TierId(1 - at.tier.index()),
    }])
}

fn under_fire(rig: &Rig, drive: impl FnOnce(&Rig) -> BatchOutcome + Send) -> BatchOutcome {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(WRITERS as usize + 1);
    let ready = AtomicU64::new(0);
    let (results, total) = thread::scope(|s| {
        let w = s.spawn(|| writers(rig, &stop, &start, &ready));
        start.wait();
        // Migrate only once every writer is writing: on a busy host a
        // writer may first run after a short drive has finished.
        while ready.load(Ordering::SeqCst) < WRITERS {
            thread::sleep(std::time::Duration::from_millis(1));
        }
        let total = drive(rig);
        stop.store(true, Ordering::Relaxed);
        (w.join().unwrap(), total)
    });
    assert!(results.iter().all(|(_, checks)| *checks > 0), "writers ran");
    verify_final(rig, &results);
    total
}

fn random_moves(rig: &Rig, target: usize, batch: usize) -> BatchOutcome {
    let mut total = BatchOutcome::default();
    let mut rng = 12345u64;
    while total.report.moved < target {
        let mut moves = Vec::new();
        for _ in 0..batch {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let frame = ((rng >> 33) % FRAMES) as usize;
            let to_tier = TierId(1 - rig.mem.location(FrameId(frame)).unwrap().tier.index());
            moves.push(Move {
                frame: FrameId(frame),
                to_tier,
            });
        }
        total.absorb(rig.migrator.migrate_moves(&moves));
    }
    total
}

#[test]
fn plain_protocol_loses_no_write() {
    let rig = rig(FRAMES, FRAMES, false);
    let total = under_fire(&rig, |r| random_moves(r, 3000, 8));
    assert!(total.report.moved >= 3000);
    assert_eq!(total.report.aborted, 0, "{:?}", total.failed);
}

#[test]
fn precopy_protocol_loses_no_write() {
    let rig = rig(FRAMES, FRAMES, true);
    // The first pass waits until a writer dirties one of its pages, so a
    // re-copy is seen however the writers happen to be scheduled.
    rig.migrator.faults().unwrap().hold_precopy_until_dirty(1);
    let total = under_fire(&rig, |r| random_moves(r, 3000, 8));
    assert!(total.report.moved >= 3000);
    assert_eq!(total.report.aborted, 0, "{:?}", total.failed);
    assert!(
        total.report.recopied_pages > 0,
        "writers dirtied pages during pre-copy"
    );
}

/// Zaps random pages the way the fault sampler does (under the window
/// lock, never inside a migration window) and maps them back a moment
/// later, until `stop`, counting the pages zapped in `zapped`.
fn sampler_zaps(rig: &Rig, stop: &AtomicBool, zapped: &AtomicU64) {
    let guard = rig.guard.as_ref().unwrap();
    let mut rng = 777u64;
    while !stop.load(Ordering::Relaxed) {
        let mut runs = Vec::new();
        for _ in 0..8 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let frame = ((rng >> 33) % FRAMES) as usize;
            let page = (rng >> 20) % (FRAME / 4096 - 3);
            let start = rig.mem.frames().host_addr(FrameId(frame)).unwrap() + page * 4096;
            let window = guard.lock_window();
            if !window.overlaps(start, 4 * 4096) {
                crate::minor_faults::zap(start, 4 * 4096);
                runs.push(start);
                zapped.fetch_add(4, Ordering::Relaxed);
            }
        }
        thread::sleep(std::time::Duration::from_micros(300));
        for start in runs {
            // ENOENT: the frame is between its remap and re-registration,
            // which populates the new mapping anyway.
            if let Err(guest_memory::uffd::UffdError::Ioctl { source, .. }) =
                guard.lock_window().restore(start, 4 * 4096)
            {
                assert_eq!(source.raw_os_error(), Some(libc::ENOENT), "{source}");
            }
        }
    }
}

/// Fault sampling next to live migration: pages zapped before a window
/// opens fault while their frame is protected, and the write still waits.
#[test]
fn sampling_zaps_during_migration_lose_no_write() {
    let sampled = GuardOptions { minor_faults: true };
    for (precopy, tiers) in [
        (false, Tiers::OnDemand),
        (true, Tiers::OnDemand),
        (false, Tiers::Preallocated),
    ] {
        let rig = match tiers {
            Tiers::OnDemand => rig_with(FRAMES, FRAMES, precopy, sampled),
            Tiers::Preallocated => rig_prealloc(precopy, sampled),
        };
        let guard = rig.guard.clone().unwrap();
        assert!(guard.minor_faults_enabled());
        let rec = Arc::new(crate::minor_faults::Recorder::default());
        guard.set_minor_sink(rec.clone());
        let total = under_fire(&rig, |r| {
            let stop = AtomicBool::new(false);
            let zapped = AtomicU64::new(0);
            thread::scope(|s| {
                s.spawn(|| sampler_zaps(r, &stop, &zapped));
                let mut total = random_moves(r, 1500, 8);
                // Migrate on until the zaps and faults the checks below
                // need have happened, however the threads were scheduled.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
                while (zapped.load(Ordering::Relaxed) <= 1000
                    || rec.faults.lock().unwrap().len() <= 100)
                    && std::time::Instant::now() < deadline
                {
                    total.absorb(random_moves(r, 8, 8));
                }
                stop.store(true, Ordering::Relaxed);
                assert!(zapped.load(Ordering::Relaxed) > 1000, "pages zapped");
                total
            })
        });
        assert!(total.report.moved >= 1500);
        assert_eq!(total.report.aborted, 0, "{:?}", total.failed);
        assert!(
            rec.faults.lock().unwrap().len() > 100,
            "zapped pages faulted"
        );
        assert!(!rec.remaps.lock().unwrap().is_empty(), "remaps reported");
    }
}

#[test]
fn exchange_when_both_tiers_are_full_loses_no_write() {
    // Capacities equal guest RAM exactly: no free slot anywhere. On
    // preallocated tiers the frames are held by minor faults until they
    // are parked on the bounce area.
    for tiers in [Tiers::OnDemand, Tiers::Preallocated] {
        exchanges_when_both_tiers_are_full(tiers);
    }
}

fn exchanges_when_both_tiers_are_full(tiers: Tiers) {
    let rig = rig_full(tiers);
    let total = under_fire(&rig, |r| {
        let mut total = BatchOutcome::default();
        let mut rng = 99u64;
        while total.report.exchanged < 2000 {
            let on = |t: usize| {
                (0..FRAMES as usize)
                    .filter(|&f| r.mem.location(FrameId(f)).unwrap().tier == TierId(t))
                    .collect::<Vec<_>>()
            };
            let (fast, slow) = (on(0), on(1));
            // Four distinct frames from each tier: every move has a partner.
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1);
            let (i, j) = ((rng >> 33) as usize, (rng >> 40) as usize);
            let mut moves = Vec::new();
            for k in 0..4 {
                moves.push(Move {
                    frame: FrameId(fast[(i + k) % fast.len()]),
                    to_tier: TierId(1),
                });
                moves.push(Move {
                    frame: FrameId(slow[(j + k) % slow.len()]),
                    to_tier: TierId(0),
                });
            }
            total.absorb(r.migrator.migrate_moves(&moves));
        }
        total
    });
    assert_eq!(
        total.report.moved, total.report.exchanged,
        "every move was an exchange ({tiers:?})"
    );
    assert_eq!(total.report.aborted, 0, "{tiers:?}: {:?}", total.failed);
    let usage = rig.mem.tier_usage();
    assert_eq!(usage[0].used_frames, FRAMES as usize / 2);
    assert_eq!(usage[1].used_frames, FRAMES as usize / 2);
}

fn inject_every_step(rig: &Rig, faults: &FaultInjection) -> BatchOutcome {
    let mut total = BatchOutcome::default();
    for step in [Step::Reserve, Step::Copy, Step::Remap, Step::Register] {
        for _ in 0..20 {
            faults.fail_next(step, 1);
            total.absorb(random_moves(rig, 1, 4));
            faults.fail_next(step, 0);
        }
    }
    total.absorb(random_moves(rig, 500, 8));
    total
}

#[test]
fn injected_failures_roll_back_plain() {
    let rig = rig(FRAMES, FRAMES, false);
    let faults = rig.migrator.faults().unwrap().clone();
    let total = under_fire(&rig, |r| inject_every_step(r, &faults));
    assert_eq!(faults.injected(), 80);
    // A failed registration keeps its moves; the other steps abort.
    assert!(
        total.report.aborted >= 60,
        "each injected failure aborts moves: {}",
        total.report.aborted
    );
    // Each injected step is reported as the step that failed, injected;
    // a failed registration as a warning on moved frames.
    let injected = |step: MoveStep| {
        move |e: &MoveError| e.step == step && matches!(e.source, StepError::Injected)
    };
    assert!(total.failed.iter().any(injected(MoveStep::Reserve)));
    assert!(total.failed.iter().any(injected(MoveStep::Copy)));
    assert!(total.failed.iter().any(injected(MoveStep::Remap)));
    assert!(total.warnings.iter().any(injected(MoveStep::Register)));
}

#[test]
fn injected_failures_roll_back_precopy_and_exchange() {
    let rig = rig(FRAMES, FRAMES, true);
    let faults = rig.migrator.faults().unwrap().clone();
    let total = under_fire(&rig, |r| inject_every_step(r, &faults));
    assert!(total.report.aborted >= 60);
    // Exchange with full tiers, failures injected in both stages.
    for tiers in [Tiers::OnDemand, Tiers::Preallocated] {
        exchange_failures_roll_back(tiers);
    }
}

fn exchange_failures_roll_back(tiers: Tiers) {
    let rig = rig_full(tiers);
    let faults = rig.migrator.faults().unwrap().clone();
    let total = under_fire(&rig, |r| {
        let mut total = BatchOutcome::default();
        for (step, n) in [(Step::Copy, 1), (Step::Copy, 2), (Step::Remap, 1)] {
            for _ in 0..10 {
                let fast = (0..FRAMES as usize)
                    .find(|&f| r.mem.location(FrameId(f)).unwrap().tier == TierId(0))
                    .unwrap();
                let slow = (0..FRAMES as usize)
                    .find(|&f| r.mem.location(FrameId(f)).unwrap().tier == TierId(1))
                    .unwrap();
                faults.fail_next(step, n);
                total.absorb(r.migrator.migrate_moves(&[
                    Move {
                        frame: FrameId(fast),
                        to_tier: TierId(1),
                    },
                    Move {
                        frame: FrameId(slow),
                        to_tier: TierId(0),
                    },
                ]));
                faults.fail_next(step, 0);
            }
        }
        total
    });
    assert_eq!(total.report.aborted, 60, "{tiers:?}: {:?}", total.failed);
    rig.mem.verify_backing().unwrap();
}

#[test]
fn pipelined_batches_lose_no_write() {
    let rig = rig(FRAMES, FRAMES, false);
    // 32 frames a batch: four sub-batches of eight, each protected,
    // copied and remapped while its neighbours are in the other stages.
    let total = under_fire(&rig, |r| random_moves(r, 2000, 32));
    assert!(total.report.moved >= 2000);
    assert_eq!(total.report.aborted, 0, "{:?}", total.failed);
    assert!(total.report.sub_batches > 0, "the batches ran pipelined");
}

/// Moves frames `0..32` to the other tier in one batch (four sub-batches
/// of eight) with `step` failing `count` times after `skip` attempts;
/// returns the outcome and each frame's location before.
fn pipelined_batch_with_a_failure(
    rig: &Rig,
    step: Step,
    skip: u64,
    count: u64,
) -> (BatchOutcome, Vec<Location>) {
    let before: Vec<Location> = (0..32)
        .map(|f| rig.mem.location(FrameId(f)).unwrap())
        .collect();
    let moves: Vec<Move> = before
        .iter()
        .enumerate()
        .map(|(f, at)| Move {
            frame: FrameId(f),
            to_tier: TierId(1 - at.tier.index()),
        })
        .collect();
    let faults = rig.migrator.faults().unwrap();
    faults.fail_after(step, skip, count);
    let out = rig.migrator.migrate_moves(&moves);
    faults.fail_next(step, 0);
    (out, before)
}

#[test]
fn a_failure_in_one_sub_batch_rolls_back_that_sub_batch_only() {
    let rig = rig(FRAMES, FRAMES, false);
    let faults = rig.migrator.faults().unwrap().clone();
    under_fire(&rig, |r| {
        let mut total = BatchOutcome::default();
        for step in [Step::Protect, Step::Copy, Step::Remap, Step::Register] {
            for skip in 0..4 {
                let (out, before) = pipelined_batch_with_a_failure(r, step, skip, 1);
                assert_eq!(out.report.sub_batches, 4, "{step:?}");
                let failed: Vec<usize> = out.failed.iter().flat_map(|e| e.frames.clone()).collect();
                for (f, was) in before.iter().enumerate() {
                    let stayed = r.mem.location(FrameId(f)).unwrap() == *was;
                    assert_eq!(stayed, failed.contains(&f), "{step:?} {skip}: frame {f}");
                }
                match step {
                    // The whole sub-batch `skip` (frames in order, eight a
                    // sub-batch) stays; the others move.
                    Step::Protect | Step::Copy => {
                        let want: Vec<usize> = (8 * skip as usize..8 * skip as usize + 8).collect();
                        let mut got = failed.clone();
                        got.sort_unstable();
                        assert_eq!(got, want, "{step:?} {skip}: {:?}", out.failed);
                        let want_step = if step == Step::Copy {
                            MoveStep::Copy
                        } else {
                            MoveStep::Hold
                        };
                        assert!(out.failed.iter().all(
                            |e| e.step == want_step && matches!(e.source, StepError::Injected)
                        ));
                    }
                    // One run of one sub-batch goes back to its source.
                    Step::Remap => {
                        assert!((1..=8).contains(&failed.len()), "{:?}", out.failed);
                        let sub = failed[0] / 8;
                        assert!(failed.iter().all(|f| f / 8 == sub), "{failed:?}");
                        assert!(out.failed.iter().all(|e| e.step == MoveStep::Remap));
                    }
                    // A failed registration keeps its moves.
                    _ => {
                        assert!(failed.is_empty(), "{:?}", out.failed);
                        assert!(out.warnings.iter().any(|e| e.step == MoveStep::Register));
                    }
                }
                total.absorb(out);
            }
        }
        total
    });
    assert_eq!(faults.injected(), 16);
}

#[test]
fn pipelined_precopy_loses_no_write() {
    let rig = rig(FRAMES, FRAMES, true);
    // The first sub-batch's pass waits until a writer dirties one of its
    // pages, so a re-copy is seen however the writers are scheduled.
    rig.migrator.faults().unwrap().hold_precopy_until_dirty(1);
    // 64 draws of 64 frames: about 40 distinct, enough for four
    // sub-batches (32 frames).
    let total = under_fire(&rig, |r| random_moves(r, 2000, 64));
    assert!(total.report.moved >= 2000);
    assert_eq!(total.report.aborted, 0, "{:?}", total.failed);
    assert!(total.report.sub_batches > 0, "the batches ran pipelined");
    assert!(total.report.recopied_pages > 0, "pages were re-copied");
}

/// Moves every frame to the other tier in one batch, `batches` times.
fn whole_batches(rig: &Rig, batches: usize) -> BatchOutcome {
    let mut total = BatchOutcome::default();
    for _ in 0..batches {
        let moves: Vec<Move> = (0..FRAMES as usize)
            .map(|f| Move {
                frame: FrameId(f),
                to_tier: TierId(1 - rig.mem.location(FrameId(f)).unwrap().tier.index()),
            })
            .collect();
        total.absorb(rig.migrator.migrate_moves(&moves));
    }
    total
}

/// A 64-frame batch has small edge sub-batches: plain cuts it into 4, 14,
/// 14, 14, 14 and 4 frames, pre-copy into 15, 15, 15, 15 and 4.
#[test]
fn batches_with_small_edge_sub_batches_lose_no_write() {
    for (precopy, subs) in [(false, 6), (true, 5)] {
        let rig = rig(FRAMES, FRAMES, precopy);
        let faults = rig.migrator.faults().unwrap().clone();
        let total = under_fire(&rig, |r| {
            let mut total = whole_batches(r, 30);
            assert_eq!(total.report.moved, 30 * FRAMES as usize);
            assert_eq!(total.report.sub_batches, 30 * subs);
            if !precopy {
                // A failure in an edge sub-batch keeps just its frames
                // (the plain protocol copies once a sub-batch).
                for (step, skip, stays) in [(Step::Protect, 0, 0..4), (Step::Copy, 5, 60..64)] {
                    let before: Vec<Location> = (0..FRAMES as usize)
                        .map(|f| r.mem.location(FrameId(f)).unwrap())
                        .collect();
                    faults.fail_after(step, skip, 1);
                    let out = whole_batches(r, 1);
                    faults.fail_next(step, 0);
                    let mut failed: Vec<usize> =
                        out.failed.iter().flat_map(|e| e.frames.clone()).collect();
                    failed.sort_unstable();
                    assert_eq!(failed, stays.clone().collect::<Vec<_>>(), "{step:?}");
                    for (f, was) in before.iter().enumerate() {
                        let stayed = r.mem.location(FrameId(f)).unwrap() == *was;
                        assert_eq!(stayed, stays.contains(&f), "{step:?}: frame {f}");
                    }
                    total.absorb(out);
                }
            }
            total
        });
        assert_eq!(
            total.report.aborted,
            if precopy { 0 } else { 8 },
            "{:?}",
            total.failed
        );
    }
}

/// A dirty source that fails every reset, or every take, whose spans
/// hold the address set for it (none while that is `u64::MAX`), and
/// otherwise reads the host log.
#[derive(Debug)]
struct DirtyFailingAt {
    log: Arc<HostWriteLog>,
    reset_at: AtomicU64,
    take_at: AtomicU64,
}

impl DirtyFailingAt {
    fn fails(at: &AtomicU64, spans: &[GpaRange]) -> Result<(), DirtyError> {
        let gpa = at.load(Ordering::SeqCst);
        if spans.iter().any(|s| s.gpa <= gpa && gpa < s.gpa + s.len) {
            return Err(DirtyError("injected dirty-log failure".into()));
        }
        Ok(())
    }
}

impl DirtySource for DirtyFailingAt {
    fn reset(&self, spans: &[GpaRange]) -> Result<(), DirtyError> {
        Self::fails(&self.reset_at, spans)?;
        self.log.reset(spans)
    }

    fn take(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError> {
        Self::fails(&self.take_at, spans)?;
        self.log.take(spans, out)
    }

    fn take_final(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError> {
        self.log.take_final(spans, out)
    }
}

/// Frames `0..32` in one pre-copy batch (four sub-batches of eight, the
/// pre-copy of each running while the previous one's final groups do),
/// with one step failing: every frame either moved or stayed where it
/// was, writes intact, and exactly the frames the failure hit stayed.
#[test]
fn a_failure_in_one_precopy_sub_batch_rolls_back_that_sub_batch_only() {
    let mut rig = rig(FRAMES, FRAMES, true);
    let dirty = Arc::new(DirtyFailingAt {
        log: rig.log.clone(),
        reset_at: AtomicU64::new(u64::MAX),
        take_at: AtomicU64::new(u64::MAX),
    });
    let engine = two_thread_engine();
    let guard = rig.guard.clone().unwrap();
    let pre = Some(PrecopyConfig::new(dirty.clone()));
    rig.migrator = RemapMigrator::new(rig.mem.clone(), guard, engine, pre).unwrap();
    let faults = rig.migrator.faults().unwrap().clone();
    under_fire(&rig, |r| {
        let mut total = BatchOutcome::default();
        let check = |out: &BatchOutcome, before: &[Location], want: &[usize], what: &str| {
            let mut failed: Vec<usize> = out.failed.iter().flat_map(|e| e.frames.clone()).collect();
            failed.sort_unstable();
            assert_eq!(failed, want, "{what}: {:?}", out.failed);
            for (f, was) in before.iter().enumerate() {
                let stayed = r.mem.location(FrameId(f)).unwrap() == *was;
                assert_eq!(stayed, want.contains(&f), "{what}: frame {f}");
            }
        };
        let dirty_failed = |out: &BatchOutcome| {
            out.failed
                .iter()
                .all(|e| e.step == MoveStep::Precopy && matches!(e.source, StepError::Dirty(_)))
        };
        // The batch's one reset fails: nothing moves.
        dirty.reset_at.store(0, Ordering::SeqCst);
        let (out, before) = pipelined_batch_with_a_failure(r, Step::Copy, 0, 0);
        dirty.reset_at.store(u64::MAX, Ordering::SeqCst);
        check(&out, &before, &(0..32).collect::<Vec<_>>(), "reset");
        assert!(dirty_failed(&out));
        total.absorb(out);
        // Reading the dirty log fails for sub-batch k: that sub-batch
        // stays whole, while the one before it runs its final groups.
        for k in 0..4u64 {
            let gpa = r.mem.frames().gpa(FrameId(8 * k as usize)).unwrap();
            dirty.take_at.store(gpa, Ordering::SeqCst);
            let (out, before) = pipelined_batch_with_a_failure(r, Step::Copy, 0, 0);
            dirty.take_at.store(u64::MAX, Ordering::SeqCst);
            assert_eq!(out.report.sub_batches, 4);
            let want: Vec<usize> = (8 * k as usize..8 * k as usize + 8).collect();
            check(&out, &before, &want, &format!("dirty log, sub-batch {k}"));
            assert!(dirty_failed(&out));
            total.absorb(out);
        }
        // The first copy is sub-batch 0's, before any final group runs.
        let (out, before) = pipelined_batch_with_a_failure(r, Step::Copy, 0, 1);
        assert_eq!(out.report.sub_batches, 4);
        check(&out, &before, &(0..8).collect::<Vec<_>>(), "copy");
        total.absorb(out);
        // The first protection and the first remap are the first final
        // group's: frame 0 alone, while sub-batch 1 is pre-copied.
        for step in [Step::Protect, Step::Remap] {
            let (out, before) = pipelined_batch_with_a_failure(r, step, 0, 1);
            assert_eq!(out.report.sub_batches, 4);
            check(&out, &before, &[0], &format!("{step:?}"));
            total.absorb(out);
        }
        total
    });
    assert_eq!(faults.injected(), 3);
}

/// A rig whose tiers each hold half of guest RAM: both full, every move
/// an exchange.
fn rig_full(tiers: Tiers) -> Rig {
    rig_built(
        (FRAMES / 2, FRAMES / 2),
        false,
        GuardOptions::default(),
        Placement::Interleave,
        tiers,
    )
}

#[test]
fn writes_stall_only_while_their_frame_moves() {
    let rig = rig(FRAMES, FRAMES, false);
    // The first batch stays protected until a writer waits on it, so a
    // stall is seen however the writers happen to be scheduled.
    rig.migrator.faults().unwrap().hold_until_write_waits(1);
    let total = under_fire(&rig, |r| random_moves(r, 500, 16));
    assert!(!total.report.stalls.is_empty());
    assert!(total.report.stall_max >= *total.report.stalls.iter().min().unwrap());
}

#[test]
fn moves_to_the_current_tier_and_duplicates_are_skipped() {
    let rig = rig(FRAMES, FRAMES, false);
    let tier = rig.mem.location(FrameId(0)).unwrap().tier;
    let r = rig.migrator.migrate_moves(&[
        Move {
            frame: FrameId(0),
            to_tier: tier,
        },
        Move {
            frame: FrameId(1),
            to_tier: TierId(1 - rig.mem.location(FrameId(1)).unwrap().tier.index()),
        },
        Move {
            frame: FrameId(1),
            to_tier: TierId(0),
        },
        Move {
            frame: FrameId(10_000),
            to_tier: TierId(0),
        },
        Move {
            frame: FrameId(2),
            to_tier: TierId(7),
        },
    ]);
    assert_eq!(
        (
            r.report.requested,
            r.report.moved,
            r.report.skipped,
            r.report.aborted
        ),
        (5, 1, 2, 2),
        "{r:?}"
    );
}

#[test]
fn consecutive_frames_get_consecutive_slots_and_one_mapping() {
    // Every frame on fast; slow is empty, its free slots handed out in
    // ascending order. Reserving in batch order gave frames 2..=5 the
    // slots 3, 1, 2, 0: three mappings where one does.
    let rig = rig_placed(
        FRAMES,
        FRAMES,
        false,
        GuardOptions::default(),
        Placement::FastFirst,
    );
    let before = tier_mappings(&rig.mem, 1);
    let batch: Vec<Move> = [5, 3, 4, 2]
        .into_iter()
        .map(|frame| Move {
            frame: FrameId(frame),
            to_tier: TierId(1),
        })
        .collect();
    let r = rig.migrator.migrate_moves(&batch);
    assert_eq!((r.report.moved, r.report.aborted), (4, 0), "{r:?}");
    let slots: Vec<usize> = (2..=5)
        .map(|f| {
            let at = rig.mem.location(FrameId(f)).unwrap();
            assert_eq!(at.tier, TierId(1));
            at.slot
        })
        .collect();
    assert!(
        slots.windows(2).all(|w| w[1] == w[0] + 1),
        "slots {slots:?}"
    );
    assert_eq!(
        tier_mappings(&rig.mem, 1),
        before + 1,
        "one mmap for the run"
    );
    rig.mem.verify_backing().unwrap();
}

#[test]
fn a_failed_move_keeps_the_source_readable_with_latest_data() {
    let rig = rig(FRAMES, FRAMES, false);
    let (frame, host, before) = fed_first_frame(&rig);
    for step in [Step::Copy, Step::Remap] {
        rig.migrator.faults().unwrap().fail_next(step, 1);
        let r = rig.migrator.migrate_moves(&[Move {
            frame,
            to_tier: TierId(1 - before.tier.index()),
        }]);
        assert_eq!(r.report.aborted, 1, "{step:?}");
        assert_eq!(rig.mem.location(frame), Some(before));
        assert_eq!(read_host_u64(host), 0xfeed);
        // Writable again: protection was lifted.
        write_host_u64(host, 0xfeed);
    }
    rig.mem.verify_backing().unwrap();
}

#[test]
fn a_failed_registration_keeps_the_move_and_the_next_protect_registers() {
    let rig = rig(FRAMES, FRAMES, false);
    let (frame, host, from) = fed_first_frame(&rig);
    rig.migrator.faults().unwrap().fail_next(Step::Register, 1);
    let r = rig.migrator.migrate_moves(&[Move {
        frame,
        to_tier: TierId(1 - from.tier.index()),
    }]);
    // The new mapping took writes the moment it was mapped: rolling back
    // would lose them, so the move stands.
    assert_eq!((r.report.moved, r.report.aborted), (1, 0), "{r:?}");
    assert!(
        r.warnings.iter().any(|e| e.step == MoveStep::Register),
        "{r:?}"
    );
    assert_eq!(
        rig.mem.location(frame).unwrap().tier,
        TierId(1 - from.tier.index())
    );
    assert_eq!(read_host_u64(host), 0xfeed);
    write_host_u64(host, 0xbeef);
    rig.mem.verify_backing().unwrap();
    // Unregistered, the frame cannot be write-protected until the next
    // move registers it.
    let r = rig.migrator.migrate_moves(&[Move {
        frame,
        to_tier: from.tier,
    }]);
    assert_eq!((r.report.moved, r.report.aborted), (1, 0), "{r:?}");
    assert_eq!(r.errors().count(), 0, "{r:?}");
    assert_eq!(read_host_u64(host), 0xbeef);
    rig.mem.verify_backing().unwrap();
}

#[test]
fn a_move_into_a_full_tier_uses_the_slot_a_demotion_frees() {
    // fast holds half of RAM (full), slow all of it (room to spare).
    let rig = rig(FRAMES / 2, FRAMES, false);
    let on = |t: usize| {
        (0..FRAMES as usize)
            .find(|&f| rig.mem.location(FrameId(f)).unwrap().tier == TierId(t))
            .unwrap()
    };
    let (hot, cold) = (on(1), on(0));
    let r = rig.migrator.migrate_moves(&[
        Move {
            frame: FrameId(hot),
            to_tier: TierId(0),
        },
        Move {
            frame: FrameId(cold),
            to_tier: TierId(1),
        },
    ]);
    assert_eq!(
        (r.report.moved, r.report.exchanged, r.report.aborted),
        (2, 0, 0),
        "{r:?}"
    );
    assert_eq!(rig.mem.location(FrameId(hot)).unwrap().tier, TierId(0));
    assert_eq!(rig.mem.location(FrameId(cold)).unwrap().tier, TierId(1));
    rig.mem.verify_backing().unwrap();
}

#[test]
fn preallocated_tiers_keep_released_memory_and_lose_no_write() {
    // Plain and pre-copy, whole and pipelined batches: frames are held by
    // minor faults, and writers touch pages a remap left unmapped.
    for precopy in [false, true] {
        let rig = rig_prealloc(precopy, GuardOptions::default());
        for t in rig.mem.tiers() {
            assert!(
                (0..t.slot_count()).all(|s| t.slot_has_data(s).unwrap()),
                "allocated at creation"
            );
        }
        // Draws of 64 frames: about 40 distinct, enough for pre-copy's
        // four sub-batches (32 frames) too.
        let total = under_fire(&rig, |r| {
            let mut total = random_moves(r, 1000, 8);
            total.absorb(random_moves(r, 1000, 64));
            total
        });
        assert_eq!(total.report.aborted, 0, "{:?}", total.failed);
        assert!(total.report.sub_batches > 0, "pipelined ({precopy})");
        for t in rig.mem.tiers() {
            assert!(
                (0..t.slot_count()).all(|s| t.slot_has_data(s).unwrap()),
                "released slots keep their memory"
            );
        }
        rig.mem.verify_backing().unwrap();
    }
}

#[test]
fn injected_failures_roll_back_frames_held_by_minor_faults() {
    for precopy in [false, true] {
        let rig = rig_prealloc(precopy, GuardOptions::default());
        let faults = rig.migrator.faults().unwrap().clone();
        let total = under_fire(&rig, |r| inject_every_step(r, &faults));
        // The remap registers nothing here (the next hold registers the
        // new mapping), so the 20 registration failures asked for never
        // happen; the other 60 all do.
        assert_eq!(faults.injected(), 60);
        assert!(
            total.report.aborted >= 60,
            "each injected failure aborts moves: {}",
            total.report.aborted
        );
        assert_eq!(total.warnings.len(), 0, "{:?}", total.warnings);
        rig.mem.verify_backing().unwrap();
    }
}

/// Frame 0's host address and where it is, with `value` written to its
/// first word and then every page-table entry of the frame zapped (the
/// page stays in the memfd): as a frame is after a remap the guest has
/// not touched since.
fn unmapped_first_frame(rig: &Rig, value: u64) -> (u64, Location) {
    let host = rig.mem.frames().host_addr(FrameId(0)).unwrap();
    write_host_u64(host, value);
    crate::minor_faults::zap(host, FRAME);
    (host, rig.mem.location(FrameId(0)).unwrap())
}

/// The hazard the minor-fault hold must cover: a frame with no page
/// mapped is not write-protected, so a write into it while it moves must
/// be caught as a minor fault, wait, and land on the destination.
///
/// Also for a frame that moved before: its new mapping was left
/// unregistered, and the hold registers it.
#[test]
fn a_write_into_an_unmapped_frame_while_it_moves_waits_and_lands() {
    for moved_before in [false, true] {
        write_into_an_unmapped_frame_while_it_moves(moved_before);
    }
}

fn write_into_an_unmapped_frame_while_it_moves(moved_before: bool) {
    let rig = rig_prealloc(false, GuardOptions::default());
    let guard = rig.guard.clone().unwrap();
    if moved_before {
        let r = move_to_the_other_tier(&rig, FrameId(0));
        assert_eq!((r.report.moved, r.report.aborted), (1, 0), "{r:?}");
    }
    let (host, from) = unmapped_first_frame(&rig, 1);
    let to_tier = TierId(1 - from.tier.index());
    // The batch stays held until a writer waits on it.
    rig.migrator.faults().unwrap().hold_until_write_waits(1);
    let r = thread::scope(|s| {
        let moving = s.spawn(|| {
            rig.migrator.migrate_moves(&[Move {
                frame: FrameId(0),
                to_tier,
            }])
        });
        // Write once the frame is held: its mapping registered for minor
        // faults (a write before that would simply land on the source
        // before the copy, and the frame be write-protected).
        let held = |f: &Vec<String>| f.iter().any(|f| f == "ui");
        let deadline = Instant::now() + Duration::from_secs(120);
        while !held(&vm_flags(host)) {
            assert!(!moving.is_finished(), "the move ended before its hold");
            assert!(Instant::now() < deadline, "no hold: {:?}", vm_flags(host));
            thread::sleep(Duration::from_millis(1));
        }
        write_host_u64(host, 2);
        moving.join().unwrap()
    });
    assert_eq!((r.report.moved, r.report.aborted), (1, 0), "{r:?}");
    assert_eq!(r.report.stalls.len(), 1, "the write waited: {r:?}");
    assert_eq!(
        guard.minor_faults(),
        1,
        "caught as a minor fault, not by a write-protected entry"
    );
    let to = rig.mem.location(FrameId(0)).unwrap();
    assert_eq!(to.tier, to_tier);
    let view = rig.mem.tiers()[to.tier.index()]
        .slot_view_addr(to.slot)
        .unwrap();
    assert_eq!(
        read_host_u64(view),
        2,
        "the write landed on the destination"
    );
    assert_eq!(read_host_u64(host), 2);
    rig.mem.verify_backing().unwrap();
}

/// A remap registers the new mapping with the guard at once, except
/// where the next hold of its frame registers it anyway: on a
/// preallocated tier when the guard takes no minor faults of its own.
/// There the guest's touches of the new mapping are ordinary faults.
#[test]
fn a_new_mapping_is_registered_unless_the_next_hold_registers_it() {
    let sampled = GuardOptions { minor_faults: true };
    let cases = [
        ("on demand", rig(FRAMES, FRAMES, false), true),
        ("on demand, pre-copy", rig(FRAMES, FRAMES, true), true),
        (
            "preallocated",
            rig_prealloc(false, GuardOptions::default()),
            false,
        ),
        (
            "preallocated, pre-copy",
            rig_prealloc(true, GuardOptions::default()),
            false,
        ),
        ("preallocated, sampled", rig_prealloc(false, sampled), true),
    ];
    for (name, rig, registered) in cases {
        let host = rig.mem.frames().host_addr(FrameId(0)).unwrap();
        for _ in 0..2 {
            let r = move_to_the_other_tier(&rig, FrameId(0));
            assert_eq!((r.report.moved, r.report.aborted), (1, 0), "{name}: {r:?}");
            assert_eq!(r.errors().count(), 0, "{name}: {r:?}");
            let flags = vm_flags(host);
            assert_eq!(
                flags.iter().any(|f| f == "uw"),
                registered,
                "{name}: {flags:?}"
            );
            write_host_u64(host, 0xfeed);
            assert_eq!(read_host_u64(host), 0xfeed, "{name}");
        }
        rig.mem.verify_backing().unwrap();
    }
}

/// A move rolled back after its frame was held by minor faults leaves the
/// frame registered as before: a touch of an unmapped page is an ordinary
/// fault again, and the data is the source's.
#[test]
fn a_rolled_back_minor_fault_hold_is_released() {
    let rig = rig_prealloc(false, GuardOptions::default());
    let guard = rig.guard.clone().unwrap();
    for step in [Step::Copy, Step::Remap] {
        let (host, from) = unmapped_first_frame(&rig, 0xfeed);
        rig.migrator.faults().unwrap().fail_next(step, 1);
        let r = rig.migrator.migrate_moves(&[Move {
            frame: FrameId(0),
            to_tier: TierId(1 - from.tier.index()),
        }]);
        assert_eq!(r.report.aborted, 1, "{step:?}: {r:?}");
        assert_eq!(rig.mem.location(FrameId(0)), Some(from));
        assert_eq!(read_host_u64(host), 0xfeed, "{step:?}");
        let flags = vm_flags(host);
        assert!(!flags.iter().any(|f| f == "ui"), "{step:?}: {flags:?}");
        assert!(flags.iter().any(|f| f == "uw"), "{step:?}: {flags:?}");
        write_host_u64(host + FRAME - 8, 0xbeef);
        assert_eq!(guard.minor_faults(), 0, "{step:?}: no minor fault");
    }
    rig.mem.verify_backing().unwrap();
}

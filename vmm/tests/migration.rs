//! Live migration under fire on real KVM: a `memcheck` guest on 2 vCPUs
//! writes and verifies its round pattern over 64 frames while a migrator
//! thread moves random frames of all guest RAM (buffer, page tables, code,
//! stacks) between the two tiers. When the migrations
//! are done the VMM asks the guest to stop; the guest verifies everything
//! and exits 0, then the VMM checks the whole image itself (through the
//! guest mapping), the mappings against the placement map, and that every
//! released slot was given back to the host.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use guest_memory::migrate::FaultInjection;
use guest_memory::{BatchOutcome, Migrator, Move, MoveStep, Placement, StepError, TierSpec};
use guest_memory::{FrameId, TierId};
use vm_memory::{Bytes, GuestAddress};
use vmm::devices::hypercall::LogSink;
use vmm::migration::{MigrationConfig, MigratorKind};
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd};
use workloads::{ImageCheck, Spec, check_memcheck_image};

/// Guest RAM, frames and tiers of a run.
#[derive(Clone, Copy)]
struct Shape {
    frame: u64,
    memory: u64,
    /// memcheck's buffer, in frames.
    buffer_frames: u64,
    /// Extra tier options (`key=value,...`), or "".
    tier_options: &'static str,
    /// The slow tier is a regular file (no userfaultfd: its frames move
    /// under the VM-wide write stop, as device-DAX frames do).
    slow_file: bool,
}

/// 64 KiB frames on shmem: many frames, cheap moves.
const SMALL: Shape = Shape {
    frame: 64 << 10,
    memory: 16 << 20,
    buffer_frames: 64,
    tier_options: "",
    slow_file: false,
};

/// [`SMALL`] on preallocated tiers: the migrator holds frames by minor
/// faults and write-protects only the frames with pages mapped.
const SMALL_PREALLOC: Shape = Shape {
    tier_options: ",prealloc=on",
    ..SMALL
};

/// [`SMALL`] with the slow tier in a regular file.
const SMALL_FILE: Shape = Shape {
    slow_file: true,
    ..SMALL
};

/// 2 MiB frames on preallocated hugetlb tiers (64 MiB each: 64 pages of
/// the host's pool): userfaultfd protects and `mmap` replaces whole huge
/// pages.
const HUGE: Shape = Shape {
    frame: 2 << 20,
    memory: 64 << 20,
    buffer_frames: 16,
    tier_options: ",hugetlb=on,prealloc=on",
    slow_file: false,
};

fn tier(name: &str, size: u64, shape: Shape) -> TierSpec {
    format!(
        "name={name},backend=memfd,size={}K{}",
        size / 1024,
        shape.tier_options
    )
    .parse()
    .unwrap()
}

/// A regular file for a slow tier, removed when dropped.
struct SlowFile(std::path::PathBuf);

impl SlowFile {
    fn new(kind: MigratorKind) -> Self {
        let path = std::env::temp_dir().join(format!(
            "tiervisor-slow-tier-{}-{kind:?}",
            std::process::id()
        ));
        std::fs::File::create(&path).unwrap();
        SlowFile(path)
    }
}

impl Drop for SlowFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

struct Outcome {
    end: VmEnd,
    total: BatchOutcome,
    log: Vec<String>,
}

/// Boots memcheck over 64 frames and runs `drive` (the migrator thread)
/// alongside; returns once the guest has exited.
fn under_fire(
    shape: Shape,
    kind: MigratorKind,
    full_tiers: bool,
    drive: impl FnOnce(&dyn Migrator, &[usize], &dyn Fn(usize) -> usize) -> BatchOutcome + Send,
) -> Outcome {
    let memory = shape.memory;
    let (fast, slow) = if full_tiers {
        (memory / 2, memory / 2)
    } else {
        (memory, memory)
    };
    let args = format!(
        "memcheck:size={}K,seconds=300",
        shape.buffer_frames * shape.frame / 1024
    );
    let file = shape.slow_file.then(|| SlowFile::new(kind));
    let slow_tier = match &file {
        Some(f) => format!(
            "name=slow,backend=file,path={},size={}K",
            f.0.display(),
            slow / 1024
        )
        .parse()
        .unwrap(),
        None => tier("slow", slow, shape),
    };
    let config = VmConfig {
        vcpus: 2,
        memory: guest_memory::MemoryConfig {
            size: memory,
            frame_size: shape.frame,
            tiers: vec![tier("fast", fast, shape), slow_tier],
            placement: Placement::Interleave,
            ..Default::default()
        },
        payload: PayloadSource::Embedded,
        args: args.clone(),
        timeout: Some(Duration::from_secs(240)),
        dirty_log_tracking: false,
        tiering: None,
        migration: MigrationConfig {
            migrator: kind,
            ..Default::default()
        },
    };
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let log: LogSink = Arc::new(move |v, l| sink.lock().unwrap().push(format!("vcpu{v}: {l}")));
    let mut vm = Vm::new(&config, log).unwrap();
    let migrator = vm.migrator().unwrap().clone();
    let memory = vm.memory().clone();
    let free = vm.first_free_range().unwrap();
    // Every frame of guest RAM moves: the buffer the guest verifies, and
    // the frames holding its page tables, GDT/TSS, code, stacks and the
    // hypercall request blocks the VMM writes status into.
    let all: Vec<usize> = (0..memory.frame_count()).collect();
    let stop = vm.stop_handle();
    let (end, total) = std::thread::scope(|s| {
        let mover = s.spawn(|| {
            let where_is = |f: usize| memory.location(FrameId(f)).unwrap().tier.index();
            let total = drive(migrator.as_ref(), &all, &where_is);
            stop.request();
            total
        });
        let end = vm.run(Duration::from_millis(200), &mut |_, _| {}).unwrap();
        (end, mover.join().unwrap())
    });
    let log = lines.lock().unwrap().clone();
    assert_eq!(end, VmEnd::Success, "guest log: {log:?}");

    // The VMM's own check of the final image.
    let spec = Spec::parse(&args).unwrap();
    let mem = memory.guest_memory();
    let check = check_memcheck_image(&spec, free, 2, |gpa| {
        mem.read_obj::<u64>(GuestAddress(gpa)).ok()
    });
    assert!(matches!(check, ImageCheck::Intact { .. }), "{check:?}");
    memory.verify_backing().unwrap();
    assert_eq!(
        memory.leaked_slots().unwrap(),
        [],
        "released slots are punched out"
    );
    Outcome { end, total, log }
}

/// Random single-frame moves of buffer frames to the other tier, in
/// batches of 8, until `target` frames moved.
fn random_moves(
    target: usize,
) -> impl FnOnce(&dyn Migrator, &[usize], &dyn Fn(usize) -> usize) -> BatchOutcome + Send {
    move |m, frames, tier_of| {
        let mut total = BatchOutcome::default();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        while total.report.moved < target {
            let batch: Vec<Move> = (0..8)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let frame = frames[(rng % frames.len() as u64) as usize];
                    Move {
                        frame: FrameId(frame),
                        to_tier: TierId(1 - tier_of(frame)),
                    }
                })
                .collect();
            total.absorb(m.migrate_moves(&batch));
        }
        total
    }
}

/// Pairs of frames on different tiers swap places (both tiers full).
fn random_exchanges(
    target: usize,
) -> impl FnOnce(&dyn Migrator, &[usize], &dyn Fn(usize) -> usize) -> BatchOutcome + Send {
    move |m, frames, tier_of| {
        let mut total = BatchOutcome::default();
        let mut i = 0usize;
        while total.report.exchanged < target {
            let fast: Vec<usize> = frames
                .iter()
                .copied()
                .filter(|&f| tier_of(f) == 0)
                .collect();
            let slow: Vec<usize> = frames
                .iter()
                .copied()
                .filter(|&f| tier_of(f) == 1)
                .collect();
            let batch: Vec<Move> = (0..4)
                .flat_map(|k| {
                    [
                        Move {
                            frame: FrameId(fast[(i * 7 + k) % fast.len()]),
                            to_tier: TierId(1),
                        },
                        Move {
                            frame: FrameId(slow[(i * 5 + k) % slow.len()]),
                            to_tier: TierId(0),
                        },
                    ]
                })
                .collect();
            i += 1;
            total.absorb(m.migrate_moves(&batch));
        }
        total
    }
}

fn assert_clean(o: &Outcome, target: usize) {
    assert!(
        o.total.report.moved >= target,
        "moved {}",
        o.total.report.moved
    );
    assert_eq!(o.total.report.aborted, 0, "{:?}", o.total.failed);
    assert!(o.log.iter().any(|l| l.contains("memcheck")), "{:?}", o.log);
}

/// First every fast frame (half of memcheck's buffer among them) moves to
/// the slow tier in one batch, with `hook` armed on the migrator's fault
/// injection (it makes that batch wait for the guest: see its use); then
/// random moves until `target` frames moved.
fn fast_frames_first_then_random(
    target: usize,
    hook: fn(&FaultInjection),
) -> impl FnOnce(&dyn Migrator, &[usize], &dyn Fn(usize) -> usize) -> BatchOutcome + Send {
    let moves = random_moves(target);
    move |m, frames, tier_of| {
        hook(m.faults().unwrap());
        let fast: Vec<FrameId> = frames
            .iter()
            .copied()
            .filter(|&f| tier_of(f) == 0)
            .map(FrameId)
            .collect();
        let mut total = m.migrate_frames(&fast, TierId(1));
        total.absorb(moves(m, frames, tier_of));
        total
    }
}

#[test]
fn plain_remap_under_a_verifying_guest() {
    // The first batch stays protected until a vCPU write waits on it: a
    // stall is seen however the vCPUs are scheduled.
    let drive = fast_frames_first_then_random(40_000, |f| f.hold_until_write_waits(1));
    let o = under_fire(SMALL, MigratorKind::Remap, false, drive);
    assert_clean(&o, 40_000);
    assert!(
        !o.total.report.stalls.is_empty(),
        "vCPU writes waited on migrating frames"
    );
}

#[test]
fn precopy_remap_under_a_verifying_guest() {
    // The first batch's pre-copy pass waits until the guest dirties one of
    // its pages: a re-copy is seen however the vCPUs are scheduled.
    let drive = fast_frames_first_then_random(30_000, |f| f.hold_precopy_until_dirty(1));
    let o = under_fire(SMALL, MigratorKind::RemapPrecopy, false, drive);
    assert_clean(&o, 30_000);
    assert!(
        o.total.report.recopied_pages > 0,
        "the KVM dirty log reported pages written during pre-copy"
    );
}

/// Preallocated shmem: a frame with no page mapped (most frames after a
/// remap the guest has not touched since) is held by minor faults, not by
/// write-protect markers; vCPU writes into it must still wait and land.
#[test]
fn preallocated_tiers_under_a_verifying_guest() {
    let drive = fast_frames_first_then_random(10_000, |f| f.hold_until_write_waits(1));
    let o = under_fire(SMALL_PREALLOC, MigratorKind::Remap, false, drive);
    assert_clean(&o, 10_000);
    assert!(
        !o.total.report.stalls.is_empty(),
        "vCPU writes waited on migrating frames"
    );
    let drive = fast_frames_first_then_random(10_000, |f| f.hold_precopy_until_dirty(1));
    let o = under_fire(SMALL_PREALLOC, MigratorKind::RemapPrecopy, false, drive);
    assert_clean(&o, 10_000);
}

#[test]
fn exchange_under_a_verifying_guest() {
    let o = under_fire(SMALL, MigratorKind::Remap, true, random_exchanges(30_000));
    assert_clean(&o, 30_000);
    assert_eq!(o.total.report.moved, o.total.report.exchanged);
    let _ = &o.end;
}

/// A tier userfaultfd cannot write-protect (a regular file here; device
/// DAX on real hosts, which the tiered-host scenario covers): frames
/// leaving it move under the VM-wide write stop (every vCPU parked, host
/// writers held), frames entering it under write-protection, plain and
/// pre-copy, and in exchanges; the guest and the VMM find every write.
#[test]
fn file_tier_moves_under_the_write_stop() {
    for kind in [MigratorKind::Remap, MigratorKind::RemapPrecopy] {
        let o = under_fire(SMALL_FILE, kind, false, random_moves(4_000));
        assert_clean(&o, 4_000);
        assert!(
            o.total.report.stops > 100,
            "{kind:?}: stops: {}",
            o.total.report.stops
        );
    }
    for kind in [MigratorKind::Remap, MigratorKind::RemapPrecopy] {
        let o = under_fire(SMALL_FILE, kind, true, random_exchanges(2_000));
        assert_clean(&o, 2_000);
        assert!(
            o.total.report.stops > 100,
            "{kind:?} exchanges: stops: {}",
            o.total.report.stops
        );
    }
}

/// Failures injected at every step (reserve, copy, remap), round after
/// round, while the verifying guest runs: every aborted move leaves its
/// frame readable and writable with its latest data.
#[test]
fn injected_failures_under_a_verifying_guest() {
    use guest_memory::migrate::Step;
    for (shape, kind) in [
        (SMALL, MigratorKind::Remap),
        (SMALL, MigratorKind::RemapPrecopy),
        (SMALL_PREALLOC, MigratorKind::Remap),
        (SMALL_FILE, MigratorKind::Remap),
    ] {
        let steps: &[Step] = if shape.slow_file {
            &[Step::Reserve, Step::Copy, Step::Remap, Step::Stop]
        } else {
            &[Step::Reserve, Step::Copy, Step::Remap]
        };
        let o = under_fire(shape, kind, false, |m, frames, tier_of| {
            let faults = m.faults().expect("remap migrators inject faults").clone();
            let mut total = BatchOutcome::default();
            let mut round = 0u64;
            while total.report.moved < 3_000 {
                let step = steps[(round % steps.len() as u64) as usize];
                faults.fail_next(step, 1);
                let frame = frames[(round as usize * 37) % frames.len()];
                let batch: Vec<Move> = (0..8)
                    .map(|k| {
                        let f = frames[(frame + k * 13) % frames.len()];
                        Move {
                            frame: FrameId(f),
                            to_tier: TierId(1 - tier_of(f)),
                        }
                    })
                    .collect();
                total.absorb(m.migrate_moves(&batch));
                faults.fail_next(step, 0);
                round += 1;
            }
            assert!(faults.injected() >= 100, "{}", faults.injected());
            total
        });
        assert!(
            o.total.report.aborted >= 100,
            "each injection aborted moves: {}",
            o.total.report.aborted
        );
        let mut expected = vec![MoveStep::Reserve, MoveStep::Copy, MoveStep::Remap];
        if shape.slow_file {
            expected.push(MoveStep::Hold);
        }
        for what in expected {
            assert!(
                o.total
                    .failed
                    .iter()
                    .any(|e| e.step == what && matches!(e.source, StepError::Injected)),
                "{kind:?}: {what}"
            );
        }
    }
}

/// Makes sure the host's hugetlb pool has `pages` free 2 MiB pages,
/// growing it if it must (the test suite runs as root; `scripts/test-all.sh`
/// reserves them up front).
fn reserve_hugepages(pages: u64) {
    let meminfo = || std::fs::read_to_string("/proc/meminfo").unwrap();
    let field = |text: &str, key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let info = meminfo();
    let (total, free) = (
        field(&info, "HugePages_Total:"),
        field(&info, "HugePages_Free:"),
    );
    if free < pages {
        let _ = std::fs::write(
            "/proc/sys/vm/nr_hugepages",
            (total + pages - free).to_string(),
        );
    }
    let free = field(&meminfo(), "HugePages_Free:");
    assert!(
        free >= pages,
        "this test needs {pages} free 2 MiB hugepages, the host has {free}: \
         reserve them with `sysctl vm.nr_hugepages=<n>` (as root)"
    );
}

/// Plain and pre-copy moves between hugetlb tiers (whole 2 MiB pages
/// protected, copied and remapped) under the verifying guest.
#[test]
fn hugetlb_tiers_under_a_verifying_guest() {
    for kind in [MigratorKind::Remap, MigratorKind::RemapPrecopy] {
        reserve_hugepages(2 * HUGE.memory / HUGE.frame);
        let o = under_fire(HUGE, kind, false, random_moves(3_000));
        assert_clean(&o, 3_000);
    }
}

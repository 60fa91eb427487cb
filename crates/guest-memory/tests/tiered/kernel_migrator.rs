//! The kernel migrator on real memfds, real `mbind` and real
//! `move_pages(2)`. This host has one NUMA node, so both tiers are node 0
//! (`allow_same_node`): the kernel finds every page already on its target
//! and copies nothing, but every step — policies, page discovery, status
//! handling, quotas, exchanges, rollback, placement — runs for real.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use guest_memory::migrate::{Batch, KernelMigrator, Migrator, Move, MoveStep, Step, StepError};
use guest_memory::{FrameId, TierId};
use guest_memory::{Placement, TieredMemory};
use vm_memory::{Bytes, GuestAddress};

use crate::common::MIB;
use crate::common::at;
use crate::common::policy_at;
use crate::common::tier_mappings;
use crate::shared_numa::shared;

const PAGE: u64 = 4096;

/// `moves` as a batch, exchanges where tiers are full.
fn paired(k: &KernelMigrator, moves: &[Move]) -> Batch {
    Batch::pairing(moves, k.memory())
}

fn mv(frame: usize, to_tier: usize) -> Move {
    Move {
        frame: FrameId(frame),
        to_tier: TierId(to_tier),
    }
}

fn pattern(frame: usize, page: u64) -> u64 {
    0x5eed_0000_0000_0000 | (frame as u64) << 24 | page
}

/// Writes a distinct value into the first `pages` pages of `frame`.
fn fill(mem: &TieredMemory, frame: usize, pages: u64) {
    let gpa = mem.frames().gpa(FrameId(frame)).unwrap();
    for page in 0..pages {
        mem.guest_memory()
            .write_obj(pattern(frame, page), GuestAddress(gpa + page * PAGE + 8))
            .unwrap();
    }
}

/// Checks what [`fill`] wrote.
fn check(mem: &TieredMemory, frame: usize, pages: u64) {
    let gpa = mem.frames().gpa(FrameId(frame)).unwrap();
    for page in 0..pages {
        let got: u64 = mem
            .guest_memory()
            .read_obj(GuestAddress(gpa + page * PAGE + 8))
            .unwrap();
        assert_eq!(got, pattern(frame, page), "frame {frame} page {page}");
    }
}

fn used(mem: &TieredMemory) -> Vec<usize> {
    mem.tier_usage().iter().map(|u| u.used_frames).collect()
}

fn migrator(mem: TieredMemory) -> KernelMigrator {
    KernelMigrator::new(Arc::new(mem)).unwrap()
}

#[test]
fn a_frame_moves_to_the_other_tier_and_back_with_its_data() {
    let k = migrator(shared(8 * MIB, "4M", "8M", Placement::FastFirst));
    let mem = k.memory();
    fill(mem, 0, 10);
    let (out, pages) = k.migrate_pages(&paired(&k, &[mv(0, 1)]));
    let report = &out.report;
    assert_eq!(
        (
            report.requested,
            report.moved,
            report.skipped,
            report.aborted
        ),
        (1, 1, 0, 0),
        "{out:?}"
    );
    assert_eq!(out.errors().count(), 0, "{out:?}");
    // One node: every resident page is already "there"; nothing copied.
    assert_eq!(
        (pages.present, pages.already_there, pages.moved),
        (10, 10, 0)
    );
    assert_eq!((pages.not_present, pages.failed), (502, 0));
    assert_eq!(report.bytes, 0);
    assert_eq!(mem.location(FrameId(0)), Some(at(1, 0)));
    assert_eq!(used(mem), vec![1, 3]);
    assert_eq!(
        (mem.reserved_slots(TierId(0)), mem.reserved_slots(TierId(1))),
        (0, 0)
    );
    let host = mem.frames().host_addr(FrameId(0)).unwrap();
    assert_eq!(policy_at(host), (libc::MPOL_BIND, 1));
    mem.verify_backing().unwrap();
    mem.verify_numa().unwrap();
    check(mem, 0, 10);

    let (out, _) = k.migrate_pages(&paired(&k, &[mv(0, 0)]));
    let report = &out.report;
    assert_eq!(report.moved, 1, "{out:?}");
    assert_eq!(mem.location(FrameId(0)), Some(at(0, 0)));
    assert_eq!(used(mem), vec![2, 2]);
    check(mem, 0, 10);
}

#[test]
fn untouched_pages_count_as_not_present_not_as_failures() {
    let k = migrator(shared(8 * MIB, "4M", "8M", Placement::FastFirst));
    let (out, pages) = k.migrate_pages(&paired(&k, &[mv(1, 1)]));
    let report = &out.report;
    assert_eq!((report.moved, report.aborted), (1, 0), "{out:?}");
    assert_eq!(
        (pages.present, pages.not_present, pages.failed),
        (0, 512, 0)
    );
    assert!(pages.failed_by_status.is_empty());
    // The policy, not a page move, places the frame: still nothing there.
    assert_eq!(
        k.memory()
            .frame_node_counts(FrameId(1))
            .unwrap()
            .not_present,
        512
    );
}

#[test]
fn resident_pages_unmapped_from_the_guest_range_are_found_without_faulting_it() {
    let k = migrator(shared(8 * MIB, "4M", "8M", Placement::FastFirst));
    let mem = k.memory();
    fill(mem, 1, 8);
    let host = mem.frames().host_addr(FrameId(1)).unwrap();
    // As a fault-sampling tracker does: drop the guest's mapping of pages
    // 2..5; the memfd keeps them.
    // SAFETY: MADV_DONTNEED on a shared file mapping only unmaps; the
    // contents stay in the memfd.
    let rc = unsafe {
        libc::madvise(
            (host + 2 * PAGE) as *mut libc::c_void,
            3 * PAGE as usize,
            libc::MADV_DONTNEED,
        )
    };
    assert_eq!(rc, 0);
    let (out, pages) = k.migrate_pages(&paired(&k, &[mv(1, 1)]));
    let report = &out.report;
    assert_eq!(report.moved, 1, "{out:?}");
    assert_eq!((pages.present, pages.unmapped_resident), (8, 3));
    assert_eq!(pages.not_present, 504);
    // The guest range was not faulted in by the migrator.
    let status = mem.frame_nodes(FrameId(1)).unwrap();
    assert_eq!(&status[..8], &[0, 0, -2, -2, -2, 0, 0, 0]);
    check(mem, 1, 8);
}

#[test]
fn repeats_and_no_ops_are_skipped_and_bad_moves_refused() {
    let k = migrator(shared(8 * MIB, "4M", "8M", Placement::FastFirst));
    let before = k.memory().placement();
    let (out, _) = k.migrate_pages(&paired(
        &k,
        &[mv(0, 0), mv(1, 1), mv(1, 0), mv(99, 1), mv(2, 5)],
    ));
    let report = &out.report;
    assert_eq!(
        (
            report.requested,
            report.moved,
            report.skipped,
            report.aborted
        ),
        (5, 1, 2, 2),
        "{out:?}"
    );
    let refused: Vec<String> = out.errors().map(|e| format!("{e}: {}", e.source)).collect();
    assert_eq!(
        refused,
        vec![
            "frame 99 -> tier 1: check failed: no such frame (memory has 4)".to_owned(),
            "frame 2 -> tier 5: check failed: no tier 5".to_owned()
        ]
    );
    assert_ne!(k.memory().placement(), before);
    assert_eq!(k.memory().location(FrameId(1)).unwrap().tier, TierId(1));
}

#[test]
fn a_move_into_a_full_tier_is_refused_and_changes_nothing() {
    let k = migrator(shared(8 * MIB, "4M", "4M", Placement::FastFirst));
    let mem = k.memory();
    let before = mem.placement();
    let (out, _) = k.migrate_pages(&paired(&k, &[mv(2, 0)]));
    let report = &out.report;
    assert_eq!((report.moved, report.aborted), (0, 1));
    let refused: Vec<String> = out.errors().map(|e| format!("{e}: {}", e.source)).collect();
    assert_eq!(
        refused,
        vec![
            "frame 2 -> tier 0: reserve failed: tier 'fast' is full (quota 2 frames) and no frame leaves it in this batch"
        ]
    );
    assert_eq!(mem.placement(), before);
    assert_eq!(
        (mem.reserved_slots(TierId(0)), mem.reserved_slots(TierId(1))),
        (0, 0)
    );
}

#[test]
fn full_tiers_exchange_frames_in_one_batch() {
    let k = migrator(shared(8 * MIB, "4M", "4M", Placement::FastFirst));
    let mem = k.memory();
    fill(mem, 0, 4);
    fill(mem, 2, 4);
    let (out, _) = k.migrate_pages(&paired(&k, &[mv(2, 0), mv(0, 1)]));
    let report = &out.report;
    assert_eq!(
        (report.moved, report.exchanged, report.aborted),
        (2, 2, 0),
        "{out:?}"
    );
    assert_eq!(mem.location(FrameId(2)), Some(at(0, 2)));
    assert_eq!(mem.location(FrameId(0)), Some(at(1, 0)));
    assert_eq!(used(mem), vec![2, 2]);
    assert_eq!(
        (mem.reserved_slots(TierId(0)), mem.reserved_slots(TierId(1))),
        (0, 0)
    );
    check(mem, 0, 4);
    check(mem, 2, 4);
    mem.verify_backing().unwrap();
}

#[test]
fn an_exchange_is_both_moves_or_neither() {
    let k = migrator(shared(8 * MIB, "4M", "4M", Placement::FastFirst));
    let mem = k.memory();
    fill(mem, 0, 4);
    fill(mem, 2, 4);
    let before = mem.placement();
    // The first frame's pages "fail"; its partner moved fine, yet must go back.
    k.faults().unwrap().fail_next(Step::Copy, 1);
    let (out, pages) = k.migrate_pages(&paired(&k, &[mv(2, 0), mv(0, 1)]));
    let report = &out.report;
    assert_eq!(
        (report.moved, report.aborted, report.exchanged),
        (0, 2, 0),
        "{out:?}"
    );
    assert!(
        out.failed
            .iter()
            .any(|e| matches!(e.source, StepError::PartnerFailed(_))),
        "{out:?}"
    );
    assert_eq!(mem.placement(), before);
    assert_eq!(
        (mem.reserved_slots(TierId(0)), mem.reserved_slots(TierId(1))),
        (0, 0)
    );
    // Same node: nothing had to be moved back.
    assert_eq!((pages.rolled_back, pages.stuck), (0, 0));
    check(mem, 0, 4);
    check(mem, 2, 4);
    mem.verify_numa().unwrap();
}

#[test]
fn failed_steps_roll_back_and_the_next_batch_works() {
    let k = migrator(shared(8 * MIB, "4M", "8M", Placement::FastFirst));
    let mem = k.memory();
    fill(mem, 1, 16);
    let before = mem.placement();
    for (step, failed) in [
        (Step::Remap, MoveStep::Remap),
        (Step::Copy, MoveStep::MovePages),
        (Step::Reserve, MoveStep::Reserve),
    ] {
        k.faults().unwrap().fail_next(step, 1);
        let (out, _) = k.migrate_pages(&paired(&k, &[mv(1, 1)]));
        let report = &out.report;
        assert_eq!((report.moved, report.aborted), (0, 1), "{step:?}: {out:?}");
        let errors: Vec<(std::ops::Range<usize>, TierId, MoveStep, bool)> = out
            .errors()
            .map(|e| {
                (
                    e.frames.clone(),
                    e.to_tier,
                    e.step,
                    matches!(e.source, StepError::Injected),
                )
            })
            .collect();
        assert_eq!(errors, vec![(1..2, TierId(1), failed, true)], "{step:?}");
        assert_eq!(mem.placement(), before, "{step:?}");
        assert_eq!(
            (mem.reserved_slots(TierId(0)), mem.reserved_slots(TierId(1))),
            (0, 0)
        );
        let host = mem.frames().host_addr(FrameId(1)).unwrap();
        assert_eq!(policy_at(host), (libc::MPOL_BIND, 1), "{step:?}");
        check(mem, 1, 16);
    }
    assert_eq!(k.faults().unwrap().injected(), 3);
    let (out, _) = k.migrate_pages(&paired(&k, &[mv(1, 1)]));
    let report = &out.report;
    assert_eq!(report.moved, 1);
    mem.verify_backing().unwrap();
}

#[test]
fn a_batch_larger_than_one_move_pages_call_is_chunked() {
    // 40 frames x 512 pages = 20480 pages: two calls of at most 16 Ki pages.
    let k = migrator(shared(80 * MIB, "80M", "80M", Placement::FastFirst));
    let mem = k.memory();
    for frame in 0..40 {
        fill(mem, frame, 512);
    }
    let batch: Vec<Move> = (0..40).map(|f| mv(f, 1)).collect();
    let (out, pages) = k.migrate_pages(&paired(&k, &batch));
    let report = &out.report;
    assert_eq!(report.moved, 40, "{out:?}");
    assert_eq!((pages.present, pages.already_there), (20480, 20480));
    assert_eq!(used(mem), vec![0, 40]);
    for frame in [0, 17, 39] {
        check(mem, frame, 512);
    }
    mem.verify_numa().unwrap();
}

#[test]
fn it_is_a_migrator_and_sums_page_counts() {
    let k = migrator(shared(8 * MIB, "4M", "8M", Placement::FastFirst));
    fill(k.memory(), 0, 2);
    let m: &dyn Migrator = &k;
    assert_eq!(m.name(), "kernel");
    assert_eq!(m.migrate_moves(&[mv(0, 1)]).report.moved, 1);
    assert_eq!(m.migrate_moves(&[mv(0, 0)]).report.moved, 1);
    let totals = k.page_totals();
    assert_eq!((totals.present, totals.not_present), (4, 1020));
}

/// A writer hammers every frame while batches move them back and forth:
/// every value written is read back right after, and the last value of
/// every slot is there at the end. (One node: the kernel copies nothing,
/// but policies, page lookups and placement change under the writer.)
#[test]
fn writes_during_migration_are_never_lost() {
    let k = Arc::new(migrator(shared(8 * MIB, "8M", "8M", Placement::FastFirst)));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (k, stop) = (Arc::clone(&k), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mem = k.memory();
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) || round < 50 {
                round += 1;
                for frame in 0..4 {
                    let gpa = mem.frames().gpa(FrameId(frame)).unwrap();
                    for page in (0..512).step_by(7) {
                        let at = GuestAddress(gpa + page * PAGE);
                        let value = round << 32 | (frame as u64) << 16 | page;
                        mem.guest_memory().write_obj(value, at).unwrap();
                        let back: u64 = mem.guest_memory().read_obj(at).unwrap();
                        assert_eq!(back, value, "lost write at frame {frame} page {page}");
                    }
                }
            }
            round
        })
    };
    let mut moved = 0;
    for batch in 0..200 {
        let to = (batch + 1) % 2;
        let (out, pages) =
            k.migrate_pages(&paired(&k, &(0..4).map(|f| mv(f, to)).collect::<Vec<_>>()));
        let report = &out.report;
        assert_eq!(report.aborted, 0, "{out:?}");
        assert_eq!(pages.failed, 0);
        moved += report.moved;
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert_eq!(moved, 800);
    let mem = k.memory();
    for frame in 0..4 {
        let gpa = mem.frames().gpa(FrameId(frame)).unwrap();
        for page in (0..512).step_by(7) {
            let got: u64 = mem
                .guest_memory()
                .read_obj(GuestAddress(gpa + page * PAGE))
                .unwrap();
            assert_eq!(got, rounds << 32 | (frame as u64) << 16 | page);
        }
    }
    assert_eq!(used(mem), vec![4, 0]);
    mem.verify_backing().unwrap();
    mem.verify_numa().unwrap();
}

/// Per-frame policies split no mapping and windows do not outlive a batch:
/// after many batches the memfd is mapped exactly as before.
#[test]
fn policies_leave_no_mappings_behind() {
    let k = migrator(shared(16 * MIB, "16M", "16M", Placement::Interleave));
    let mem = k.memory();
    for frame in 0..8 {
        fill(mem, frame, 2);
    }
    // SAFETY: drops the guest's mapping of one page; the memfd keeps it, and
    // the batch must use its window to find it.
    let rc = unsafe {
        libc::madvise(
            mem.frames().host_addr(FrameId(3)).unwrap() as *mut libc::c_void,
            PAGE as usize,
            libc::MADV_DONTNEED,
        )
    };
    assert_eq!(rc, 0);
    let before = tier_mappings(mem, 0);
    for round in 0..20 {
        let batch: Vec<Move> = (0..8).map(|f| mv(f, (f + round) % 2)).collect();
        let (out, _) = k.migrate_pages(&paired(&k, &batch));
        let report = &out.report;
        assert_eq!(report.aborted, 0, "{out:?}");
    }
    assert_eq!(tier_mappings(mem, 0), before);
    for frame in 0..8 {
        check(mem, frame, 2);
    }
}

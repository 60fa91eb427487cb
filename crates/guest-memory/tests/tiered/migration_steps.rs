//! The steps a remap migrator will take, done by hand: reserve, copy via
//! views, remap, commit, discard, release — and the refusals that keep the
//! ledger consistent.

use std::sync::Arc;

use guest_memory::{Error, LedgerError, Location, MemoryConfig, TieredMemory};
use guest_memory::{FrameId, TierId};
use vm_memory::{Bytes, GuestAddress};

use crate::common::at;
use crate::common::{MIB, memfd, read_host_u64};

fn memory() -> TieredMemory {
    TieredMemory::new(&MemoryConfig::new(
        8 * MIB,
        vec![memfd("fast", "8M"), memfd("slow", "8M")],
    ))
    .unwrap()
}

/// Copies one frame's slot to another through the tier views.
fn copy_slot(mem: &TieredMemory, from: Location, to: Location) {
    let src = mem.tiers()[from.tier.index()]
        .slot_view_addr(from.slot)
        .unwrap();
    let dst = mem.tiers()[to.tier.index()]
        .slot_view_addr(to.slot)
        .unwrap();
    // SAFETY: both are whole slots inside live views of distinct slots.
    unsafe {
        std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, mem.frame_size() as usize)
    };
}

#[test]
fn a_frame_moves_to_another_tier_without_losing_data() {
    let mem = memory();
    let gpa = mem.frames().gpa(FrameId(1)).unwrap();
    mem.guest_memory()
        .write_obj(0x5eed_u64, GuestAddress(gpa + 4096))
        .unwrap();
    let from = mem.location(FrameId(1)).unwrap();

    let to = mem.reserve_slot(TierId(1)).unwrap();
    assert_eq!(mem.reserved_slots(TierId(1)), 1);
    copy_slot(&mem, from, to);
    mem.map_frames(FrameId(1), 1, to).unwrap();
    mem.commit_move(FrameId(1), from, to).unwrap();
    assert!(
        mem.tiers()[from.tier.index()]
            .discard_slot(from.slot)
            .unwrap()
    );
    mem.release_slot(from).unwrap();

    assert_eq!(mem.location(FrameId(1)), Some(to));
    assert_eq!(
        mem.guest_memory()
            .read_obj::<u64>(GuestAddress(gpa + 4096))
            .unwrap(),
        0x5eed
    );
    let old = mem.tiers()[from.tier.index()]
        .slot_view_addr(from.slot)
        .unwrap();
    assert_eq!(read_host_u64(old + 4096), 0, "the hole reads as zeros");
    let used: Vec<usize> = mem.tier_usage().iter().map(|u| u.used_frames).collect();
    assert_eq!(used, vec![3, 1]);
    assert_eq!(
        (mem.reserved_slots(TierId(0)), mem.reserved_slots(TierId(1))),
        (0, 0)
    );
    mem.verify_backing().unwrap();
    // Writes now land in the slow tier.
    mem.guest_memory()
        .write_obj(7u64, GuestAddress(gpa))
        .unwrap();
    assert_eq!(
        read_host_u64(mem.tiers()[1].slot_view_addr(to.slot).unwrap()),
        7
    );
}

#[test]
fn two_frames_exchange_slots() {
    let mem = TieredMemory::new(&MemoryConfig::new(
        4 * MIB,
        vec![memfd("fast", "2M"), memfd("slow", "2M")],
    ))
    .unwrap();
    let (a, b) = (
        mem.location(FrameId(0)).unwrap(),
        mem.location(FrameId(1)).unwrap(),
    );
    mem.guest_memory()
        .write_obj(0xaau64, GuestAddress(0))
        .unwrap();
    mem.guest_memory()
        .write_obj(0xbbu64, GuestAddress(2 * MIB))
        .unwrap();
    let fs = mem.frame_size() as usize;
    let mut saved = vec![0u8; fs];
    let a_view = mem.tiers()[a.tier.index()].slot_view_addr(a.slot).unwrap();
    let b_view = mem.tiers()[b.tier.index()].slot_view_addr(b.slot).unwrap();
    // SAFETY: whole slots of live views, and a local buffer of the same size.
    unsafe {
        std::ptr::copy_nonoverlapping(a_view as *const u8, saved.as_mut_ptr(), fs);
        std::ptr::copy_nonoverlapping(b_view as *const u8, a_view as *mut u8, fs);
        std::ptr::copy_nonoverlapping(saved.as_ptr(), b_view as *mut u8, fs);
    }
    mem.map_frames(FrameId(0), 1, b).unwrap();
    mem.map_frames(FrameId(1), 1, a).unwrap();
    mem.commit_exchange(FrameId(0), a, FrameId(1), b).unwrap();
    mem.verify_backing().unwrap();
    assert_eq!(
        mem.guest_memory().read_obj::<u64>(GuestAddress(0)).unwrap(),
        0xaa
    );
    assert_eq!(
        mem.guest_memory()
            .read_obj::<u64>(GuestAddress(2 * MIB))
            .unwrap(),
        0xbb
    );
    assert_eq!(mem.location(FrameId(0)), Some(b));
}

#[test]
fn refusals_leave_everything_unchanged() {
    let mem = memory();
    let before = mem.placement();
    let from = mem.location(FrameId(0)).unwrap();
    // Destination never reserved.
    let err = mem.commit_move(FrameId(0), from, at(1, 0)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Ledger(LedgerError::NotReserved {
                tier: TierId(1),
                slot: 0
            })
        ),
        "{err:?}"
    );
    // Releasing a slot that backs a frame.
    let err = mem.release_slot(from).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Ledger(LedgerError::SlotInUse {
                frame: FrameId(0),
                ..
            })
        ),
        "{err:?}"
    );
    // A wrong idea of where the frame is.
    let to = mem.reserve_slot(TierId(1)).unwrap();
    let err = mem.commit_move(FrameId(0), at(0, 3), to).unwrap_err();
    assert!(
        matches!(err, Error::Ledger(LedgerError::Placement(_))),
        "{err:?}"
    );
    mem.release_slot(to).unwrap();
    // More slots than free, or a tier that does not exist.
    assert!(matches!(
        mem.reserve_slots(TierId(0), 1),
        Err(Error::Ledger(LedgerError::TierFull {
            tier: TierId(0),
            ..
        }))
    ));
    assert!(matches!(
        mem.reserve_slot(TierId(9)),
        Err(Error::Ledger(LedgerError::NoSuchTier(TierId(9))))
    ));
    // Remaps outside the guest or the tier.
    assert!(matches!(
        mem.map_frames(FrameId(3), 2, to),
        Err(Error::NotARun { first: 3, count: 2 })
    ));
    assert!(matches!(
        mem.map_frames(FrameId(0), 1, at(1, 4)),
        Err(Error::SlotsOutOfRange {
            slot: 4,
            count: 1,
            ..
        })
    ));
    assert!(matches!(
        mem.map_frames(FrameId(0), 1, at(2, 0)),
        Err(Error::NoSuchTier(TierId(2)))
    ));
    assert_eq!(mem.placement(), before);
    mem.verify_backing().unwrap();
}

#[test]
fn placement_changes_from_another_thread_stay_consistent() {
    let mem = Arc::new(memory());
    let mover = {
        let mem = Arc::clone(&mem);
        std::thread::spawn(move || {
            for round in 0..200 {
                let frame = round % 4;
                let from = mem.location(FrameId(frame)).unwrap();
                let to = mem.reserve_slot(TierId(1 - from.tier.index())).unwrap();
                mem.commit_move(FrameId(frame), from, to).unwrap();
                mem.release_slot(from).unwrap();
            }
        })
    };
    while !mover.is_finished() {
        let usage = mem.tier_usage();
        assert_eq!(usage.iter().map(|u| u.used_frames).sum::<usize>(), 4);
    }
    mover.join().unwrap();
    // Every frame moved an even number of times: back where it started.
    assert_eq!(
        mem.tier_usage()
            .iter()
            .map(|u| u.used_frames)
            .collect::<Vec<_>>(),
        vec![4, 0]
    );
}

//! Data written through the guest view lands in the tier slot the placement
//! map names, and the RAM layout matches the x86 memory map.

use guest_memory::{FrameId, TierId};
use guest_memory::{GIB, Placement, TieredMemory};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend};

use crate::common::at;
use crate::common::{MIB, config, memfd, read_host_u64, write_host_u64};

/// Writes a distinct value at several offsets of every frame through
/// `guest_memory()` and finds each in the placement map's tier view.
fn assert_writes_land_in_placed_slots(mem: &TieredMemory, frames: impl Iterator<Item = usize>) {
    let frame_size = mem.frame_size();
    for frame in frames {
        let gpa = mem.frames().gpa(FrameId(frame)).unwrap();
        let loc = mem.location(FrameId(frame)).unwrap();
        let view = mem.tiers()[loc.tier.index()]
            .slot_view_addr(loc.slot)
            .unwrap();
        for offset in [0, 8, frame_size - 8] {
            let value = 0xfeed_0000_0000_0000 | (frame as u64) << 20 | offset;
            mem.guest_memory()
                .write_obj(value, GuestAddress(gpa + offset))
                .unwrap();
            assert_eq!(
                read_host_u64(view + offset),
                value,
                "frame {frame} offset {offset}"
            );
        }
    }
}

#[test]
fn guest_writes_land_in_the_tier_view_at_the_slot() {
    for placement in [
        Placement::FastFirst,
        Placement::SlowFirst,
        Placement::Interleave,
    ] {
        let cfg = config(
            12 * MIB,
            2 * MIB,
            vec![memfd("a", "6M"), memfd("b", "8M")],
            placement,
        );
        let mem = TieredMemory::new(&cfg).unwrap();
        assert_writes_land_in_placed_slots(&mem, 0..mem.frame_count());
    }
}

#[test]
fn view_writes_are_seen_by_the_guest() {
    let cfg = config(
        8 * MIB,
        2 * MIB,
        vec![memfd("a", "4M"), memfd("b", "4M")],
        Placement::Interleave,
    );
    let mem = TieredMemory::new(&cfg).unwrap();
    let loc = mem.location(FrameId(3)).unwrap();
    let view = mem.tiers()[loc.tier.index()]
        .slot_view_addr(loc.slot)
        .unwrap();
    write_host_u64(view + 4096, 0x1234_5678);
    let gpa = mem.frames().gpa(FrameId(3)).unwrap() + 4096;
    assert_eq!(
        mem.guest_memory()
            .read_obj::<u64>(GuestAddress(gpa))
            .unwrap(),
        0x1234_5678
    );
    // Also through the frame's host address (what KVM sees).
    assert_eq!(
        read_host_u64(mem.frames().host_addr(FrameId(3)).unwrap() + 4096),
        0x1234_5678
    );
}

#[test]
fn small_frames_work() {
    let cfg = config(
        256 * 1024,
        4096,
        vec![memfd("a", "128K"), memfd("b", "128K")],
        Placement::Interleave,
    );
    let mem = TieredMemory::new(&cfg).unwrap();
    assert_eq!(mem.frame_count(), 64);
    assert_writes_land_in_placed_slots(&mem, 0..64);
    mem.verify_backing().unwrap();
}

#[test]
fn guest_of_exactly_3g_has_one_region() {
    let cfg = config(
        3 * GIB,
        2 * MIB,
        vec![memfd("a", "3G")],
        Placement::FastFirst,
    );
    let mem = TieredMemory::new(&cfg).unwrap();
    assert_eq!(mem.regions().len(), 1);
    assert_eq!((mem.regions()[0].gpa, mem.regions()[0].len), (0, 3 * GIB));
    assert!(
        mem.guest_memory()
            .check_address(GuestAddress(3 * GIB))
            .is_none()
    );
    assert_writes_land_in_placed_slots(&mem, [0, 1535].into_iter());
}

#[test]
fn guest_above_4g_skips_the_mmio_hole() {
    let cfg = config(
        5 * GIB,
        2 * MIB,
        vec![memfd("dram", "3G"), memfd("pmem", "2G")],
        Placement::FastFirst,
    );
    let mem = TieredMemory::new(&cfg).unwrap();
    let regions: Vec<(u64, u64)> = mem.regions().iter().map(|r| (r.gpa, r.len)).collect();
    assert_eq!(regions, vec![(0, 3 * GIB), (4 * GIB, 2 * GIB)]);
    for r in mem.regions() {
        assert_eq!(
            r.host_addr % mem.frame_size(),
            0,
            "host range aligned to the frame size"
        );
    }
    assert_eq!(mem.frame_count(), 2560);
    assert_eq!(mem.frames().frame_of_gpa(4 * GIB), Some(FrameId(1536)));
    assert_eq!(mem.frames().frame_of_gpa(3 * GIB + 4096), None);
    assert!(
        mem.guest_memory()
            .check_address(GuestAddress(3 * GIB + MIB))
            .is_none()
    );
    assert!(
        mem.guest_memory()
            .check_address(GuestAddress(6 * GIB - 1))
            .is_some()
    );
    // Low RAM filled dram exactly; high RAM sits on pmem from slot 0.
    assert_eq!(mem.location(FrameId(1535)).unwrap().tier, TierId(0));
    assert_eq!(mem.location(FrameId(1536)).unwrap(), at(1, 0));
    assert_writes_land_in_placed_slots(&mem, [0, 1535, 1536, 2559].into_iter());
    mem.verify_backing().unwrap();
}

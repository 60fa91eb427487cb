//! The shared-numa backing on the host's real node 0: one memfd for all of
//! guest RAM, frames in their own slots, NUMA policy set per frame range
//! before first touch, and the configuration rules.

use guest_memory::migrate::{KernelError, KernelMigrator};
use guest_memory::{
    BackendError, Backing, Error, LedgerError, Location, MemoryConfig, Placement, TierSpec,
    TieredMemory,
};
use guest_memory::{FrameId, TierId};
use vm_memory::{Bytes, GuestAddress};

use crate::common::at;
use crate::common::{GIB, MIB, config_error, file_id, memfd, policy_at, read_host_u64};

/// A memfd tier on `node`.
pub fn on_node(name: &str, size: &str, node: u32) -> TierSpec {
    format!("name={name},backend=memfd,size={size},numa-node={node}")
        .parse()
        .unwrap()
}

/// Shared-numa memory of `size` bytes with tiers `fast` and `slow` of the
/// given sizes, both on node 0 (the only node here).
pub fn shared(size: u64, fast: &str, slow: &str, placement: Placement) -> TieredMemory {
    TieredMemory::new(&MemoryConfig {
        size,
        tiers: vec![on_node("fast", fast, 0), on_node("slow", slow, 0)],
        placement,
        backing: Backing::SharedNuma {
            allow_same_node: true,
        },
        ..MemoryConfig::default()
    })
    .unwrap()
}

fn shared_config(tiers: Vec<TierSpec>) -> MemoryConfig {
    MemoryConfig {
        size: 8 * MIB,
        tiers,
        backing: Backing::SHARED_NUMA,
        ..MemoryConfig::default()
    }
}

#[test]
fn shared_numa_configurations_are_checked_before_anything_is_made() {
    let cases = [
        (
            vec![
                on_node("fast", "4M", 0),
                "name=slow,backend=file,path=/nonexistent".parse().unwrap(),
            ],
            "backing shared-numa needs backend=memfd on every tier: tier 'slow' is backend=file",
        ),
        (
            vec![
                on_node("fast", "4M", 0),
                "name=slow,backend=memfd,size=4M,numa-node=0,hugetlb=on"
                    .parse()
                    .unwrap(),
            ],
            "backing shared-numa does not support hugetlb: tier 'slow' has hugetlb=on",
        ),
        (
            vec![on_node("fast", "4M", 0), on_node("slow", "4M", 0)],
            "backing shared-numa needs a distinct numa-node per tier: \
             tiers 'fast' and 'slow' are both on node 0",
        ),
        (
            vec![on_node("fast", "4M", 0), on_node("slow", "4M", 4000)],
            "tier 'slow': numa node 4000 does not exist (no /sys/devices/system/node/node4000)",
        ),
    ];
    for (tiers, message) in cases {
        assert_eq!(config_error(&shared_config(tiers)), message);
    }
    let too_small = MemoryConfig {
        size: 8 * MIB,
        tiers: vec![on_node("fast", "2M", 0), on_node("slow", "4M", 0)],
        backing: Backing::SharedNuma {
            allow_same_node: true,
        },
        ..MemoryConfig::default()
    };
    assert_eq!(
        config_error(&too_small),
        "tiers too small: guest RAM is 8 MiB but tiers hold 6 MiB"
    );
}

#[test]
fn all_tiers_share_one_memfd_and_frames_keep_their_own_slot() {
    let mem = shared(8 * MIB, "4M", "8M", Placement::Interleave);
    assert_eq!(mem.backing().to_string(), "shared-numa-same-node");
    let (fast, slow) = (&mem.tiers()[0], &mem.tiers()[1]);
    assert!(fast.is_shared() && slow.is_shared());
    assert_eq!(file_id(fast.fd()), file_id(slow.fd()));
    assert_eq!(fast.view_base(), slow.view_base());
    // Slots are frames; capacities are quotas.
    assert_eq!((fast.slot_count(), slow.slot_count()), (4, 4));
    assert_eq!((fast.capacity_frames(), slow.capacity_frames()), (2, 4));
    let locations: Vec<Location> = (0..4).map(|f| mem.location(FrameId(f)).unwrap()).collect();
    assert_eq!(locations, vec![at(0, 0), at(1, 1), at(0, 2), at(1, 3),]);
    let usage: Vec<(usize, usize)> = mem
        .tier_usage()
        .iter()
        .map(|u| (u.capacity_frames, u.used_frames))
        .collect();
    assert_eq!(usage, vec![(2, 2), (4, 2)]);
    mem.verify_backing().unwrap();
    // A guest write lands at the frame's own offset of the one memfd.
    mem.guest_memory()
        .write_obj(0xabcd_u64, GuestAddress(3 * 2 * MIB + 16))
        .unwrap();
    let view = slow.slot_view_addr(3).unwrap() + 16;
    assert_eq!(read_host_u64(view), 0xabcd);
}

#[test]
fn each_frame_range_is_bound_to_its_node_before_first_touch() {
    let mem = shared(8 * MIB, "4M", "4M", Placement::FastFirst);
    for frame in 0..mem.frame_count() {
        let host = mem.frames().host_addr(FrameId(frame)).unwrap();
        assert_eq!(policy_at(host), (libc::MPOL_BIND, 1), "frame {frame}");
        let counts = mem.frame_node_counts(FrameId(frame)).unwrap();
        assert_eq!(counts.not_present, 512, "untouched: {counts:?}");
        assert_eq!(counts.present(), 0);
    }
    // Pages are born on the bound node.
    for offset in [0, 4096, 2 * MIB + 8192] {
        mem.guest_memory()
            .write_obj(1u64, GuestAddress(offset))
            .unwrap();
    }
    assert_eq!(
        mem.frame_node_counts(FrameId(0)).unwrap().by_node.get(&0),
        Some(&2)
    );
    assert_eq!(
        mem.frame_node_counts(FrameId(1)).unwrap().by_node.get(&0),
        Some(&1)
    );
    mem.verify_numa().unwrap();
    // A per-tier memory without nodes has no policy on its frames.
    let plain = TieredMemory::new(&MemoryConfig::new(4 * MIB, vec![memfd("a", "4M")])).unwrap();
    assert_eq!(
        policy_at(plain.frames().host_addr(FrameId(0)).unwrap()).0,
        libc::MPOL_DEFAULT
    );
}

#[test]
fn slot_operations_that_would_break_slot_equals_frame_are_refused() {
    let mem = shared(8 * MIB, "4M", "4M", Placement::FastFirst);
    let before = mem.placement();
    assert!(matches!(
        mem.reserve_slot(TierId(1)),
        Err(Error::Ledger(LedgerError::FixedSlots))
    ));
    assert!(matches!(
        mem.map_frames(FrameId(0), 1, at(1, 3)),
        Err(Error::Ledger(LedgerError::FixedSlots))
    ));
    assert!(matches!(
        mem.tiers()[1].discard_slot(3),
        Err(BackendError::SharedSlot(3))
    ));
    assert!(matches!(
        mem.commit_exchange(FrameId(0), at(0, 0), FrameId(2), at(1, 2)),
        Err(Error::Ledger(LedgerError::FixedSlots))
    ));
    // Mapping a frame's own slot again is harmless and allowed.
    mem.map_frames(FrameId(2), 2, at(1, 2)).unwrap();
    assert_eq!(mem.placement(), before);
    mem.verify_backing().unwrap();
}

#[test]
fn frames_above_the_mmio_hole_sit_at_their_index_in_the_memfd() {
    // 3 GiB + 4 MiB: two frames above 4 GiB guest-physical. Only touched
    // pages take memory.
    let size = 3 * GIB + 4 * MIB;
    let mem = shared(size, "2G", "2G", Placement::FastFirst);
    let last = mem.frame_count() - 1;
    assert_eq!(mem.frames().gpa(FrameId(last)), Some(4 * GIB + 2 * MIB));
    assert_eq!(mem.location(FrameId(last)), Some(at(1, last)));
    mem.guest_memory()
        .write_obj(0x77u64, GuestAddress(4 * GIB + 2 * MIB))
        .unwrap();
    let view = mem.tiers()[1].slot_view_addr(last).unwrap();
    assert_eq!(read_host_u64(view), 0x77);
    mem.verify_backing().unwrap();
}

#[test]
fn the_kernel_migrator_needs_a_shared_backing() {
    let mem = TieredMemory::new(&MemoryConfig::new(
        4 * MIB,
        vec![memfd("fast", "2M"), memfd("slow", "2M")],
    ))
    .unwrap();
    let err = KernelMigrator::new(std::sync::Arc::new(mem)).unwrap_err();
    assert!(matches!(err, KernelError::NotSharedNuma(Backing::PerTier)));
    assert_eq!(
        err.to_string(),
        "the kernel migrator needs backing shared-numa, not per-tier"
    );
}

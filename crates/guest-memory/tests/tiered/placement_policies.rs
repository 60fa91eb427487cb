//! Initial placement policies on real memfd tiers.

use guest_memory::{FrameId, TierId};
use guest_memory::{Placement, TierUsage, TieredMemory};

use crate::common::at;
use crate::common::{MIB, config, memfd};

fn build(size: u64, tiers: &[(&str, &str)], placement: Placement) -> TieredMemory {
    let specs = tiers.iter().map(|(n, s)| memfd(n, s)).collect();
    TieredMemory::new(&config(size, 2 * MIB, specs, placement)).unwrap()
}

fn locations(mem: &TieredMemory) -> Vec<(usize, usize)> {
    mem.placement()
        .iter()
        .map(|(_, l)| (l.tier.index(), l.slot))
        .collect()
}

fn usage(mem: &TieredMemory) -> Vec<(String, usize, usize)> {
    mem.tier_usage()
        .into_iter()
        .map(
            |TierUsage {
                 name,
                 capacity_frames,
                 used_frames,
                 ..
             }| (name, capacity_frames, used_frames),
        )
        .collect()
}

#[test]
fn fast_first_fills_tier_zero_then_tier_one() {
    let mem = build(
        16 * MIB,
        &[("fast", "8M"), ("slow", "16M")],
        Placement::FastFirst,
    );
    assert_eq!(
        locations(&mem),
        vec![
            (0, 0),
            (0, 1),
            (0, 2),
            (0, 3),
            (1, 0),
            (1, 1),
            (1, 2),
            (1, 3)
        ]
    );
    assert_eq!(
        usage(&mem),
        vec![("fast".into(), 4, 4), ("slow".into(), 8, 4)]
    );
    mem.verify_backing().unwrap();
}

#[test]
fn slow_first_fills_the_last_tier_then_goes_up() {
    let mem = build(
        12 * MIB,
        &[("fast", "8M"), ("slow", "8M")],
        Placement::SlowFirst,
    );
    assert_eq!(
        locations(&mem),
        vec![(1, 0), (1, 1), (1, 2), (1, 3), (0, 0), (0, 1)]
    );
    assert_eq!(
        usage(&mem),
        vec![("fast".into(), 4, 2), ("slow".into(), 4, 4)]
    );
    mem.verify_backing().unwrap();
}

#[test]
fn interleave_alternates_and_skips_full_tiers() {
    let mem = build(
        20 * MIB,
        &[("fast", "8M"), ("slow", "16M")],
        Placement::Interleave,
    );
    let tiers: Vec<usize> = locations(&mem).iter().map(|(t, _)| *t).collect();
    assert_eq!(tiers, vec![0, 1, 0, 1, 0, 1, 0, 1, 1, 1]);
    // Slots ascend per tier in frame order.
    assert_eq!(mem.location(FrameId(8)), Some(at(1, 4)));
    assert_eq!(mem.location(FrameId(6)), Some(at(0, 3)));
    assert_eq!(
        usage(&mem),
        vec![("fast".into(), 4, 4), ("slow".into(), 8, 6)]
    );
    assert_eq!(mem.placement_policy(), Placement::Interleave);
    mem.verify_backing().unwrap();
}

#[test]
fn usage_is_derived_from_the_map() {
    let mem = build(
        16 * MIB,
        &[("fast", "8M"), ("slow", "16M")],
        Placement::Interleave,
    );
    let map = mem.placement();
    for (i, u) in mem.tier_usage().iter().enumerate() {
        assert_eq!(u.used_frames, map.frames_on(TierId(i)).count());
        assert_eq!(u.capacity_frames, mem.tiers()[i].slot_count());
    }
    assert_eq!(
        mem.tier_usage()
            .iter()
            .map(|u| u.used_frames)
            .sum::<usize>(),
        mem.frame_count()
    );
}

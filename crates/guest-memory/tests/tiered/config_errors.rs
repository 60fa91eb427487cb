//! Configurations that must be refused before anything is created.

use std::path::Path;

use guest_memory::{
    DEFAULT_FRAME_SIZE, HUGEPAGE_SIZE, MemoryConfig, Placement, TieredMemory, available_hugepages,
};

use crate::common::{GIB, MIB, ScratchFile, config, config_error, memfd};

#[test]
fn memory_not_a_multiple_of_the_frame_size() {
    let cfg = config(
        5 * MIB,
        2 * MIB,
        vec![memfd("a", "8M")],
        Placement::FastFirst,
    );
    assert_eq!(
        config_error(&cfg),
        "memory size 5 MiB (5242880 bytes) is not a multiple of the frame size 2 MiB (2097152 bytes)"
    );
}

#[test]
fn frame_size_must_be_a_power_of_two_of_at_least_4k() {
    let cfg = config(
        6 * MIB,
        3 * MIB,
        vec![memfd("a", "6M")],
        Placement::FastFirst,
    );
    assert_eq!(
        config_error(&cfg),
        "frame size 3145728 is not a power of two"
    );
    let cfg = config(8 * MIB, 2048, vec![memfd("a", "8M")], Placement::FastFirst);
    assert_eq!(
        config_error(&cfg),
        "frame size 2 KiB is below the minimum of 4 KiB"
    );
}

#[test]
fn ram_regions_must_be_whole_frames() {
    // 4 GiB of RAM in 2 GiB frames: the 3 GiB low region is not whole frames.
    let cfg = config(
        4 * GIB,
        2 * GIB,
        vec![memfd("a", "4G")],
        Placement::FastFirst,
    );
    assert_eq!(
        config_error(&cfg),
        "ram region at 0x0 of 3 GiB is not a multiple of the frame size 2 GiB"
    );
}

#[test]
fn zero_memory_and_no_tiers() {
    let cfg = config(
        0,
        DEFAULT_FRAME_SIZE,
        vec![memfd("a", "8M")],
        Placement::FastFirst,
    );
    assert_eq!(config_error(&cfg), "memory size is zero");
    let cfg = MemoryConfig::new(8 * MIB, vec![]);
    assert_eq!(
        config_error(&cfg),
        "no tiers configured (need at least one --tier)"
    );
}

#[test]
fn duplicate_tier_names() {
    let cfg = MemoryConfig::new(8 * MIB, vec![memfd("a", "8M"), memfd("a", "8M")]);
    assert_eq!(config_error(&cfg), "duplicate tier name 'a'");
}

#[test]
fn tier_size_not_a_multiple_of_the_frame_size() {
    let cfg = MemoryConfig::new(8 * MIB, vec![memfd("a", "8M"), memfd("b", "3M")]);
    assert_eq!(
        config_error(&cfg),
        "tier 'b': size 3 MiB (3145728 bytes) is not a multiple of the frame size 2 MiB"
    );
}

#[test]
fn tiers_too_small_names_both_sizes() {
    let cfg = MemoryConfig::new(16 * MIB, vec![memfd("a", "4M"), memfd("b", "8M")]);
    assert_eq!(
        config_error(&cfg),
        "tiers too small: guest RAM is 16 MiB but tiers hold 12 MiB"
    );
}

#[test]
fn missing_numa_node() {
    let spec = "name=a,backend=memfd,size=8M,numa-node=4000"
        .parse()
        .unwrap();
    let cfg = MemoryConfig::new(8 * MIB, vec![spec]);
    assert_eq!(
        config_error(&cfg),
        "tier 'a': numa node 4000 does not exist (no /sys/devices/system/node/node4000)"
    );
}

#[test]
fn hugetlb_needs_2m_frames() {
    let spec = "name=h,backend=memfd,size=8M,hugetlb=on".parse().unwrap();
    let cfg = config(8 * MIB, 4096, vec![spec], Placement::FastFirst);
    assert_eq!(
        config_error(&cfg),
        "tier 'h': hugetlb needs a frame size that is a multiple of 2 MiB, not 4 KiB"
    );
}

/// On a host without enough free 2 MiB hugepages a hugetlb tier is a clean
/// configuration error; with enough, it builds. (The host's setting is read,
/// never changed.)
#[test]
fn hugetlb_tier_depends_on_the_host_pool() {
    let spec = "name=h,backend=memfd,size=4M,hugetlb=on".parse().unwrap();
    let cfg = MemoryConfig::new(4 * MIB, vec![spec]);
    let available = available_hugepages().unwrap();
    let needed = 4 * MIB / HUGEPAGE_SIZE;
    if available < needed {
        assert_eq!(
            config_error(&cfg),
            format!(
                "hugetlb tiers need {needed} free 2 MiB hugepages but the host has {available} \
                 (raise /proc/sys/vm/nr_hugepages)"
            )
        );
    } else {
        let mem = TieredMemory::new(&cfg).unwrap();
        mem.verify_backing().unwrap();
    }
}

#[test]
fn file_backend_path_problems() {
    let missing: guest_memory::TierSpec = "name=p,backend=file,path=/nonexistent/guestmem"
        .parse()
        .unwrap();
    let msg = config_error(&MemoryConfig::new(8 * MIB, vec![missing]));
    assert_eq!(msg, "tier 'p': cannot stat /nonexistent/guestmem");

    let dir = "name=p,backend=file,path=/tmp".parse().unwrap();
    let msg = config_error(&MemoryConfig::new(8 * MIB, vec![dir]));
    assert_eq!(
        msg,
        "tier 'p': /tmp is neither a regular file nor a device-DAX character device"
    );

    let not_dax = "name=p,backend=file,path=/dev/null".parse().unwrap();
    let msg = config_error(&MemoryConfig::new(8 * MIB, vec![not_dax]));
    assert_eq!(msg, "tier 'p': /dev/null is not a device-DAX device");
}

#[test]
fn empty_file_cannot_hold_a_frame() {
    let file = ScratchFile::new(Path::new("/tmp"), 0);
    let spec = format!("name=p,backend=file,path={}", file.path.display())
        .parse()
        .unwrap();
    let msg = config_error(&MemoryConfig::new(2 * MIB, vec![spec]));
    assert_eq!(msg, "tier 'p': 0 B cannot hold one frame of 2 MiB");
}

/// Validation runs completely before anything is created: a file tier that
/// creation would grow stays untouched when a later tier is invalid.
#[test]
fn nothing_is_created_when_a_later_tier_is_invalid() {
    let file = ScratchFile::new(Path::new("/tmp"), 0);
    let grows = format!("name=p,backend=file,path={},size=4M", file.path.display())
        .parse()
        .unwrap();
    let bad = "name=q,backend=memfd,size=4M,numa-node=4000"
        .parse()
        .unwrap();
    let cfg = MemoryConfig::new(8 * MIB, vec![grows, bad]);
    assert!(config_error(&cfg).contains("numa node 4000"));
    assert_eq!(file.len(), 0);
    // And the same file tier alone is created (and grown): the check can fail.
    let alone = format!("name=p,backend=file,path={},size=4M", file.path.display())
        .parse()
        .unwrap();
    let _mem = TieredMemory::new(&MemoryConfig::new(4 * MIB, vec![alone])).unwrap();
    assert_eq!(file.len(), 4 * MIB);
}

//! File-backed tiers: regular files on ext4 (/tmp here) and tmpfs (/dev/shm).

use std::os::unix::fs::FileExt;
use std::path::Path;

use guest_memory::{BackendKind, MemoryConfig, TierSpec, TieredMemory};
use guest_memory::{FrameId, TierId};
use vm_memory::{Bytes, GuestAddress};

use crate::common::{MIB, ScratchFile, memfd};

fn file_spec(file: &ScratchFile, size: Option<&str>) -> TierSpec {
    let size = size.map(|s| format!(",size={s}")).unwrap_or_default();
    format!("name=pmem,backend=file,path={}{size}", file.path.display())
        .parse()
        .unwrap()
}

fn writes_reach_the_file(dir: &Path) {
    let file = ScratchFile::new(dir, 8 * MIB);
    let cfg = MemoryConfig::new(12 * MIB, vec![memfd("dram", "4M"), file_spec(&file, None)]);
    let mem = TieredMemory::new(&cfg).unwrap();
    let pmem = &mem.tiers()[1];
    assert_eq!(pmem.capacity(), 8 * MIB, "file size becomes capacity");
    assert_eq!(pmem.slot_count(), 4);
    assert_eq!(
        pmem.kind(),
        &BackendKind::RegularFile {
            path: file.path.clone()
        }
    );
    mem.verify_backing().unwrap();

    // Frame 2 is the first on pmem (fast-first, dram holds 2 frames).
    let loc = mem.location(FrameId(2)).unwrap();
    assert_eq!((loc.tier, loc.slot), (TierId(1), 0));
    let gpa = mem.frames().gpa(FrameId(5)).unwrap() + 100;
    let loc5 = mem.location(FrameId(5)).unwrap();
    mem.guest_memory()
        .write_obj(0xabcdef_u64, GuestAddress(gpa))
        .unwrap();
    let mut buf = [0u8; 8];
    let reader = std::fs::File::open(&file.path).unwrap();
    reader
        .read_exact_at(&mut buf, loc5.slot as u64 * 2 * MIB + 100)
        .unwrap();
    assert_eq!(u64::from_ne_bytes(buf), 0xabcdef);
}

#[test]
fn regular_file_in_tmp_backs_a_tier() {
    writes_reach_the_file(Path::new("/tmp"));
}

#[test]
fn tmpfs_file_backs_a_tier() {
    writes_reach_the_file(Path::new("/dev/shm"));
}

/// A file (like persistent memory) keeps what an earlier VM wrote: the
/// slots that back guest frames are cleared before the guest sees them,
/// a slot no frame uses is left alone (a migration into it overwrites it
/// whole).
fn old_data_is_cleared(dir: &Path) {
    let file = ScratchFile::new(dir, 8 * MIB);
    std::fs::write(&file.path, vec![0xa5u8; (8 * MIB) as usize]).unwrap();
    let cfg = MemoryConfig::new(10 * MIB, vec![memfd("dram", "4M"), file_spec(&file, None)]);
    let mem = TieredMemory::new(&cfg).unwrap();
    for frame in 2..5 {
        assert_eq!(mem.location(FrameId(frame)).unwrap().tier, TierId(1));
        let gpa = mem.frames().gpa(FrameId(frame)).unwrap();
        let mut page = vec![0xffu8; (2 * MIB) as usize];
        mem.guest_memory()
            .read_slice(&mut page, GuestAddress(gpa))
            .unwrap();
        assert!(page.iter().all(|&b| b == 0), "frame {frame} reads zeros");
    }
    let mut unused = [0u8; 8];
    std::fs::File::open(&file.path)
        .unwrap()
        .read_exact_at(&mut unused, 3 * 2 * MIB)
        .unwrap();
    assert_eq!(unused, [0xa5; 8], "the unused slot is not touched");
}

#[test]
fn a_file_tier_never_shows_old_data_to_the_guest() {
    old_data_is_cleared(Path::new("/tmp"));
    old_data_is_cleared(Path::new("/dev/shm"));
}

#[test]
fn explicit_size_grows_a_short_file() {
    let file = ScratchFile::new(Path::new("/tmp"), 2 * MIB);
    let cfg = MemoryConfig::new(6 * MIB, vec![file_spec(&file, Some("6M"))]);
    let mem = TieredMemory::new(&cfg).unwrap();
    assert_eq!(mem.tiers()[0].capacity(), 6 * MIB);
    assert_eq!(file.len(), 6 * MIB);
    mem.verify_backing().unwrap();
}

#[test]
fn explicit_size_uses_a_prefix_of_a_long_file() {
    let file = ScratchFile::new(Path::new("/tmp"), 16 * MIB);
    let cfg = MemoryConfig::new(4 * MIB, vec![file_spec(&file, Some("4M"))]);
    let mem = TieredMemory::new(&cfg).unwrap();
    assert_eq!(mem.tiers()[0].capacity(), 4 * MIB);
    assert_eq!(file.len(), 16 * MIB, "the file is not shrunk");
}

#[test]
fn file_size_is_cut_to_whole_frames() {
    let file = ScratchFile::new(Path::new("/tmp"), 5 * MIB);
    let cfg = MemoryConfig::new(4 * MIB, vec![file_spec(&file, None)]);
    let mem = TieredMemory::new(&cfg).unwrap();
    assert_eq!(mem.tiers()[0].capacity(), 4 * MIB);
    assert_eq!(mem.tiers()[0].slot_count(), 2);
}

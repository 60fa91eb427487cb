//! `verify_backing` passes on correct memory and catches wrong mappings.

use guest_memory::{Error, MemoryConfig, TieredMemory, VerifyError};
use guest_memory::{FrameId, TierId};

use crate::common::at;
use crate::common::{MIB, memfd};

fn two_tier_memory() -> TieredMemory {
    // fast holds frames 0..4 (slots 0..4), slow holds frames 4..6 (slots 0..2).
    TieredMemory::new(&MemoryConfig::new(
        12 * MIB,
        vec![memfd("fast", "8M"), memfd("slow", "8M")],
    ))
    .unwrap()
}

fn mismatch(mem: &TieredMemory) -> (usize, String, String) {
    match mem.verify_backing() {
        Err(Error::Verify(VerifyError::Mismatch {
            frame,
            expected,
            found,
            ..
        })) => (frame.index(), expected, found),
        other => panic!("expected a mismatch, got {other:?}"),
    }
}

#[test]
fn detects_a_frame_mapped_from_the_wrong_tier() {
    let mem = two_tier_memory();
    mem.verify_backing().unwrap();
    let spare = mem.reserve_slot(TierId(1)).unwrap();
    mem.map_frames(FrameId(2), 1, spare).unwrap();
    assert_eq!(
        mismatch(&mem),
        (
            2,
            "tier 'fast' slot 2".into(),
            format!("tier 'slow' slot {}", spare.slot)
        )
    );
    let msg = mem.verify_backing().unwrap_err().to_string();
    assert!(msg.starts_with("frame 2 (gpa 0x400000)"), "{msg}");
    // Putting the right slot back makes it pass again.
    mem.map_frames(FrameId(2), 1, at(0, 2)).unwrap();
    mem.verify_backing().unwrap();
}

#[test]
fn detects_a_frame_mapped_from_the_wrong_slot() {
    let mem = two_tier_memory();
    mem.map_frames(FrameId(5), 1, at(1, 3)).unwrap();
    assert_eq!(
        mismatch(&mem),
        (5, "tier 'slow' slot 1".into(), "tier 'slow' slot 3".into())
    );
}

#[test]
fn detects_a_frame_that_is_not_mapped() {
    let mem = two_tier_memory();
    let host = mem.frames().host_addr(FrameId(1)).unwrap();
    // Replace frame 1 with inaccessible anonymous memory, as if never mapped.
    // SAFETY: the range is frame 1 of `mem`'s guest range, which nothing
    // references; MAP_FIXED keeps it reserved (just unbacked).
    let got = unsafe {
        libc::mmap(
            host as *mut libc::c_void,
            2 * MIB as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(got, libc::MAP_FAILED);
    let (frame, _, found) = mismatch(&mem);
    assert_eq!(frame, 1);
    assert_eq!(found, "anonymous memory (frame not mapped)");
}

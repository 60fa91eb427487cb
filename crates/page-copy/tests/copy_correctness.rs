//! Every engine copies random data exactly, touching nothing else: single
//! ranges of edge-case sizes, unaligned ends, and large mixed batches.

mod common;

use page_copy::{CopyEngine, CopyRange};

use common::{KIB, MIB, Region, all_engines};

const GUARD: u8 = 0xA5;
const SIZES: [usize; 7] = [0, 1, 4095, 4 * KIB, 64 * KIB, 2 * MIB, 2 * MIB + 7];

/// Copies `len` bytes from `src + src_off` to `dst + dst_off` (dst filled
/// with GUARD) and checks the copy and that every other byte is untouched.
fn check_one(engine: &dyn CopyEngine, len: usize, src_off: usize, dst_off: usize, seed: u64) {
    let slack = 64;
    let src = Region::random(src_off + len + slack, seed);
    let dst = Region::filled(dst_off + len + slack, GUARD);
    let range = CopyRange::new(src.at(src_off), dst.at(dst_off), len);
    // SAFETY: both regions are live mappings covering the range, distinct.
    let stats = unsafe { engine.copy(&[range]) }.unwrap();
    let name = engine.name();
    assert_eq!(stats.bytes, len as u64, "{name} len {len}");
    assert_eq!(
        stats.per_worker_chunks.iter().sum::<usize>(),
        stats.chunks,
        "{name}"
    );
    let got = dst.as_slice();
    assert!(
        got[dst_off..dst_off + len] == src.as_slice()[src_off..src_off + len],
        "{name}: wrong bytes for len {len}, offsets {src_off}/{dst_off}"
    );
    assert!(
        got[..dst_off]
            .iter()
            .chain(&got[dst_off + len..])
            .all(|&b| b == GUARD),
        "{name}: wrote outside the range for len {len}, offsets {src_off}/{dst_off}"
    );
}

#[test]
fn every_engine_copies_every_size() {
    for engine in all_engines() {
        for (i, &len) in SIZES.iter().enumerate() {
            check_one(engine.as_ref(), len, 0, 0, i as u64 + 1);
        }
    }
}

#[test]
fn every_engine_copies_unaligned_ends() {
    let offsets = [(1, 0), (0, 3), (7, 13), (15, 1), (4095, 17), (9, 9)];
    for engine in all_engines() {
        for (i, &(src_off, dst_off)) in offsets.iter().enumerate() {
            for len in [100, 64 * KIB + 3, 2 * MIB + 7] {
                check_one(engine.as_ref(), len, src_off, dst_off, 100 + i as u64);
            }
        }
    }
}

#[test]
fn every_engine_copies_large_mixed_batches() {
    // Sizes mixing tiny, page-sized, chunk-straddling and frame-sized
    // ranges; destinations are laid out in a different order than sources.
    let sizes = [
        0,
        1,
        17,
        4095,
        4 * KIB,
        4 * KIB + 1,
        64 * KIB,
        300 * KIB,
        2 * MIB,
        2 * MIB + 7,
        3,
        128 * KIB - 1,
    ];
    let gap = 13;
    let mut src_offsets = Vec::new();
    let mut at = 5;
    for len in sizes {
        src_offsets.push(at);
        at += len + gap;
    }
    let src = Region::random(at, 42);
    let mut dst_offsets = vec![0; sizes.len()];
    let mut at = 3;
    for i in (0..sizes.len()).rev() {
        dst_offsets[i] = at;
        at += sizes[i] + gap;
    }
    let dst_len = at;
    for engine in all_engines() {
        let dst = Region::filled(dst_len, GUARD);
        let ranges: Vec<CopyRange> = (0..sizes.len())
            .map(|i| CopyRange::new(src.at(src_offsets[i]), dst.at(dst_offsets[i]), sizes[i]))
            .collect();
        // SAFETY: every range lies inside a live region; destinations are
        // disjoint (laid out with gaps) and in a different mapping.
        let stats = unsafe { engine.copy(&ranges) }.unwrap();
        let name = engine.name();
        assert_eq!(stats.bytes, sizes.iter().sum::<usize>() as u64, "{name}");
        let mut expected = vec![GUARD; dst_len];
        for i in 0..sizes.len() {
            expected[dst_offsets[i]..dst_offsets[i] + sizes[i]]
                .copy_from_slice(&src.as_slice()[src_offsets[i]..src_offsets[i] + sizes[i]]);
        }
        assert!(
            dst.as_slice() == expected.as_slice(),
            "{name}: mixed batch differs"
        );
    }
}

#[test]
fn every_engine_copies_a_batch_of_many_frames() {
    // 16 x 2 MiB frames, frame i going to slot 15 - i, like a migration batch.
    let frame = 2 * MIB;
    let count = 16;
    let src = Region::random(count * frame, 7);
    for engine in all_engines() {
        let dst = Region::filled(count * frame, GUARD);
        let ranges: Vec<CopyRange> = (0..count)
            .map(|i| CopyRange::new(src.at(i * frame), dst.at((count - 1 - i) * frame), frame))
            .collect();
        // SAFETY: frames lie inside live, distinct regions; slots are disjoint.
        let stats = unsafe { engine.copy(&ranges) }.unwrap();
        assert_eq!(stats.bytes, (count * frame) as u64);
        for i in 0..count {
            let want = &src.as_slice()[i * frame..(i + 1) * frame];
            let got = &dst.as_slice()[(count - 1 - i) * frame..(count - i) * frame];
            assert!(got == want, "{}: frame {i} differs", engine.name());
        }
    }
}

#[test]
fn empty_batch_and_empty_ranges_copy_nothing() {
    let src = Region::random(4 * KIB, 9);
    let dst = Region::filled(4 * KIB, GUARD);
    for engine in all_engines() {
        // SAFETY: an empty batch touches no memory.
        let stats = unsafe { engine.copy(&[]) }.unwrap();
        assert_eq!((stats.bytes, stats.chunks), (0, 0));
        let ranges = [CopyRange::new(src.ptr(), dst.ptr(), 0); 3];
        // SAFETY: zero-length ranges over live regions.
        let stats = unsafe { engine.copy(&ranges) }.unwrap();
        assert_eq!((stats.bytes, stats.chunks), (0, 0));
        assert!(dst.as_slice().iter().all(|&b| b == GUARD));
    }
}

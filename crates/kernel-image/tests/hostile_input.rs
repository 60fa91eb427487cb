//! Hostile input: random bytes, random setup headers and randomly damaged
//! images of every format must give an error or a checked kernel, never a
//! panic, a hang or an allocation past the limit.

mod common;

use common::{PVH_ENTRY, SUPPORTED, bzimage, payload, vmlinux};
use kernel_image::{Compression, check_vmlinux, decompress, extract, pvh_entry};
use proptest::prelude::*;

/// Small cap, so that no case allocates much.
const LIMIT: usize = 1 << 20;

/// One valid image per supported format (built once: xz and lzma encoding
/// are slow in debug builds).
fn images() -> &'static [(Compression, Vec<u8>)] {
    static IMAGES: std::sync::OnceLock<Vec<(Compression, Vec<u8>)>> = std::sync::OnceLock::new();
    IMAGES.get_or_init(|| {
        let kernel = vmlinux(40_000, Some(PVH_ENTRY));
        SUPPORTED
            .iter()
            .map(|&c| (c, bzimage(&payload(&kernel, c))))
            .collect()
    })
}

/// Damage to an image: byte flips and a truncation.
fn damage(image: &[u8], flips: &[(usize, u8)], cut: usize) -> Vec<u8> {
    let mut damaged = image.to_vec();
    for &(at, xor) in flips {
        let at = at % damaged.len();
        damaged[at] ^= xor.max(1);
    }
    damaged.truncate(damaged.len() - cut % damaged.len());
    damaged
}

#[test]
fn undamaged_images_extract() {
    for (compression, image) in images() {
        let extracted = extract(image, LIMIT).unwrap_or_else(|e| panic!("{compression}: {e}"));
        assert_eq!(extracted.elf.pvh_entry, Some(PVH_ENTRY));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        prop_assert!(extract(&data, LIMIT).is_err());
        let _ = pvh_entry(&data);
        let _ = check_vmlinux(&data);
        for compression in Compression::ALL {
            let _ = decompress(&data, compression, LIMIT);
        }
    }

    #[test]
    fn random_streams_behind_each_magic_never_panic(
        format in 0..Compression::ALL.len(),
        tail in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let compression = Compression::ALL[format];
        let mut stream = compression.magic().to_vec();
        stream.extend_from_slice(&tail);
        let _ = decompress(&stream, compression, LIMIT);
        let _ = extract(&bzimage(&stream), LIMIT);
    }

    #[test]
    fn random_setup_headers_never_panic(
        setup_sects in any::<u8>(),
        version in any::<u16>(),
        payload_offset in any::<u32>(),
        payload_length in any::<u32>(),
        len in 0x250usize..0x4000,
    ) {
        let mut image = bzimage(&payload(b"x", Compression::Lz4));
        image.resize(len, 0);
        image[0x1f1] = setup_sects;
        image[0x206..0x208].copy_from_slice(&version.to_le_bytes());
        image[0x248..0x24c].copy_from_slice(&payload_offset.to_le_bytes());
        image[0x24c..0x250].copy_from_slice(&payload_length.to_le_bytes());
        prop_assert!(extract(&image, LIMIT).is_err());
    }

    #[test]
    fn damaged_images_never_panic(
        format in 0..SUPPORTED.len(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in 0usize..64,
    ) {
        let (_, image) = &images()[format];
        let damaged = damage(image, &flips, cut);
        if let Ok(extracted) = extract(&damaged, LIMIT) {
            // Whatever comes out passed the checks and respects the cap.
            prop_assert!(extracted.vmlinux.len() <= LIMIT);
            prop_assert_eq!(check_vmlinux(&extracted.vmlinux), Ok(extracted.elf));
        }
    }

    #[test]
    fn damaged_elves_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..16),
        cut in 0usize..512,
    ) {
        // Damage concentrated on the headers and notes.
        let kernel = vmlinux(256, Some(PVH_ENTRY));
        let head = 64 + 2 * 56 + 64;
        let flips: Vec<_> = flips.iter().map(|&(at, xor)| (at % head, xor)).collect();
        let damaged = damage(&kernel, &flips, cut);
        let _ = pvh_entry(&damaged);
        if let Ok(info) = check_vmlinux(&damaged) {
            prop_assert_eq!(info.pvh_entry, pvh_entry(&damaged));
        }
    }
}

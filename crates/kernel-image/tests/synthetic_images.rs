//! Extraction of `vmlinux` from synthetic bzImages built as the kernel
//! build builds them, one per compression format.

mod common;

use common::{PVH_ENTRY, SUPPORTED, bzimage, payload, vmlinux};
use kernel_image::{
    Compression, DecompressError, ExtractError, HeaderError, extract, extract_vmlinux, pvh_entry,
};

#[test]
fn extracts_the_same_vmlinux_from_every_supported_format() {
    let kernel = vmlinux(300_000, Some(PVH_ENTRY));
    for compression in SUPPORTED {
        let image = bzimage(&payload(&kernel, compression));
        let extracted = extract(&image, 1 << 20).unwrap_or_else(|e| panic!("{compression}: {e}"));
        assert_eq!(extracted.compression, compression);
        assert!(
            extracted.vmlinux == kernel,
            "{compression}: vmlinux differs"
        );
        assert_eq!(extracted.elf.pvh_entry, Some(PVH_ENTRY));
        assert_eq!(extracted.header.protocol, 0x020f);
        assert!(extract_vmlinux(&image).unwrap() == kernel);
    }
}

#[test]
fn reports_a_kernel_without_pvh_note() {
    let kernel = vmlinux(10_000, None);
    let extracted = extract(&bzimage(&payload(&kernel, Compression::Lz4)), 1 << 20).unwrap();
    assert_eq!(extracted.elf.pvh_entry, None);
    assert_eq!(pvh_entry(&extracted.vmlinux), None);
}

#[test]
fn refuses_a_kernel_over_the_limit_before_decompressing() {
    let kernel = vmlinux(100_000, Some(PVH_ENTRY));
    for compression in SUPPORTED {
        let image = bzimage(&payload(&kernel, compression));
        let err = extract(&image, kernel.len() - 1).unwrap_err();
        assert!(
            matches!(err, ExtractError::TooLarge { declared, .. } if declared as usize == kernel.len()),
            "{compression}: {err}"
        );
    }
}

#[test]
fn a_lying_size_trailer_cannot_get_past_the_limit() {
    // The trailer claims 1 KiB; the stream holds 100 KB: decompression
    // itself must stop at the limit.
    let kernel = vmlinux(100_000, Some(PVH_ENTRY));
    for compression in SUPPORTED {
        let mut payload = payload(&kernel, compression);
        let at = payload.len() - 4;
        payload[at..].copy_from_slice(&1024u32.to_le_bytes());
        let err = extract(&bzimage(&payload), 50_000).unwrap_err();
        match (compression, &err) {
            // gzip's trailer is its ISIZE, checked by the decoder itself.
            (Compression::Gzip, ExtractError::Decompress(DecompressError::Corrupt { .. })) => {}
            (_, ExtractError::Decompress(DecompressError::TooLarge { limit: 50_000, .. })) => {}
            _ => panic!("{compression}: {err:?}"),
        }
    }
}

#[test]
fn refuses_a_size_that_does_not_match_the_trailer() {
    let kernel = vmlinux(20_000, Some(PVH_ENTRY));
    let mut payload = payload(&kernel, Compression::Zstd);
    let at = payload.len() - 4;
    payload[at..].copy_from_slice(&((kernel.len() + 1) as u32).to_le_bytes());
    let err = extract(&bzimage(&payload), 1 << 20).unwrap_err();
    assert!(
        matches!(err, ExtractError::SizeMismatch { actual, .. } if actual == kernel.len()),
        "{err}"
    );
}

#[test]
fn refuses_a_payload_that_is_not_a_kernel() {
    let data = b"just some text, no ELF header in here".repeat(100);
    let err = extract(&bzimage(&payload(&data, Compression::Gzip)), 1 << 20).unwrap_err();
    assert!(matches!(err, ExtractError::NotVmlinux(_)), "{err}");
}

#[test]
fn names_unsupported_and_unknown_formats() {
    for compression in [Compression::Bzip2, Compression::Lzo] {
        let err = extract_vmlinux(&bzimage(&payload(b"x", compression))).unwrap_err();
        assert!(
            matches!(err, ExtractError::Decompress(DecompressError::Unsupported(c)) if c == compression),
            "{err}"
        );
    }
    let err = extract_vmlinux(&bzimage(b"\x7fELF and more")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "payload starts with [7f, 45, 4c, 46], which is no known compression format"
    );
    let err = extract_vmlinux(&bzimage(b"xyz")).unwrap_err();
    assert!(
        matches!(err, ExtractError::PayloadTooShort { length: 3 }),
        "{err}"
    );
}

#[test]
fn refuses_images_that_are_not_bzimages() {
    let kernel = vmlinux(1000, Some(PVH_ENTRY));
    // A plain vmlinux is no bzImage.
    assert!(matches!(
        extract_vmlinux(&kernel),
        Err(ExtractError::Header(HeaderError::NoMagic))
    ));
    let image = bzimage(&payload(&kernel, Compression::Lz4));
    assert!(matches!(
        extract_vmlinux(&image[..0x300]),
        Err(ExtractError::Header(HeaderError::PayloadOutOfBounds { .. }))
    ));
}

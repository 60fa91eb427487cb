//! `vmlinux` out of a bzImage: locate the payload with the setup header,
//! detect its compression, decompress it under a size cap and check that
//! the result is an x86-64 ELF kernel, like the kernel's own
//! `scripts/extract-vmlinux` but with every step bounded.

use thiserror::Error;

use crate::bytes::{array_at, le_u32};
use crate::compression::Compression;
use crate::decompress::{DecompressError, decompress_into};
use crate::elf::{ElfError, ElfInfo, check_vmlinux};
use crate::setup_header::{HeaderError, SetupHeader};

/// Default cap on the decompressed kernel: a distribution `vmlinux` is
/// 30-70 MiB, so 256 MiB leaves room and still bounds a hostile image.
pub const MAX_VMLINUX_SIZE: usize = 256 << 20;

/// Why no `vmlinux` could be extracted.
#[derive(Debug, Error)]
pub enum ExtractError {
    /// The image has no usable setup header.
    #[error("not a usable bzImage")]
    Header(#[from] HeaderError),
    /// The payload cannot hold a stream and its size.
    #[error("payload of {length} bytes is too short for a compressed kernel")]
    PayloadTooShort {
        /// `payload_length`.
        length: usize,
    },
    /// The payload's first bytes match no known format.
    #[error("payload starts with {magic:02x?}, which is no known compression format")]
    UnknownCompression {
        /// The first bytes of the payload.
        magic: [u8; 4],
    },
    /// The size appended to the payload is over the limit.
    #[error("payload declares a {declared}-byte kernel, over the {limit}-byte limit")]
    TooLarge {
        /// The size the payload declares.
        declared: u32,
        /// The limit.
        limit: usize,
    },
    /// Decompression failed.
    #[error("cannot decompress the payload")]
    Decompress(#[from] DecompressError),
    /// Decompression gave another size than the payload declares.
    #[error("decompressed kernel has {actual} bytes but the payload declares {declared}")]
    SizeMismatch {
        /// The size the payload declares (modulo 2^32).
        declared: u32,
        /// The decompressed size.
        actual: usize,
    },
    /// The decompressed payload is no x86-64 kernel ELF.
    #[error("decompressed payload is not an x86-64 vmlinux")]
    NotVmlinux(#[from] ElfError),
}

/// A kernel extracted from a bzImage.
#[derive(Clone, Debug)]
pub struct Extracted {
    /// The image's setup header.
    pub header: SetupHeader,
    /// The payload's compression.
    pub compression: Compression,
    /// The decompressed kernel ELF.
    pub vmlinux: Vec<u8>,
    /// What the ELF looks like, PVH entry included.
    pub elf: ElfInfo,
}

/// Extracts the `vmlinux` ELF from a bzImage, capped at
/// [`MAX_VMLINUX_SIZE`].
pub fn extract_vmlinux(bzimage: &[u8]) -> Result<Vec<u8>, ExtractError> {
    extract(bzimage, MAX_VMLINUX_SIZE).map(|extracted| extracted.vmlinux)
}

/// Extracts the `vmlinux` ELF from a bzImage; the decompressed kernel may
/// not exceed `limit` bytes.
pub fn extract(bzimage: &[u8], limit: usize) -> Result<Extracted, ExtractError> {
    let header = SetupHeader::parse(bzimage)?;
    let payload = header.payload(bzimage)?;
    let magic: [u8; 4] = array_at(payload, 0).ok_or(ExtractError::PayloadTooShort {
        length: payload.len(),
    })?;
    let compression =
        Compression::detect(payload).ok_or(ExtractError::UnknownCompression { magic })?;
    let (stream, declared) = split_declared_size(payload, compression)?;
    let declared_len = usize::try_from(declared)
        .ok()
        .filter(|&len| len <= limit)
        .ok_or(ExtractError::TooLarge { declared, limit })?;
    let mut vmlinux = Vec::new();
    // At most `limit` bytes, and saves regrowing a 50 MiB buffer.
    vmlinux.reserve_exact(declared_len);
    decompress_into(stream, compression, limit, &mut vmlinux)?;
    if vmlinux.len() as u64 & u64::from(u32::MAX) != u64::from(declared) {
        return Err(ExtractError::SizeMismatch {
            declared,
            actual: vmlinux.len(),
        });
    }
    let elf = check_vmlinux(&vmlinux)?;
    Ok(Extracted {
        header,
        compression,
        vmlinux,
        elf,
    })
}

/// The compressed stream and the decompressed size in the payload's last
/// four bytes (little-endian): the kernel build appends the size to every
/// format but gzip, whose own trailer already ends with it (ISIZE).
fn split_declared_size(
    payload: &[u8],
    compression: Compression,
) -> Result<(&[u8], u32), ExtractError> {
    let too_short = || ExtractError::PayloadTooShort {
        length: payload.len(),
    };
    let body_len = payload.len().checked_sub(4).ok_or_else(too_short)?;
    let declared = le_u32(payload, body_len).ok_or_else(too_short)?;
    let stream = match compression {
        Compression::Gzip => payload,
        _ => &payload[..body_len],
    };
    Ok((stream, declared))
}

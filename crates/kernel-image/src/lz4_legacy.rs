//! The LZ4 legacy frame format (`lz4 -l`), which the kernel build uses for
//! `CONFIG_KERNEL_LZ4` and which no LZ4 crate reads: a magic, then chunks,
//! each a little-endian `u32` compressed size and an LZ4 block of at most
//! 8 MiB once decompressed (the kernel's `lib/decompress_unlz4.c`).

use thiserror::Error;

use crate::bytes::le_u32;

/// The magic at the start of a legacy frame (0x184c2102 little-endian);
/// it may appear again between chunks where frames were concatenated.
pub const LZ4_LEGACY_MAGIC: [u8; 4] = [0x02, 0x21, 0x4c, 0x18];
/// Largest decompressed size of one chunk.
pub const LZ4_LEGACY_CHUNK_SIZE: usize = 8 << 20;
/// Largest compressed size of one chunk: LZ4's worst-case expansion of
/// [`LZ4_LEGACY_CHUNK_SIZE`] bytes.
const MAX_COMPRESSED_CHUNK: usize = LZ4_LEGACY_CHUNK_SIZE + LZ4_LEGACY_CHUNK_SIZE / 255 + 16;

/// Why a legacy LZ4 stream cannot be decompressed.
#[derive(Debug, Error)]
pub enum Lz4LegacyError {
    /// The stream does not start with [`LZ4_LEGACY_MAGIC`].
    #[error("no lz4 legacy frame magic")]
    NoMagic,
    /// A chunk header or body runs past the end of the stream.
    #[error("lz4 chunk at {offset:#x} is cut short by the end of the stream")]
    Truncated {
        /// Offset of the chunk's size field in the stream.
        offset: usize,
    },
    /// A chunk is larger than any 8 MiB block can compress to.
    #[error("lz4 chunk at {offset:#x} claims {size} bytes, more than a chunk can hold")]
    ChunkTooBig {
        /// Offset of the chunk's size field in the stream.
        offset: usize,
        /// The size it claims.
        size: u32,
    },
    /// A chunk's LZ4 block is corrupt.
    #[error("lz4 chunk at {offset:#x} is corrupt")]
    Corrupt {
        /// Offset of the chunk's size field in the stream.
        offset: usize,
        /// What the block decoder found.
        #[source]
        source: lz4_flex::block::DecompressError,
    },
    /// The output would exceed the caller's limit.
    #[error("lz4 output exceeds the {limit}-byte limit")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
}

/// Appends the decompressed contents of the legacy frame `stream` to
/// `out`, refusing to grow `out` past `limit` bytes.
pub fn decompress_lz4_legacy(
    stream: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), Lz4LegacyError> {
    let mut offset = LZ4_LEGACY_MAGIC.len();
    if !stream.starts_with(&LZ4_LEGACY_MAGIC) {
        return Err(Lz4LegacyError::NoMagic);
    }
    // Chunks decode here first: LZ4 needs an initialised output slice, and
    // zeroing `out`'s tail for every chunk would cost more than the copy.
    let mut scratch = vec![0u8; LZ4_LEGACY_CHUNK_SIZE.min(limit)];
    while offset < stream.len() {
        let size = le_u32(stream, offset).ok_or(Lz4LegacyError::Truncated { offset })?;
        let body = offset + 4;
        if size.to_le_bytes() == LZ4_LEGACY_MAGIC {
            offset = body;
            continue;
        }
        let len = usize::try_from(size)
            .ok()
            .filter(|&len| len <= MAX_COMPRESSED_CHUNK)
            .ok_or(Lz4LegacyError::ChunkTooBig { offset, size })?;
        let chunk = stream
            .get(body..body + len)
            .ok_or(Lz4LegacyError::Truncated { offset })?;
        let room = scratch.len().min(limit.saturating_sub(out.len()));
        let decoded = decompress_chunk(chunk, offset, limit, &mut scratch[..room])?;
        out.extend_from_slice(decoded);
        offset = body + len;
    }
    Ok(())
}

/// Decompresses one chunk into `room`; returns the decoded bytes.
fn decompress_chunk<'a>(
    chunk: &[u8],
    offset: usize,
    limit: usize,
    room: &'a mut [u8],
) -> Result<&'a [u8], Lz4LegacyError> {
    match lz4_flex::block::decompress_into(chunk, room) {
        Ok(written) => Ok(&room[..written]),
        // Short of a full chunk's room only because of the limit.
        Err(lz4_flex::block::DecompressError::OutputTooSmall { .. })
            if room.len() < LZ4_LEGACY_CHUNK_SIZE =>
        {
            Err(Lz4LegacyError::TooLarge { limit })
        }
        Err(source) => Err(Lz4LegacyError::Corrupt { offset, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A legacy frame of `data` cut into chunks of `chunk` bytes.
    fn frame(data: &[u8], chunk: usize) -> Vec<u8> {
        let mut stream = LZ4_LEGACY_MAGIC.to_vec();
        for piece in data.chunks(chunk) {
            let block = lz4_flex::block::compress(piece);
            stream.extend_from_slice(&u32::try_from(block.len()).unwrap().to_le_bytes());
            stream.extend_from_slice(&block);
        }
        stream
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i % 251) as u8 ^ (i / 4096) as u8)
            .collect()
    }

    #[test]
    fn decompresses_several_chunks() {
        let data = sample(100_000);
        let mut out = Vec::new();
        decompress_lz4_legacy(&frame(&data, 30_000), usize::MAX, &mut out).unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn skips_the_magic_of_concatenated_frames() {
        let data = sample(50_000);
        let mut stream = frame(&data[..20_000], 8192);
        stream.extend_from_slice(&frame(&data[20_000..], 8192));
        let mut out = Vec::new();
        decompress_lz4_legacy(&stream, usize::MAX, &mut out).unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn an_empty_frame_is_empty() {
        let mut out = Vec::new();
        decompress_lz4_legacy(&LZ4_LEGACY_MAGIC, 0, &mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn stops_at_the_limit() {
        let data = sample(100_000);
        let stream = frame(&data, 30_000);
        let mut out = Vec::new();
        let err = decompress_lz4_legacy(&stream, 99_999, &mut out).unwrap_err();
        assert!(
            matches!(err, Lz4LegacyError::TooLarge { limit: 99_999 }),
            "{err}"
        );
        assert!(out.len() <= 99_999);
        let mut out = Vec::new();
        decompress_lz4_legacy(&stream, 100_000, &mut out).unwrap();
        assert_eq!(out.len(), 100_000);
    }

    #[test]
    fn refuses_truncated_oversized_and_corrupt_chunks() {
        let data = sample(10_000);
        let stream = frame(&data, 10_000);
        let mut out = Vec::new();
        assert!(matches!(
            decompress_lz4_legacy(&stream[..stream.len() - 1], usize::MAX, &mut out),
            Err(Lz4LegacyError::Truncated { offset: 4 })
        ));
        assert!(matches!(
            decompress_lz4_legacy(&stream[..6], usize::MAX, &mut out),
            Err(Lz4LegacyError::Truncated { offset: 4 })
        ));

        let mut huge = LZ4_LEGACY_MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decompress_lz4_legacy(&huge, usize::MAX, &mut out),
            Err(Lz4LegacyError::ChunkTooBig {
                offset: 4,
                size: u32::MAX
            })
        ));

        // A match reaching back before the start of the output.
        let mut corrupt = LZ4_LEGACY_MAGIC.to_vec();
        corrupt.extend_from_slice(&3u32.to_le_bytes());
        corrupt.extend_from_slice(&[0x0f, 0xff, 0xff]);
        assert!(matches!(
            decompress_lz4_legacy(&corrupt, usize::MAX, &mut out),
            Err(Lz4LegacyError::Corrupt { offset: 4, .. })
        ));
        assert!(matches!(
            decompress_lz4_legacy(b"\x02\x21\x4c", usize::MAX, &mut out),
            Err(Lz4LegacyError::NoMagic)
        ));
    }
}

//! Decompression of a kernel payload with a hard cap on the output: every
//! decoder is pure Rust and streams into a buffer that may not grow past
//! the caller's limit, so a hostile image cannot exhaust memory.

use std::io::{self, Read};

use thiserror::Error;

use crate::compression::Compression;
use crate::lz4_legacy::{Lz4LegacyError, decompress_lz4_legacy};

/// Memory the LZMA decoders may always use: a 64 MiB dictionary plus
/// their state.
const LZMA_MIN_MEM_LIMIT: usize = 65 << 20;

/// Why a payload cannot be decompressed.
#[derive(Debug, Error)]
pub enum DecompressError {
    /// A format this crate has no decoder for.
    #[error("{0} payloads are not supported (gzip, xz, lzma, lz4 and zstd are)")]
    Unsupported(Compression),
    /// The output would exceed the limit.
    #[error("decompressed {compression} payload exceeds the {limit}-byte limit")]
    TooLarge {
        /// The format.
        compression: Compression,
        /// The limit.
        limit: usize,
    },
    /// The stream is corrupt or truncated.
    #[error("corrupt {compression} stream")]
    Corrupt {
        /// The format.
        compression: Compression,
        /// What the decoder found.
        #[source]
        source: io::Error,
    },
    /// The LZ4 legacy stream is corrupt or truncated.
    #[error("corrupt lz4 stream")]
    Lz4(#[source] Lz4LegacyError),
}

/// Decompresses `stream`, compressed with `compression`, into a new buffer
/// of at most `limit` bytes.
pub fn decompress(
    stream: &[u8],
    compression: Compression,
    limit: usize,
) -> Result<Vec<u8>, DecompressError> {
    let mut out = Vec::new();
    decompress_into(stream, compression, limit, &mut out)?;
    Ok(out)
}

/// Like [`decompress`], into `out` (which the caller may have reserved).
pub(crate) fn decompress_into(
    stream: &[u8],
    compression: Compression,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let mem_limit_kib = lzma_mem_limit_kib(limit);
    let corrupt = |source| DecompressError::Corrupt {
        compression,
        source,
    };
    match compression {
        Compression::Gzip => read_capped(
            flate2::read::GzDecoder::new(stream),
            compression,
            limit,
            out,
        ),
        Compression::Xz => {
            let reader = lzma_rust2::XzReader::new_mem_limit(stream, false, mem_limit_kib);
            read_capped(reader, compression, limit, out)
        }
        Compression::Lzma => {
            let reader = lzma_rust2::LzmaReader::new_mem_limit(stream, mem_limit_kib, None)
                .map_err(corrupt)?;
            read_capped(reader, compression, limit, out)
        }
        Compression::Zstd => {
            let reader = ruzstd::decoding::StreamingDecoder::new(stream)
                .map_err(|e| corrupt(io::Error::new(io::ErrorKind::InvalidData, e)))?;
            read_capped(reader, compression, limit, out)
        }
        Compression::Lz4 => decompress_lz4_legacy(stream, limit, out).map_err(|e| match e {
            Lz4LegacyError::TooLarge { limit } => DecompressError::TooLarge { compression, limit },
            e => DecompressError::Lz4(e),
        }),
        Compression::Bzip2 | Compression::Lzo => Err(DecompressError::Unsupported(compression)),
    }
}

/// What the LZMA decoders may allocate (dictionary and state), in KiB: as
/// much as the output may grow, but at least what `lzma -9`'s 64 MiB
/// dictionary needs, as an encoder picks the dictionary before it knows
/// how small the data is. A hostile header asking for a 4 GiB dictionary
/// is refused before anything is allocated.
fn lzma_mem_limit_kib(limit: usize) -> u32 {
    let bytes = limit.max(LZMA_MIN_MEM_LIMIT);
    u32::try_from(bytes / 1024).unwrap_or(u32::MAX - 1)
}

/// Reads `reader` to its end into `out`, failing once more than `limit`
/// bytes came out (one byte past the limit is read to tell).
fn read_capped(
    reader: impl Read,
    compression: Compression,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(out)
        .map_err(|source| DecompressError::Corrupt {
            compression,
            source,
        })?;
    if out.len() > limit {
        out.truncate(limit);
        return Err(DecompressError::TooLarge { compression, limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn sample() -> Vec<u8> {
        (0..200_000u32).map(|i| (i * 7 / 1000) as u8).collect()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut writer =
            lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1)).unwrap();
        writer.write_all(data).unwrap();
        writer.finish().unwrap()
    }

    fn lzma(data: &[u8]) -> Vec<u8> {
        let options = lzma_rust2::LzmaOptions::with_preset(1);
        let mut writer =
            lzma_rust2::LzmaWriter::new_use_header(Vec::new(), &options, None).unwrap();
        writer.write_all(data).unwrap();
        writer.finish().unwrap()
    }

    fn zstd(data: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[test]
    fn round_trips_every_supported_format() {
        let data = sample();
        for (compression, stream) in [
            (Compression::Gzip, gzip(&data)),
            (Compression::Xz, xz(&data)),
            (Compression::Lzma, lzma(&data)),
            (Compression::Zstd, zstd(&data)),
        ] {
            assert_eq!(Compression::detect(&stream), Some(compression));
            let out = decompress(&stream, compression, data.len()).unwrap();
            assert!(out == data, "{compression} output differs");
        }
    }

    #[test]
    fn every_decoder_stops_at_the_limit() {
        let data = sample();
        for (compression, stream) in [
            (Compression::Gzip, gzip(&data)),
            (Compression::Xz, xz(&data)),
            (Compression::Lzma, lzma(&data)),
            (Compression::Zstd, zstd(&data)),
        ] {
            let err = decompress(&stream, compression, data.len() - 1).unwrap_err();
            assert!(
                matches!(err, DecompressError::TooLarge { limit, .. } if limit == data.len() - 1),
                "{compression}: {err}"
            );
        }
    }

    #[test]
    fn truncated_streams_are_corrupt() {
        let data = sample();
        for (compression, stream) in [
            (Compression::Gzip, gzip(&data)),
            (Compression::Xz, xz(&data)),
            (Compression::Lzma, lzma(&data)),
            (Compression::Zstd, zstd(&data)),
        ] {
            let cut = &stream[..stream.len() / 2];
            let err = decompress(cut, compression, usize::MAX).unwrap_err();
            assert!(
                matches!(err, DecompressError::Corrupt { .. }),
                "{compression}: {err}"
            );
        }
    }

    #[test]
    fn a_hostile_lzma_dictionary_is_refused_before_allocation() {
        // props, a 1 GiB dictionary, unknown size.
        let mut stream = vec![0x5d, 0x00, 0x00, 0x00, 0x40];
        stream.extend_from_slice(&[0xff; 8]);
        stream.extend_from_slice(&[0; 16]);
        let err = decompress(&stream, Compression::Lzma, 1 << 20).unwrap_err();
        assert!(
            matches!(&err, DecompressError::Corrupt { source, .. } if source.kind() == io::ErrorKind::OutOfMemory),
            "{err:?}"
        );
    }

    #[test]
    fn bzip2_and_lzo_are_refused_by_name() {
        let err = decompress(b"BZh91AY&SY", Compression::Bzip2, 1 << 20).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bzip2 payloads are not supported (gzip, xz, lzma, lz4 and zstd are)"
        );
        assert!(matches!(
            decompress(b"\x89LZO", Compression::Lzo, 1 << 20),
            Err(DecompressError::Unsupported(Compression::Lzo))
        ));
    }
}

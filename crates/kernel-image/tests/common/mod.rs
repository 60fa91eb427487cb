//! Synthetic kernel images built the way the kernel build builds them:
//! an x86-64 ELF `vmlinux`, compressed as `arch/x86/boot/compressed`
//! does (with the decompressed size appended), behind a setup header.

#![allow(dead_code)]

use std::io::Write;

use kernel_image::{Compression, LZ4_LEGACY_MAGIC};

/// Where the synthetic kernel's PVH note points.
pub const PVH_ENTRY: u32 = 0x0100_0ab0;
/// Setup sectors of the synthetic bzImage: protected-mode code at 0x600.
const SETUP_SECTS: u8 = 2;
/// Payload offset from the protected-mode code, as in a real bzImage
/// (the decompressor stub comes first).
const PAYLOAD_OFFSET: usize = 0x3c0;

/// An x86-64 `vmlinux` of about `body` bytes: a PT_LOAD of compressible
/// but not trivial contents and, with `pvh`, a PT_NOTE holding the Xen
/// PHYS32_ENTRY note (8-byte descriptor, as Linux writes it).
pub fn vmlinux(body: usize, pvh: Option<u32>) -> Vec<u8> {
    let mut notes = note(b"Xen\0", 6, b"linux\0");
    if let Some(entry) = pvh {
        notes.extend(note(b"Xen\0", 18, &u64::from(entry).to_le_bytes()));
    }
    let phoff = 64usize;
    let notes_at = phoff + 2 * 56;
    let load_at = notes_at + notes.len();
    let mut elf = vec![0u8; notes_at];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2; // ELFCLASS64
    elf[5] = 1; // little-endian
    elf[6] = 1;
    elf[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    elf[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
    elf[24..32].copy_from_slice(&0xffff_ffff_8100_0000u64.to_le_bytes());
    elf[32..40].copy_from_slice(&(phoff as u64).to_le_bytes());
    elf[52..54].copy_from_slice(&64u16.to_le_bytes());
    elf[54..56].copy_from_slice(&56u16.to_le_bytes());
    elf[56..58].copy_from_slice(&2u16.to_le_bytes());
    let mut phdr = |index: usize, p_type: u32, offset: usize, size: usize| {
        let at = phoff + index * 56;
        elf[at..at + 4].copy_from_slice(&p_type.to_le_bytes());
        elf[at + 8..at + 16].copy_from_slice(&(offset as u64).to_le_bytes());
        elf[at + 32..at + 40].copy_from_slice(&(size as u64).to_le_bytes());
        elf[at + 40..at + 48].copy_from_slice(&(size as u64).to_le_bytes());
        elf[at + 48..at + 56].copy_from_slice(&4u64.to_le_bytes());
    };
    phdr(0, 1, load_at, body);
    phdr(1, 4, notes_at, notes.len());
    elf.extend_from_slice(&notes);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    elf.extend((0..body).map(|i| {
        // Runs of text-like bytes with some noise, like code and data.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if i % 64 < 48 {
            (i / 64 % 26) as u8 + b'a'
        } else {
            state as u8
        }
    }));
    elf
}

fn note(name: &[u8], note_type: u32, desc: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    out.extend_from_slice(&note_type.to_le_bytes());
    out.extend_from_slice(name);
    out.resize(out.len().next_multiple_of(4), 0);
    out.extend_from_slice(desc);
    out.resize(out.len().next_multiple_of(4), 0);
    out
}

/// `data` compressed as the kernel build compresses `vmlinux.bin`, with
/// the `size_append` trailer for every format but gzip.
pub fn payload(data: &[u8], compression: Compression) -> Vec<u8> {
    let mut out = match compression {
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            encoder.write_all(data).unwrap();
            return encoder.finish().unwrap();
        }
        Compression::Xz => {
            // scripts/xz_wrap.sh: --check=crc32 --x86 --lzma2 (with a
            // small preset: the encoder is slow in debug builds).
            let mut options = lzma_rust2::XzOptions::with_preset(1);
            options.set_check_sum_type(lzma_rust2::CheckType::Crc32);
            options.prepend_pre_filter(lzma_rust2::FilterType::BcjX86, 0);
            let mut writer = lzma_rust2::XzWriter::new(Vec::new(), options).unwrap();
            writer.write_all(data).unwrap();
            writer.finish().unwrap()
        }
        Compression::Lzma => {
            // `lzma -9` on a pipe: unknown size in the header, end marker
            // (preset 1 for speed).
            let options = lzma_rust2::LzmaOptions::with_preset(1);
            let mut writer =
                lzma_rust2::LzmaWriter::new_use_header(Vec::new(), &options, None).unwrap();
            writer.write_all(data).unwrap();
            writer.finish().unwrap()
        }
        Compression::Lz4 => {
            // `lz4 -l`: legacy frame, 8 MiB chunks (small ones here, to
            // have several).
            let mut out = LZ4_LEGACY_MAGIC.to_vec();
            for chunk in data.chunks(16 << 10) {
                let block = lz4_flex::block::compress(chunk);
                out.extend_from_slice(&(block.len() as u32).to_le_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Compression::Zstd => {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        }
        Compression::Bzip2 | Compression::Lzo => {
            // No encoder: a stream that starts with the right magic.
            let mut out = compression.magic().to_vec();
            out.extend_from_slice(&[0x55; 64]);
            out
        }
    };
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// A bzImage (boot protocol 2.15) around `payload`.
pub fn bzimage(payload: &[u8]) -> Vec<u8> {
    let pm = (usize::from(SETUP_SECTS) + 1) * 512;
    let mut image = vec![0u8; pm + PAYLOAD_OFFSET];
    image[0x1f1] = SETUP_SECTS;
    image[0x1fe..0x200].copy_from_slice(&0xaa55u16.to_le_bytes());
    image[0x202..0x206].copy_from_slice(b"HdrS");
    image[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    image[0x248..0x24c].copy_from_slice(&(PAYLOAD_OFFSET as u32).to_le_bytes());
    image[0x24c..0x250].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    image.extend_from_slice(payload);
    // The decompressor stub's tail after the payload.
    image.extend_from_slice(&[0xcc; 256]);
    image
}

/// The formats this crate decompresses.
pub const SUPPORTED: [Compression; 5] = [
    Compression::Gzip,
    Compression::Xz,
    Compression::Lzma,
    Compression::Lz4,
    Compression::Zstd,
];

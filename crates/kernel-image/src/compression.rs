//! The compression formats a kernel build can use for a bzImage payload
//! (`CONFIG_KERNEL_*`), recognised by their magic bytes as the kernel's own
//! `lib/decompress.c` does.

use std::fmt;

/// A payload compression format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// `CONFIG_KERNEL_GZIP`: gzip (RFC 1952).
    Gzip,
    /// `CONFIG_KERNEL_BZIP2`: bzip2 (not decompressed here).
    Bzip2,
    /// `CONFIG_KERNEL_LZMA`: the `.lzma` ("LZMA alone") format.
    Lzma,
    /// `CONFIG_KERNEL_XZ`: xz, usually with the x86 BCJ filter.
    Xz,
    /// `CONFIG_KERNEL_LZO`: lzop (not decompressed here).
    Lzo,
    /// `CONFIG_KERNEL_LZ4`: the LZ4 *legacy* frame format (`lz4 -l`).
    Lz4,
    /// `CONFIG_KERNEL_ZSTD`: a zstd frame.
    Zstd,
}

/// Magic bytes of each format at the start of a stream.
const MAGICS: [(&[u8], Compression); 7] = [
    (&[0x1f, 0x8b], Compression::Gzip),
    (b"BZh", Compression::Bzip2),
    // props byte 0x5d (lc=3 lp=0 pb=2) then a little-endian dictionary size
    // whose low byte is 0, as every `lzma -N` preset writes.
    (&[0x5d, 0x00], Compression::Lzma),
    (&[0xfd, b'7', b'z', b'X', b'Z', 0x00], Compression::Xz),
    (&[0x89, b'L', b'Z', b'O'], Compression::Lzo),
    (&[0x02, 0x21, 0x4c, 0x18], Compression::Lz4),
    (&[0x28, 0xb5, 0x2f, 0xfd], Compression::Zstd),
];

impl Compression {
    /// Every format, in `CONFIG_KERNEL_*` order.
    pub const ALL: [Compression; 7] = [
        Compression::Gzip,
        Compression::Bzip2,
        Compression::Lzma,
        Compression::Xz,
        Compression::Lzo,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The format whose magic `stream` starts with, if any.
    pub fn detect(stream: &[u8]) -> Option<Self> {
        MAGICS
            .iter()
            .find(|(magic, _)| stream.starts_with(magic))
            .map(|&(_, compression)| compression)
    }

    /// The magic bytes a stream of this format starts with.
    pub fn magic(self) -> &'static [u8] {
        MAGICS
            .iter()
            .find(|&&(_, compression)| compression == self)
            .map_or(&[], |&(magic, _)| magic)
    }

    /// Whether [`crate::decompress`] can decompress this format.
    pub fn is_supported(self) -> bool {
        !matches!(self, Compression::Bzip2 | Compression::Lzo)
    }

    /// The format's name as in `CONFIG_KERNEL_*`, lowercase.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Bzip2 => "bzip2",
            Compression::Lzma => "lzma",
            Compression::Xz => "xz",
            Compression::Lzo => "lzo",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_is_detected_by_its_own_magic() {
        for compression in Compression::ALL {
            let mut stream = compression.magic().to_vec();
            assert!(!stream.is_empty(), "{compression} has no magic");
            stream.extend_from_slice(&[0x42; 8]);
            assert_eq!(Compression::detect(&stream), Some(compression));
        }
    }

    #[test]
    fn unknown_or_short_streams_are_not_detected() {
        assert_eq!(Compression::detect(&[]), None);
        assert_eq!(Compression::detect(&[0x1f]), None);
        assert_eq!(Compression::detect(&[0xfd, b'7', b'z', b'X', b'Z']), None);
        assert_eq!(Compression::detect(b"\x7fELF"), None);
    }

    #[test]
    fn names_match_the_kernel_config() {
        let names: Vec<_> = Compression::ALL.iter().map(|c| c.to_string()).collect();
        assert_eq!(names, ["gzip", "bzip2", "lzma", "xz", "lzo", "lz4", "zstd"]);
        assert!(Compression::Lz4.is_supported());
        assert!(!Compression::Bzip2.is_supported());
    }
}

//! The ELF64 reader the workspace shares: the file header and program
//! header table of a little-endian ELF64 file, read bounds-checked from
//! untrusted bytes. It owns the format's layout and constants; what makes
//! a file acceptable is the caller's rule (a `vmlinux` here in
//! [`check_vmlinux`](crate::check_vmlinux), a workload payload in the
//! VMM's payload loader).

use std::ops::Range;

use thiserror::Error;

use crate::bytes::{le_u16, le_u32, le_u64, slice_at};

/// Size of the ELF64 file header.
pub const EHDR_SIZE: usize = 64;
/// Size of one ELF64 program header.
pub const PHDR_SIZE: usize = 56;
/// `e_machine` of x86-64.
pub const EM_X86_64: u16 = 62;
/// `e_type` of an executable.
pub const ET_EXEC: u16 = 2;
/// `e_type` of a shared object (also a position-independent executable).
pub const ET_DYN: u16 = 3;
/// A loadable segment.
pub const PT_LOAD: u32 = 1;
/// The program interpreter of a dynamically linked file.
pub const PT_INTERP: u32 = 3;
/// A note segment.
pub const PT_NOTE: u32 = 4;
/// Segment flag: executable.
pub const PF_X: u32 = 1;

const ELF_MAGIC: [u8; 4] = *b"\x7fELF";
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;

/// Why bytes are not a little-endian ELF64 file.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Elf64Error {
    /// No ELF magic at the start.
    #[error("no ELF magic")]
    NotElf,
    /// The magic, but shorter than an ELF64 header.
    #[error("too short for an ELF64 header ({len} bytes)")]
    TooShort {
        /// Length of the buffer.
        len: usize,
    },
    /// Not ELF64 little-endian.
    #[error("not a little-endian ELF64 file (class {class}, data {data})")]
    WrongClass {
        /// `EI_CLASS`.
        class: u8,
        /// `EI_DATA`.
        data: u8,
    },
}

/// The fields of an ELF64 file header that loaders read.
#[derive(Clone, Copy, Debug)]
pub struct Elf64<'a> {
    bytes: &'a [u8],
    /// `e_type`.
    pub e_type: u16,
    /// `e_machine`.
    pub machine: u16,
    /// `e_entry`.
    pub entry: u64,
    /// `e_phoff`: where the program header table starts.
    pub phoff: u64,
    /// `e_phentsize`: the size of one program header.
    pub phentsize: u16,
    /// `e_phnum`: the number of program headers.
    pub phnum: u16,
}

/// One program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramHeader {
    /// `p_type`.
    pub p_type: u32,
    /// `p_flags`.
    pub flags: u32,
    /// `p_offset`: where the segment's bytes start in the file.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_paddr`.
    pub paddr: u64,
    /// `p_filesz`: the segment's bytes in the file.
    pub filesz: u64,
    /// `p_memsz`: the segment's size in memory.
    pub memsz: u64,
    /// `p_align`.
    pub align: u64,
}

impl<'a> Elf64<'a> {
    /// Reads the file header: the magic first (a short file without it is
    /// no ELF file), then the length, then the class and byte order.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Elf64Error> {
        if bytes.get(..4) != Some(&ELF_MAGIC[..]) {
            return Err(Elf64Error::NotElf);
        }
        if bytes.len() < EHDR_SIZE {
            return Err(Elf64Error::TooShort { len: bytes.len() });
        }
        if bytes[4] != ELFCLASS64 || bytes[5] != ELFDATA2LSB {
            return Err(Elf64Error::WrongClass {
                class: bytes[4],
                data: bytes[5],
            });
        }
        // In bounds: bytes.len() >= EHDR_SIZE was checked above.
        let field16 = |offset| le_u16(bytes, offset).unwrap_or_default();
        let field64 = |offset| le_u64(bytes, offset).unwrap_or_default();
        Ok(Elf64 {
            bytes,
            e_type: field16(16),
            machine: field16(18),
            entry: field64(24),
            phoff: field64(32),
            phentsize: field16(54),
            phnum: field16(56),
        })
    }

    /// The program headers, or `None` when the table has entries of
    /// another size than [`PHDR_SIZE`] or does not lie inside the file.
    pub fn program_headers(&self) -> Option<impl Iterator<Item = ProgramHeader> + 'a> {
        if self.phnum > 0 && usize::from(self.phentsize) != PHDR_SIZE {
            return None;
        }
        let len = u64::from(self.phnum) * PHDR_SIZE as u64;
        let table = slice_at(self.bytes, self.phoff, len)?;
        Some(table.chunks_exact(PHDR_SIZE).map(ProgramHeader::read))
    }
}

impl ProgramHeader {
    /// Reads one [`PHDR_SIZE`]-byte entry.
    fn read(entry: &[u8]) -> Self {
        let field32 = |offset| le_u32(entry, offset).unwrap_or_default();
        let field64 = |offset| le_u64(entry, offset).unwrap_or_default();
        ProgramHeader {
            p_type: field32(0),
            flags: field32(4),
            offset: field64(8),
            vaddr: field64(16),
            paddr: field64(24),
            filesz: field64(32),
            memsz: field64(40),
            align: field64(48),
        }
    }

    /// Where the segment's file bytes lie in a file of `file_len` bytes, if
    /// they lie inside it.
    pub fn file_range(&self, file_len: usize) -> Option<Range<usize>> {
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(usize::try_from(self.filesz).ok()?)?;
        (end <= file_len).then_some(start..end)
    }

    /// The segment's file bytes in `elf`, if they lie inside it.
    pub fn contents<'b>(&self, elf: &'b [u8]) -> Option<&'b [u8]> {
        elf.get(self.file_range(elf.len())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header of `phnum` program headers at `phoff`, and room for them.
    fn image(phoff: u64, phnum: u16) -> Vec<u8> {
        let mut out = vec![0u8; EHDR_SIZE + usize::from(phnum) * PHDR_SIZE];
        out[..4].copy_from_slice(&ELF_MAGIC);
        out[4] = ELFCLASS64;
        out[5] = ELFDATA2LSB;
        out[16..18].copy_from_slice(&ET_EXEC.to_le_bytes());
        out[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        out[24..32].copy_from_slice(&0x1234u64.to_le_bytes());
        out[32..40].copy_from_slice(&phoff.to_le_bytes());
        out[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        out[56..58].copy_from_slice(&phnum.to_le_bytes());
        out
    }

    #[test]
    fn reads_the_header_and_program_headers() {
        let mut bytes = image(EHDR_SIZE as u64, 1);
        let ph = EHDR_SIZE;
        bytes[ph..ph + 4].copy_from_slice(&PT_LOAD.to_le_bytes());
        bytes[ph + 4..ph + 8].copy_from_slice(&PF_X.to_le_bytes());
        bytes[ph + 8..ph + 16].copy_from_slice(&8u64.to_le_bytes());
        bytes[ph + 32..ph + 40].copy_from_slice(&4u64.to_le_bytes());
        let elf = Elf64::parse(&bytes).unwrap();
        assert_eq!(
            (elf.e_type, elf.machine, elf.entry),
            (ET_EXEC, EM_X86_64, 0x1234)
        );
        let headers: Vec<_> = elf.program_headers().unwrap().collect();
        assert_eq!(headers.len(), 1);
        assert_eq!((headers[0].p_type, headers[0].flags), (PT_LOAD, PF_X));
        assert_eq!(headers[0].file_range(bytes.len()), Some(8..12));
        assert_eq!(headers[0].contents(&bytes), Some(&bytes[8..12]));
        assert_eq!(headers[0].file_range(11), None);
    }

    #[test]
    fn refuses_what_is_not_an_elf64_file() {
        assert_eq!(Elf64::parse(b"").unwrap_err(), Elf64Error::NotElf);
        assert_eq!(
            Elf64::parse(b"#!/bin/sh\n").unwrap_err(),
            Elf64Error::NotElf
        );
        assert_eq!(
            Elf64::parse(b"\x7fELF").unwrap_err(),
            Elf64Error::TooShort { len: 4 }
        );
        let mut bad = image(EHDR_SIZE as u64, 0);
        bad[5] = 2;
        assert_eq!(
            Elf64::parse(&bad).unwrap_err(),
            Elf64Error::WrongClass { class: 2, data: 2 }
        );
    }

    #[test]
    fn a_table_outside_the_file_or_of_odd_entries_is_refused() {
        let bytes = image(EHDR_SIZE as u64, 1);
        let mut bad = bytes.clone();
        bad[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Elf64::parse(&bad).unwrap().program_headers().is_none());
        let mut bad = bytes.clone();
        bad[54] = 32;
        assert!(Elf64::parse(&bad).unwrap().program_headers().is_none());
        // No entries: their size does not matter.
        let mut empty = image(EHDR_SIZE as u64, 0);
        empty[54] = 0;
        let elf = Elf64::parse(&empty).unwrap();
        assert_eq!(elf.program_headers().unwrap().count(), 0);
    }
}

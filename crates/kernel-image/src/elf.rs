//! The decompressed kernel, `vmlinux`: checks that it is a loadable x86-64
//! ELF executable and finds its PVH entry point, the Xen ELF note
//! `XEN_ELFNOTE_PHYS32_ENTRY` that Linux emits with `CONFIG_PVH`.

use thiserror::Error;

use crate::bytes::{le_u32, le_u64};
use crate::elf64::{
    EM_X86_64, ET_EXEC, Elf64, Elf64Error, PHDR_SIZE, PT_LOAD, PT_NOTE, ProgramHeader,
};

/// Note type of the 32-bit physical PVH entry point (Xen's `elfnote.h`).
pub const XEN_ELFNOTE_PHYS32_ENTRY: u32 = 18;
/// Owner name of Xen notes (with its terminating NUL).
const XEN_NOTE_NAME: &[u8] = b"Xen\0";

/// Why a buffer is not a loadable x86-64 `vmlinux`.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ElfError {
    /// Shorter than an ELF64 header.
    #[error("too short for an ELF64 header ({len} bytes)")]
    TooShort {
        /// Length of the buffer.
        len: usize,
    },
    /// No ELF magic.
    #[error("no ELF magic")]
    NotElf,
    /// Not ELF64 little-endian.
    #[error("not a little-endian ELF64 file (class {class}, data {data})")]
    WrongClass {
        /// `EI_CLASS`.
        class: u8,
        /// `EI_DATA`.
        data: u8,
    },
    /// Built for another machine.
    #[error("ELF machine {machine} is not x86-64 ({EM_X86_64})")]
    NotX86_64 {
        /// `e_machine`.
        machine: u16,
    },
    /// Not an executable.
    #[error("ELF type {e_type} is not an executable (ET_EXEC)")]
    NotExecutable {
        /// `e_type`.
        e_type: u16,
    },
    /// The program header table does not fit in the file.
    #[error(
        "program header table ({phnum} entries of {phentsize} bytes at {phoff:#x}) is malformed"
    )]
    BadProgramHeaders {
        /// `e_phoff`.
        phoff: u64,
        /// `e_phnum`.
        phnum: u16,
        /// `e_phentsize`.
        phentsize: u16,
    },
    /// A segment's file contents lie past the end of the file.
    #[error("segment {index} ({size} bytes at {offset:#x}) lies outside the file")]
    SegmentOutOfBounds {
        /// Index of the program header.
        index: usize,
        /// `p_offset`.
        offset: u64,
        /// `p_filesz`.
        size: u64,
    },
    /// Nothing to load.
    #[error("no PT_LOAD segment")]
    NoLoadSegment,
}

/// What a checked `vmlinux` looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElfInfo {
    /// `e_entry`: the 64-bit entry (a virtual address in a vmlinux).
    pub entry: u64,
    /// Number of `PT_LOAD` segments.
    pub load_segments: usize,
    /// The PVH entry point, if the kernel has one ([`pvh_entry`]).
    pub pvh_entry: Option<u32>,
}

/// Checks that `elf` is a little-endian ELF64 x86-64 executable whose
/// program headers and segments all lie inside it.
pub fn check_vmlinux(elf: &[u8]) -> Result<ElfInfo, ElfError> {
    let (header, headers) = program_headers(elf)?;
    let mut load_segments = 0;
    for (index, ph) in headers.iter().enumerate() {
        if ph.contents(elf).is_none() {
            return Err(ElfError::SegmentOutOfBounds {
                index,
                offset: ph.offset,
                size: ph.filesz,
            });
        }
        load_segments += usize::from(ph.p_type == PT_LOAD);
    }
    if load_segments == 0 {
        return Err(ElfError::NoLoadSegment);
    }
    Ok(ElfInfo {
        entry: header.entry,
        load_segments,
        pvh_entry: find_pvh_entry(elf, &headers),
    })
}

/// The PVH entry point of a `vmlinux`: the 32-bit physical address in its
/// `XEN_ELFNOTE_PHYS32_ENTRY` note (owner "Xen", in a `PT_NOTE` segment),
/// where a VMM may start the kernel in 32-bit protected mode with a
/// `hvm_start_info`. `None` when `elf` is no valid x86-64 ELF or has no
/// such note.
pub fn pvh_entry(elf: &[u8]) -> Option<u32> {
    find_pvh_entry(elf, &program_headers(elf).ok()?.1)
}

fn find_pvh_entry(elf: &[u8], headers: &[ProgramHeader]) -> Option<u32> {
    headers
        .iter()
        .filter(|ph| ph.p_type == PT_NOTE)
        .filter_map(|ph| {
            let notes = ph.contents(elf)?;
            // Notes are 4-byte aligned unless the segment says 8.
            let align = if ph.align == 8 { 8 } else { 4 };
            find_note(notes, align, XEN_NOTE_NAME, XEN_ELFNOTE_PHYS32_ENTRY)
        })
        .find_map(|desc| match desc.len() {
            // Linux writes the address with _ASM_PTR: 8 bytes on x86-64.
            4 => le_u32(desc, 0),
            8 => le_u64(desc, 0).and_then(|addr| u32::try_from(addr).ok()),
            _ => None,
        })
}

/// The descriptor of the first note named `name` of type `note_type` in a
/// note segment's contents.
fn find_note<'a>(notes: &'a [u8], align: usize, name: &[u8], note_type: u32) -> Option<&'a [u8]> {
    let mut rest = notes;
    while !rest.is_empty() {
        let namesz = usize::try_from(le_u32(rest, 0)?).ok()?;
        let descsz = usize::try_from(le_u32(rest, 4)?).ok()?;
        let this_type = le_u32(rest, 8)?;
        let name_end = 12usize.checked_add(namesz)?;
        let desc_start = align_up(name_end, align)?;
        let desc_end = desc_start.checked_add(descsz)?;
        let this_name = rest.get(12..name_end)?;
        let desc = rest.get(desc_start..desc_end)?;
        if this_type == note_type && this_name == name {
            return Some(desc);
        }
        // A last note may omit its padding.
        rest = rest.get(align_up(desc_end, align)?.min(rest.len())..)?;
    }
    None
}

fn align_up(value: usize, align: usize) -> Option<usize> {
    Some(value.checked_add(align - 1)? & !(align - 1))
}

/// Validates the ELF header and reads the program header table.
fn program_headers(elf: &[u8]) -> Result<(Elf64<'_>, Vec<ProgramHeader>), ElfError> {
    let header = Elf64::parse(elf)?;
    if header.machine != EM_X86_64 {
        return Err(ElfError::NotX86_64 {
            machine: header.machine,
        });
    }
    if header.e_type != ET_EXEC {
        return Err(ElfError::NotExecutable {
            e_type: header.e_type,
        });
    }
    let bad = ElfError::BadProgramHeaders {
        phoff: header.phoff,
        phnum: header.phnum,
        phentsize: header.phentsize,
    };
    // Stricter than the reader: even an empty table must declare the size.
    if usize::from(header.phentsize) != PHDR_SIZE {
        return Err(bad);
    }
    let table = header.program_headers().ok_or(bad)?.collect();
    Ok((header, table))
}

impl From<Elf64Error> for ElfError {
    fn from(e: Elf64Error) -> Self {
        match e {
            Elf64Error::NotElf => ElfError::NotElf,
            Elf64Error::TooShort { len } => ElfError::TooShort { len },
            Elf64Error::WrongClass { class, data } => ElfError::WrongClass { class, data },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf64::EHDR_SIZE;

    /// A note with 4-byte padding.
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

    /// An x86-64 executable with one PT_LOAD and one PT_NOTE of `notes`.
    fn elf(notes: &[u8]) -> Vec<u8> {
        let phoff = EHDR_SIZE;
        let notes_at = phoff + 2 * PHDR_SIZE;
        let mut out = vec![0u8; notes_at];
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = 2;
        out[5] = 1;
        out[6] = 1;
        out[16..18].copy_from_slice(&ET_EXEC.to_le_bytes());
        out[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        out[24..32].copy_from_slice(&0xffff_ffff_8100_0000u64.to_le_bytes());
        out[32..40].copy_from_slice(&(phoff as u64).to_le_bytes());
        out[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        out[56..58].copy_from_slice(&2u16.to_le_bytes());
        let mut ph = |index: usize, p_type: u32, offset: usize, size: usize| {
            let at = phoff + index * PHDR_SIZE;
            out[at..at + 4].copy_from_slice(&p_type.to_le_bytes());
            out[at + 8..at + 16].copy_from_slice(&(offset as u64).to_le_bytes());
            out[at + 32..at + 40].copy_from_slice(&(size as u64).to_le_bytes());
            out[at + 40..at + 48].copy_from_slice(&(size as u64).to_le_bytes());
            out[at + 48..at + 56].copy_from_slice(&4u64.to_le_bytes());
        };
        ph(0, PT_LOAD, 0, notes_at + notes.len());
        ph(1, PT_NOTE, notes_at, notes.len());
        out.extend_from_slice(notes);
        out
    }

    #[test]
    fn finds_the_pvh_entry_among_other_notes() {
        let mut notes = note(b"GNU\0", 3, &[0xaa; 20]);
        notes.extend(note(b"Xen\0", 6, b"linux\0"));
        notes.extend(note(b"Xen\0", 18, &0x0100_0ab0u64.to_le_bytes()));
        let image = elf(&notes);
        assert_eq!(pvh_entry(&image), Some(0x0100_0ab0));
        let info = check_vmlinux(&image).unwrap();
        assert_eq!(info.pvh_entry, Some(0x0100_0ab0));
        assert_eq!(info.load_segments, 1);
        assert_eq!(info.entry, 0xffff_ffff_8100_0000);
    }

    #[test]
    fn accepts_a_four_byte_descriptor() {
        let image = elf(&note(b"Xen\0", 18, &0x0123_4567u32.to_le_bytes()));
        assert_eq!(pvh_entry(&image), Some(0x0123_4567));
    }

    #[test]
    fn no_pvh_entry_without_the_right_note() {
        assert_eq!(pvh_entry(&elf(&[])), None);
        assert_eq!(pvh_entry(&elf(&note(b"Xen\0", 17, &[1; 8]))), None);
        assert_eq!(pvh_entry(&elf(&note(b"Xe\0", 18, &[1; 8]))), None);
        // An address above 4 GiB cannot be a 32-bit entry.
        assert_eq!(
            pvh_entry(&elf(&note(b"Xen\0", 18, &(1u64 << 32).to_le_bytes()))),
            None
        );
        assert_eq!(pvh_entry(&elf(&note(b"Xen\0", 18, &[1; 2]))), None);
        assert_eq!(check_vmlinux(&elf(&[])).unwrap().pvh_entry, None);
    }

    #[test]
    fn a_note_running_past_its_segment_is_ignored() {
        let mut notes = note(b"Xen\0", 18, &0x1000u64.to_le_bytes());
        notes[4..8].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(pvh_entry(&elf(&notes)), None);
        notes[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(pvh_entry(&elf(&notes)), None);
    }

    #[test]
    fn refuses_what_is_not_an_x86_64_executable() {
        let good = elf(&[]);
        assert_eq!(
            check_vmlinux(&good[..63]),
            Err(ElfError::TooShort { len: 63 })
        );
        let mut bad = good.clone();
        bad[0] = 0;
        assert_eq!(check_vmlinux(&bad), Err(ElfError::NotElf));
        let mut bad = good.clone();
        bad[4] = 1;
        assert_eq!(
            check_vmlinux(&bad),
            Err(ElfError::WrongClass { class: 1, data: 1 })
        );
        let mut bad = good.clone();
        bad[18] = 3;
        assert_eq!(check_vmlinux(&bad), Err(ElfError::NotX86_64 { machine: 3 }));
        let mut bad = good.clone();
        bad[16] = 3;
        assert_eq!(
            check_vmlinux(&bad),
            Err(ElfError::NotExecutable { e_type: 3 })
        );
    }

    #[test]
    fn refuses_tables_and_segments_outside_the_file() {
        let good = elf(&note(b"Xen\0", 18, &[0; 8]));
        let mut bad = good.clone();
        bad[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(matches!(
            check_vmlinux(&bad),
            Err(ElfError::BadProgramHeaders { .. })
        ));
        assert_eq!(pvh_entry(&bad), None);
        let mut bad = good.clone();
        bad[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            check_vmlinux(&bad),
            Err(ElfError::BadProgramHeaders { .. })
        ));
        let mut bad = good.clone();
        bad[54] = 32;
        assert!(matches!(
            check_vmlinux(&bad),
            Err(ElfError::BadProgramHeaders { .. })
        ));
        // The PT_NOTE segment's offset pushed past the end.
        let mut bad = good.clone();
        let at = EHDR_SIZE + PHDR_SIZE + 8;
        bad[at..at + 8].copy_from_slice(&(good.len() as u64).to_le_bytes());
        assert_eq!(
            check_vmlinux(&bad),
            Err(ElfError::SegmentOutOfBounds {
                index: 1,
                offset: good.len() as u64,
                size: 24,
            })
        );
        assert_eq!(pvh_entry(&bad), None);
    }

    #[test]
    fn refuses_an_executable_with_nothing_to_load() {
        let mut bad = elf(&[]);
        bad[EHDR_SIZE..EHDR_SIZE + 4].copy_from_slice(&PT_NOTE.to_le_bytes());
        assert_eq!(check_vmlinux(&bad), Err(ElfError::NoLoadSegment));
    }
}

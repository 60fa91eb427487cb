//! Parsing and validation of payload ELF images (read with the shared
//! ELF64 reader, `kernel_image::elf64`; the payload's rules are here).
//!
//! A payload is a static, non-PIE x86-64 ELF executable whose loadable
//! segments lie at or above [`guest_abi::PAYLOAD_MIN_LOAD_ADDR`], inside one
//! RAM range, without overlapping each other. Everything is checked here,
//! before the VM starts; loading then cannot fail half-way for a reason the
//! image could have told us.

use thiserror::Error;

use guest_abi::{GpaRange, PAYLOAD_MIN_LOAD_ADDR};
use kernel_image::elf64::{
    EM_X86_64, ET_DYN, ET_EXEC, Elf64, Elf64Error, PF_X, PHDR_SIZE, PT_INTERP, PT_LOAD,
};

const MAX_SEGMENTS: usize = 64;

/// Why an image is not a loadable payload.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ElfError {
    /// The file does not start with the ELF magic.
    #[error("not an ELF file")]
    NotElf,
    /// The file is shorter than what its headers describe.
    #[error("truncated ELF: {0}")]
    Truncated(&'static str),
    /// 32-bit or big-endian ELF.
    #[error("not a 64-bit little-endian ELF")]
    WrongClass,
    /// Built for another machine.
    #[error("ELF is for machine {0}, not x86-64 (62)")]
    WrongMachine(u16),
    /// A position-independent or dynamically linked image.
    #[error("ELF must be a static non-PIE executable ({0})")]
    NotStatic(&'static str),
    /// No loadable segment.
    #[error("ELF has no loadable segment")]
    NoSegments,
    /// Too many program headers.
    #[error("ELF has {0} program headers (at most {MAX_SEGMENTS})")]
    TooManySegments(usize),
    /// A segment's file size exceeds its memory size.
    #[error("segment at {vaddr:#x}: file size exceeds memory size")]
    FileSizeExceedsMemSize {
        /// Segment address.
        vaddr: u64,
    },
    /// A segment is mapped at a virtual address other than its physical one.
    #[error("segment at {vaddr:#x}: virtual address differs from physical {paddr:#x}")]
    NotIdentity {
        /// Virtual address.
        vaddr: u64,
        /// Physical address.
        paddr: u64,
    },
    /// A segment below the payload area (where page tables live).
    #[error(
        "segment {start:#x}..{end:#x} overlaps the VMM area below {PAYLOAD_MIN_LOAD_ADDR:#x} (page tables, boot info)"
    )]
    BelowLoadArea {
        /// Segment start.
        start: u64,
        /// Segment end.
        end: u64,
    },
    /// A segment outside guest RAM.
    #[error("segment {start:#x}..{end:#x} lies outside guest RAM")]
    OutsideRam {
        /// Segment start.
        start: u64,
        /// Segment end.
        end: u64,
    },
    /// Two segments overlap.
    #[error("segments at {0:#x} and {1:#x} overlap")]
    Overlap(u64, u64),
    /// Entry point outside every executable segment.
    #[error("entry point {0:#x} is not inside an executable segment")]
    BadEntry(u64),
}

/// A loadable segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Guest-physical load address.
    pub gpa: u64,
    /// Bytes from the file.
    pub file_range: std::ops::Range<usize>,
    /// Size in memory (the rest beyond the file bytes is zeroed).
    pub mem_size: u64,
    /// Whether the segment is executable.
    pub executable: bool,
}

impl Segment {
    fn end(&self) -> u64 {
        self.gpa + self.mem_size
    }
}

/// A validated payload image.
#[derive(Debug)]
pub struct PayloadImage<'a> {
    /// The raw file.
    pub bytes: &'a [u8],
    /// Entry point.
    pub entry: u64,
    /// Loadable segments sorted by address.
    pub segments: Vec<Segment>,
}

impl PayloadImage<'_> {
    /// One past the highest byte any segment occupies.
    pub fn end(&self) -> u64 {
        self.segments.iter().map(Segment::end).max().unwrap_or(0)
    }
}

/// Parses `bytes` and checks that it can be loaded into `ram`.
pub fn parse<'a>(bytes: &'a [u8], ram: &[GpaRange]) -> Result<PayloadImage<'a>, ElfError> {
    let elf = Elf64::parse(bytes).map_err(|e| match e {
        Elf64Error::NotElf => ElfError::NotElf,
        Elf64Error::TooShort { .. } => ElfError::Truncated("ELF header"),
        Elf64Error::WrongClass { .. } => ElfError::WrongClass,
    })?;
    if elf.machine != EM_X86_64 {
        return Err(ElfError::WrongMachine(elf.machine));
    }
    match elf.e_type {
        ET_EXEC => {}
        ET_DYN => return Err(ElfError::NotStatic("position-independent")),
        _ => return Err(ElfError::NotStatic("not an executable")),
    }
    let entry = elf.entry;
    let phnum = usize::from(elf.phnum);
    if phnum > MAX_SEGMENTS {
        return Err(ElfError::TooManySegments(phnum));
    }
    if usize::from(elf.phentsize) != PHDR_SIZE && phnum > 0 {
        return Err(ElfError::Truncated("program header size"));
    }
    let table = elf
        .program_headers()
        .ok_or(ElfError::Truncated("program headers"))?;

    let mut segments = Vec::new();
    for ph in table {
        if ph.p_type == PT_INTERP {
            return Err(ElfError::NotStatic("has an interpreter"));
        }
        if ph.p_type != PT_LOAD {
            continue;
        }
        let (vaddr, paddr, memsz) = (ph.vaddr, ph.paddr, ph.memsz);
        if memsz == 0 {
            continue;
        }
        if ph.filesz > memsz {
            return Err(ElfError::FileSizeExceedsMemSize { vaddr });
        }
        if vaddr != paddr {
            return Err(ElfError::NotIdentity { vaddr, paddr });
        }
        let file_range = ph
            .file_range(bytes.len())
            .ok_or(ElfError::Truncated("segment data"))?;
        let end = paddr.checked_add(memsz).ok_or(ElfError::OutsideRam {
            start: paddr,
            end: u64::MAX,
        })?;
        if paddr < PAYLOAD_MIN_LOAD_ADDR {
            return Err(ElfError::BelowLoadArea { start: paddr, end });
        }
        if !ram.iter().any(|r| r.start <= paddr && end <= r.end()) {
            return Err(ElfError::OutsideRam { start: paddr, end });
        }
        segments.push(Segment {
            gpa: paddr,
            file_range,
            mem_size: memsz,
            executable: ph.flags & PF_X != 0,
        });
    }
    if segments.is_empty() {
        return Err(ElfError::NoSegments);
    }
    segments.sort_by_key(|s| s.gpa);
    for pair in segments.windows(2) {
        if pair[0].end() > pair[1].gpa {
            return Err(ElfError::Overlap(pair[0].gpa, pair[1].gpa));
        }
    }
    if !segments
        .iter()
        .any(|s| s.executable && s.gpa <= entry && entry < s.end())
    {
        return Err(ElfError::BadEntry(entry));
    }
    Ok(PayloadImage {
        bytes,
        entry,
        segments,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use kernel_image::elf64::EHDR_SIZE;

    use super::*;

    /// A minimal valid ELF: one RX segment at `gpa` holding `code`.
    pub(crate) fn tiny_elf(gpa: u64, code: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; EHDR_SIZE + PHDR_SIZE];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[6] = 1;
        b[16..18].copy_from_slice(&ET_EXEC.to_le_bytes());
        b[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        b[24..32].copy_from_slice(&gpa.to_le_bytes());
        b[32..40].copy_from_slice(&(EHDR_SIZE as u64).to_le_bytes());
        b[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        b[56..58].copy_from_slice(&1u16.to_le_bytes());
        let ph = EHDR_SIZE;
        let data_off = (EHDR_SIZE + PHDR_SIZE) as u64;
        b[ph..ph + 4].copy_from_slice(&PT_LOAD.to_le_bytes());
        b[ph + 4..ph + 8].copy_from_slice(&5u32.to_le_bytes());
        b[ph + 8..ph + 16].copy_from_slice(&data_off.to_le_bytes());
        b[ph + 16..ph + 24].copy_from_slice(&gpa.to_le_bytes());
        b[ph + 24..ph + 32].copy_from_slice(&gpa.to_le_bytes());
        b[ph + 32..ph + 40].copy_from_slice(&(code.len() as u64).to_le_bytes());
        b[ph + 40..ph + 48].copy_from_slice(&(code.len() as u64).to_le_bytes());
        b.extend_from_slice(code);
        b
    }

    const RAM: [GpaRange; 1] = [GpaRange {
        start: 0,
        len: 64 << 20,
    }];

    #[test]
    fn accepts_a_minimal_image() {
        let elf = tiny_elf(0x40_0000, &[0x90; 16]);
        let img = parse(&elf, &RAM).unwrap();
        assert_eq!(img.entry, 0x40_0000);
        assert_eq!(img.end(), 0x40_0010);
    }

    #[test]
    fn accepts_the_embedded_payload() {
        let img = parse(super::super::embedded::WORKLOADS_ELF, &RAM).unwrap();
        assert!(img.entry >= PAYLOAD_MIN_LOAD_ADDR);
    }

    #[test]
    fn rejects_bad_images() {
        assert_eq!(parse(b"#!/bin/sh\n", &RAM).unwrap_err(), ElfError::NotElf);
        assert_eq!(
            parse(b"\x7fELF", &RAM).unwrap_err(),
            ElfError::Truncated("ELF header")
        );

        let mut arm = tiny_elf(0x40_0000, &[0x90]);
        arm[18..20].copy_from_slice(&183u16.to_le_bytes());
        assert_eq!(parse(&arm, &RAM).unwrap_err(), ElfError::WrongMachine(183));

        let mut pie = tiny_elf(0x40_0000, &[0x90]);
        pie[16..18].copy_from_slice(&ET_DYN.to_le_bytes());
        assert!(matches!(
            parse(&pie, &RAM).unwrap_err(),
            ElfError::NotStatic(_)
        ));

        let low = tiny_elf(0x1_0000, &[0x90]);
        assert!(matches!(
            parse(&low, &RAM).unwrap_err(),
            ElfError::BelowLoadArea { .. }
        ));

        let high = tiny_elf(128 << 20, &[0x90]);
        assert!(matches!(
            parse(&high, &RAM).unwrap_err(),
            ElfError::OutsideRam { .. }
        ));

        let wrap = tiny_elf(u64::MAX - 4, &[0x90; 16]);
        assert!(matches!(
            parse(&wrap, &RAM).unwrap_err(),
            ElfError::OutsideRam { .. }
        ));

        let mut truncated = tiny_elf(0x40_0000, &[0x90; 16]);
        truncated.truncate(truncated.len() - 1);
        assert_eq!(
            parse(&truncated, &RAM).unwrap_err(),
            ElfError::Truncated("segment data")
        );

        let mut bad_entry = tiny_elf(0x40_0000, &[0x90]);
        bad_entry[24..32].copy_from_slice(&0x50_0000u64.to_le_bytes());
        assert_eq!(
            parse(&bad_entry, &RAM).unwrap_err(),
            ElfError::BadEntry(0x50_0000)
        );

        let mut huge_phoff = tiny_elf(0x40_0000, &[0x90]);
        huge_phoff[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            parse(&huge_phoff, &RAM).unwrap_err(),
            ElfError::Truncated("program headers")
        );
    }

    #[test]
    fn rejects_overlapping_segments() {
        let mut elf = tiny_elf(0x40_0000, &[0x90; 32]);
        // Duplicate the program header: two segments at the same address.
        let ph: Vec<u8> = elf[EHDR_SIZE..EHDR_SIZE + PHDR_SIZE].to_vec();
        let phoff = elf.len() as u64;
        elf.extend_from_slice(&ph);
        elf.extend_from_slice(&ph);
        elf[32..40].copy_from_slice(&phoff.to_le_bytes());
        elf[56..58].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(
            parse(&elf, &RAM).unwrap_err(),
            ElfError::Overlap(0x40_0000, 0x40_0000)
        );
    }
}

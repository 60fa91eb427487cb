//! Kernel images: telling a bzImage from an ELF vmlinux, checking what
//! each needs before the VM exists (boot protocol, entry point, the memory
//! it occupies), and loading it into guest memory with linux-loader.
//!
//! A bzImage boots through the 64-bit boot protocol (entry at the
//! protected-mode code + 0x200); an ELF vmlinux boots through its PVH
//! entry (the `XEN_ELFNOTE_PHYS32_ENTRY` note), which skips the
//! decompressor.

use std::io::Cursor;

use linux_loader::bootparam::setup_header;
use linux_loader::loader::elf::PvhBootCapability;
use linux_loader::loader::{BzImage, Elf, KernelLoader};
use vm_memory::{ByteValued, GuestAddress, GuestMemoryMmap};

use super::error::LinuxError;
use super::layout::HIMEM_START;

/// Offset of the setup header in a bzImage.
const SETUP_HEADER_OFFSET: usize = 0x1f1;
/// "HdrS", the setup header's magic.
const HDRS_MAGIC: u32 = 0x5372_6448;
/// Boot protocol 2.12: the first with `xloadflags` (and the 64-bit entry
/// flag).
const MIN_PROTOCOL: u16 = 0x020c;
/// `loadflags`: the protected-mode code loads at 1 MiB or above.
const LOADED_HIGH: u8 = 1;
/// `xloadflags`: the kernel has the 64-bit entry point at +0x200.
const XLF_KERNEL_64: u16 = 1;
/// Offset of the 64-bit entry point from the protected-mode code.
const ENTRY_64_OFFSET: u64 = 0x200;
/// `PT_LOAD`.
const PT_LOAD: u32 = 1;
const EM_X86_64: u16 = 62;
const MAX_PHDRS: usize = 128;

/// A kernel image, checked and ready to load.
#[derive(Debug)]
pub enum KernelImage<'a> {
    /// A bzImage, started through the 64-bit boot protocol.
    BzImage(BzImageKernel<'a>),
    /// An ELF vmlinux, started through its PVH entry.
    Elf(ElfKernel<'a>),
}

/// A bzImage and the fields of its setup header the boot needs.
#[derive(Debug)]
pub struct BzImageKernel<'a> {
    bytes: &'a [u8],
    /// The setup header as the image carries it.
    pub header: setup_header,
    /// Where the protected-mode code goes (`pref_address` of a relocatable
    /// kernel, else `code32_start`).
    pub load_addr: u64,
}

/// An ELF vmlinux with a PVH entry.
#[derive(Debug)]
pub struct ElfKernel<'a> {
    bytes: &'a [u8],
    /// The 32-bit PVH entry point (guest-physical).
    pub pvh_entry: u64,
    /// Lowest guest-physical address a segment occupies.
    pub start: u64,
    /// One past the highest one (BSS included).
    pub end: u64,
}

/// Where a loaded kernel starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelEntry {
    /// 64-bit boot protocol: RIP in long mode, RSI = the zero page.
    Linux64 {
        /// The entry point.
        rip: u64,
        /// The setup header after loading (for the zero page).
        header: setup_header,
    },
    /// PVH: EIP in 32-bit protected mode, EBX = the start info.
    Pvh {
        /// The entry point.
        eip: u64,
    },
}

fn bz(reason: impl Into<String>) -> LinuxError {
    LinuxError::BadBzImage(reason.into())
}

fn bad_elf(reason: impl Into<String>) -> LinuxError {
    LinuxError::BadElf(reason.into())
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

impl<'a> KernelImage<'a> {
    /// Tells the format of `bytes` and checks it.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, LinuxError> {
        if bytes.starts_with(b"\x7fELF") {
            return ElfKernel::parse(bytes).map(KernelImage::Elf);
        }
        if u32_at(bytes, 0x202) == Some(HDRS_MAGIC) {
            return BzImageKernel::parse(bytes).map(KernelImage::BzImage);
        }
        Err(LinuxError::NotAKernel)
    }

    /// The guest-physical range the kernel needs while it boots: its
    /// image, and for a bzImage the room it decompresses into.
    pub fn memory(&self) -> (u64, u64) {
        match self {
            KernelImage::BzImage(k) => (k.load_addr, k.end()),
            KernelImage::Elf(k) => (k.start, k.end),
        }
    }

    /// The longest command line the kernel accepts, NUL excluded.
    pub fn cmdline_max(&self) -> usize {
        match self {
            KernelImage::BzImage(k) => k.cmdline_max(),
            KernelImage::Elf(_) => super::cmdline::PVH_CMDLINE_SIZE - 1,
        }
    }

    /// The highest address the initramfs may end at (exclusive).
    pub fn initramfs_limit(&self) -> u64 {
        match self {
            KernelImage::BzImage(k) => u64::from(k.header.initrd_addr_max) + 1,
            // PVH hands the module over with a 64-bit address; the kernel
            // maps the low 4 GiB early, so stay below it like a bzImage.
            KernelImage::Elf(_) => 1 << 32,
        }
    }

    /// Short name of the format, for messages.
    pub fn format(&self) -> &'static str {
        match self {
            KernelImage::BzImage(_) => "bzImage",
            KernelImage::Elf(_) => "ELF (PVH)",
        }
    }

    /// Loads the kernel into `mem` with linux-loader and says where it
    /// starts.
    pub fn load(&self, mem: &GuestMemoryMmap) -> Result<KernelEntry, LinuxError> {
        let himem = Some(GuestAddress(HIMEM_START));
        match self {
            KernelImage::BzImage(k) => {
                let loaded = BzImage::load(
                    mem,
                    Some(GuestAddress(k.load_addr)),
                    &mut Cursor::new(k.bytes),
                    himem,
                )
                .map_err(LinuxError::Load)?;
                let header = loaded.setup_header.unwrap_or(k.header);
                Ok(KernelEntry::Linux64 {
                    rip: k.load_addr + ENTRY_64_OFFSET,
                    header,
                })
            }
            KernelImage::Elf(k) => {
                let loaded = Elf::load(mem, None, &mut Cursor::new(k.bytes), himem)
                    .map_err(LinuxError::Load)?;
                match loaded.pvh_boot_cap {
                    PvhBootCapability::PvhEntryPresent(entry) if entry.0 == k.pvh_entry => {
                        Ok(KernelEntry::Pvh { eip: k.pvh_entry })
                    }
                    other => Err(bad_elf(format!(
                        "linux-loader disagrees about the PVH entry: {other}"
                    ))),
                }
            }
        }
    }
}

impl<'a> BzImageKernel<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, LinuxError> {
        let size = std::mem::size_of::<setup_header>();
        let raw = bytes
            .get(SETUP_HEADER_OFFSET..SETUP_HEADER_OFFSET + size)
            .ok_or_else(|| bz("truncated setup header"))?;
        let mut header = setup_header::default();
        header.as_mut_slice().copy_from_slice(raw);
        let version = header.version;
        if version < MIN_PROTOCOL {
            return Err(bz(format!(
                "boot protocol {}.{:02} has no 64-bit entry (needs 2.12)",
                version >> 8,
                version & 0xff
            )));
        }
        let (xloadflags, loadflags) = (header.xloadflags, header.loadflags);
        if xloadflags & XLF_KERNEL_64 == 0 {
            return Err(bz("no 64-bit entry point (XLF_KERNEL_64 clear)"));
        }
        if loadflags & LOADED_HIGH == 0 {
            return Err(bz("not loadable at 1 MiB (a zImage?)"));
        }
        let sects = match header.setup_sects {
            0 => 4,
            n => usize::from(n),
        };
        let setup_size = (sects + 1) * 512;
        if setup_size >= bytes.len() {
            return Err(bz(format!(
                "setup code ({setup_size} bytes) fills the whole {}-byte file",
                bytes.len()
            )));
        }
        let load_addr = if header.relocatable_kernel != 0 {
            let align = u64::from(header.kernel_alignment).max(1);
            header.pref_address.max(HIMEM_START).next_multiple_of(align)
        } else {
            u64::from(header.code32_start)
        };
        if load_addr < HIMEM_START {
            return Err(bz(format!("load address {load_addr:#x} is below 1 MiB")));
        }
        Ok(BzImageKernel {
            bytes,
            header,
            load_addr,
        })
    }

    fn setup_size(&self) -> usize {
        let sects = match self.header.setup_sects {
            0 => 4,
            n => usize::from(n),
        };
        (sects + 1) * 512
    }

    /// One past the last byte the kernel uses while it decompresses and
    /// runs: the load address plus `init_size` (or the image, if larger).
    pub fn end(&self) -> u64 {
        let image = (self.bytes.len() - self.setup_size()) as u64;
        self.load_addr + image.max(u64::from(self.header.init_size))
    }

    /// `cmdline_size` of the header.
    pub fn cmdline_max(&self) -> usize {
        usize::try_from(self.header.cmdline_size).unwrap_or(usize::MAX)
    }
}

impl<'a> ElfKernel<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, LinuxError> {
        let truncated = || bad_elf("truncated headers");
        if bytes.len() < 64 {
            return Err(truncated());
        }
        if bytes[4] != 2 || bytes[5] != 1 {
            return Err(bad_elf("not a 64-bit little-endian ELF"));
        }
        let machine = u16_at(bytes, 18).ok_or_else(truncated)?;
        if machine != EM_X86_64 {
            return Err(bad_elf(format!("machine {machine}, not x86-64 (62)")));
        }
        let phoff = u64_at(bytes, 32).ok_or_else(truncated)?;
        let phentsize = usize::from(u16_at(bytes, 54).ok_or_else(truncated)?);
        let phnum = usize::from(u16_at(bytes, 56).ok_or_else(truncated)?);
        if phentsize != 56 || phnum == 0 || phnum > MAX_PHDRS {
            return Err(bad_elf(format!(
                "{phnum} program headers of {phentsize} bytes"
            )));
        }
        let phoff = usize::try_from(phoff).map_err(|_| truncated())?;
        let (mut start, mut end) = (u64::MAX, 0u64);
        for i in 0..phnum {
            let ph = phoff
                .checked_add(i * phentsize)
                .and_then(|o| bytes.get(o..o + phentsize))
                .ok_or_else(truncated)?;
            let p_type = u32_at(ph, 0).ok_or_else(truncated)?;
            let offset = u64_at(ph, 8).ok_or_else(truncated)?;
            let paddr = u64_at(ph, 24).ok_or_else(truncated)?;
            let filesz = u64_at(ph, 32).ok_or_else(truncated)?;
            let memsz = u64_at(ph, 40).ok_or_else(truncated)?;
            let file_end = offset.checked_add(filesz);
            if file_end.is_none_or(|e| e > bytes.len() as u64) {
                return Err(bad_elf(format!(
                    "segment {i} lies past the end of the file"
                )));
            }
            match p_type {
                PT_LOAD if memsz > 0 => {
                    let seg_end = paddr
                        .checked_add(memsz)
                        .ok_or_else(|| bad_elf(format!("segment {i} wraps around")))?;
                    if filesz > memsz {
                        return Err(bad_elf(format!(
                            "segment {i}: file size exceeds memory size"
                        )));
                    }
                    start = start.min(paddr);
                    end = end.max(seg_end);
                }
                _ => {}
            }
        }
        if end == 0 {
            return Err(bad_elf("no loadable segment"));
        }
        // The note's walk is shared with the vmlinux extractor.
        let pvh_entry = kernel_image::pvh_entry(bytes)
            .map(u64::from)
            .ok_or_else(|| {
                bad_elf("no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY); build with CONFIG_PVH=y")
            })?;
        if start < HIMEM_START {
            return Err(bad_elf(format!(
                "segment at {start:#x} is below 1 MiB (the boot structures and BIOS area)"
            )));
        }
        if !(start..end).contains(&pvh_entry) {
            return Err(bad_elf(format!(
                "PVH entry {pvh_entry:#x} is outside the image {start:#x}..{end:#x}"
            )));
        }
        Ok(ElfKernel {
            bytes,
            pvh_entry,
            start,
            end,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const PT_NOTE: u32 = 4;
    /// The PVH entry note: owner "Xen", type 18.
    const XEN_ELFNOTE_PHYS32_ENTRY: u32 = 18;

    /// A minimal bzImage: boot sector, setup header, `setup_sects` of
    /// setup code, then `payload` as the protected-mode code.
    pub(crate) fn tiny_bzimage(payload: usize, init_size: u32) -> Vec<u8> {
        let setup_sects = 4u8;
        let mut b = vec![0u8; (usize::from(setup_sects) + 1) * 512 + payload];
        b[0x1f1] = setup_sects;
        b[0x1fe..0x200].copy_from_slice(&0xaa55u16.to_le_bytes());
        b[0x202..0x206].copy_from_slice(&HDRS_MAGIC.to_le_bytes());
        b[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
        b[0x211] = LOADED_HIGH;
        b[0x214..0x218].copy_from_slice(&0x10_0000u32.to_le_bytes());
        b[0x22c..0x230].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        b[0x230..0x234].copy_from_slice(&0x20_0000u32.to_le_bytes());
        b[0x234] = 1; // relocatable
        b[0x236..0x238].copy_from_slice(&0x7fu16.to_le_bytes());
        b[0x238..0x23c].copy_from_slice(&2047u32.to_le_bytes());
        b[0x258..0x260].copy_from_slice(&0x100_0000u64.to_le_bytes());
        b[0x260..0x264].copy_from_slice(&init_size.to_le_bytes());
        b
    }

    /// A minimal ELF vmlinux: one loadable segment of `len` bytes at
    /// `paddr` and, if `pvh`, a note with the PVH entry at its start.
    pub(crate) fn tiny_vmlinux(paddr: u64, len: u64, pvh: bool) -> Vec<u8> {
        let phnum: u16 = if pvh { 2 } else { 1 };
        let data_off = 64 + 56 * u64::from(phnum);
        let note = {
            let mut n = Vec::new();
            n.extend_from_slice(&4u32.to_le_bytes());
            n.extend_from_slice(&4u32.to_le_bytes());
            n.extend_from_slice(&XEN_ELFNOTE_PHYS32_ENTRY.to_le_bytes());
            n.extend_from_slice(b"Xen\0");
            n.extend_from_slice(&(paddr as u32).to_le_bytes());
            n
        };
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[6] = 1;
        b[16..18].copy_from_slice(&2u16.to_le_bytes());
        b[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        b[24..32].copy_from_slice(&paddr.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[52..54].copy_from_slice(&64u16.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&phnum.to_le_bytes());
        let phdr = |kind: u32, off: u64, addr: u64, size: u64| {
            let mut p = vec![0u8; 56];
            p[..4].copy_from_slice(&kind.to_le_bytes());
            p[4..8].copy_from_slice(&7u32.to_le_bytes());
            p[8..16].copy_from_slice(&off.to_le_bytes());
            p[16..24].copy_from_slice(&(addr | 0xffff_ffff_8000_0000).to_le_bytes());
            p[24..32].copy_from_slice(&addr.to_le_bytes());
            p[32..40].copy_from_slice(&size.to_le_bytes());
            p[40..48].copy_from_slice(&size.to_le_bytes());
            p[48..56].copy_from_slice(&0x1000u64.to_le_bytes());
            p
        };
        b.extend(phdr(PT_LOAD, data_off, paddr, len));
        if pvh {
            b.extend(phdr(PT_NOTE, data_off + len, 0, note.len() as u64));
        }
        b.extend(std::iter::repeat_n(0x90u8, len as usize));
        if pvh {
            b.extend(note);
        }
        b
    }

    #[test]
    fn a_bzimage_is_recognised_and_loads_at_its_preferred_address() {
        let image = tiny_bzimage(4096, 0x300_0000);
        let KernelImage::BzImage(k) = KernelImage::parse(&image).unwrap() else {
            panic!("not a bzImage");
        };
        assert_eq!(k.load_addr, 0x100_0000);
        assert_eq!(k.end(), 0x100_0000 + 0x300_0000);
        assert_eq!(k.cmdline_max(), 2047);
    }

    #[test]
    fn old_or_32_bit_only_bzimages_are_refused() {
        let mut old = tiny_bzimage(4096, 0x100_0000);
        old[0x206..0x208].copy_from_slice(&0x020au16.to_le_bytes());
        let e = KernelImage::parse(&old).unwrap_err();
        assert!(e.to_string().contains("2.10"), "{e}");
        let mut no64 = tiny_bzimage(4096, 0x100_0000);
        no64[0x236] = 0;
        assert!(matches!(
            KernelImage::parse(&no64),
            Err(LinuxError::BadBzImage(_))
        ));
        let mut truncated = tiny_bzimage(0, 0x100_0000);
        truncated.truncate(0x300);
        assert!(matches!(
            KernelImage::parse(&truncated),
            Err(LinuxError::BadBzImage(_))
        ));
    }

    #[test]
    fn anything_else_is_not_a_kernel() {
        for bytes in [&b""[..], b"hello world", &[0u8; 4096][..]] {
            assert!(matches!(
                KernelImage::parse(bytes),
                Err(LinuxError::NotAKernel)
            ));
        }
    }

    #[test]
    fn an_elf_vmlinux_is_found_with_its_pvh_entry() {
        let elf = tiny_vmlinux(0x100_0000, 0x2000, true);
        let KernelImage::Elf(k) = KernelImage::parse(&elf).unwrap() else {
            panic!("not an ELF");
        };
        assert_eq!(k.pvh_entry, 0x100_0000);
        assert_eq!((k.start, k.end), (0x100_0000, 0x100_2000));
    }

    #[test]
    fn an_elf_without_pvh_note_or_below_1m_is_refused() {
        let e = KernelImage::parse(&tiny_vmlinux(0x100_0000, 0x2000, false)).unwrap_err();
        assert!(e.to_string().contains("PVH"), "{e}");
        let e = KernelImage::parse(&tiny_vmlinux(0x8000, 0x2000, true)).unwrap_err();
        assert!(e.to_string().contains("below 1 MiB"), "{e}");
        let mut cut = tiny_vmlinux(0x100_0000, 0x2000, true);
        cut.truncate(200);
        assert!(matches!(
            KernelImage::parse(&cut),
            Err(LinuxError::BadElf(_))
        ));
    }
}

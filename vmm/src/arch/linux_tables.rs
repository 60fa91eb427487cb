//! Descriptor and page tables for entering a Linux kernel: the boot GDT
//! (`__BOOT_CS` 0x10, `__BOOT_DS` 0x18, a TSS) for the 64-bit boot
//! protocol or the 32-bit PVH entry, and identity page tables over the
//! first 4 GiB (2 MiB pages, supervisor-only) for the 64-bit entry. The
//! kernel replaces all of them early; they only have to be valid.

use kvm_bindings::kvm_segment;

/// `__BOOT_CS`: the kernel code segment the boot protocol requires.
pub const BOOT_CS: u16 = 0x10;
/// `__BOOT_DS`: the kernel data segment.
pub const BOOT_DS: u16 = 0x18;
/// The TSS selector (a 16-byte descriptor in long mode).
pub const BOOT_TSS: u16 = 0x20;

/// Which entry the GDT is for: its code segment differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeMode {
    /// 64-bit code (L=1), for the 64-bit boot protocol.
    Long,
    /// 32-bit code (D=1), for the PVH entry.
    Protected32,
}

/// A descriptor from its flag bits (type, S, DPL, P in the low byte; AVL,
/// L, D/B, G in the high nibble), base and 20-bit limit.
const fn descriptor(flags: u16, base: u32, limit: u32) -> u64 {
    let (flags, base, limit) = (flags as u64, base as u64, limit as u64);
    ((base & 0xff00_0000) << 32)
        | ((flags & 0xf0ff) << 40)
        | ((limit & 0xf_0000) << 32)
        | ((base & 0x00ff_ffff) << 16)
        | (limit & 0xffff)
}

/// The GDT for `mode`: null, null, code, data, TSS (two slots).
pub fn gdt(mode: CodeMode) -> [u64; 6] {
    let code = match mode {
        CodeMode::Long => descriptor(0xa09b, 0, 0xf_ffff),
        CodeMode::Protected32 => descriptor(0xc09b, 0, 0xf_ffff),
    };
    [
        0,
        0,
        code,
        descriptor(0xc093, 0, 0xf_ffff),
        descriptor(0x808b, 0, 0xf_ffff),
        0,
    ]
}

/// The GDT as bytes.
pub fn gdt_bytes(mode: CodeMode) -> Vec<u8> {
    gdt(mode).iter().flat_map(|e| e.to_le_bytes()).collect()
}

/// The GDTR limit.
pub const fn gdt_limit() -> u16 {
    (6 * 8 - 1) as u16
}

/// The hidden segment state KVM loads for selector `selector` of `gdt`.
pub fn segment(gdt: &[u64; 6], selector: u16) -> kvm_segment {
    let e = gdt[usize::from(selector >> 3)];
    let limit = ((e >> 32) & 0xf_0000) | (e & 0xffff);
    let g = ((e >> 55) & 1) as u8;
    kvm_segment {
        base: ((e >> 16) & 0x00ff_ffff) | ((e >> 32) & 0xff00_0000),
        limit: if g == 1 {
            ((limit << 12) | 0xfff) as u32
        } else {
            limit as u32
        },
        selector,
        type_: ((e >> 40) & 0xf) as u8,
        present: ((e >> 47) & 1) as u8,
        dpl: ((e >> 45) & 3) as u8,
        db: ((e >> 54) & 1) as u8,
        s: ((e >> 44) & 1) as u8,
        l: ((e >> 53) & 1) as u8,
        g,
        avl: ((e >> 52) & 1) as u8,
        unusable: 0,
        padding: 0,
    }
}

const PAGE: u64 = 4096;
const PRESENT_WRITABLE: u64 = 0b11;
const HUGE_PAGE: u64 = 1 << 7;
/// Page directories in the identity map: one per GiB of the first 4 GiB.
const DIRECTORIES: u64 = 4;

/// Pages the identity tables take: PML4, PDPT, the page directories.
pub const IDENTITY_TABLE_PAGES: u64 = 2 + DIRECTORIES;

/// Identity page tables mapping the first 4 GiB with 2 MiB pages, to be
/// written at `base` (the PML4; the PDPT and directories follow it).
pub fn identity_tables(base: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; (IDENTITY_TABLE_PAGES * PAGE) as usize];
    let mut put = |page: u64, index: u64, entry: u64| {
        let off = (page * PAGE + index * 8) as usize;
        bytes[off..off + 8].copy_from_slice(&entry.to_le_bytes());
    };
    put(0, 0, (base + PAGE) | PRESENT_WRITABLE);
    for dir in 0..DIRECTORIES {
        put(1, dir, (base + (2 + dir) * PAGE) | PRESENT_WRITABLE);
        for i in 0..512 {
            let gpa = (dir << 30) | (i << 21);
            put(2 + dir, i, gpa | PRESENT_WRITABLE | HUGE_PAGE);
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_segments_are_flat_kernel_segments() {
        let gdt = gdt(CodeMode::Long);
        assert_eq!(gdt[2], 0x00af_9b00_0000_ffff);
        assert_eq!(gdt[3], 0x00cf_9300_0000_ffff);
        let cs = segment(&gdt, BOOT_CS);
        assert_eq!(
            (cs.l, cs.db, cs.dpl, cs.type_, cs.present),
            (1, 0, 0, 0xb, 1)
        );
        assert_eq!((cs.base, cs.limit), (0, 0xffff_ffff));
        let ds = segment(&gdt, BOOT_DS);
        assert_eq!((ds.l, ds.db, ds.type_, ds.s), (0, 1, 3, 1));
        let tss = segment(&gdt, BOOT_TSS);
        assert_eq!((tss.type_, tss.s, tss.present), (0xb, 0, 1));
        let cs32 = segment(&super::gdt(CodeMode::Protected32), BOOT_CS);
        assert_eq!((cs32.l, cs32.db, cs32.g), (0, 1, 1));
        assert_eq!(
            gdt_bytes(CodeMode::Long).len(),
            usize::from(gdt_limit()) + 1
        );
    }

    /// Walks the tables like the MMU.
    fn translate(tables: &[u8], base: u64, va: u64) -> Option<u64> {
        let entry = |table: u64, index: u64| {
            let off = (table - base + index * 8) as usize;
            let e = u64::from_le_bytes(tables[off..off + 8].try_into().unwrap());
            (e & 1 == 1).then_some(e)
        };
        let pml4e = entry(base, (va >> 39) & 511)?;
        let pdpte = entry(pml4e & !0xfff, (va >> 30) & 511)?;
        let pde = entry(pdpte & !0xfff, (va >> 21) & 511)?;
        assert_ne!(pde & HUGE_PAGE, 0);
        Some((pde & !0x1f_ffff) | (va & 0x1f_ffff))
    }

    #[test]
    fn identity_tables_map_the_first_4g_and_nothing_else() {
        let base = 0x9000;
        let t = identity_tables(base);
        for va in [0, 0x7000, 0x100_0200, (3 << 30) + 12345, (4 << 30) - 1] {
            assert_eq!(translate(&t, base, va), Some(va), "{va:#x}");
        }
        assert_eq!(translate(&t, base, 4 << 30), None);
        // Supervisor-only: no user bit anywhere.
        for chunk in t.chunks(8) {
            let e = u64::from_le_bytes(chunk.try_into().unwrap());
            assert_eq!(e & 0b100, 0);
        }
    }
}

//! The payload GDT: flat 64-bit code and data segments at DPL 3 and a TSS.

use kvm_bindings::kvm_segment;

use super::layout::{GDT_GPA, PAGE_TABLES_GPA, TSS_GPA};

/// Selector of the user code segment (index 3, RPL 3).
pub const USER_CS: u16 = (3 << 3) | 3;
/// Selector of the user data segment (index 4, RPL 3).
pub const USER_DS: u16 = (4 << 3) | 3;
/// Selector of the TSS (index 5; a 16-byte descriptor).
pub const TSS_SEL: u16 = 5 << 3;
/// Offset of the I/O permission bitmap in the TSS (right after the 104-byte
/// 64-bit TSS).
pub const TSS_IOMAP_OFFSET: u64 = 0x68;
/// The TSS: header, a bitmap for all 65536 ports, and the 0xff terminator.
pub const TSS_SIZE: u64 = TSS_IOMAP_OFFSET + 8192 + 1;
/// TSS limit (size minus one).
pub const TSS_LIMIT: u32 = (TSS_SIZE - 1) as u32;

// The TSS fits between its place in the payload layout and the page tables.
const _: () = assert!(TSS_GPA + TSS_SIZE <= PAGE_TABLES_GPA);

/// TSS bytes: the I/O bitmap permits every port (each access exits to the
/// VMM, which claims or refuses it with a clear error).
pub fn tss_bytes() -> Vec<u8> {
    let mut tss = vec![0u8; TSS_SIZE as usize];
    tss[0x66..0x68].copy_from_slice(&(TSS_IOMAP_OFFSET as u16).to_le_bytes());
    tss[TSS_SIZE as usize - 1] = 0xff;
    tss
}

/// GDT entries, in order: null, kernel code, kernel data, user code, user
/// data, TSS (two slots).
pub fn entries() -> [u64; 7] {
    let tss = TSS_GPA;
    let limit = u64::from(TSS_LIMIT);
    let tss_low = (limit & 0xffff)
        | (((limit >> 16) & 0xf) << 48)
        | ((tss & 0xff_ffff) << 16)
        | (0x89 << 40) // present, type 9 (available 64-bit TSS)
        | (((tss >> 24) & 0xff) << 56);
    let tss_high = tss >> 32;
    [
        0,
        0x00af_9a00_0000_ffff, // kernel code: L, P, DPL0, execute/read
        0x00cf_9200_0000_ffff, // kernel data: P, DPL0, read/write
        0x00af_fa00_0000_ffff, // user code: L, P, DPL3, execute/read
        0x00cf_f200_0000_ffff, // user data: P, DPL3, read/write
        tss_low,
        tss_high,
    ]
}

/// GDT as bytes, to be written at [`GDT_GPA`].
pub fn table_bytes() -> Vec<u8> {
    entries().iter().flat_map(|e| e.to_le_bytes()).collect()
}

/// GDTR limit.
pub fn limit() -> u16 {
    (entries().len() * 8 - 1) as u16
}

/// GDTR base.
pub const fn base() -> u64 {
    GDT_GPA
}

/// The hidden segment state KVM loads for the 64-bit user code segment.
pub fn user_code() -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector: USER_CS,
        type_: 0xb,
        present: 1,
        dpl: 3,
        db: 0,
        s: 1,
        l: 1,
        g: 1,
        ..Default::default()
    }
}

/// The hidden segment state for the user data segments (DS, ES, FS, GS, SS).
pub fn user_data() -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector: USER_DS,
        type_: 0x3,
        present: 1,
        dpl: 3,
        db: 1,
        s: 1,
        l: 0,
        g: 1,
        ..Default::default()
    }
}

/// The task register (busy 64-bit TSS, as VM entry requires).
pub fn task_register() -> kvm_segment {
    kvm_segment {
        base: TSS_GPA,
        limit: TSS_LIMIT,
        selector: TSS_SEL,
        type_: 0xb,
        present: 1,
        s: 0,
        ..Default::default()
    }
}

/// An unusable LDT.
pub fn ldt() -> kvm_segment {
    kvm_segment {
        type_: 0x2,
        present: 1,
        unusable: 1,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_segments_are_dpl3() {
        let e = entries();
        assert_eq!((e[3] >> 45) & 3, 3);
        assert_eq!((e[4] >> 45) & 3, 3);
        assert_eq!(USER_CS & 3, 3);
        assert_eq!(usize::from(USER_CS >> 3), 3);
        assert_eq!(usize::from(USER_DS >> 3), 4);
    }

    #[test]
    fn tss_descriptor_encodes_base_and_limit() {
        let e = entries();
        let base = ((e[5] >> 16) & 0xff_ffff) | (((e[5] >> 56) & 0xff) << 24) | (e[6] << 32);
        assert_eq!(base, TSS_GPA);
        let tss_limit = (e[5] & 0xffff) | (((e[5] >> 48) & 0xf) << 16);
        assert_eq!(tss_limit, u64::from(TSS_LIMIT));
        assert_eq!(tss_bytes().len() as u64, TSS_SIZE);
        assert_eq!(table_bytes().len(), usize::from(limit()) + 1);
    }
}

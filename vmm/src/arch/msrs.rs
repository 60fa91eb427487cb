//! The MSRs a Linux guest's vCPU boots with: system-call MSRs cleared, the
//! TSC at zero on every vCPU (so they start in sync), fast strings on, and
//! MTRRs on with write-back as the default type (there is no firmware to
//! set them up; a kernel that sees MTRRs off maps all memory uncached).

use kvm_bindings::{Msrs, kvm_msr_entry};

use super::regs::RegsError;

/// `IA32_MISC_ENABLE` bit 0: fast string operations.
const MISC_ENABLE_FAST_STRING: u64 = 1;
/// `IA32_MTRR_DEF_TYPE`: MTRRs enabled (bit 11), default type write-back.
const MTRR_ENABLE_WRITE_BACK: u64 = (1 << 11) | 6;

/// (index, value) of every MSR set at boot.
pub const BOOT_MSRS: [(u32, u64); 11] = [
    (0x174, 0),                       // IA32_SYSENTER_CS
    (0x175, 0),                       // IA32_SYSENTER_ESP
    (0x176, 0),                       // IA32_SYSENTER_EIP
    (0xc000_0081, 0),                 // STAR
    (0xc000_0082, 0),                 // LSTAR
    (0xc000_0083, 0),                 // CSTAR
    (0xc000_0084, 0),                 // SYSCALL_MASK
    (0xc000_0102, 0),                 // KERNEL_GS_BASE
    (0x10, 0),                        // IA32_TSC
    (0x1a0, MISC_ENABLE_FAST_STRING), // IA32_MISC_ENABLE
    (0x2ff, MTRR_ENABLE_WRITE_BACK),  // IA32_MTRR_DEF_TYPE
];

/// The boot MSRs in KVM's form.
pub fn boot_msrs() -> Result<Msrs, RegsError> {
    let entries: Vec<kvm_msr_entry> = BOOT_MSRS
        .iter()
        .map(|&(index, data)| kvm_msr_entry {
            index,
            data,
            ..Default::default()
        })
        .collect();
    Msrs::from_entries(&entries).map_err(|_| RegsError::TooManyEntries("MSR"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_msrs_enable_fast_strings_and_write_back_mtrrs() {
        let msrs = boot_msrs().unwrap();
        let get = |index| {
            msrs.as_slice()
                .iter()
                .find(|e| e.index == index)
                .map(|e| e.data)
        };
        assert_eq!(msrs.as_slice().len(), BOOT_MSRS.len());
        assert_eq!(get(0x1a0), Some(1));
        assert_eq!(get(0x2ff), Some(0x806));
        assert_eq!(get(0x10), Some(0));
    }
}

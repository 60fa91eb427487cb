//! The CPUID a Linux guest's vCPU sees: what KVM supports, marked as a KVM
//! guest (hypervisor bit, `KVMKVMKVM` leaves), with this vCPU's APIC id
//! and a topology of one core per vCPU in one package (leaf 1, leaves
//! 0xb/0x1f, AMD's 0x8000001e and 0x80000008), less the features the
//! host's KVM cannot run in guest kernel mode.

use kvm_bindings::{CpuId, kvm_cpuid_entry2};

use super::regs::RegsError;

const HYPERVISOR_BIT: u32 = 1 << 31;
const CX16_BIT: u32 = 1 << 13;
const HTT_BIT: u32 = 1 << 28;
/// "KVMKVMKVM\0\0\0" in EBX, ECX, EDX.
const KVM_SIGNATURE: [u32; 3] = [0x4b4d_564b, 0x564b_4d56, 0x0000_004d];
const KVM_LEAF: u32 = 0x4000_0000;
/// `KVM_CPUID_FLAG_SIGNIFICANT_INDEX` (missing from kvm-bindings): the
/// entry applies to one sub-leaf.
const KVM_CPUID_FLAG_SIGNIFICANT_INDEX: u32 = 1;
/// Topology level types of leaves 0xb and 0x1f.
const LEVEL_SMT: u32 = 1;
const LEVEL_CORE: u32 = 2;

/// What the host's KVM cannot do that the CPUID must hide.
///
/// Measured on PVM: its emulator of guest kernel mode lacks `cmpxchg16b`
/// and `xsave`/`xrstor`. PVM reports leaf 1 with the host's feature bits
/// added to the VMM's (SSE4, XSAVE, AVX...), except CX16, which follows
/// the VMM's table: CX16 can be hidden, XSAVE cannot (a kernel on PVM
/// needs `noxsave` on its command line to get past its FPU setup).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostQuirks {
    /// Guest kernel code is emulated (PVM) by an emulator without
    /// `cmpxchg16b`: hide CX16 so the kernel does not use it (user code,
    /// which runs natively, then falls back to other atomics too).
    pub no_kernel_cmpxchg16b: bool,
}

impl HostQuirks {
    /// The quirks of the KVM this process runs on: PVM (the `kvm_pvm`
    /// module) emulates guest kernel mode.
    pub fn detect() -> Self {
        HostQuirks {
            no_kernel_cmpxchg16b: std::path::Path::new("/sys/module/kvm_pvm").exists(),
        }
    }
}

/// The CPUID of vCPU `index` (APIC id = index) of `vcpus`, from KVM's
/// supported CPUID `supported`.
pub fn linux_cpuid(
    supported: &CpuId,
    index: u32,
    vcpus: u32,
    quirks: HostQuirks,
) -> Result<CpuId, RegsError> {
    let amd = supported
        .as_slice()
        .iter()
        .find(|e| e.function == 0)
        .is_some_and(|e| matches!(e.ebx, 0x6874_7541 | 0x6f67_7948)); // "Auth", "Hygo"
    let apic_id = index;
    let count = vcpus.clamp(1, 255);
    // Bits of the APIC id that number the cores of the package.
    let core_bits = u32::BITS - (count - 1).leading_zeros();
    let mut entries: Vec<kvm_cpuid_entry2> = Vec::new();
    let mut has_kvm_leaf = false;
    for e in supported.as_slice() {
        let mut e = *e;
        match e.function {
            1 => {
                e.ecx |= HYPERVISOR_BIT;
                if quirks.no_kernel_cmpxchg16b {
                    e.ecx &= !CX16_BIT;
                }
                e.ebx = (e.ebx & 0xffff) | (count << 16) | (apic_id << 24);
                if count > 1 {
                    e.edx |= HTT_BIT;
                }
            }
            // Rebuilt below, all sub-leaves.
            0xb | 0x1f => {
                if e.index == 0 {
                    entries.extend(topology_leaf(e.function, apic_id, count, core_bits));
                }
                continue;
            }
            KVM_LEAF => {
                has_kvm_leaf = true;
                e.eax = e.eax.max(KVM_LEAF + 1);
                [e.ebx, e.ecx, e.edx] = KVM_SIGNATURE;
            }
            0x8000_0008 if amd => {
                e.ecx = (e.ecx & !0xf0ff) | (core_bits << 12) | (count - 1);
            }
            0x8000_001e if amd => {
                e.eax = apic_id;
                // Core id = index, one thread per core; node 0.
                e.ebx = index & 0xff;
                e.ecx = 0;
                e.edx = 0;
            }
            _ => {}
        }
        entries.push(e);
    }
    if !has_kvm_leaf {
        let [ebx, ecx, edx] = KVM_SIGNATURE;
        entries.push(kvm_cpuid_entry2 {
            function: KVM_LEAF,
            eax: KVM_LEAF + 1,
            ebx,
            ecx,
            edx,
            ..Default::default()
        });
    }
    CpuId::from_entries(&entries).map_err(|_| RegsError::TooManyEntries("CPUID"))
}

/// Leaf 0xb or 0x1f: SMT level (one thread per core), core level (`count`
/// cores), then the invalid level that ends the list; EDX is the x2APIC id.
fn topology_leaf(function: u32, apic_id: u32, count: u32, core_bits: u32) -> [kvm_cpuid_entry2; 3] {
    let level = |index: u32, eax: u32, ebx: u32, kind: u32| kvm_cpuid_entry2 {
        function,
        index,
        flags: KVM_CPUID_FLAG_SIGNIFICANT_INDEX,
        eax,
        ebx,
        ecx: (kind << 8) | index,
        edx: apic_id,
        ..Default::default()
    };
    [
        level(0, 0, 1, LEVEL_SMT),
        level(1, core_bits, count, LEVEL_CORE),
        level(2, 0, 0, 0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(function: u32, index: u32, regs: [u32; 4]) -> kvm_cpuid_entry2 {
        kvm_cpuid_entry2 {
            function,
            index,
            eax: regs[0],
            ebx: regs[1],
            ecx: regs[2],
            edx: regs[3],
            ..Default::default()
        }
    }

    /// What this project's AMD PVM host reports, trimmed.
    fn supported() -> CpuId {
        CpuId::from_entries(&[
            entry(0, 0, [0xd, 0x6874_7541, 0x444d_4163, 0x6974_6e65]),
            entry(1, 0, [0x00a0_0f11, 0x0002_0800, 0x8120_2000, 0x078b_fbff]),
            entry(0xb, 0, [0, 0, 0, 0]),
            entry(0x8000_0008, 0, [0x3030, 0x1000_0005, 0x7001, 0]),
            entry(0x8000_001e, 0, [0, 0, 0, 0]),
        ])
        .unwrap()
    }

    fn find(c: &CpuId, function: u32, index: u32) -> kvm_cpuid_entry2 {
        *c.as_slice()
            .iter()
            .find(|e| e.function == function && e.index == index)
            .unwrap()
    }

    #[test]
    fn each_vcpu_gets_its_apic_id_everywhere() {
        for index in 0..4 {
            let c = linux_cpuid(&supported(), index, 4, HostQuirks::default()).unwrap();
            assert_eq!(find(&c, 1, 0).ebx >> 24, index);
            assert_eq!((find(&c, 1, 0).ebx >> 16) & 0xff, 4);
            for sub in 0..3 {
                assert_eq!(find(&c, 0xb, sub).edx, index);
            }
            assert_eq!(find(&c, 0x8000_001e, 0).eax, index);
        }
    }

    #[test]
    fn topology_is_one_core_per_vcpu() {
        let c = linux_cpuid(&supported(), 0, 3, HostQuirks::default()).unwrap();
        let smt = find(&c, 0xb, 0);
        let core = find(&c, 0xb, 1);
        let end = find(&c, 0xb, 2);
        assert_eq!((smt.eax, smt.ebx, (smt.ecx >> 8) & 0xff), (0, 1, 1));
        assert_eq!((core.eax, core.ebx, (core.ecx >> 8) & 0xff), (2, 3, 2));
        assert_eq!((end.ebx, (end.ecx >> 8) & 0xff), (0, 0));
        assert_ne!(find(&c, 1, 0).edx & HTT_BIT, 0);
        assert_eq!(find(&c, 0x8000_0008, 0).ecx & 0xff, 2);
    }

    #[test]
    fn the_guest_knows_it_runs_on_kvm() {
        let c = linux_cpuid(&supported(), 0, 1, HostQuirks::default()).unwrap();
        assert_ne!(find(&c, 1, 0).ecx & HYPERVISOR_BIT, 0);
        let kvm = find(&c, KVM_LEAF, 0);
        let sig: Vec<u8> = [kvm.ebx, kvm.ecx, kvm.edx]
            .iter()
            .flat_map(|r| r.to_le_bytes())
            .collect();
        assert_eq!(&sig, b"KVMKVMKVM\0\0\0");
        assert_eq!(find(&c, 1, 0).edx & HTT_BIT, 0, "one vCPU: no HTT");
    }

    #[test]
    fn cx16_is_hidden_only_on_hosts_that_cannot_emulate_it() {
        let plain = linux_cpuid(&supported(), 0, 1, HostQuirks::default()).unwrap();
        assert_ne!(find(&plain, 1, 0).ecx & CX16_BIT, 0);
        let pvm = linux_cpuid(
            &supported(),
            0,
            1,
            HostQuirks {
                no_kernel_cmpxchg16b: true,
            },
        )
        .unwrap();
        assert_eq!(find(&pvm, 1, 0).ecx & CX16_BIT, 0);
    }
}

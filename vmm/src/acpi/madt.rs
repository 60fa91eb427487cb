//! The Multiple APIC Description Table: the interrupt controllers, which
//! is how an ACPI guest learns how many CPUs it has and brings them up.

use super::sdt::Sdt;
use super::{AcpiConfig, AcpiError, IOAPIC_ADDR, LAPIC_ADDR};

/// MADT revision 5 (ACPI 6.3+). Every entry used here dates from ACPI
/// 1.0; revision 5 only gives the processor Online Capable bit meaning,
/// and that bit stays clear because every declared CPU is enabled.
const REVISION: u8 = 5;

/// MADT flag: a PC-AT dual 8259 is present (KVM's in-kernel PIC), so an
/// OS switching to APIC mode must mask it.
pub const PCAT_COMPAT: u32 = 1;

/// Entry type: Processor Local APIC.
pub const TYPE_LOCAL_APIC: u8 = 0;
/// Entry type: I/O APIC.
pub const TYPE_IO_APIC: u8 = 1;
/// Entry type: Interrupt Source Override.
pub const TYPE_SOURCE_OVERRIDE: u8 = 2;
/// Entry type: Local APIC NMI.
pub const TYPE_LOCAL_APIC_NMI: u8 = 4;

/// Local APIC flag: the processor is enabled (usable now).
pub const LAPIC_ENABLED: u32 = 1;

/// ACPI processor UID meaning "all processors".
const ALL_PROCESSORS: u8 = 0xff;

/// MPS INTI flags 0: polarity and trigger mode conform to the bus, which
/// for ISA is active-high, edge-triggered.
const INTI_CONFORMS: u16 = 0;

/// The local APIC input wired to NMI on every PC: LINT1.
const NMI_LINT: u8 = 1;

/// The I/O APIC's APIC ID: the first one after the vCPUs' (0..vcpus).
/// Distinct from every local APIC ID, as the ACPI and MP specifications
/// ask (Linux on x86_64 reads but does not reprogram it).
pub fn ioapic_id(config: &AcpiConfig) -> Result<u8, AcpiError> {
    config.validate()?;
    u8::try_from(config.vcpus).map_err(|_| AcpiError::TooManyVcpus(config.vcpus))
}

/// A MADT for `config`: one enabled local APIC per vCPU (ACPI processor
/// UID = APIC ID = vCPU index), KVM's I/O APIC with GSIs from 0, the PIT's
/// ISA IRQ 0 on `config.pit_gsi`, and LINT1 as NMI on all processors.
///
/// No override for IRQ 9: a hardware-reduced platform has no SCI. Only
/// xAPIC entries: see [`super::MAX_VCPUS`].
pub fn madt(config: &AcpiConfig) -> Result<Vec<u8>, AcpiError> {
    config.validate()?;
    let mut t = Sdt::new(*b"APIC", REVISION);
    t.u32(LAPIC_ADDR);
    t.u32(PCAT_COMPAT);
    for vcpu in 0..config.vcpus {
        // validate() bounds vcpus to MAX_VCPUS, which fits in a u8.
        let id = u8::try_from(vcpu).map_err(|_| AcpiError::TooManyVcpus(config.vcpus))?;
        t.u8(TYPE_LOCAL_APIC).u8(8);
        t.u8(id); // ACPI processor UID
        t.u8(id); // APIC ID: what KVM gives vCPU `id` by default
        t.u32(LAPIC_ENABLED);
    }
    t.u8(TYPE_IO_APIC).u8(12);
    t.u8(ioapic_id(config)?);
    t.u8(0); // reserved
    t.u32(IOAPIC_ADDR);
    t.u32(0); // global system interrupt base: pins are GSIs 0..24
    t.u8(TYPE_SOURCE_OVERRIDE).u8(10);
    t.u8(0); // bus: ISA
    t.u8(0); // source: ISA IRQ 0, the PIT
    t.u32(config.pit_gsi);
    t.u16(INTI_CONFORMS);
    t.u8(TYPE_LOCAL_APIC_NMI).u8(6);
    t.u8(ALL_PROCESSORS);
    t.u16(INTI_CONFORMS);
    t.u8(NMI_LINT);
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acpi::sdt::{HEADER_LEN, byte_sum};

    #[test]
    fn layout_for_two_vcpus() {
        let b = madt(&AcpiConfig::new(2)).unwrap();
        assert_eq!(byte_sum(&b), 0);
        assert_eq!(&b[..4], b"APIC");
        let mut expected = vec![];
        expected.extend_from_slice(&0xfee0_0000u32.to_le_bytes());
        expected.extend_from_slice(&1u32.to_le_bytes());
        expected.extend_from_slice(&[0, 8, 0, 0, 1, 0, 0, 0]);
        expected.extend_from_slice(&[0, 8, 1, 1, 1, 0, 0, 0]);
        expected.extend_from_slice(&[1, 12, 2, 0, 0, 0, 0xc0, 0xfe, 0, 0, 0, 0]);
        expected.extend_from_slice(&[2, 10, 0, 0, 0, 0, 0, 0, 0, 0]);
        expected.extend_from_slice(&[4, 6, 0xff, 0, 0, 1]);
        assert_eq!(&b[HEADER_LEN..], &expected[..]);
    }

    #[test]
    fn pit_override_follows_the_config() {
        let config = AcpiConfig {
            pit_gsi: 2,
            ..AcpiConfig::new(1)
        };
        let b = madt(&config).unwrap();
        let iso = HEADER_LEN + 8 + 8 + 12;
        assert_eq!(&b[iso..iso + 10], &[2, 10, 0, 0, 2, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn refuses_what_xapic_cannot_address() {
        assert!(matches!(madt(&AcpiConfig::new(0)), Err(AcpiError::NoVcpus)));
        assert!(matches!(
            madt(&AcpiConfig::new(255)),
            Err(AcpiError::TooManyVcpus(255))
        ));
        let bad_pit = AcpiConfig {
            pit_gsi: 24,
            ..AcpiConfig::new(1)
        };
        assert!(matches!(madt(&bad_pit), Err(AcpiError::PitGsi(24))));
    }
}

//! [`AcpiConfig`]: what the ACPI tables describe (the vCPUs and the PIT's
//! interrupt line), and the checks that the tables can describe it.

use super::error::AcpiError;
use super::platform::{IOAPIC_PINS, MAX_VCPUS};

/// What the tables describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcpiConfig {
    /// vCPUs, 1..=[`MAX_VCPUS`]. vCPU i has ACPI processor UID i and APIC
    /// ID i, so KVM_CREATE_VCPU's id and the CPUID APIC IDs must be i too.
    pub vcpus: u32,
    /// The I/O APIC input (GSI) the PIT's ISA IRQ 0 reaches. KVM's default
    /// GSI routing (in force until the VMM calls KVM_SET_GSI_ROUTING) wires
    /// ISA IRQ n to I/O APIC pin n, so the PIT is on GSI 0, not on GSI 2
    /// as on real PCs and QEMU (which installs its own routing). Declaring
    /// 2 without that routing would send IRQ 0 to a silent pin.
    pub pit_gsi: u32,
}

impl AcpiConfig {
    /// `vcpus` vCPUs on KVM's default interrupt routing.
    pub fn new(vcpus: u32) -> Self {
        Self { vcpus, pit_gsi: 0 }
    }

    /// Checks the config is describable.
    pub fn validate(&self) -> Result<(), AcpiError> {
        if self.vcpus == 0 {
            return Err(AcpiError::NoVcpus);
        }
        if self.vcpus > MAX_VCPUS {
            return Err(AcpiError::TooManyVcpus(self.vcpus));
        }
        if self.pit_gsi >= IOAPIC_PINS {
            return Err(AcpiError::PitGsi(self.pit_gsi));
        }
        Ok(())
    }
}

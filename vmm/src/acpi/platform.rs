//! The platform the ACPI tables describe: where KVM's in-kernel local
//! APICs and I/O APIC sit, the I/O APIC's pins, and how many vCPUs xAPIC
//! IDs can address. The devices themselves are built elsewhere; these
//! must match them.

/// Physical address of every vCPU's local APIC (the architectural
/// default, where KVM's in-kernel LAPIC sits).
pub const LAPIC_ADDR: u32 = 0xfee0_0000;

/// Physical address of KVM's in-kernel I/O APIC.
pub const IOAPIC_ADDR: u32 = 0xfec0_0000;

/// Input pins on KVM's in-kernel I/O APIC: GSIs 0..24.
pub const IOAPIC_PINS: u32 = 24;

/// Most vCPUs the tables describe. xAPIC IDs are 8 bits and 0xff is the
/// broadcast ID, leaving 0..=254; the I/O APIC takes the ID after the
/// last vCPU's, so 254 vCPUs (IDs 0..=253) plus the I/O APIC (254). More
/// would need x2APIC entries, and a guest can only use APIC IDs above 254
/// in x2APIC mode with interrupt remapping or KVM's extended destination
/// ID, neither of which tiervisor offers; so more is refused.
pub const MAX_VCPUS: u32 = 254;

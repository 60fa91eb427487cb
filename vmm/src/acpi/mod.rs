//! ACPI tables for Linux guests: what lets an unmodified kernel without an
//! MP-table parser find its vCPUs, interrupt controllers and ISA devices.
//!
//! This module owns the tables' contents (RSDP, XSDT, FADT, MADT, DSDT;
//! builders in [`rsdp()`], [`xsdt()`], [`fadt()`], [`madt()`], [`dsdt()`])
//! and where they live in guest memory ([`build_tables`],
//! [`write_tables`]). It does not own the devices they describe: the
//! in-kernel PIC, I/O APIC ([`IOAPIC_ADDR`]) and local APICs
//! ([`LAPIC_ADDR`]), the PIT, the 16550 at 0x3f8 (IRQ 4) and the i8042 at
//! 0x60/0x64 (IRQ 1) are built elsewhere; the constants here must match
//! them.
//!
//! Guest memory layout, all inside 0xe0000..0xf0000 (each table 16-byte
//! aligned, in this order; only the MADT's size depends on the config):
//!
//! | address | table | bytes                                 |
//! |---------|-------|---------------------------------------|
//! | 0xe0000 | RSDP  | 36                                    |
//! | 0xe0030 | XSDT  | 52 (two entries: FADT, MADT)          |
//! | 0xe0070 | FADT  | 276                                   |
//! | 0xe0190 | DSDT  | 234                                   |
//! | 0xe0280 | MADT  | 72 + 8 per vCPU (2104 at 254 vCPUs)   |
//!
//! Why there: 0xe0000..0x100000 is the BIOS read-only area, where a kernel
//! scans for the RSDP on 16-byte boundaries when the boot protocol gives
//! it no address (`boot_params.acpi_rsdp_addr` is 0), and the e820 map
//! reserves 0x9fc00..0x100000, so the kernel neither allocates nor
//! overwrites the tables. They stop below 0xf0000 to leave 0xf0000.. for
//! an MP table or SMBIOS entry point. Everything is below 4 GiB, so the
//! 32-bit DSDT pointer is filled as well as the 64-bit one.

mod aml;
mod dsdt;
mod fadt;
mod madt;
mod rsdp;
mod sdt;
mod xsdt;

#[cfg(test)]
mod iasl_tests;
#[cfg(test)]
mod tests;

use thiserror::Error;
use vm_memory::{Bytes, GuestAddress, GuestMemory, GuestMemoryError};

pub use dsdt::dsdt;
pub use fadt::{FADT_LEN, fadt};
pub use madt::{ioapic_id, madt};
pub use rsdp::{RSDP_LEN, RSDP_SIGNATURE, rsdp};
pub use xsdt::{xsdt, xsdt_len};

/// Where the RSDP goes: the start of the BIOS area Linux scans, 16-byte
/// aligned as the scan requires.
pub const RSDP_ADDR: GuestAddress = GuestAddress(0xe_0000);

/// End (exclusive) of the window the tables must fit in.
pub const TABLES_END: GuestAddress = GuestAddress(0xf_0000);

/// Alignment of each table after the RSDP.
const TABLE_ALIGN: u64 = 16;

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

/// Errors building or writing ACPI tables.
#[derive(Debug, Error)]
pub enum AcpiError {
    /// A guest needs at least one vCPU.
    #[error("an ACPI guest needs at least one vcpu")]
    NoVcpus,
    /// More vCPUs than xAPIC IDs.
    #[error("{0} vcpus exceed the {MAX_VCPUS} that xapic ids can address")]
    TooManyVcpus(u32),
    /// The PIT's GSI is not an I/O APIC pin.
    #[error("pit gsi {0} is not an i/o apic pin (0..{IOAPIC_PINS})")]
    PitGsi(u32),
    /// An AML package longer than PkgLength can encode.
    #[error("aml package of {len} bytes exceeds the pkglength maximum {max}")]
    AmlTooLong {
        /// Bytes in the package body.
        len: usize,
        /// Largest encodable total.
        max: usize,
    },
    /// An AML package with more elements than its count byte holds.
    #[error("aml package of {0} elements exceeds 255")]
    AmlTooManyElements(usize),
    /// A table longer than its 32-bit length field.
    #[error("{signature} table of {len} bytes overflows its length field")]
    TableTooLarge {
        /// The table's signature.
        signature: String,
        /// Its length.
        len: usize,
    },
    /// The tables do not fit below [`TABLES_END`].
    #[error("acpi tables end at {end:#x}, past the window end {limit:#x}")]
    NoRoom {
        /// Where the last table would end.
        end: u64,
        /// [`TABLES_END`].
        limit: u64,
    },
    /// Writing a table to guest memory failed.
    #[error("writing the {table} table to guest memory at {addr:#x}")]
    Write {
        /// The table's signature.
        table: String,
        /// Where it was going.
        addr: u64,
        /// The cause.
        #[source]
        source: GuestMemoryError,
    },
}

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

/// One table and where it goes in guest memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcpiTable {
    /// Its signature ("RSD PTR " is cut to "RSD ").
    pub signature: [u8; 4],
    /// Guest physical address.
    pub addr: GuestAddress,
    /// Its bytes, checksums included.
    pub bytes: Vec<u8>,
}

/// All tables for `config`, laid out from [`RSDP_ADDR`]: RSDP, XSDT, FADT,
/// DSDT, MADT, in that order (the MADT last because only it grows).
pub fn build_tables(config: &AcpiConfig) -> Result<Vec<AcpiTable>, AcpiError> {
    config.validate()?;
    let dsdt = dsdt()?;
    let madt = madt(config)?;
    let mut next = RSDP_ADDR.0 + RSDP_LEN as u64;
    let mut place = |len: usize| {
        let addr = next.next_multiple_of(TABLE_ALIGN);
        next = addr + len as u64;
        GuestAddress(addr)
    };
    let xsdt_addr = place(xsdt_len(2));
    let fadt_addr = place(FADT_LEN);
    let dsdt_addr = place(dsdt.len());
    let madt_addr = place(madt.len());
    if next > TABLES_END.0 {
        return Err(AcpiError::NoRoom {
            end: next,
            limit: TABLES_END.0,
        });
    }
    let table = |signature: &[u8; 4], addr, bytes| AcpiTable {
        signature: *signature,
        addr,
        bytes,
    };
    Ok(vec![
        table(b"RSD ", RSDP_ADDR, rsdp(xsdt_addr)),
        table(b"XSDT", xsdt_addr, xsdt(&[fadt_addr, madt_addr])?),
        table(b"FACP", fadt_addr, fadt(dsdt_addr)?),
        table(b"DSDT", dsdt_addr, dsdt),
        table(b"APIC", madt_addr, madt),
    ])
}

/// Writes the tables for `config` into guest memory and returns the
/// RSDP's address, for `boot_params.acpi_rsdp_addr`.
pub fn write_tables(
    mem: &impl GuestMemory,
    config: &AcpiConfig,
) -> Result<GuestAddress, AcpiError> {
    for t in build_tables(config)? {
        mem.write_slice(&t.bytes, t.addr)
            .map_err(|source| AcpiError::Write {
                table: String::from_utf8_lossy(&t.signature).into_owned(),
                addr: t.addr.0,
                source,
            })?;
    }
    Ok(RSDP_ADDR)
}

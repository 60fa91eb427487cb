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
mod config;
mod dsdt;
mod error;
mod fadt;
mod madt;
mod platform;
mod rsdp;
mod sdt;
mod xsdt;

#[cfg(test)]
mod iasl_tests;
#[cfg(test)]
mod tests;

use vm_memory::{Bytes, GuestAddress, GuestMemory};

pub use config::AcpiConfig;
pub use dsdt::dsdt;
pub use error::AcpiError;
pub use fadt::{FADT_LEN, fadt};
pub use madt::{ioapic_id, madt};
pub use platform::{IOAPIC_ADDR, IOAPIC_PINS, LAPIC_ADDR, MAX_VCPUS};
pub use rsdp::{RSDP_LEN, RSDP_SIGNATURE, rsdp};
pub use xsdt::{xsdt, xsdt_len};

/// Where the RSDP goes: the start of the BIOS area Linux scans, 16-byte
/// aligned as the scan requires.
pub const RSDP_ADDR: GuestAddress = GuestAddress(0xe_0000);

/// End (exclusive) of the window the tables must fit in.
pub const TABLES_END: GuestAddress = GuestAddress(0xf_0000);

/// Alignment of each table after the RSDP.
const TABLE_ALIGN: u64 = 16;

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

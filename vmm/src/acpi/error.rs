//! [`AcpiError`]: why the ACPI tables could not be built or written.

use thiserror::Error;
use vm_memory::GuestMemoryError;

use super::platform::{IOAPIC_PINS, MAX_VCPUS};

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
    /// The tables do not fit below [`TABLES_END`](super::TABLES_END).
    #[error("acpi tables end at {end:#x}, past the window end {limit:#x}")]
    NoRoom {
        /// Where the last table would end.
        end: u64,
        /// [`TABLES_END`](super::TABLES_END).
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

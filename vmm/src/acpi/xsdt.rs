//! The Extended System Description Table: the list of 64-bit table
//! addresses the RSDP points at.

use vm_memory::GuestAddress;

use super::AcpiError;
use super::sdt::{HEADER_LEN, Sdt};

/// Bytes in an XSDT listing `entries` tables.
pub const fn xsdt_len(entries: usize) -> usize {
    HEADER_LEN + 8 * entries
}

/// An XSDT listing the tables at `entries`. The DSDT is not one of them:
/// the FADT points to it.
pub fn xsdt(entries: &[GuestAddress]) -> Result<Vec<u8>, AcpiError> {
    let mut t = Sdt::new(*b"XSDT", 1);
    for e in entries {
        t.u64(e.0);
    }
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acpi::sdt::byte_sum;

    #[test]
    fn lists_each_entry_in_order() {
        let b = xsdt(&[GuestAddress(0xe_0080), GuestAddress(0xe_0200)]).unwrap();
        assert_eq!(b.len(), xsdt_len(2));
        assert_eq!(byte_sum(&b), 0);
        assert_eq!(&b[..4], b"XSDT");
        assert_eq!(u64::from_le_bytes(b[36..44].try_into().unwrap()), 0xe_0080);
        assert_eq!(u64::from_le_bytes(b[44..52].try_into().unwrap()), 0xe_0200);
    }
}

//! The Root System Description Pointer: the one structure a guest finds
//! by address (boot_params.acpi_rsdp_addr) or by scanning the BIOS area,
//! and the start of the walk to every other table.

use vm_memory::GuestAddress;

use super::sdt::{OEM_ID, checksum};

/// Bytes in an ACPI 2.0+ RSDP.
pub const RSDP_LEN: usize = 36;

/// The RSDP's signature.
pub const RSDP_SIGNATURE: [u8; 8] = *b"RSD PTR ";

/// Bytes the ACPI 1.0 checksum covers.
const V1_LEN: usize = 20;

/// An ACPI 2.0+ RSDP (revision 2) pointing at the XSDT at `xsdt_addr`.
///
/// The 32-bit RSDT address is 0: there is no RSDT, because every parser
/// of revision-2 RSDPs (Linux's ACPICA included) takes the XSDT, and one
/// root table is one less to keep consistent. `acpi=rsdt` therefore does
/// not work in the guest.
pub fn rsdp(xsdt_addr: GuestAddress) -> Vec<u8> {
    let mut b = Vec::with_capacity(RSDP_LEN);
    b.extend_from_slice(&RSDP_SIGNATURE);
    b.push(0); // checksum of the first 20 bytes, below
    b.extend_from_slice(&OEM_ID);
    b.push(2); // revision: ACPI 2.0 and later
    b.extend_from_slice(&0u32.to_le_bytes()); // RSDT address: none
    b.extend_from_slice(&(RSDP_LEN as u32).to_le_bytes());
    b.extend_from_slice(&xsdt_addr.0.to_le_bytes());
    b.push(0); // extended checksum of all 36 bytes, below
    b.extend_from_slice(&[0; 3]); // reserved
    debug_assert_eq!(b.len(), RSDP_LEN);
    b[8] = checksum(&b[..V1_LEN]);
    b[32] = checksum(&b);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acpi::sdt::byte_sum;

    #[test]
    fn both_checksums_hold_and_the_xsdt_address_is_recorded() {
        for addr in [0xe_0040, 0x1234_5678_9abc, 0] {
            let b = rsdp(GuestAddress(addr));
            assert_eq!(b.len(), RSDP_LEN);
            assert_eq!(&b[..8], b"RSD PTR ");
            assert_eq!(byte_sum(&b[..20]), 0);
            assert_eq!(byte_sum(&b), 0);
            assert_eq!(b[15], 2);
            assert_eq!(&b[9..15], b"TIERVR");
            assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 36);
            assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), addr);
        }
    }
}

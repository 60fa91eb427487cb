//! The System Description Table header every ACPI table but the RSDP
//! starts with, and the byte checksums that make a table valid.

use super::AcpiError;

/// Bytes in a System Description Table header.
pub const HEADER_LEN: usize = 36;

/// OEM ID in the RSDP and every table header.
pub const OEM_ID: [u8; 6] = *b"TIERVR";

/// Byte offset of the length field in a table header.
pub const LENGTH_OFFSET: usize = 4;

/// Byte offset of the checksum field in a table header.
pub const CHECKSUM_OFFSET: usize = 9;

/// The OEM table ID prefix; the table's signature completes it
/// ("TIERFACP", "TIERAPIC", ...), so each table is named distinctly.
const OEM_TABLE_ID_PREFIX: [u8; 4] = *b"TIER";

/// Creator ID: who built the table (for the DSDT: which "ASL compiler").
const CREATOR_ID: [u8; 4] = *b"TIER";

/// The 8-bit wrapping sum of `bytes`; a valid table sums to 0.
pub fn byte_sum(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |sum, b| sum.wrapping_add(*b))
}

/// The checksum byte that makes `bytes` (with the checksum field still 0)
/// sum to 0.
pub fn checksum(bytes: &[u8]) -> u8 {
    0u8.wrapping_sub(byte_sum(bytes))
}

/// A table under construction: header first, body appended, length and
/// checksum filled in by [`Sdt::finish`].
#[derive(Debug)]
pub struct Sdt {
    signature: [u8; 4],
    bytes: Vec<u8>,
}

impl Sdt {
    /// Starts a table with `signature` and table `revision`.
    pub fn new(signature: [u8; 4], revision: u8) -> Self {
        let mut bytes = Vec::with_capacity(256);
        bytes.extend_from_slice(&signature);
        bytes.extend_from_slice(&0u32.to_le_bytes()); // length, set by finish
        bytes.push(revision);
        bytes.push(0); // checksum, set by finish
        bytes.extend_from_slice(&OEM_ID);
        bytes.extend_from_slice(&OEM_TABLE_ID_PREFIX);
        bytes.extend_from_slice(&signature);
        bytes.extend_from_slice(&1u32.to_le_bytes()); // OEM revision
        bytes.extend_from_slice(&CREATOR_ID);
        bytes.extend_from_slice(&1u32.to_le_bytes()); // creator revision
        debug_assert_eq!(bytes.len(), HEADER_LEN);
        Self { signature, bytes }
    }

    /// Appends one byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes.push(v);
        self
    }

    /// Appends a little-endian u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Appends a little-endian u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Appends a little-endian u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(v);
        self
    }

    /// Bytes so far, header included: the offset the next field lands at.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Fills in the length and checksum and returns the table.
    pub fn finish(mut self) -> Result<Vec<u8>, AcpiError> {
        let len = u32::try_from(self.bytes.len()).map_err(|_| AcpiError::TableTooLarge {
            signature: String::from_utf8_lossy(&self.signature).into_owned(),
            len: self.bytes.len(),
        })?;
        self.bytes[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&len.to_le_bytes());
        self.bytes[CHECKSUM_OFFSET] = checksum(&self.bytes);
        Ok(self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_table_sums_to_zero_and_records_its_length() {
        let mut t = Sdt::new(*b"TEST", 3);
        t.u8(0xab).u16(0x1234).u32(0xdead_beef).u64(u64::MAX);
        let bytes = t.finish().unwrap();
        assert_eq!(bytes.len(), HEADER_LEN + 15);
        assert_eq!(byte_sum(&bytes), 0);
        assert_eq!(&bytes[0..4], b"TEST");
        assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()), 51);
        assert_eq!(bytes[8], 3);
        assert_eq!(&bytes[10..16], b"TIERVR");
        assert_eq!(&bytes[16..24], b"TIERTEST");
        assert_eq!(&bytes[36..39], &[0xab, 0x34, 0x12]);
    }

    #[test]
    fn checksum_balances_any_bytes() {
        for data in [&b""[..], b"\x01", b"\xff\xff\xff", b"RSD PTR "] {
            let mut v = data.to_vec();
            v.push(checksum(data));
            assert_eq!(byte_sum(&v), 0, "{data:?}");
        }
    }
}

//! A small ACPI Machine Language encoder: just the terms a static DSDT of
//! ISA devices needs (Scope, Device, Name, integers, strings, EISA IDs,
//! Buffer, Package, resource templates of fixed I/O ports and ISA IRQs),
//! and the one method body the power button needs (Method, Notify).
//!
//! Encodings follow ACPI 6.5 chapter 20 (AML) and section 6.4 (resource
//! data types).

use super::AcpiError;

const ZERO_OP: u8 = 0x00;
const ONE_OP: u8 = 0x01;
const NAME_OP: u8 = 0x08;
const BYTE_PREFIX: u8 = 0x0a;
const WORD_PREFIX: u8 = 0x0b;
const DWORD_PREFIX: u8 = 0x0c;
const QWORD_PREFIX: u8 = 0x0e;
const SCOPE_OP: u8 = 0x10;
const STRING_PREFIX: u8 = 0x0d;
const DUAL_NAME_PREFIX: u8 = 0x2e;
const BUFFER_OP: u8 = 0x11;
const PACKAGE_OP: u8 = 0x12;
const METHOD_OP: u8 = 0x14;
const NOTIFY_OP: u8 = 0x86;
const EXT_OP_PREFIX: u8 = 0x5b;
const DEVICE_OP: u8 = 0x82;
const ROOT_CHAR: u8 = b'\\';

/// Small resource descriptor: I/O port (tag 8, 7 bytes).
const RES_IO: u8 = 0x47;
/// Small resource descriptor: IRQ without flags (tag 4, 2 bytes).
const RES_IRQ_NO_FLAGS: u8 = 0x22;
/// Small resource descriptor: end tag (tag 0xf, 1 byte).
const RES_END_TAG: u8 = 0x79;
/// I/O descriptor information: the device decodes 16 address bits.
const IO_DECODE16: u8 = 1;

/// The largest total a PkgLength can encode: 28 bits.
const PKG_LENGTH_MAX: usize = (1 << 28) - 1;

/// Encodes a PkgLength for `body_len` bytes that follow it. The encoded
/// length counts the PkgLength bytes themselves, so its size is chosen
/// first: one byte holds totals below 2^6; n extra bytes hold totals
/// below 2^(4 + 8n), with the lead byte's bits 7-6 saying n and its bits
/// 3-0 holding the lowest nibble.
pub fn pkg_length(body_len: usize) -> Result<Vec<u8>, AcpiError> {
    if body_len < (1 << 6) - 1 {
        return Ok(vec![(body_len + 1) as u8]);
    }
    for extra in 1..=3usize {
        let total = body_len + 1 + extra;
        if total < 1 << (4 + 8 * extra) {
            let mut out = Vec::with_capacity(1 + extra);
            out.push(((extra as u8) << 6) | (total & 0x0f) as u8);
            for i in 0..extra {
                out.push(((total >> (4 + 8 * i)) & 0xff) as u8);
            }
            return Ok(out);
        }
    }
    Err(AcpiError::AmlTooLong {
        len: body_len,
        max: PKG_LENGTH_MAX,
    })
}

/// `body` prefixed by its PkgLength.
fn with_pkg_length(body: &[u8]) -> Result<Vec<u8>, AcpiError> {
    let mut out = pkg_length(body.len())?;
    out.extend_from_slice(body);
    Ok(out)
}

/// `Scope (\NAME) { body }` for a name in the root.
pub fn root_scope(name: [u8; 4], body: &[u8]) -> Result<Vec<u8>, AcpiError> {
    let mut inner = vec![ROOT_CHAR];
    inner.extend_from_slice(&name);
    inner.extend_from_slice(body);
    let mut out = vec![SCOPE_OP];
    out.extend(with_pkg_length(&inner)?);
    Ok(out)
}

/// `Device (NAME) { body }`.
pub fn device(name: [u8; 4], body: &[u8]) -> Result<Vec<u8>, AcpiError> {
    let mut inner = name.to_vec();
    inner.extend_from_slice(body);
    let mut out = vec![EXT_OP_PREFIX, DEVICE_OP];
    out.extend(with_pkg_length(&inner)?);
    Ok(out)
}

/// `Name (NAME, value)`, `value` an encoded data object.
pub fn name(name: [u8; 4], value: &[u8]) -> Vec<u8> {
    let mut out = vec![NAME_OP];
    out.extend_from_slice(&name);
    out.extend_from_slice(value);
    out
}

/// A String object `"text"`: ASCII without NUL (ASL string literals
/// used as IDs, like `"ACPI0013"`).
pub fn string(text: &str) -> Vec<u8> {
    debug_assert!(text.bytes().all(|b| b.is_ascii() && b != 0));
    let mut out = vec![STRING_PREFIX];
    out.extend_from_slice(text.as_bytes());
    out.push(0);
    out
}

/// `Method (NAME, args, NotSerialized) { body }` (`args` 0..=7).
pub fn method(name: [u8; 4], args: u8, body: &[u8]) -> Result<Vec<u8>, AcpiError> {
    debug_assert!(args <= 7, "a method takes at most 7 arguments");
    let mut inner = name.to_vec();
    // MethodFlags: ArgCount in bits 0-2; not serialized, sync level 0.
    inner.push(args & 0x07);
    inner.extend_from_slice(body);
    let mut out = vec![METHOD_OP];
    out.extend(with_pkg_length(&inner)?);
    Ok(out)
}

/// `Notify (\SCOPE.DEVICE, value)`: a notification to a device of a
/// root scope, by its absolute path.
pub fn notify(scope: [u8; 4], device: [u8; 4], value: u8) -> Vec<u8> {
    let mut out = vec![NOTIFY_OP, ROOT_CHAR, DUAL_NAME_PREFIX];
    out.extend_from_slice(&scope);
    out.extend_from_slice(&device);
    out.extend(integer(u64::from(value)));
    out
}

/// `Package () { elements }`, each element an encoded data object (at
/// most 255 of them: the short NumElements form).
pub fn package(elements: &[Vec<u8>]) -> Result<Vec<u8>, AcpiError> {
    let count =
        u8::try_from(elements.len()).map_err(|_| AcpiError::AmlTooManyElements(elements.len()))?;
    let mut body = vec![count];
    for e in elements {
        body.extend_from_slice(e);
    }
    let mut out = vec![PACKAGE_OP];
    out.extend(with_pkg_length(&body)?);
    Ok(out)
}

/// An integer in its shortest encoding (Zero, One, Byte/Word/DWord/QWord
/// constant), as iasl emits it.
pub fn integer(v: u64) -> Vec<u8> {
    match v {
        0 => vec![ZERO_OP],
        1 => vec![ONE_OP],
        _ => {
            let (prefix, width) = if v <= 0xff {
                (BYTE_PREFIX, 1)
            } else if v <= 0xffff {
                (WORD_PREFIX, 2)
            } else if v <= 0xffff_ffff {
                (DWORD_PREFIX, 4)
            } else {
                (QWORD_PREFIX, 8)
            };
            let mut out = vec![prefix];
            out.extend_from_slice(&v.to_le_bytes()[..width]);
            out
        }
    }
}

/// The 32-bit compressed EISA ID of a 7-character PnP ID like "PNP0501"
/// (ASL `EisaId`): three letters of 5 bits each, then four hex digits,
/// stored so the bytes read in the ID's order. A `const fn`, so a
/// malformed literal fails the build rather than a boot.
pub const fn eisa_id(id: [u8; 7]) -> u32 {
    let mut i = 0;
    while i < 3 {
        assert!(id[i].is_ascii_uppercase(), "EISA ID vendor must be A-Z");
        i += 1;
    }
    let vendor =
        (((id[0] - 0x40) as u32) << 10) | (((id[1] - 0x40) as u32) << 5) | ((id[2] - 0x40) as u32);
    let mut product = 0u32;
    while i < 7 {
        let d = match id[i] {
            b'0'..=b'9' => id[i] - b'0',
            b'A'..=b'F' => id[i] - b'A' + 10,
            _ => panic!("EISA ID product must be hex digits 0-9, A-F"),
        };
        product = (product << 4) | d as u32;
        i += 1;
    }
    // Big-endian vendor then big-endian product, read as a little-endian
    // DWORD.
    u32::from_le_bytes([
        (vendor >> 8) as u8,
        vendor as u8,
        (product >> 8) as u8,
        product as u8,
    ])
}

/// An EISA ID as an AML integer (always a DWordConst, as iasl emits it).
pub fn eisa_id_object(id: u32) -> Vec<u8> {
    let mut out = vec![DWORD_PREFIX];
    out.extend_from_slice(&id.to_le_bytes());
    out
}

/// `Buffer () { bytes }`.
pub fn buffer(bytes: &[u8]) -> Result<Vec<u8>, AcpiError> {
    let mut inner = integer(bytes.len() as u64);
    inner.extend_from_slice(bytes);
    let mut out = vec![BUFFER_OP];
    out.extend(with_pkg_length(&inner)?);
    Ok(out)
}

/// A `ResourceTemplate ()` under construction: resource descriptors, then
/// the end tag added by [`ResourceTemplate::finish`].
#[derive(Debug, Default)]
pub struct ResourceTemplate {
    bytes: Vec<u8>,
}

impl ResourceTemplate {
    /// An empty template.
    pub fn new() -> Self {
        Self::default()
    }

    /// `IO (Decode16, port, port, 1, len)`: `len` ports fixed at `port`.
    pub fn io(mut self, port: u16, len: u8) -> Self {
        let [lo, hi] = port.to_le_bytes();
        self.bytes
            .extend_from_slice(&[RES_IO, IO_DECODE16, lo, hi, lo, hi, 1, len]);
        self
    }

    /// `IRQNoFlags () {irq}`: ISA IRQ `irq` (0..16), edge-triggered,
    /// active-high, exclusive.
    pub fn irq_no_flags(mut self, irq: u8) -> Self {
        debug_assert!(irq < 16, "ISA IRQs are 0..16");
        let [lo, hi] = (1u16 << (irq & 0x0f)).to_le_bytes();
        self.bytes.extend_from_slice(&[RES_IRQ_NO_FLAGS, lo, hi]);
        self
    }

    /// The template as a `Buffer`, ended by an end tag whose checksum
    /// makes the descriptors sum to 0 (ACPI allows 0 for "no checksum";
    /// a real one costs nothing).
    pub fn finish(mut self) -> Result<Vec<u8>, AcpiError> {
        self.bytes.push(RES_END_TAG);
        let sum = super::sdt::checksum(&self.bytes);
        self.bytes.push(sum);
        buffer(&self.bytes)
    }
}

#[cfg(test)]
pub mod decode {
    //! Test-only AML decoding: the inverse of the encoder above, strict
    //! enough to reject anything it did not expect.

    /// Decodes a PkgLength at the start of `b`: (total length including
    /// the PkgLength bytes, PkgLength bytes).
    pub fn pkg_length(b: &[u8]) -> (usize, usize) {
        let lead = b[0];
        let extra = usize::from(lead >> 6);
        if extra == 0 {
            return (usize::from(lead & 0x3f), 1);
        }
        assert_eq!(lead & 0x30, 0, "bits 5-4 of a multi-byte PkgLength lead");
        let mut total = usize::from(lead & 0x0f);
        for i in 0..extra {
            total |= usize::from(b[1 + i]) << (4 + 8 * i);
        }
        (total, 1 + extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkg_length_round_trips_across_every_size_boundary() {
        let mut lens: Vec<usize> = (0..300).collect();
        for boundary in [1usize << 6, 1 << 12, 1 << 20, 1 << 28] {
            lens.extend(boundary.saturating_sub(6)..boundary + 6);
        }
        for body in lens {
            let Ok(enc) = pkg_length(body) else {
                assert!(body + 4 > PKG_LENGTH_MAX, "{body} should encode");
                continue;
            };
            let (total, used) = decode::pkg_length(&enc);
            assert_eq!(used, enc.len(), "body {body}");
            assert_eq!(total, body + used, "body {body}");
            // Shortest encoding: one byte fewer could not hold the total.
            let limit = [1usize << 6, 1 << 12, 1 << 20, 1 << 28][used - 1];
            assert!(total < limit, "body {body}");
            if used > 1 {
                let smaller = [1usize << 6, 1 << 12, 1 << 20][used - 2];
                let total_one_byte_shorter = body + used - 1;
                assert!(total_one_byte_shorter >= smaller, "body {body} not minimal");
            }
        }
    }

    #[test]
    fn pkg_length_known_encodings() {
        assert_eq!(pkg_length(0).unwrap(), [0x01]);
        assert_eq!(pkg_length(62).unwrap(), [0x3f]);
        // 63 + 2 = 65 = 0x41: lead 0b01 << 6 | 0x1, then 0x04.
        assert_eq!(pkg_length(63).unwrap(), [0x41, 0x04]);
        assert!(pkg_length(PKG_LENGTH_MAX).is_err());
    }

    #[test]
    fn strings_methods_and_notify_encode_as_iasl_does() {
        assert_eq!(string("ACPI0013"), b"\x0dACPI0013\0");
        // Method (_EVT, 1, NotSerialized) { Notify (\_SB.PWRB, 0x80) }
        let body = notify(*b"_SB_", *b"PWRB", 0x80);
        assert_eq!(body, b"\x86\\\x2e_SB_PWRB\x0a\x80");
        let m = method(*b"_EVT", 1, &body).unwrap();
        assert_eq!(m[0], 0x14);
        let (total, used) = decode::pkg_length(&m[1..]);
        assert_eq!(total, m.len() - 1);
        assert_eq!(&m[1 + used..1 + used + 5], b"_EVT\x01");
        assert_eq!(&m[1 + used + 5..], body);
    }

    #[test]
    fn eisa_ids_match_iasl() {
        // iasl: EisaId ("PNP0501") = 0x0105D041, EisaId ("PNP0303") = 0x0303D041.
        assert_eq!(eisa_id(*b"PNP0501"), 0x0105_d041);
        assert_eq!(eisa_id(*b"PNP0303"), 0x0303_d041);
        assert_eq!(eisa_id(*b"PNP0A03"), 0x030a_d041);
    }

    #[test]
    fn integers_use_the_shortest_encoding() {
        assert_eq!(integer(0), [0x00]);
        assert_eq!(integer(1), [0x01]);
        assert_eq!(integer(0x12), [0x0a, 0x12]);
        assert_eq!(integer(0x1234), [0x0b, 0x34, 0x12]);
        assert_eq!(integer(0x12_3456), [0x0c, 0x56, 0x34, 0x12, 0x00]);
        assert_eq!(integer(1 << 32).len(), 9);
    }

    #[test]
    fn resource_template_encodes_io_irq_and_a_valid_end_tag() {
        let buf = ResourceTemplate::new()
            .io(0x3f8, 8)
            .irq_no_flags(4)
            .finish()
            .unwrap();
        // Buffer op, PkgLength 16 (1 + 2 + 13), BufferSize 13.
        assert_eq!(&buf[..4], &[0x11, 16, 0x0a, 13]);
        let res = &buf[4..];
        assert_eq!(
            &res[..11],
            &[0x47, 1, 0xf8, 0x03, 0xf8, 0x03, 1, 8, 0x22, 0x10, 0x00]
        );
        assert_eq!(res[11], 0x79);
        assert_eq!(crate::acpi::sdt::byte_sum(res), 0);
    }
}

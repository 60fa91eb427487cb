//! The setup header of a bzImage (x86 boot protocol,
//! `Documentation/arch/x86/boot.rst`): the fields that say where the
//! compressed kernel, the *payload*, lies in the image.

use thiserror::Error;

use crate::bytes::{le_u16, le_u32, slice_at, u8_at};

/// `header` field: the magic that marks a setup header.
pub const HDRS_MAGIC: [u8; 4] = *b"HdrS";
/// The first boot protocol version with `payload_offset`/`payload_length`.
pub const MIN_PAYLOAD_PROTOCOL: u16 = 0x0208;

/// Offsets of the fields in the image (the header starts at 0x1f1).
const SETUP_SECTS: usize = 0x1f1;
const HEADER: usize = 0x202;
const VERSION: usize = 0x206;
const PAYLOAD_OFFSET: usize = 0x248;
const PAYLOAD_LENGTH: usize = 0x24c;
/// Size of a real-mode sector: the setup code is `setup_sects` of them
/// after the boot sector.
const SECTOR: usize = 512;
/// A `setup_sects` of 0 means 4 (boot protocol, for ancient images).
const LEGACY_SETUP_SECTS: u8 = 4;

/// Why an image has no usable setup header.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HeaderError {
    /// The image ends before the header fields.
    #[error("image too short for a bzImage setup header ({len} bytes)")]
    TooShort {
        /// Length of the image.
        len: usize,
    },
    /// No `HdrS` magic at 0x202.
    #[error("no HdrS magic at 0x202: not a bzImage")]
    NoMagic,
    /// The boot protocol predates the payload fields.
    #[error(
        "boot protocol {}.{:02} has no payload fields (2.08 or later needed)",
        version >> 8,
        version & 0xff
    )]
    ProtocolTooOld {
        /// The `version` field.
        version: u16,
    },
    /// `payload_offset`/`payload_length` point outside the image.
    #[error("payload ({length} bytes at {offset:#x}) lies outside the {image_len}-byte image")]
    PayloadOutOfBounds {
        /// Offset of the payload in the image (may overflow `usize`, hence `u64`).
        offset: u64,
        /// `payload_length`.
        length: u32,
        /// Length of the image.
        image_len: usize,
    },
}

/// The setup header fields that locate the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetupHeader {
    /// `setup_sects` as stored (0 means 4).
    pub setup_sects: u8,
    /// `version`: the boot protocol, e.g. 0x020f for 2.15.
    pub protocol: u16,
    /// `payload_offset`: from the start of the protected-mode code.
    pub payload_offset: u32,
    /// `payload_length`, including the 4-byte size the kernel build
    /// appends after the compressed stream.
    pub payload_length: u32,
}

impl SetupHeader {
    /// Reads the setup header of a bzImage; refuses images without the
    /// `HdrS` magic or older than boot protocol 2.08.
    pub fn parse(image: &[u8]) -> Result<Self, HeaderError> {
        let too_short = || HeaderError::TooShort { len: image.len() };
        let magic = image
            .get(HEADER..HEADER + HDRS_MAGIC.len())
            .ok_or_else(too_short)?;
        if magic != HDRS_MAGIC {
            return Err(HeaderError::NoMagic);
        }
        let protocol = le_u16(image, VERSION).ok_or_else(too_short)?;
        if protocol < MIN_PAYLOAD_PROTOCOL {
            return Err(HeaderError::ProtocolTooOld { version: protocol });
        }
        Ok(Self {
            setup_sects: u8_at(image, SETUP_SECTS).ok_or_else(too_short)?,
            protocol,
            payload_offset: le_u32(image, PAYLOAD_OFFSET).ok_or_else(too_short)?,
            payload_length: le_u32(image, PAYLOAD_LENGTH).ok_or_else(too_short)?,
        })
    }

    /// Offset of the protected-mode code in the image: the boot sector
    /// plus `setup_sects` sectors of real-mode setup code.
    pub fn protected_mode_offset(&self) -> usize {
        let sects = match self.setup_sects {
            0 => LEGACY_SETUP_SECTS,
            n => n,
        };
        (usize::from(sects) + 1) * SECTOR
    }

    /// The payload's bytes in `image` (the image this header was read from).
    pub fn payload<'a>(&self, image: &'a [u8]) -> Result<&'a [u8], HeaderError> {
        // u64 arithmetic: 0xffff_ffff + 256 * 512 cannot overflow it.
        let offset = self.protected_mode_offset() as u64 + u64::from(self.payload_offset);
        let out_of_bounds = HeaderError::PayloadOutOfBounds {
            offset,
            length: self.payload_length,
            image_len: image.len(),
        };
        slice_at(image, offset, u64::from(self.payload_length)).ok_or(out_of_bounds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4 KiB image with a 2.15 header: 3 setup sectors, so the
    /// protected-mode code starts at 0x800.
    fn image(payload_offset: u32, payload_length: u32) -> Vec<u8> {
        let mut image = vec![0u8; 4096];
        image[SETUP_SECTS] = 3;
        image[HEADER..HEADER + 4].copy_from_slice(b"HdrS");
        image[VERSION..VERSION + 2].copy_from_slice(&0x020fu16.to_le_bytes());
        image[PAYLOAD_OFFSET..PAYLOAD_OFFSET + 4].copy_from_slice(&payload_offset.to_le_bytes());
        image[PAYLOAD_LENGTH..PAYLOAD_LENGTH + 4].copy_from_slice(&payload_length.to_le_bytes());
        image
    }

    #[test]
    fn locates_the_payload_after_the_setup_sectors() {
        let mut img = image(0x100, 16);
        img[0x900..0x910].copy_from_slice(&[0xab; 16]);
        let header = SetupHeader::parse(&img).unwrap();
        assert_eq!(header.protocol, 0x020f);
        assert_eq!(header.protected_mode_offset(), 0x800);
        assert_eq!(header.payload(&img).unwrap(), &[0xab; 16]);
    }

    #[test]
    fn zero_setup_sects_means_four() {
        let mut img = image(0, 8);
        img[SETUP_SECTS] = 0;
        let header = SetupHeader::parse(&img).unwrap();
        assert_eq!(header.protected_mode_offset(), 5 * 512);
    }

    #[test]
    fn payload_ending_at_the_image_end_is_accepted() {
        let img = image(4096 - 0x800 - 32, 32);
        let header = SetupHeader::parse(&img).unwrap();
        assert_eq!(header.payload(&img).unwrap().len(), 32);
    }

    #[test]
    fn refuses_a_payload_past_the_end() {
        let img = image(4096 - 0x800 - 32, 33);
        let header = SetupHeader::parse(&img).unwrap();
        assert!(matches!(
            header.payload(&img),
            Err(HeaderError::PayloadOutOfBounds {
                length: 33,
                image_len: 4096,
                ..
            })
        ));
        let img = image(u32::MAX, u32::MAX);
        let header = SetupHeader::parse(&img).unwrap();
        assert!(header.payload(&img).is_err());
    }

    #[test]
    fn refuses_images_without_magic_or_too_old() {
        assert_eq!(
            SetupHeader::parse(&[0u8; 0x205]),
            Err(HeaderError::TooShort { len: 0x205 })
        );
        let mut img = image(0, 0);
        img[HEADER] = b'X';
        assert_eq!(SetupHeader::parse(&img), Err(HeaderError::NoMagic));
        let mut img = image(0, 0);
        img[VERSION..VERSION + 2].copy_from_slice(&0x0207u16.to_le_bytes());
        let err = SetupHeader::parse(&img).unwrap_err();
        assert_eq!(err, HeaderError::ProtocolTooOld { version: 0x0207 });
        assert_eq!(
            err.to_string(),
            "boot protocol 2.07 has no payload fields (2.08 or later needed)"
        );
    }

    #[test]
    fn refuses_an_image_cut_inside_the_header() {
        let img = image(0, 0);
        assert_eq!(
            SetupHeader::parse(&img[..0x24e]),
            Err(HeaderError::TooShort { len: 0x24e })
        );
    }
}

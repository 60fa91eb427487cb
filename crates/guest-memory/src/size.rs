//! Byte sizes as people write them: parsing `256M`-style arguments and
//! formatting sizes for messages. Suffixes are binary (K = 1024).

use thiserror::Error;

/// One kibibyte.
pub const KIB: u64 = 1 << 10;
/// One mebibyte.
pub const MIB: u64 = 1 << 20;
/// One gibibyte.
pub const GIB: u64 = 1 << 30;
/// One tebibyte.
pub const TIB: u64 = 1 << 40;

/// Units from the largest down, with their long and short names.
const UNITS: [(u64, &str, &str); 4] = [
    (TIB, "TiB", "T"),
    (GIB, "GiB", "G"),
    (MIB, "MiB", "M"),
    (KIB, "KiB", "K"),
];

/// Why a size string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeError {
    /// The string was empty.
    #[error("empty size")]
    Empty,
    /// The string does not start with a decimal number.
    #[error("'{0}' is not a size (expected a number with an optional K, M, G or T suffix)")]
    NotANumber(String),
    /// The number is followed by something that is not a known suffix.
    #[error("'{0}' has an unknown suffix (expected K, M, G or T: binary, K = 1024)")]
    UnknownSuffix(String),
    /// A decimal suffix (`KB`, `MB`, `GB`, `TB`), which some read as
    /// powers of 1000 and others of 1024.
    #[error(
        "'{given}' is ambiguous ({unit} means 10^{power} to some, 2^{binary_power} to others): \
         write {number}{short} or {number}{short}iB (binary)"
    )]
    DecimalUnit {
        /// The size as given.
        given: String,
        /// The suffix as given.
        unit: String,
        /// The number before it.
        number: String,
        /// The binary suffix meant (`K`, `M`, `G`, `T`).
        short: char,
        /// Its power of ten.
        power: u32,
        /// Its power of two.
        binary_power: u32,
    },
    /// A fraction that does not come to a whole number of bytes.
    #[error("'{0}' is not a whole number of bytes")]
    Fraction(String),
    /// The size does not fit in 64 bits.
    #[error("'{0}' is too large")]
    Overflow(String),
}

/// Parses a size: a number, whole or with a fraction, and an optional
/// binary suffix (K = 1024): `4096`, `64K`, `256M`, `1.5G`, `2GiB`, `1T`
/// (case-insensitive; `KiB` .. `TiB` and a trailing `B` for bytes are
/// accepted too). A fraction must come to whole bytes (`1.5K` is 1536,
/// `0.1K` is refused). `KB`, `MB`, `GB` and `TB` are refused as ambiguous
/// (10^9 or 2^30?). The one size grammar of every command line.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(SizeError::Empty);
    }
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(fraction) {
        return Err(SizeError::NotANumber(text.to_owned()));
    }
    let multiplier = suffix_multiplier(suffix).ok_or_else(|| match decimal_unit(suffix) {
        Some((short, power, binary_power)) => SizeError::DecimalUnit {
            given: text.to_owned(),
            unit: suffix.to_owned(),
            number: number.to_owned(),
            short,
            power,
            binary_power,
        },
        None => SizeError::UnknownSuffix(text.to_owned()),
    })?;
    let overflow = || SizeError::Overflow(text.to_owned());
    // Exact: (whole . fraction) × multiplier in u128, then whole bytes.
    let scale = 10u128
        .checked_pow(u32::try_from(fraction.len()).map_err(|_| overflow())?)
        .ok_or_else(overflow)?;
    let mantissa: u128 = format!("{whole}{fraction}")
        .parse()
        .map_err(|_| overflow())?;
    let scaled = mantissa
        .checked_mul(u128::from(multiplier))
        .ok_or_else(overflow)?;
    if scaled % scale != 0 {
        return Err(SizeError::Fraction(text.to_owned()));
    }
    u64::try_from(scaled / scale).map_err(|_| overflow())
}

/// The multiplier a suffix stands for, or `None` if it is not one.
fn suffix_multiplier(suffix: &str) -> Option<u64> {
    let lower = suffix.to_ascii_lowercase();
    match lower.as_str() {
        "" | "b" => Some(1),
        "k" | "kib" => Some(KIB),
        "m" | "mib" => Some(MIB),
        "g" | "gib" => Some(GIB),
        "t" | "tib" => Some(TIB),
        _ => None,
    }
}

/// For a decimal unit (`KB` .. `TB`, any case): the binary suffix meant,
/// its power of ten and its power of two.
fn decimal_unit(suffix: &str) -> Option<(char, u32, u32)> {
    match suffix.to_ascii_lowercase().as_str() {
        "kb" => Some(('K', 3, 10)),
        "mb" => Some(('M', 6, 20)),
        "gb" => Some(('G', 9, 30)),
        "tb" => Some(('T', 12, 40)),
        _ => None,
    }
}

/// Formats a size for people: `512 MiB`, `1.50 GiB`, `4 KiB`, `100 B`.
/// Whole multiples of a unit print without decimals.
pub fn format_size(bytes: u64) -> String {
    format_size_with_decimals(bytes, 2)
}

/// [`format_size`] with `decimals` digits after the point for sizes that
/// are no whole multiple of their unit (`1.5 GiB` with one).
pub fn format_size_with_decimals(bytes: u64, decimals: usize) -> String {
    for (unit, name, _) in UNITS {
        if bytes >= unit {
            return if bytes % unit == 0 {
                format!("{} {name}", bytes / unit)
            } else {
                // Precision loss is fine: this is for display only.
                format!("{:.decimals$} {name}", bytes as f64 / unit as f64)
            };
        }
    }
    format!("{bytes} B")
}

/// Formats a size in the exact, parseable short form: `256M`, `3G`, `4100`.
/// `parse_size(&format_size_arg(x)) == Ok(x)` for every `x`.
pub fn format_size_arg(bytes: u64) -> String {
    for (unit, _, short) in UNITS {
        if bytes != 0 && bytes % unit == 0 {
            return format!("{}{short}", bytes / unit);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_suffixed_sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 * KIB));
        assert_eq!(parse_size("64k"), Ok(64 * KIB));
        assert_eq!(parse_size("256M"), Ok(256 * MIB));
        assert_eq!(parse_size("2G"), Ok(2 * GIB));
        assert_eq!(parse_size("2GiB"), Ok(2 * GIB));
        assert_eq!(parse_size("1T"), Ok(TIB));
        assert_eq!(parse_size(" 8M "), Ok(8 * MIB));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096B"), Ok(4096));
    }

    #[test]
    fn fractions_that_come_to_whole_bytes_are_sizes() {
        assert_eq!(parse_size("1.5G"), Ok(3 * GIB / 2));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("0.25M"), Ok(MIB / 4));
        assert_eq!(parse_size("2.0GiB"), Ok(2 * GIB));
        assert_eq!(parse_size("1."), Ok(1));
    }

    #[test]
    fn decimal_units_are_refused_as_ambiguous() {
        for text in ["1GB", "512mb", "4KB", "1TB", "1.5GB"] {
            let e = parse_size(text).unwrap_err();
            assert!(matches!(e, SizeError::DecimalUnit { .. }), "{text}: {e:?}");
        }
        assert_eq!(
            parse_size("1GB").unwrap_err().to_string(),
            "'1GB' is ambiguous (GB means 10^9 to some, 2^30 to others): write 1G or 1GiB (binary)"
        );
    }

    #[test]
    fn rejects_bad_sizes() {
        assert_eq!(parse_size(""), Err(SizeError::Empty));
        assert_eq!(parse_size("M"), Err(SizeError::NotANumber("M".into())));
        assert_eq!(parse_size("-1"), Err(SizeError::NotANumber("-1".into())));
        assert_eq!(parse_size("0.1K"), Err(SizeError::Fraction("0.1K".into())));
        assert_eq!(parse_size("1.5"), Err(SizeError::Fraction("1.5".into())));
        assert_eq!(parse_size(".5G"), Err(SizeError::NotANumber(".5G".into())));
        assert_eq!(
            parse_size("1.2.3G"),
            Err(SizeError::NotANumber("1.2.3G".into()))
        );
        assert_eq!(
            parse_size("12X"),
            Err(SizeError::UnknownSuffix("12X".into()))
        );
        assert_eq!(
            parse_size("12X"),
            Err(SizeError::UnknownSuffix("12X".into()))
        );
        assert_eq!(
            parse_size("99999999999999999999"),
            Err(SizeError::Overflow("99999999999999999999".into()))
        );
        assert_eq!(
            parse_size("20000000T"),
            Err(SizeError::Overflow("20000000T".into()))
        );
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(100), "100 B");
        assert_eq!(format_size(4 * KIB), "4 KiB");
        assert_eq!(format_size(512 * MIB), "512 MiB");
        assert_eq!(format_size(3 * GIB / 2), "1.50 GiB");
        assert_eq!(format_size(3 * TIB), "3 TiB");
        assert_eq!(format_size_with_decimals(3 * GIB / 2, 1), "1.5 GiB");
        assert_eq!(format_size_with_decimals(4 * KIB, 1), "4 KiB");
    }

    #[test]
    fn arg_form_round_trips() {
        for value in [
            0,
            1,
            4095,
            4096,
            3 * MIB,
            5 * GIB,
            7 * TIB,
            4 * GIB + 4 * KIB,
        ] {
            assert_eq!(parse_size(&format_size_arg(value)), Ok(value), "{value}");
        }
        assert_eq!(format_size_arg(256 * MIB), "256M");
        assert_eq!(format_size_arg(1000), "1000");
    }
}

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
    #[error("'{0}' has an unknown suffix (expected K, M, G or T)")]
    UnknownSuffix(String),
    /// The size does not fit in 64 bits.
    #[error("'{0}' is too large")]
    Overflow(String),
}

/// Parses a size such as `4096`, `64K`, `256M`, `2G`, `1T` (binary units,
/// case-insensitive; `KiB`/`MiB`/`GiB`/`TiB` and a trailing `B` are accepted too).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(SizeError::Empty);
    }
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(SizeError::NotANumber(text.to_owned()));
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| SizeError::Overflow(text.to_owned()))?;
    let multiplier =
        suffix_multiplier(suffix).ok_or_else(|| SizeError::UnknownSuffix(text.to_owned()))?;
    number
        .checked_mul(multiplier)
        .ok_or_else(|| SizeError::Overflow(text.to_owned()))
}

/// The multiplier a suffix stands for, or `None` if it is not one.
fn suffix_multiplier(suffix: &str) -> Option<u64> {
    let lower = suffix.to_ascii_lowercase();
    match lower.as_str() {
        "" | "b" => Some(1),
        "k" | "kb" | "kib" => Some(KIB),
        "m" | "mb" | "mib" => Some(MIB),
        "g" | "gb" | "gib" => Some(GIB),
        "t" | "tb" | "tib" => Some(TIB),
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
    }

    #[test]
    fn rejects_bad_sizes() {
        assert_eq!(parse_size(""), Err(SizeError::Empty));
        assert_eq!(parse_size("M"), Err(SizeError::NotANumber("M".into())));
        assert_eq!(parse_size("-1"), Err(SizeError::NotANumber("-1".into())));
        assert_eq!(
            parse_size("1.5G"),
            Err(SizeError::UnknownSuffix("1.5G".into()))
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

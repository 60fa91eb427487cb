//! Byte sizes as people write them: parsing `64M`-style arguments and
//! printing `64 MiB`-style labels (the printing is guest-memory's, at the
//! benchmarks' precision).

use guest_memory::format_size_with_decimals;
use thiserror::Error;

/// Why a size argument was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeError {
    /// Not a number with an optional K/M/G suffix.
    #[error("bad size {0:?} (expected a number of bytes with an optional K, M or G suffix)")]
    Syntax(String),
    /// The value does not fit in 64 bits.
    #[error("size {0:?} is too large")]
    Overflow(String),
}

/// Parses `N`, `NK`, `NM`, `NG` (binary multiples; `KiB`, `MiB`, `GiB`
/// and a trailing `B` are accepted too).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(SizeError::Syntax(text.to_owned()));
    }
    let shift = match suffix.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return Err(SizeError::Syntax(text.to_owned())),
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| SizeError::Overflow(text.to_owned()))?;
    value
        .checked_mul(1 << shift)
        .ok_or_else(|| SizeError::Overflow(text.to_owned()))
}

/// `4 KiB`, `2 MiB`, `1.5 GiB`, `100 B`: guest-memory's format with the
/// one decimal the benchmark labels and tables have always printed.
pub fn format_size(bytes: u64) -> String {
    format_size_with_decimals(bytes, 1)
}

/// `format_size` without the space (`4KiB`), for file names.
pub fn size_tag(bytes: u64) -> String {
    format_size(bytes).replace(' ', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_suffixed_sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("64m"), Ok(64 << 20));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
    }

    #[test]
    fn rejects_garbage_and_overflow() {
        assert!(matches!(parse_size(""), Err(SizeError::Syntax(_))));
        assert!(matches!(parse_size("M"), Err(SizeError::Syntax(_))));
        assert!(matches!(parse_size("12X"), Err(SizeError::Syntax(_))));
        assert!(matches!(parse_size("-1"), Err(SizeError::Syntax(_))));
        assert!(matches!(
            parse_size("99999999999999999999"),
            Err(SizeError::Overflow(_))
        ));
        assert!(matches!(
            parse_size("17179869184G"),
            Err(SizeError::Overflow(_))
        ));
    }

    #[test]
    fn formats_with_the_largest_whole_unit() {
        assert_eq!(format_size(4096), "4 KiB");
        assert_eq!(format_size(64 << 10), "64 KiB");
        assert_eq!(format_size(2 << 20), "2 MiB");
        assert_eq!(format_size(256 << 20), "256 MiB");
        assert_eq!(format_size(3 << 29), "1.5 GiB");
        assert_eq!(format_size(100), "100 B");
        assert_eq!(size_tag(2 << 20), "2MiB");
    }
}

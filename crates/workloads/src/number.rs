//! Number syntax of workload parameters: integers (decimal or `0x` hex),
//! byte sizes with binary `K`/`M`/`G`/`T` suffixes, plain decimals for
//! fractions, and seconds with millisecond resolution. Hand-written because
//! `core` cannot parse floats without pulling in more than we need, and the
//! guest and the VMM must read every string identically.

use core::fmt;

/// Why a number did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumberError {
    /// Not of the expected form.
    Bad,
    /// Well-formed but does not fit.
    TooLarge,
}

/// An unsigned integer: decimal digits or `0x` followed by hex digits.
pub(crate) fn parse_u64(s: &str) -> Result<u64, NumberError> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    if digits.is_empty() {
        return Err(NumberError::Bad);
    }
    let mut value: u64 = 0;
    for ch in digits.chars() {
        let d = ch.to_digit(radix).ok_or(NumberError::Bad)?;
        value = value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(NumberError::TooLarge)?;
    }
    Ok(value)
}

/// A byte count: an integer (or a decimal that comes to whole bytes,
/// like `1.5G`), optionally followed by `K`, `M`, `G` or `T` (powers of
/// 1024, either case): the host's size grammar (`guest_memory::parse_size`)
/// less its long suffixes, plus hex integers.
pub(crate) fn parse_size(s: &str) -> Result<u64, NumberError> {
    let shift = match s.as_bytes().last() {
        Some(b'k' | b'K') => 10,
        Some(b'm' | b'M') => 20,
        Some(b'g' | b'G') => 30,
        Some(b't' | b'T') => 40,
        _ => 0,
    };
    let digits = if shift == 0 { s } else { &s[..s.len() - 1] };
    let Some((whole, fraction)) = digits.split_once('.') else {
        let value = parse_u64(digits)?;
        if value > u64::MAX >> shift {
            return Err(NumberError::TooLarge);
        }
        return Ok(value << shift);
    };
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) || fraction.len() > 18 {
        return Err(NumberError::Bad);
    }
    // Exact: the digits as one integer, times 2^shift, over 10^fraction.
    let mut mantissa: u128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(b - b'0')))
            .ok_or(NumberError::TooLarge)?;
    }
    let scale = 10u128.pow(fraction.len() as u32);
    let scaled = mantissa
        .checked_mul(1 << shift)
        .ok_or(NumberError::TooLarge)?;
    if scaled % scale != 0 {
        return Err(NumberError::Bad);
    }
    u64::try_from(scaled / scale).map_err(|_| NumberError::TooLarge)
}

/// Splits `123.456` into its integer and fraction digits; `.5` and `5.` are
/// allowed, signs, exponents and `inf`/`nan` are not.
fn split_decimal(s: &str) -> Result<(&str, &str), NumberError> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(NumberError::Bad);
    }
    Ok((int, frac))
}

/// A non-negative decimal such as `0.9` or `2`. Up to 15 significant
/// digits are correctly rounded (exact mantissa, exact power of ten); longer
/// inputs are within an ulp, digits past the 18th are ignored.
pub(crate) fn parse_decimal(s: &str) -> Result<f64, NumberError> {
    let (int, frac) = split_decimal(s)?;
    let mut mantissa: u64 = 0;
    let mut digits = 0u32;
    let mut scale = 0i32;
    for (i, b) in int.bytes().chain(frac.bytes()).enumerate() {
        let in_fraction = i >= int.len();
        if mantissa == 0 && b == b'0' {
            // Leading zeros carry no precision.
            scale -= i32::from(in_fraction);
            continue;
        }
        if digits < 18 {
            mantissa = mantissa * 10 + u64::from(b - b'0');
            digits += 1;
            scale -= i32::from(in_fraction);
        } else if !in_fraction {
            scale += 1;
        }
    }
    if scale > 22 {
        return Err(NumberError::TooLarge);
    }
    // 10^k is exact in f64 for k <= 22, so this is one rounding step.
    let pow10 = (0..scale.unsigned_abs()).fold(1.0f64, |p, _| p * 10.0);
    let m = mantissa as f64;
    Ok(if scale >= 0 { m * pow10 } else { m / pow10 })
}

/// Seconds as a decimal with at most three fraction digits, returned in
/// milliseconds (`0.5` → 500).
pub(crate) fn parse_millis(s: &str) -> Result<u64, NumberError> {
    let (int, frac) = split_decimal(s)?;
    if frac.len() > 3 {
        return Err(NumberError::Bad);
    }
    let whole = if int.is_empty() { 0 } else { parse_u64(int)? };
    let mut millis = 0;
    for (i, b) in frac.bytes().enumerate() {
        millis += u64::from(b - b'0') * [100, 10, 1][i];
    }
    whole
        .checked_mul(1000)
        .and_then(|v| v.checked_add(millis))
        .ok_or(NumberError::TooLarge)
}

/// A byte count shown for people: `256 MiB`, `4 KiB`, `12345 bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if v >> shift == 0 {
                continue;
            }
            if v.trailing_zeros() >= shift {
                return write!(f, "{} {unit}", v >> shift);
            }
            // Not a round number: two (truncated) decimals are enough here.
            let hundredths = ((u128::from(v) * 100) >> shift) as u64;
            return write!(f, "{}.{:02} {unit}", hundredths / 100, hundredths % 100);
        }
        write!(f, "{v} bytes")
    }
}

/// A byte count in parameter syntax: `256M`, `4K`, `12345`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SizeArg(pub u64);

impl fmt::Display for SizeArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        for (shift, unit) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
            if v != 0 && v.trailing_zeros() >= shift {
                return write!(f, "{}{unit}", v >> shift);
            }
        }
        write!(f, "{v}")
    }
}

/// Milliseconds in `seconds` parameter syntax: `2`, `0.5`, `1.25`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SecondsArg(pub u64);

impl fmt::Display for SecondsArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, mut ms) = (self.0 / 1000, self.0 % 1000);
        write!(f, "{whole}")?;
        if ms != 0 {
            let mut width = 3;
            while ms % 10 == 0 {
                ms /= 10;
                width -= 1;
            }
            write!(f, ".{ms:0width$}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_u64("0"), Ok(0));
        assert_eq!(parse_u64("42"), Ok(42));
        assert_eq!(parse_u64("0x1F"), Ok(31));
        assert_eq!(parse_u64("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_u64("18446744073709551616"),
            Err(NumberError::TooLarge)
        );
        for bad in ["", "0x", "-1", "+1", "1.0", "12a", " 1", "1e3"] {
            assert_eq!(parse_u64(bad), Err(NumberError::Bad), "{bad:?}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("256m"), Ok(256 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("16777216T"), Err(NumberError::TooLarge));
        // Fractions that come to whole bytes, as on the host.
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("0.5K"), Ok(512));
        for bad in ["", "K", "1KB", "G1", "1 G", "0.1K", "1.5", ".5G", "0x1.8G"] {
            assert_eq!(parse_size(bad), Err(NumberError::Bad), "{bad:?}");
        }
    }

    #[test]
    fn decimals() {
        assert_eq!(parse_decimal("0.9"), Ok(0.9));
        assert_eq!(parse_decimal("0.99"), Ok(0.99));
        assert_eq!(parse_decimal("1"), Ok(1.0));
        assert_eq!(parse_decimal(".5"), Ok(0.5));
        assert_eq!(parse_decimal("5."), Ok(5.0));
        assert_eq!(parse_decimal("0.05"), Ok(0.05));
        assert_eq!(parse_decimal("000.0010"), Ok(0.001));
        assert_eq!(parse_decimal("123.456"), Ok(123.456));
        let long = parse_decimal("0.123456789012345678").unwrap();
        assert!((long - 0.123_456_789_012_345_68).abs() < 1e-16);
        for bad in ["", ".", "-0.5", "1e3", "nan", "inf", "0..5", "0,5", "1.2.3"] {
            assert_eq!(parse_decimal(bad), Err(NumberError::Bad), "{bad:?}");
        }
    }

    #[test]
    fn millis() {
        assert_eq!(parse_millis("2"), Ok(2000));
        assert_eq!(parse_millis("0.5"), Ok(500));
        assert_eq!(parse_millis("1.25"), Ok(1250));
        assert_eq!(parse_millis("0.001"), Ok(1));
        assert_eq!(parse_millis(".01"), Ok(10));
        assert_eq!(parse_millis("0"), Ok(0));
        assert_eq!(parse_millis("0.0001"), Err(NumberError::Bad));
        assert_eq!(parse_millis("-1"), Err(NumberError::Bad));
        assert_eq!(
            parse_millis("18446744073709552"),
            Err(NumberError::TooLarge)
        );
    }

    #[test]
    fn display_forms() {
        assert_eq!(ByteSize(256 << 20).to_string(), "256 MiB");
        assert_eq!(ByteSize(4096).to_string(), "4 KiB");
        assert_eq!(ByteSize(3 << 30).to_string(), "3 GiB");
        assert_eq!(ByteSize(100).to_string(), "100 bytes");
        assert_eq!(ByteSize(0).to_string(), "0 bytes");
        assert_eq!(ByteSize((3 << 30) + 1).to_string(), "3.00 GiB");
        assert_eq!(ByteSize(1536 << 20).to_string(), "1.50 GiB");
        assert_eq!(ByteSize(5000).to_string(), "4.88 KiB");
        assert_eq!(SizeArg(256 << 20).to_string(), "256M");
        assert_eq!(SizeArg(12345).to_string(), "12345");
        assert_eq!(SecondsArg(2000).to_string(), "2");
        assert_eq!(SecondsArg(500).to_string(), "0.5");
        assert_eq!(SecondsArg(1250).to_string(), "1.25");
        assert_eq!(SecondsArg(1).to_string(), "0.001");
    }
}

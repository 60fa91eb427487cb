//! How the track suite writes its figures: intervals, percentages,
//! microseconds and guest sizes, shared by its tables and by the other
//! suites' tables.

use crate::size::format_size;

/// `200 ms`, or `—` for the baseline.
pub fn format_interval(interval_ms: Option<u64>) -> String {
    interval_ms.map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms"))
}

/// `1.2%`, `-0.4%`, or `—`; a share that rounds to zero is `0.0%`,
/// whatever its sign.
pub fn format_percent(share: Option<f64>) -> String {
    share.map_or_else(
        || "—".to_owned(),
        |s| {
            let text = format!("{:.1}%", s * 100.0);
            if text == "-0.0%" {
                "0.0%".to_owned()
            } else {
                text
            }
        },
    )
}

/// Microseconds with three significant digits: `0.73 µs`, `41.2 µs`,
/// `812 µs`, `1.96 ms`, `12.3 ms`.
pub fn format_us(us: f64) -> String {
    if !us.is_finite() {
        return "—".to_owned();
    }
    let (value, unit) = if us < 1e3 {
        (us, "µs")
    } else {
        (us / 1e3, "ms")
    };
    let decimals = if value < 10.0 {
        2
    } else if value < 100.0 {
        1
    } else {
        0
    };
    format!("{value:.decimals$} {unit}")
}

/// Guest RAM, with TiB for the largest heat-model size (guest-memory's
/// format, which `format_size` prints, has the unit).
pub fn format_guest(bytes: u64) -> String {
    format_size(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(format_us(0.734), "0.73 µs");
        assert_eq!(format_us(41.23), "41.2 µs");
        assert_eq!(format_us(812.4), "812 µs");
        assert_eq!(format_us(1960.0), "1.96 ms");
        assert_eq!(format_us(f64::NAN), "—");
        assert_eq!(format_percent(Some(-0.004)), "-0.4%");
        assert_eq!(format_percent(Some(-1e-17)), "0.0%");
        assert_eq!(format_guest(64 << 30), "64 GiB");
        assert_eq!(format_guest(1 << 40), "1 TiB");
    }
}

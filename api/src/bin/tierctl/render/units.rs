//! Numbers as people read them: sizes, durations, rates, bars.

/// Bytes with a binary unit (`256 MiB`, `1.50 GiB`).
pub fn size(bytes: u64) -> String {
    guest_memory::format_size(bytes)
}

/// Milliseconds as `850 ms`, `12.3 s`, `5m 07s` or `2h 03m`.
pub fn duration_ms(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m {:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h {:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// Microseconds as `640 µs`, `12.4 ms`, or as [`duration_ms`] from a
/// second up.
pub fn micros(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{:.1} ms", us as f64 / 1000.0),
        _ => duration_ms(us / 1000),
    }
}

/// `n` and a noun, plural unless `n` is 1: `1 frame`, `3 frames`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A heat value: one decimal below 100, none above.
pub use tiering::format_heat as heat;

/// `part / whole` in [0, 1]; 0 when `whole` is 0.
pub fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 / whole as f64).clamp(0.0, 1.0)
    }
}

/// A fraction as a right-aligned percentage (`  50.0%`).
pub fn percent(fraction: f64) -> String {
    format!("{:5.1}%", fraction * 100.0)
}

/// A bar of `width` cells, `#` for the filled share: `[#####.....]`.
pub fn bar(fraction: f64, width: usize) -> String {
    let fraction = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let filled = ((fraction * width as f64).round() as usize).min(width);
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(duration_ms(0), "0 ms");
        assert_eq!(duration_ms(999), "999 ms");
        assert_eq!(duration_ms(12_345), "12.3 s");
        assert_eq!(duration_ms(307_000), "5m 07s");
        assert_eq!(duration_ms(7_380_000), "2h 03m");
        assert_eq!(micros(640), "640 µs");
        assert_eq!(micros(12_400), "12.4 ms");
        assert_eq!(micros(2_500_000), "2.5 s");
    }

    #[test]
    fn bars_and_percentages_are_clamped() {
        assert_eq!(bar(0.5, 10), "[#####.....]");
        assert_eq!(bar(0.0, 4), "[....]");
        assert_eq!(bar(1.7, 4), "[####]");
        assert_eq!(bar(f64::NAN, 4), "[....]");
        assert_eq!(fraction(1, 0), 0.0);
        assert_eq!(fraction(3, 4), 0.75);
        assert_eq!(percent(0.5), " 50.0%");
        assert_eq!(percent(1.0), "100.0%");
    }

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(size(256 << 20), "256 MiB");
        assert_eq!(size(3 << 29), "1.50 GiB");
        assert_eq!(heat(12.34), "12.3");
        assert_eq!(count(1, "frame"), "1 frame");
        assert_eq!(count(0, "frame"), "0 frames");
        assert_eq!(heat(7900.4), "7900");
    }
}

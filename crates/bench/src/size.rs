//! Byte sizes as people write them: parsing `64M`-style arguments (the
//! one size grammar, guest-memory's) and printing `64 MiB`-style labels
//! (guest-memory's, at the benchmarks' precision).

use guest_memory::format_size_with_decimals;
pub use guest_memory::{SizeError, parse_size};

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

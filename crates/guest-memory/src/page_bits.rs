//! Page bitmaps (one bit per 4 KiB page, 64 pages to a `u64` word), as
//! the dirty logs keep them: the words a range of pages covers with the
//! mask of its bits in each, and the pages a word's set bits name. Dirty
//! logs read and clear them a word at a time: one atomic read-modify-write
//! per 64 pages instead of one per page (pre-copy reads the log over
//! 512 pages per 2 MiB frame several times per batch).

/// For pages `[first, end)`, every word index they touch with the mask of
/// their bits in that word, in ascending order; nothing when the range is
/// empty.
pub fn word_masks(first: u64, end: u64) -> impl Iterator<Item = (usize, u64)> {
    let words = if first < end {
        first / 64..end.div_ceil(64)
    } else {
        0..0
    };
    words.map(move |w| {
        let lo = (w * 64).max(first);
        let hi = ((w + 1) * 64).min(end);
        let bits = hi - lo;
        let mask = if bits == 64 {
            u64::MAX
        } else {
            ((1u64 << bits) - 1) << (lo % 64)
        };
        (w as usize, mask)
    })
}

/// The pages whose bits are set in `bits`, the value of word `word`, in
/// ascending order.
pub fn set_pages(word: usize, bits: u64) -> impl Iterator<Item = u64> {
    let base = word as u64 * 64;
    let mut rest = bits;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let bit = rest.trailing_zeros();
        rest &= rest - 1;
        Some(base + u64::from(bit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-page reference: the bit of every page in the range.
    fn per_page(first: u64, end: u64) -> Vec<(usize, u64)> {
        let mut words: Vec<(usize, u64)> = Vec::new();
        for page in first..end {
            let (w, b) = ((page / 64) as usize, 1u64 << (page % 64));
            match words.last_mut() {
                Some((last, mask)) if *last == w => *mask |= b,
                _ => words.push((w, b)),
            }
        }
        words
    }

    #[test]
    fn masks_match_setting_every_page_bit() {
        for first in [0, 1, 5, 63, 64, 65, 127, 128, 200] {
            for len in [0, 1, 2, 63, 64, 65, 128, 129, 512, 1000] {
                let end = first + len;
                assert_eq!(
                    word_masks(first, end).collect::<Vec<_>>(),
                    per_page(first, end),
                    "[{first}, {end})"
                );
            }
        }
        assert_eq!(word_masks(70, 10).count(), 0, "an inverted range is empty");
    }

    #[test]
    fn set_pages_lists_each_bit_in_order() {
        assert_eq!(set_pages(0, 0).count(), 0);
        assert_eq!(
            set_pages(2, 1 | 1 << 7 | 1 << 63).collect::<Vec<_>>(),
            [128, 135, 191]
        );
        assert_eq!(set_pages(1, u64::MAX).count(), 64);
    }
}

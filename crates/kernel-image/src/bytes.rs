//! Bounds-checked little-endian reads from untrusted byte slices: every
//! reader returns `None` instead of panicking when the field does not fit.

/// `N` bytes at `offset`, if they are all inside `data`.
pub(crate) fn array_at<const N: usize>(data: &[u8], offset: usize) -> Option<[u8; N]> {
    let end = offset.checked_add(N)?;
    data.get(offset..end)?.try_into().ok()
}

/// The `u8` at `offset`.
pub(crate) fn u8_at(data: &[u8], offset: usize) -> Option<u8> {
    data.get(offset).copied()
}

/// The little-endian `u16` at `offset`.
pub(crate) fn le_u16(data: &[u8], offset: usize) -> Option<u16> {
    array_at(data, offset).map(u16::from_le_bytes)
}

/// The little-endian `u32` at `offset`.
pub(crate) fn le_u32(data: &[u8], offset: usize) -> Option<u32> {
    array_at(data, offset).map(u32::from_le_bytes)
}

/// The little-endian `u64` at `offset`.
pub(crate) fn le_u64(data: &[u8], offset: usize) -> Option<u64> {
    array_at(data, offset).map(u64::from_le_bytes)
}

/// `len` bytes at `offset` (both possibly hostile 64-bit values).
pub(crate) fn slice_at(data: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    data.get(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_the_slice() {
        let data = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(u8_at(&data, 8), Some(9));
        assert_eq!(le_u16(&data, 0), Some(0x0201));
        assert_eq!(le_u32(&data, 1), Some(0x0504_0302));
        assert_eq!(le_u64(&data, 1), Some(0x0908_0706_0504_0302));
        assert_eq!(slice_at(&data, 2, 3), Some(&data[2..5]));
        assert_eq!(slice_at(&data, 9, 0), Some(&data[9..]));
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let data = [0u8; 8];
        assert_eq!(u8_at(&data, 8), None);
        assert_eq!(le_u16(&data, 7), None);
        assert_eq!(le_u32(&data, 5), None);
        assert_eq!(le_u64(&data, 1), None);
        assert_eq!(le_u64(&data, usize::MAX), None);
        assert_eq!(slice_at(&data, 4, 5), None);
        assert_eq!(slice_at(&data, u64::MAX, 1), None);
        assert_eq!(slice_at(&data, 1, u64::MAX), None);
    }
}

//! Fixed-size text buffers for log messages, so the guest can format
//! messages without an allocator.

use core::fmt;

/// Up to `N` bytes of UTF-8 text; writes past the end are cut at a
/// character boundary and otherwise ignored.
#[derive(Clone, Debug)]
pub struct MessageBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> MessageBuf<N> {
    /// An empty buffer.
    pub const fn new() -> Self {
        MessageBuf {
            buf: [0; N],
            len: 0,
        }
    }

    /// The text written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl<const N: usize> Default for MessageBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Write for MessageBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = N - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use super::*;

    #[test]
    fn formats_and_truncates() {
        let mut m = MessageBuf::<8>::new();
        write!(m, "ab{}", 12).unwrap();
        assert_eq!(m.as_bytes(), b"ab12");
        write!(m, "xyzé!").unwrap();
        // "é" would straddle the end, so it is dropped whole.
        assert_eq!(m.as_bytes(), b"ab12xyz");
        write!(m, "more").unwrap();
        assert_eq!(m.as_bytes(), b"ab12xyzm");
    }
}

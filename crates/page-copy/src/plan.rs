//! Splitting a validated batch into chunks: units of work a participant
//! claims at once.

use crate::mode::CopyMode;
use crate::range::CopyRange;

/// A contiguous part of one range.
#[derive(Debug, Clone, Copy)]
struct Piece {
    src: *const u8,
    dst: *mut u8,
    len: usize,
}

/// One chunk: the pieces `first..end` of the plan, at most `chunk_size`
/// bytes in all. Large ranges give one piece per chunk; small ranges are
/// packed so that claiming work costs little next to copying it.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    first: usize,
    end: usize,
}

/// A batch cut into chunks.
#[derive(Debug)]
pub(crate) struct Plan {
    pieces: Vec<Piece>,
    chunks: Vec<Chunk>,
}

// SAFETY: the plan only holds addresses of a batch that `CopyEngine::copy`
// guarantees valid until the call returns; the threaded engine does not
// return before every chunk is done, so no thread uses them afterwards.
unsafe impl Send for Plan {}
// SAFETY: shared access only reads the addresses; see `Send` above.
unsafe impl Sync for Plan {}

impl Plan {
    /// Cuts validated `ranges` into chunks of at most `chunk_size` bytes
    /// (`chunk_size` > 0). Empty ranges are dropped.
    pub(crate) fn new(ranges: &[CopyRange], chunk_size: usize) -> Self {
        let mut pieces = Vec::new();
        let mut chunks = Vec::new();
        let mut open = Chunk { first: 0, end: 0 };
        let mut open_bytes = 0usize;
        for range in ranges {
            let mut offset = 0;
            while offset < range.len {
                let len = (range.len - offset).min(chunk_size);
                if open_bytes + len > chunk_size {
                    chunks.push(open);
                    open = Chunk {
                        first: pieces.len(),
                        end: pieces.len(),
                    };
                    open_bytes = 0;
                }
                pieces.push(Piece {
                    // Addresses only: `wrapping_add` keeps this safe; the
                    // range was validated not to wrap.
                    src: range.src.wrapping_add(offset),
                    dst: range.dst.wrapping_add(offset),
                    len,
                });
                open.end += 1;
                open_bytes += len;
                offset += len;
            }
        }
        if open_bytes > 0 {
            chunks.push(open);
        }
        Self { pieces, chunks }
    }

    /// Number of chunks.
    pub(crate) fn len(&self) -> usize {
        self.chunks.len()
    }

    /// Copies chunk `index` (< `len()`).
    ///
    /// # Safety
    ///
    /// The batch the plan was built from is still valid per the
    /// `CopyEngine::copy` contract and was validated.
    pub(crate) unsafe fn copy_chunk(&self, index: usize, mode: CopyMode) {
        let chunk = self.chunks[index];
        for piece in &self.pieces[chunk.first..chunk.end] {
            // SAFETY: each piece lies inside one validated range whose
            // memory the caller guarantees for the whole call.
            unsafe { mode.copy(piece.src, piece.dst, piece.len) };
        }
    }

    /// Chunk sizes in bytes, in order (for tests).
    #[cfg(test)]
    fn chunk_bytes(&self) -> Vec<usize> {
        self.chunks
            .iter()
            .map(|c| self.pieces[c.first..c.end].iter().map(|p| p.len).sum())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: usize = 1024;

    fn r(src: usize, dst: usize, len: usize) -> CopyRange {
        CopyRange::new(src as *const u8, dst as *mut u8, len)
    }

    #[test]
    fn one_frame_splits_into_equal_chunks() {
        let plan = Plan::new(&[r(0x1000_0000, 0x2000_0000, 2048 * KIB)], 256 * KIB);
        assert_eq!(plan.chunk_bytes(), vec![256 * KIB; 8]);
    }

    #[test]
    fn odd_tail_gets_its_own_chunk() {
        let plan = Plan::new(&[r(0x1000_0000, 0x2000_0000, 2048 * KIB + 7)], 256 * KIB);
        let mut want = vec![256 * KIB; 8];
        want.push(7);
        assert_eq!(plan.chunk_bytes(), want);
    }

    #[test]
    fn small_ranges_are_packed_up_to_the_chunk_size() {
        let ranges: Vec<_> = (0..10)
            .map(|i| {
                r(
                    0x1000_0000 + i * 0x10000,
                    0x2000_0000 + i * 0x10000,
                    4 * KIB,
                )
            })
            .collect();
        let plan = Plan::new(&ranges, 16 * KIB);
        assert_eq!(plan.chunk_bytes(), vec![16 * KIB, 16 * KIB, 8 * KIB]);
        assert_eq!(plan.pieces.len(), 10);
    }

    #[test]
    fn empty_ranges_make_no_chunks() {
        let plan = Plan::new(&[r(0x1000, 0x2000, 0), r(0x3000, 0x4000, 0)], 4 * KIB);
        assert_eq!(plan.len(), 0);
    }

    #[test]
    fn mixed_sizes_keep_every_byte_once() {
        let sizes = [1, 4095, 4096, 70 * KIB, 3, 256 * KIB + 1];
        let mut addr = 0x1000_0000;
        let ranges: Vec<_> = sizes
            .iter()
            .map(|&len| {
                let range = r(addr, addr + 0x4000_0000, len);
                addr += len + 0x1000;
                range
            })
            .collect();
        let plan = Plan::new(&ranges, 64 * KIB);
        let total: usize = plan.chunk_bytes().iter().sum();
        assert_eq!(total, sizes.iter().sum::<usize>());
        assert!(plan.chunk_bytes().iter().all(|&b| b > 0 && b <= 64 * KIB));
    }
}

//! The ground-truth area: guest memory right after the buffer where vCPU 0
//! builds the [`AccessRange`] array of each phase for the `GroundTruth`
//! hypercall, and the chunk grid that workloads with a per-chunk
//! distribution (zipf, pmbench) accumulate their weights on.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use guest_abi::{AccessRange, MAX_GROUND_TRUTH_RANGES};

/// Words per encoded [`AccessRange`] (gpa, len, weight bits, write bits).
const RANGE_WORDS: usize = AccessRange::SIZE / 8;

/// Ground-truth entries in guest memory, encoded as [`AccessRange::encode`]
/// does (little-endian words, which is the native layout here).
#[derive(Debug)]
pub struct GroundTruthArea<'m> {
    words: &'m [AtomicU64],
    gpa: u64,
}

impl<'m> GroundTruthArea<'m> {
    /// The area in `words`, which start at guest-physical `gpa`.
    pub fn new(words: &'m [AtomicU64], gpa: u64) -> Self {
        GroundTruthArea { words, gpa }
    }

    /// Guest-physical address of entry 0.
    pub fn gpa(&self) -> u64 {
        self.gpa
    }

    fn entry(&self, i: usize) -> &[AtomicU64] {
        &self.words[i * RANGE_WORDS..(i + 1) * RANGE_WORDS]
    }

    /// Writes entry `i`.
    pub fn set(&self, i: usize, range: &AccessRange) {
        let e = self.entry(i);
        e[0].store(range.gpa, Relaxed);
        e[1].store(range.len, Relaxed);
        e[2].store(range.weight.to_bits(), Relaxed);
        e[3].store(range.write_fraction.to_bits(), Relaxed);
    }

    /// Reads entry `i`.
    #[cfg(test)]
    pub fn get(&self, i: usize) -> AccessRange {
        let e = self.entry(i);
        AccessRange {
            gpa: e[0].load(Relaxed),
            len: e[1].load(Relaxed),
            weight: f64::from_bits(e[2].load(Relaxed)),
            write_fraction: f64::from_bits(e[3].load(Relaxed)),
        }
    }

    /// Adds `weight` to entry `i`'s weight.
    #[inline]
    pub fn add_weight(&self, i: usize, weight: f64) {
        let w = &self.entry(i)[2];
        w.store(
            (f64::from_bits(w.load(Relaxed)) + weight).to_bits(),
            Relaxed,
        );
    }
}

/// Ground-truth chunk and hot-set alignment: the VMM's frame size.
pub const CHUNK_BYTES: u64 = 2 << 20;

/// The buffer cut into chunks of 2 MiB, or of a larger power of two when
/// that would give more than [`MAX_GROUND_TRUTH_RANGES`] chunks; the last
/// chunk may be short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkGrid {
    shift: u32,
    count: u64,
    buffer_bytes: u64,
}

impl ChunkGrid {
    /// The grid for a buffer of `buffer_bytes`.
    pub fn new(buffer_bytes: u64) -> Self {
        let mut shift = CHUNK_BYTES.trailing_zeros();
        while buffer_bytes.div_ceil(1 << shift) > MAX_GROUND_TRUTH_RANGES {
            shift += 1;
        }
        ChunkGrid {
            shift,
            count: buffer_bytes.div_ceil(1 << shift),
            buffer_bytes,
        }
    }

    /// Number of chunks (= ground-truth entries).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes per chunk (the last one may be shorter).
    pub fn chunk_bytes(&self) -> u64 {
        1 << self.shift
    }

    /// Writes one zero-weight entry per chunk of a buffer at `buffer_gpa`.
    pub fn reset(&self, area: &GroundTruthArea<'_>, buffer_gpa: u64, write_fraction: f64) {
        for c in 0..self.count {
            let start = c << self.shift;
            area.set(
                c as usize,
                &AccessRange {
                    gpa: buffer_gpa + start,
                    len: self.chunk_bytes().min(self.buffer_bytes - start),
                    weight: 0.0,
                    write_fraction,
                },
            );
        }
    }

    /// Adds `weight`, spread uniformly over buffer bytes
    /// `[offset, offset + len)`, to the chunks it covers.
    #[inline]
    pub fn add_span(&self, area: &GroundTruthArea<'_>, offset: u64, len: u64, weight: f64) {
        let (first, last) = (offset >> self.shift, (offset + len - 1) >> self.shift);
        if first == last {
            area.add_weight(first as usize, weight);
            return;
        }
        let per_byte = weight / len as f64;
        for c in first..=last {
            let lo = offset.max(c << self.shift);
            let hi = (offset + len).min((c + 1) << self.shift);
            area.add_weight(c as usize, per_byte * (hi - lo) as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize) -> Vec<AtomicU64> {
        (0..n).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn entries_encode_like_the_abi() {
        let w = words(8);
        let area = GroundTruthArea::new(&w, 0x1000);
        let r = AccessRange {
            gpa: 0x20_0000,
            len: 4096,
            weight: 0.25,
            write_fraction: 1.0,
        };
        area.set(1, &r);
        area.add_weight(1, 0.5);
        let bytes: Vec<u8> = w[4..8]
            .iter()
            .flat_map(|x| x.load(Relaxed).to_le_bytes())
            .collect();
        let decoded = AccessRange::decode(bytes.as_slice().try_into().unwrap());
        assert_eq!(decoded, AccessRange { weight: 0.75, ..r });
        assert_eq!(area.get(1), decoded);
    }

    #[test]
    fn grid_merges_chunks_past_the_range_limit() {
        let g = ChunkGrid::new(10 << 20);
        assert_eq!((g.count(), g.chunk_bytes()), (5, 2 << 20));
        let g = ChunkGrid::new((10 << 20) + 4096);
        assert_eq!(g.count(), 6);
        let g = ChunkGrid::new(MAX_GROUND_TRUTH_RANGES * (2 << 20));
        assert_eq!(
            (g.count(), g.chunk_bytes()),
            (MAX_GROUND_TRUTH_RANGES, 2 << 20)
        );
        let g = ChunkGrid::new(MAX_GROUND_TRUTH_RANGES * (2 << 20) + 1);
        assert_eq!(g.chunk_bytes(), 4 << 20);
        assert!(g.count() <= MAX_GROUND_TRUTH_RANGES);
        assert_eq!(ChunkGrid::new(4096).count(), 1);
    }

    #[test]
    fn spans_split_by_overlap() {
        let g = ChunkGrid::new((4 << 20) + 8192);
        let w = words(g.count() as usize * RANGE_WORDS);
        let area = GroundTruthArea::new(&w, 1 << 30);
        g.reset(&area, 1 << 30, 0.5);
        assert_eq!(area.get(2).len, 8192);
        assert_eq!(area.get(2).gpa, (1 << 30) + (4 << 20));
        // 1 MiB before and 3 MiB after the first boundary, plus the tail.
        g.add_span(&area, 1 << 20, (4 << 20) + 4096, 1.0);
        let total = 4.0 * 1048576.0 + 4096.0;
        let want = [
            1048576.0 / total,
            2097152.0 / total,
            (1048576.0 + 4096.0) / total,
        ];
        for (i, want) in want.iter().enumerate() {
            assert!((area.get(i).weight - want).abs() < 1e-12, "{i}");
        }
        g.add_span(&area, 0, 8, 2.0);
        assert!((area.get(0).weight - 2.0 - want[0]).abs() < 1e-12);
        assert_eq!(area.get(0).write_fraction, 0.5);
    }
}

//! Ordering frames by a per-frame score (a heat model's heat, the oracle's
//! access probability): the rankings tests and benchmarks judge a tracker
//! by. The engine's planner does not rank this way (it orders candidates
//! and victims by its own keys), so this lives on the harness side.
//!
//! Top-k selects with `select_nth_unstable` and sorts only the k selected
//! (O(n + k log k), not a full sort of n). Equal scores rank the lower
//! frame index first, so rankings are deterministic. Frame indices are
//! ranked as `u32`: at most [`MAX_FRAMES`] frames.

use thiserror::Error;

/// Most frames a ranking orders (indices are packed as `u32`).
pub const MAX_FRAMES: usize = u32::MAX as usize;

/// Frames that cannot be ranked among.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RankingError {
    /// A frame index is out of range.
    #[error("frame {frame} out of range ({frames} frames)")]
    FrameOutOfRange {
        /// The index given.
        frame: usize,
        /// Frames ranked.
        frames: usize,
    },
    /// A frame was given twice.
    #[error("frame {frame} given twice")]
    DuplicateFrame {
        /// The index given twice.
        frame: usize,
    },
}

/// Which end of the ranking comes first.
#[derive(Clone, Copy)]
enum Order {
    HottestFirst,
    ColdestFirst,
}

/// A sort key for `frame`: ascending keys follow `order`, ties by frame
/// index. Sorting plain integers keeps the heat next to the index, instead
/// of a comparator that looks each heat up at random.
fn key(heat: f64, frame: u32, order: Order) -> u128 {
    // The IEEE-754 total order (as `f64::total_cmp`) as an unsigned integer.
    let bits = heat.to_bits();
    let ascending = if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    };
    let by_heat = match order {
        Order::HottestFirst => !ascending,
        Order::ColdestFirst => ascending,
    };
    u128::from(by_heat) << 32 | u128::from(frame)
}

/// The `k` smallest of `keys`, ascending, as frame indices.
fn smallest_k(mut keys: Vec<u128>, k: usize) -> Vec<usize> {
    let k = k.min(keys.len());
    if k == 0 {
        return Vec::new();
    }
    if k < keys.len() {
        keys.select_nth_unstable(k - 1);
        keys.truncate(k);
    }
    keys.sort_unstable();
    // The low 32 bits are the frame.
    keys.into_iter().map(|key| key as u32 as usize).collect()
}

/// The `k` hottest frames (all of them if fewer), hottest first.
pub fn hottest(heat: &[f64], k: usize) -> Vec<usize> {
    // Callers hold at most MAX_FRAMES frames (a HeatModel refuses more).
    let keys = (0..heat.len().min(MAX_FRAMES) as u32)
        .zip(heat)
        .map(|(f, &h)| key(h, f, Order::HottestFirst))
        .collect();
    smallest_k(keys, k)
}

/// The `k` coldest of `frames` (e.g. the frames on the fast tier), coldest
/// first. Every frame must exist and be given once.
pub fn coldest_among(heat: &[f64], frames: &[usize], k: usize) -> Result<Vec<usize>, RankingError> {
    let len = heat.len().min(MAX_FRAMES);
    let mut seen = vec![0u64; len.div_ceil(64)];
    let mut candidates = Vec::with_capacity(frames.len());
    for &frame in frames {
        if frame >= len {
            return Err(RankingError::FrameOutOfRange {
                frame,
                frames: heat.len(),
            });
        }
        let (word, bit) = (frame / 64, 1u64 << (frame % 64));
        if seen[word] & bit != 0 {
            return Err(RankingError::DuplicateFrame { frame });
        }
        seen[word] |= bit;
        // frame < MAX_FRAMES = u32::MAX.
        candidates.push(frame as u32);
    }
    Ok(coldest(heat, &candidates, k))
}

/// The `k` coldest of `candidates` (distinct indices into `heat`), coldest
/// first.
fn coldest(heat: &[f64], candidates: &[u32], k: usize) -> Vec<usize> {
    let keys = candidates
        .iter()
        .map(|&f| key(heat[f as usize], f, Order::ColdestFirst))
        .collect();
    smallest_k(keys, k)
}

/// Every frame, hottest first.
pub fn rank(heat: &[f64]) -> Vec<usize> {
    hottest(heat, heat.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hottest_first_with_ties_by_index() {
        let heat = [1.0, 5.0, 0.0, 5.0, 3.0];
        assert_eq!(hottest(&heat, 3), vec![1, 3, 4]);
        assert_eq!(rank(&heat), vec![1, 3, 4, 0, 2]);
        assert_eq!(hottest(&heat, 0), Vec::<usize>::new());
        assert_eq!(hottest(&heat, 99).len(), 5);
        assert_eq!(hottest(&[], 4), Vec::<usize>::new());
    }

    #[test]
    fn nothing_to_rank_ranks_nothing() {
        assert!(hottest(&[], 5).is_empty());
        assert!(rank(&[]).is_empty());
        assert_eq!(coldest_among(&[], &[], 3), Ok(vec![]));
    }

    #[test]
    fn coldest_among_refuses_unknown_and_repeated_frames() {
        let heat = [0.0; 4];
        assert_eq!(
            coldest_among(&heat, &[1, 4], 1),
            Err(RankingError::FrameOutOfRange {
                frame: 4,
                frames: 4
            })
        );
        assert_eq!(
            coldest_among(&heat, &[2, 1, 2], 1),
            Err(RankingError::DuplicateFrame { frame: 2 })
        );
    }

    #[test]
    fn coldest_among_candidates_only() {
        let heat = [1.0, 5.0, 0.0, 5.0, 3.0];
        assert_eq!(coldest(&heat, &[1, 3, 4], 2), vec![4, 1]);
        assert_eq!(coldest(&heat, &[3, 1], 5), vec![1, 3]);
    }

    #[test]
    fn keys_follow_the_total_order_of_heats() {
        // The model never makes these, but the keys must still order them.
        let heat = [3.0, -1.0, 0.0, -0.0, f64::INFINITY, 1e-310, f64::NAN, 2.5];
        let mut expected: Vec<usize> = (0..heat.len()).collect();
        expected.sort_by(|&a, &b| heat[a].total_cmp(&heat[b]).then(a.cmp(&b)));
        let all: Vec<u32> = (0..heat.len() as u32).collect();
        assert_eq!(coldest(&heat, &all, heat.len()), expected);
        expected.sort_by(|&a, &b| heat[b].total_cmp(&heat[a]).then(a.cmp(&b)));
        assert_eq!(rank(&heat), expected);
    }

    #[test]
    fn selection_matches_a_full_sort() {
        // Deterministic pseudo-random heats with many ties.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let heat: Vec<f64> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 97) as f64 * 0.5
            })
            .collect();
        let mut sorted: Vec<usize> = (0..heat.len()).collect();
        sorted.sort_by(|&a, &b| heat[b].total_cmp(&heat[a]).then(a.cmp(&b)));
        for k in [1, 10, 777, 4999, 5000] {
            assert_eq!(hottest(&heat, k), sorted[..k], "k = {k}");
        }
        let evens: Vec<u32> = (0..5000).step_by(2).collect();
        let mut cold: Vec<usize> = evens.iter().map(|&f| f as usize).collect();
        cold.sort_by(|&a, &b| heat[a].total_cmp(&heat[b]).then(a.cmp(&b)));
        assert_eq!(coldest(&heat, &evens, 100), cold[..100]);
    }
}

//! Where every guest frame was over a run, kept small enough for the JSON
//! file: the placement samples from phase 0 on, frames grouped into at
//! most [`MAX_ROWS`] rows and samples into at most [`MAX_COLUMNS`]
//! columns, each cell the share of its frame-samples on the fast tier
//! (quantised to [`LEVELS`] steps), each row stored as runs of equal
//! cells.

use serde::{Deserialize, Serialize};

use crate::suite_common::Sample;

/// Most rows (groups of frames) kept.
pub const MAX_ROWS: usize = 256;
/// Most columns (groups of samples) kept.
pub const MAX_COLUMNS: usize = 300;
/// Steps of a cell's fast-tier share: level `l` is a share of
/// `l / LEVELS`.
pub const LEVELS: u32 = 8;

/// The placement over a run, downsampled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierMap {
    /// Frames of guest RAM.
    pub frames: usize,
    /// Frames per row (the last row may hold fewer).
    pub frames_per_row: usize,
    /// Placement samples per column (the last column may hold fewer).
    pub samples_per_column: usize,
    /// Column edges, seconds after phase 0 began: column `i` spans
    /// `edges[i]` to `edges[i + 1]` (its first sample to the next
    /// column's; the last ends one sample interval after its last sample).
    pub edges: Vec<f64>,
    /// Per row, frame 0 first: runs of equal cells as `[columns, level]`.
    pub rows: Vec<Vec<[u32; 2]>>,
}

impl TierMap {
    /// The map of `samples` taken at or after `origin` (phase 0's start,
    /// on the samples' clock), `sample_secs` apart; `None` without such a
    /// sample or without frames.
    pub fn from_samples(samples: &[Sample], origin: f64, sample_secs: f64) -> Option<Self> {
        let samples: Vec<&Sample> = samples.iter().filter(|s| s.at_secs >= origin).collect();
        let frames = samples.first()?.tiers.len();
        if frames == 0 {
            return None;
        }
        let frames_per_row = frames.div_ceil(MAX_ROWS);
        let samples_per_column = samples.len().div_ceil(MAX_COLUMNS);
        let columns: Vec<&[&Sample]> = samples.chunks(samples_per_column).collect();
        let mut edges: Vec<f64> = columns.iter().map(|c| c[0].at_secs - origin).collect();
        let last = samples.last().map_or(origin, |s| s.at_secs);
        edges.push(last - origin + sample_secs);
        let rows = (0..frames.div_ceil(frames_per_row))
            .map(|row| {
                let first = row * frames_per_row;
                let frame_range = first..(first + frames_per_row).min(frames);
                let levels = columns.iter().map(|column| {
                    let (fast, all) = column
                        .iter()
                        .flat_map(|s| s.tiers.get(frame_range.clone()).unwrap_or(&[]))
                        .fold((0u64, 0u64), |(f, a), &t| (f + u64::from(t == 0), a + 1));
                    level(fast, all)
                });
                runs(levels)
            })
            .collect();
        Some(Self {
            frames,
            frames_per_row,
            samples_per_column,
            edges,
            rows,
        })
    }

    /// Columns kept.
    pub fn columns(&self) -> usize {
        self.edges.len().saturating_sub(1)
    }

    /// The fast-tier share of every cell of `row`, left to right.
    pub fn row_shares(&self, row: usize) -> Vec<f64> {
        self.rows.get(row).map_or_else(Vec::new, |runs| {
            runs.iter()
                .flat_map(|&[n, l]| std::iter::repeat_n(share(l), n as usize))
                .collect()
        })
    }
}

/// The share of `level`.
pub fn share(level: u32) -> f64 {
    f64::from(level.min(LEVELS)) / f64::from(LEVELS)
}

/// `fast / all` quantised to a level, rounding to the nearest.
fn level(fast: u64, all: u64) -> u32 {
    if all == 0 {
        return 0;
    }
    let scaled = (fast * u64::from(LEVELS) * 2 + all) / (all * 2);
    u32::try_from(scaled).unwrap_or(LEVELS).min(LEVELS)
}

/// `levels` as runs of equal values, `[count, level]`.
fn runs(levels: impl Iterator<Item = u32>) -> Vec<[u32; 2]> {
    let mut runs: Vec<[u32; 2]> = Vec::new();
    for l in levels {
        match runs.last_mut() {
            Some([n, last]) if *last == l => *n += 1,
            _ => runs.push([1, l]),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_secs: f64, tiers: Vec<u8>) -> Sample {
        Sample {
            at_secs,
            phase: Some(0),
            tiers,
        }
    }

    #[test]
    fn small_runs_keep_every_frame_and_sample() {
        // Frame 1 moves to the fast tier at the third sample; the sample
        // before phase 0 is left out.
        let samples = vec![
            sample(9.9, vec![0, 1, 1]),
            sample(10.0, vec![0, 1, 1]),
            sample(10.1, vec![0, 1, 1]),
            sample(10.2, vec![0, 0, 1]),
        ];
        let map = TierMap::from_samples(&samples, 10.0, 0.1).unwrap();
        assert_eq!(
            (map.frames, map.frames_per_row, map.samples_per_column),
            (3, 1, 1)
        );
        assert_eq!(map.columns(), 3);
        assert!((map.edges[3] - 0.3).abs() < 1e-9, "{:?}", map.edges);
        assert_eq!(map.rows, [vec![[3, 8]], vec![[2, 0], [1, 8]], vec![[3, 0]]]);
        assert_eq!(map.row_shares(1), [0.0, 0.0, 1.0]);
        assert!(TierMap::from_samples(&samples, 11.0, 0.1).is_none());
    }

    #[test]
    fn large_runs_are_grouped_and_blend() {
        // 1024 frames, 600 samples: 4 frames per row, 2 samples per
        // column. Frames 0 and 1 are fast, 2 and 3 slow: row 0 is half
        // fast. Frame 4 is fast every other sample: row 1 is an eighth.
        let samples: Vec<Sample> = (0..600)
            .map(|i| {
                let mut tiers = vec![1u8; 1024];
                tiers[0] = 0;
                tiers[1] = 0;
                if i % 2 == 0 {
                    tiers[4] = 0;
                }
                sample(f64::from(i) * 0.1, tiers)
            })
            .collect();
        let map = TierMap::from_samples(&samples, 0.0, 0.1).unwrap();
        assert_eq!((map.frames_per_row, map.samples_per_column), (4, 2));
        assert_eq!((map.rows.len(), map.columns()), (MAX_ROWS, MAX_COLUMNS));
        assert_eq!(map.rows[0], [[300, 4]]);
        assert_eq!(map.rows[1], [[300, 1]]);
        assert_eq!(map.rows[2], [[300, 0]]);
        assert_eq!(map.row_shares(0)[0], 0.5);
    }

    #[test]
    fn levels_round_to_the_nearest() {
        assert_eq!(level(0, 0), 0);
        assert_eq!(level(1, 16), 1);
        assert_eq!(level(1, 17), 0);
        assert_eq!(level(5, 5), LEVELS);
        assert_eq!(share(4), 0.5);
    }
}

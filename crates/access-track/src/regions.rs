//! DAMON-style adaptive regions over a VM's frames: where the windowed
//! sampler spends its budget.
//!
//! Guest RAM is cut into contiguous runs of frames (regions). Every window
//! looks at the same number of 4 KiB pages in every region (one, unless
//! the budget affords more pages than there are frames), each chosen
//! uniformly over the region's pages, so each frame of a region, and each
//! page of a frame, is equally
//! likely to be looked at and per-frame estimates stay unbiased whatever
//! the region sizes. After each aggregation (a fixed number of windows)
//! neighbouring regions whose hit ratios agree are merged, and the largest
//! regions are split in two at a random frame until there are as many as
//! the budget affords: regions stay small where heat changes and grow
//! where it agrees, so the samples go where they tell most, and a hot spot
//! inside a large region is found when the region's turn to split comes.

use crate::xorshift::XorShift;

/// Hit ratios closer than this (a share of windows) are said to agree.
const MERGE_DIFF: f64 = 0.1;

/// One region: frames `[start, end)` and what its windows saw since the
/// last aggregation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    /// First frame.
    pub start: usize,
    /// One past the last frame.
    pub end: usize,
    /// Windows that looked at the region.
    pub looks: u32,
    /// Windows whose page was touched.
    pub hits: u32,
    /// Looks since the sampler last judged its window.
    pub recent_looks: u32,
    /// Hits since the sampler last judged its window.
    pub recent_hits: u32,
}

impl Region {
    fn frames(&self) -> usize {
        self.end - self.start
    }

    fn ratio(&self) -> Option<f64> {
        hit_ratio(self.hits, self.looks)
    }

    fn recent_ratio(&self) -> Option<f64> {
        hit_ratio(self.recent_hits, self.recent_looks)
    }
}

/// `hits / looks`, or `None` without a look.
fn hit_ratio(hits: u32, looks: u32) -> Option<f64> {
    (looks > 0).then(|| f64::from(hits) / f64::from(looks))
}

/// The regions of one VM.
#[derive(Clone, Debug)]
pub(crate) struct Regions {
    list: Vec<Region>,
    frames: usize,
    pages_per_frame: u64,
    min: usize,
    max: usize,
    /// Pages looked at per region and window.
    per_region: usize,
}

impl Regions {
    /// `frames` frames of `pages_per_frame` pages, looked at `pages` pages
    /// per window: in as many regions as that (at most one per frame, at
    /// least `min` while there are that many frames), each looked at
    /// `pages / regions` times per window; starting with equal regions.
    pub fn new(frames: usize, pages_per_frame: u64, min: usize, pages: usize) -> Self {
        let max = pages.max(1).min(frames.max(1));
        let min = min.clamp(1, max);
        let mut regions = Regions {
            list: Vec::new(),
            frames,
            pages_per_frame: pages_per_frame.max(1),
            min,
            max,
            per_region: (pages / max).max(1),
        };
        if frames > 0 {
            regions.list = (0..max)
                .map(|i| Region {
                    start: i * frames / max,
                    end: (i + 1) * frames / max,
                    looks: 0,
                    hits: 0,
                    recent_looks: 0,
                    recent_hits: 0,
                })
                .filter(|r| r.end > r.start)
                .collect();
        }
        regions
    }

    /// The regions, in address order.
    pub fn list(&self) -> &[Region] {
        &self.list
    }

    /// Fills `out` with the same number of pages of each region (as `frame × pages_per_frame + page`), region by region.
    pub fn pick(&self, rng: &mut XorShift, out: &mut Vec<u64>) {
        out.clear();
        for r in &self.list {
            let pages = r.frames() as u64 * self.pages_per_frame;
            for _ in 0..self.per_region {
                out.push(r.start as u64 * self.pages_per_frame + rng.below(pages));
            }
        }
    }

    /// Records one window: the `i`-th page of the last pick counted
    /// `looks[i]` looks (sub-windows of the window's length) and was
    /// touched in the last of them if `hits[i]` (the regions have not
    /// changed since).
    pub fn record(&mut self, looks: &[u32], hits: &[bool]) {
        for (r, (looks, hits)) in self.list.iter_mut().zip(
            looks
                .chunks(self.per_region)
                .zip(hits.chunks(self.per_region)),
        ) {
            let (looks, hits) = (
                looks.iter().sum::<u32>(),
                hits.iter().filter(|&&t| t).count() as u32,
            );
            r.looks = r.looks.saturating_add(looks);
            r.hits = r.hits.saturating_add(hits);
            r.recent_looks = r.recent_looks.saturating_add(looks);
            r.recent_hits = r.recent_hits.saturating_add(hits);
        }
    }

    /// Mean hit ratio of the hottest tenth of the regions (at least one)
    /// since the last [`judged`](Self::judged): near 1 when the window is
    /// so long that hot pages are caught in every window (saturation).
    /// `None` before any window.
    pub fn hottest_ratio(&self) -> Option<f64> {
        let mut ratios = self.recent_ratios()?;
        ratios.sort_unstable_by(|a, b| b.total_cmp(a));
        let top = ratios.len().div_ceil(10);
        Some(ratios[..top].iter().sum::<f64>() / top as f64)
    }

    /// Hit ratio of the median region since the last
    /// [`judged`](Self::judged): near 1 when even the typical region is
    /// caught in every window (the window is far too long). `None` before
    /// any window.
    pub fn median_ratio(&self) -> Option<f64> {
        let mut ratios = self.recent_ratios()?;
        let mid = ratios.len() / 2;
        let (_, median, _) = ratios.select_nth_unstable_by(mid, |a, b| a.total_cmp(b));
        Some(*median)
    }

    /// Each looked-at region's hit ratio since the last judgement; `None`
    /// when no region was looked at.
    fn recent_ratios(&self) -> Option<Vec<f64>> {
        let ratios: Vec<f64> = self.list.iter().filter_map(Region::recent_ratio).collect();
        (!ratios.is_empty()).then_some(ratios)
    }

    /// The sampler judged its window: the recent counts start again.
    pub fn judged(&mut self) {
        for r in &mut self.list {
            r.recent_looks = 0;
            r.recent_hits = 0;
        }
    }

    /// Ends an aggregation: merges neighbours that agree, splits the
    /// largest regions up to `max`, and zeroes the counts.
    pub fn adapt(&mut self, rng: &mut XorShift) {
        self.merge();
        self.split(rng);
        for r in &mut self.list {
            *r = Region {
                start: r.start,
                end: r.end,
                looks: 0,
                hits: 0,
                recent_looks: 0,
                recent_hits: 0,
            };
        }
    }

    fn merge(&mut self) {
        // A merged region stays below `frames / min`, so the regions never
        // fall below `min` (DAMON's size limit).
        let limit = (self.frames / self.min).max(1);
        let mut merged: Vec<Region> = Vec::with_capacity(self.list.len());
        for r in self.list.drain(..) {
            if let Some(last) = merged.last_mut() {
                let agree = match (last.ratio(), r.ratio()) {
                    (Some(a), Some(b)) => (a - b).abs() <= MERGE_DIFF,
                    _ => false,
                };
                if agree && last.frames() + r.frames() <= limit {
                    last.end = r.end;
                    last.looks += r.looks;
                    last.hits += r.hits;
                    continue;
                }
            }
            merged.push(r);
        }
        self.list = merged;
    }

    fn split(&mut self, rng: &mut XorShift) {
        // Passes that each split the largest regions in two, until the
        // budget's regions are reached or every region is one frame.
        while self.list.len() < self.max {
            let room = self.max - self.list.len();
            let mut sizes: Vec<usize> = self.list.iter().map(Region::frames).collect();
            sizes.sort_unstable_by(|a, b| b.cmp(a));
            if sizes.first().is_none_or(|&largest| largest < 2) {
                return;
            }
            // Regions at least this large are split in this pass.
            let cut = sizes[room.min(sizes.len()) - 1].max(2);
            let mut left = room;
            let mut split = Vec::with_capacity(self.list.len() + room);
            for r in self.list.drain(..) {
                if left > 0 && r.frames() >= cut {
                    let at = r.start + 1 + rng.below(r.frames() as u64 - 1) as usize;
                    split.push(Region { end: at, ..r });
                    split.push(Region { start: at, ..r });
                    left -= 1;
                } else {
                    split.push(r);
                }
            }
            self.list = split;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covers_every_frame_once(r: &Regions) {
        let mut next = 0;
        for region in r.list() {
            assert_eq!(region.start, next, "{:?}", r.list());
            assert!(region.end > region.start);
            next = region.end;
        }
        assert_eq!(next, r.frames);
    }

    #[test]
    fn picks_one_page_per_region_inside_it() {
        let r = Regions::new(100, 512, 10, 50);
        let mut rng = XorShift::new(7);
        let mut out = Vec::new();
        r.pick(&mut rng, &mut out);
        assert_eq!(out.len(), 50);
        for (page, region) in out.iter().zip(r.list()) {
            let frame = (page / 512) as usize;
            assert!((region.start..region.end).contains(&frame));
        }
    }

    #[test]
    fn regions_split_up_to_the_budget_and_merge_where_heat_agrees() {
        let mut r = Regions::new(1000, 512, 10, 64);
        let mut rng = XorShift::new(1);
        // A flat guest: every region agrees, so merging undoes splitting
        // and the count never passes the budget.
        for _ in 0..20 {
            let n = r.list().len();
            r.record(&vec![1; n], &vec![true; n]);
            r.adapt(&mut rng);
            covers_every_frame_once(&r);
            assert!(r.list().len() <= 64);
            assert!(r.list().len() >= 10);
        }
        // Frames 0..100 hot, the rest cold: after a few aggregations the
        // boundary is resolved by small regions, the cold rest by few.
        for _ in 0..30 {
            let touched: Vec<bool> = r.list().iter().map(|g| g.end <= 100).collect();
            r.record(&vec![1; touched.len()], &touched);
            r.adapt(&mut rng);
            covers_every_frame_once(&r);
            assert!(r.list().len() <= 64);
        }
        // Hot and cold never merge: the hot frames keep regions of their
        // own.
        assert!(r.list().iter().any(|g| g.end <= 100), "{:?}", r.list());
        assert!(r.list().iter().any(|g| g.start >= 100));
    }

    #[test]
    fn saturation_is_the_hottest_tenth_caught_every_window() {
        let mut r = Regions::new(100, 512, 10, 10);
        assert_eq!(r.hottest_ratio(), None);
        let touched: Vec<bool> = (0..10).map(|i| i == 0).collect();
        r.record(&[1; 10], &touched);
        assert_eq!(r.hottest_ratio(), Some(1.0));
        r.record(&[1; 10], &[false; 10]);
        assert_eq!(r.hottest_ratio(), Some(0.5));
        assert_eq!(r.median_ratio(), Some(0.0));
        // A page first touched in its third sub-window: one hit in three
        // looks.
        r.judged();
        r.record(&[3, 1, 1, 1, 1, 1, 1, 1, 1, 1], &touched);
        assert_eq!(r.hottest_ratio(), Some(1.0 / 3.0));
    }

    #[test]
    fn tiny_guests_get_one_region_per_frame_at_most() {
        let r = Regions::new(3, 512, 10, 100);
        assert_eq!(r.list().len(), 3);
        let none = Regions::new(0, 512, 10, 100);
        assert!(none.list().is_empty());
    }
}

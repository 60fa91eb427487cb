//! The pre-copy protocol of the remap migrator: a frame's first copy runs
//! while the guest writes freely; the dirty source says which 4 KiB pages
//! changed meanwhile, and those are copied again (a few rounds) before the
//! frames are write-protected, a small group at a time, for the last
//! delta (`final_groups`, whose groups adapt to a stall budget). Owns the
//! rounds, the final groups, the last delta and the dirty-log calls'
//! accounting; the write-protected final phase around the last delta is
//! shared with the plain protocol (`final_phase`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use page_copy::CopyEngine;

use super::precopy_config::PrecopyConfig;
use super::{Failure, Hold, Planned, RemapMigrator, StepResult};
use crate::gpa_range::GpaRange;
use crate::ids::FrameId;
use crate::migrate::dirty::{DirtyError, PAGE_SIZE};
use crate::migrate::faults::WRITE_WAIT_LIMIT;
use crate::migrate::outcome::{BatchOutcome, MoveStep, StepError};
use crate::migrate::urgent::Urgent;
use crate::tiered::TieredMemory;

/// Most frames per write-protected final phase of the pre-copy protocol.
const PRECOPY_GROUP_MAX: usize = 32;
/// Time one pre-copy final phase aims to keep its frames protected: the
/// group size adapts so that protect, the last delta and the remaps of a
/// group fit in it (a writer waits for at most about one group).
const PRECOPY_STALL_BUDGET: Duration = Duration::from_micros(400);

impl RemapMigrator {
    /// Pre-copy's last delta for `moves`, whose writers are held: the pages
    /// the final take of the dirty log reports, with `carried` (still dirty
    /// after the rounds), copied with `engine`.
    pub(super) fn final_delta(
        &self,
        cfg: &PrecopyConfig,
        moves: &[Planned],
        mut carried: Vec<u64>,
        engine: &dyn CopyEngine,
        out: &mut BatchOutcome,
    ) -> StepResult {
        dirty_log(out, None, || {
            cfg.dirty.take_final(&self.spans(moves), &mut carried)
        })?;
        carried.sort_unstable();
        carried.dedup();
        out.report.recopied_pages += carried.len() as u64;
        self.copy_with(engine, &self.page_pieces(moves, &carried), out)
    }

    /// Page copy pieces for dirty guest pages of `moves`.
    fn page_pieces(&self, moves: &[Planned], pages: &[u64]) -> Vec<(u64, u64, u64)> {
        let frames = self.memory.frames();
        // Looked up once per page: a batch of 512 frames re-copies
        // thousands of pages.
        let by_frame: HashMap<FrameId, &Planned> = moves.iter().map(|m| (m.frame, m)).collect();
        let mut out = Vec::with_capacity(pages.len());
        for &gpa in pages {
            let Some(frame) = frames.frame_of_gpa(gpa) else {
                continue;
            };
            let Some(m) = by_frame.get(&frame) else {
                continue;
            };
            let Some(base) = frames.gpa(frame) else {
                continue;
            };
            let off = (gpa - base) & !(PAGE_SIZE - 1);
            out.push((
                self.view(m.from) + off,
                self.view(m.to) + off,
                PAGE_SIZE.min(self.frame_size()),
            ));
        }
        out
    }

    pub(super) fn spans(&self, moves: &[Planned]) -> Vec<GpaRange> {
        let frames = self.memory.frames();
        moves
            .iter()
            .filter_map(|m| {
                frames
                    .gpa(m.frame)
                    .map(|g| GpaRange::new(g, self.frame_size()))
            })
            .collect()
    }

    /// Pre-copy rounds while the guest runs: tracks writes to `moves`
    /// from now on and [`recopy_rounds`](Self::recopy_rounds). Returns the
    /// dirty pages left for the write-protected final delta.
    pub(super) fn precopy_rounds(
        &self,
        cfg: &PrecopyConfig,
        moves: &[Planned],
        out: &mut BatchOutcome,
    ) -> Result<Vec<u64>, Failure> {
        dirty_log(out, None, || cfg.dirty.reset(&self.spans(moves)))?;
        self.recopy_rounds(cfg, moves, None, out)
    }

    /// Copies `moves`, whose writes the dirty source tracks since before
    /// this call, then copies again what the guest wrote meanwhile, a few
    /// rounds; returns the dirty pages left for the final delta. Each read
    /// of the dirty log holds `turn`, if given (see
    /// [`final_groups`](Self::final_groups)).
    pub(super) fn recopy_rounds(
        &self,
        cfg: &PrecopyConfig,
        moves: &[Planned],
        turn: Option<&Mutex<()>>,
        out: &mut BatchOutcome,
    ) -> Result<Vec<u64>, Failure> {
        let spans = self.spans(moves);
        self.copy(&self.frame_pieces(moves), out)?;
        let mut pages = Vec::new();
        if self.faults.take_dirty_wait() {
            Self::wait_for_dirty(cfg, &spans, turn, &mut pages)?;
            out.report.recopied_pages += pages.len() as u64;
            self.copy(&self.page_pieces(moves, &pages), out)?;
        }
        for _ in 0..cfg.max_rounds {
            pages.clear();
            dirty_log(out, turn, || cfg.dirty.take(&spans, &mut pages))?;
            if pages.len() <= cfg.settle_pages {
                break;
            }
            out.report.recopied_pages += pages.len() as u64;
            self.copy(&self.page_pieces(moves, &pages), out)?;
            pages.clear();
        }
        Ok(pages)
    }

    /// Takes the dirty log of `spans` into `pages` until it shows a page,
    /// at most [`WRITE_WAIT_LIMIT`] (the test hook of
    /// [`FaultInjection::hold_precopy_until_dirty`]).
    fn wait_for_dirty(
        cfg: &PrecopyConfig,
        spans: &[GpaRange],
        turn: Option<&Mutex<()>>,
        pages: &mut Vec<u64>,
    ) -> Result<(), Failure> {
        let started = Instant::now();
        while pages.is_empty() && started.elapsed() < WRITE_WAIT_LIMIT {
            let held = turn.map(|t| t.lock().unwrap_or_else(PoisonError::into_inner));
            cfg.dirty.take(spans, pages).map_err(precopy_dirty)?;
            drop(held);
            if pages.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// Pre-copy's write-protected final phase over `moves`, per group, so
    /// a writer waits for one group's delta and remap, not the whole
    /// batch's; the group grows or shrinks so a group takes about the
    /// stall budget, starting from `group` frames (left at the size for
    /// the next group). Each group registers its own new mappings.
    /// Registering a whole pre-copy batch's once, after its last group,
    /// was tried: p99 stalls of a write-busy guest on shmem tiers measured
    /// 1.9-8.6 ms in three runs against ~0.3 ms, likely because groups
    /// timed without their registration grow.
    ///
    /// Each group holds `turn`, if given, from before its protection to
    /// its commit; the pre-copy of the next sub-batch of a pipelined batch
    /// holds it for each dirty-log read. A protected group then never
    /// waits for such a read: a KVM harvest holds the log's lock over all
    /// its `KVM_CLEAR_DIRTY_LOG` calls, and each of those holds the MMU
    /// lock the remap's invalidation needs (writers stalled 3 ms behind
    /// a sub-batch's harvest without the turn, ~0.2 ms with it).
    pub(super) fn final_groups(
        &self,
        moves: &[Planned],
        carried: &[u64],
        engine: &dyn CopyEngine,
        turn: Option<&Mutex<()>>,
        group: &mut usize,
        out: &mut BatchOutcome,
    ) {
        let mut rest = moves;
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at((*group).min(rest.len()));
            rest = tail;
            let chunk_carried = Self::carried_for(&self.memory, chunk, carried);
            let _turn = turn.map(|t| t.lock().unwrap_or_else(PoisonError::into_inner));
            let started = Instant::now();
            self.final_phase(chunk.to_vec(), chunk_carried, Hold::Protect, engine, out);
            *group = next_group(chunk.len(), started.elapsed());
        }
    }

    /// Gives up `moves` before anything was held (pre-copy failed):
    /// destinations released, moves recorded as failed with `why`.
    pub(super) fn drop_all(&self, moves: &[Planned], why: Failure, out: &mut BatchOutcome) {
        for m in moves {
            self.drop_destination(m.to);
        }
        Self::fail_all(moves, why, out);
    }

    /// The pages of `carried` that lie in the frames of `moves`.
    fn carried_for(memory: &TieredMemory, moves: &[Planned], carried: &[u64]) -> Vec<u64> {
        let mine: HashSet<FrameId> = moves.iter().map(|m| m.frame).collect();
        let frames = memory.frames();
        carried
            .iter()
            .copied()
            .filter(|&gpa| frames.frame_of_gpa(gpa).is_some_and(|f| mine.contains(&f)))
            .collect()
    }
}

/// Runs a dirty-log call of pre-copy, its time counted as `dirty`. The
/// call runs urgent: sources serialize their reads (the KVM log under one
/// harvest lock), and in a pipelined batch a write-protected final group
/// may wait for a read of the next sub-batch, which must not be preempted
/// meanwhile.
pub(super) fn dirty_log(
    out: &mut BatchOutcome,
    turn: Option<&Mutex<()>>,
    call: impl FnOnce() -> Result<(), DirtyError>,
) -> Result<(), Failure> {
    let _turn = turn.map(|t| t.lock().unwrap_or_else(PoisonError::into_inner));
    let _urgent = Urgent::new();
    let started = Instant::now();
    let result = call();
    out.report.dirty += started.elapsed();
    result.map_err(precopy_dirty)
}

/// A dirty-log failure during pre-copy.
fn precopy_dirty(e: DirtyError) -> Failure {
    (MoveStep::Precopy, StepError::Dirty(Arc::new(e)))
}

/// Size of the next pre-copy final group after one of `frames` frames took
/// `took`: what fits the stall budget at the same cost per frame, at most
/// double the last (costs vary) and within `1..=PRECOPY_GROUP_MAX`.
fn next_group(frames: usize, took: Duration) -> usize {
    let per_frame = took.as_nanos() / frames.max(1) as u128;
    let fits = PRECOPY_STALL_BUDGET.as_nanos() / per_frame.max(1);
    (fits as usize).clamp(1, (frames.max(1) * 2).min(PRECOPY_GROUP_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_groups_fit_the_stall_budget() {
        let budget = PRECOPY_STALL_BUDGET;
        // Cheap frames: the group doubles each time, up to the cap.
        assert_eq!(next_group(1, budget / 100), 2);
        assert_eq!(next_group(16, budget / 100), PRECOPY_GROUP_MAX);
        // A group that cost exactly the budget keeps its size.
        assert_eq!(next_group(8, budget), 8);
        // Expensive frames: down to what fits, and never below one.
        assert_eq!(next_group(8, budget * 4), 2);
        assert_eq!(next_group(4, budget * 100), 1);
        assert!((1..=2).contains(&next_group(0, Duration::ZERO)));
    }
}

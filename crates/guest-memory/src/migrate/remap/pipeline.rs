//! The pipelined protocols of the remap migrator: a batch is cut, in
//! frame order, into sub-batches whose steps run at once, so the copy
//! engine is not idle while frames are protected,
//! remapped or committed. Each sub-batch succeeds or rolls back on its own,
//! exactly as a batch of the sequential protocol does.
//!
//! Plain (`pipelined_phase`): while the copy engine copies sub-batch k,
//! the calling thread remaps, wakes, registers and commits k − 1 and
//! write-protects k + 1, then joins the copy.
//!
//! Pre-copy (`pipelined_precopy`, from four sub-batches): two stages.
//! The dirty log is reset once for the batch; while this thread
//! pre-copies sub-batch k (copies its frames while the guest runs, reads
//! the dirty log over them and re-copies what the guest wrote meanwhile),
//! a helper runs the write-protected final groups of k − 1 (the last
//! delta, the remap, the wake and the commit).

use std::sync::{Mutex, PoisonError, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use page_copy::CpuCopy;

use super::precopy::dirty_log;
use super::precopy_config::PrecopyConfig;
use super::{Failure, Hold, Planned, RemapMigrator, StepResult};
use crate::ids::FrameId;
use crate::migrate::faults::WRITE_WAIT_LIMIT;
use crate::migrate::outcome::BatchOutcome;
use crate::migrate::urgent::Urgent;

/// Fewest frames in a sub-batch; a batch of fewer than two sub-batches
/// runs its steps one after another.
const PIPELINE_MIN_FRAMES: usize = 8;
/// Most frames in a sub-batch: enough to keep a threaded copy engine's
/// workers busy (128 MiB of 2 MiB frames), few enough that a writer waits
/// for one sub-batch's copy rather than the batch's.
const PIPELINE_MAX_FRAMES: usize = 64;
/// Sub-batches a batch is cut into, when their size allows.
const PIPELINE_DEPTH: usize = 4;
/// An edge sub-batch (the first of a plain batch, the last of any) holds
/// this share of a middle one's frames...
const EDGE_SHARE: usize = 4;
/// ...when that is at least this many frames; smaller batches are cut
/// evenly.
const EDGE_MIN_FRAMES: usize = 4;

/// Whether a batch of `frames` write-protectable frames runs pipelined:
/// plain batches from two sub-batches on, pre-copy ones from four. With
/// two, pre-copy's pipeline costs more than it overlaps (a dirty-log
/// read per sub-batch, and the first sub-batch's copy and the last one's
/// final groups run alone): 16-frame pre-copy batches measured 0.62-0.71×
/// of the best copy pipelined, 0.71-0.75× in sequence (2 cores, idle guest).
fn pipelines(frames: usize, precopy: bool) -> bool {
    let sub_batches = if precopy { PIPELINE_DEPTH } else { 2 };
    frames >= sub_batches * PIPELINE_MIN_FRAMES
}

impl RemapMigrator {
    /// Moves `moves`, all held by write-protection: pipelined when they
    /// make enough sub-batches ([`pipelines`]), one step after another
    /// otherwise.
    pub(super) fn move_protected(&self, moves: Vec<Planned>, out: &mut BatchOutcome) {
        if !pipelines(moves.len(), self.precopy.is_some()) {
            self.move_sequentially(moves, Hold::Protect, out);
        } else if let Some(cfg) = &self.precopy {
            self.pipelined_precopy(cfg, moves, out);
        } else {
            self.pipelined_phase(moves, out);
        }
    }

    /// The plain protocol over `moves` (writers held by write-protection),
    /// pipelined: the batch is cut, in frame order, into sub-batches, and
    /// while the copy engine copies sub-batch k, this thread remaps, wakes,
    /// registers and commits k − 1, write-protects k + 1, and then joins
    /// the copy ([`CopyEngine::copy_beside`](page_copy::CopyEngine::copy_beside)).
    /// The work beside the copy never waits for a CPU the copy holds (on
    /// 2 cores, helper threads did: in about one sub-batch of ten a woken
    /// helper waited for the whole copy of the sub-batch before, whatever
    /// its nice value), and the copy waits only for the first sub-batch's protection
    /// and the last one's remap. A sub-batch is protected only once the
    /// one before it is being copied, and remapped while the one after it
    /// is, so a writer waits for about two sub-batches' copies. Each
    /// sub-batch succeeds or rolls back on its own, exactly as a batch of
    /// the sequential protocol does: a failure in sub-batch k leaves its
    /// frames where they were with their writes, while its neighbours go
    /// on.
    fn pipelined_phase(&self, mut moves: Vec<Planned>, out: &mut BatchOutcome) {
        moves.sort_by_key(|m| m.frame);
        let subs = sub_batches(&moves, false);
        let frames: Vec<FrameId> = moves.iter().map(|m| m.frame).collect();
        // One window over the batch before anything is protected: a page
        // the fault sampler restores in it keeps its protection (see the
        // guard), whichever sub-batch it is in.
        self.guard.open_window(&self.runs(&frames));
        let started = Instant::now();
        let _urgent = Urgent::new();
        let mut copying = BatchOutcome::new(0);
        let work = Mutex::new(BesideWork::default());
        let mut protected = {
            let mut w = work.lock().unwrap_or_else(PoisonError::into_inner);
            self.protect_sub_batch(subs[0], &mut w.out)
        };
        for (k, sub) in subs.iter().enumerate() {
            let beside = || {
                let mut w = work.lock().unwrap_or_else(PoisonError::into_inner);
                let w = &mut *w;
                if w.done_beside == Some(k) {
                    return;
                }
                w.done_beside = Some(k);
                if let Some((j, copied)) = w.copied.take() {
                    self.finish_sub_batch(subs[j], copied, &mut w.out);
                }
                if let Some(after) = subs.get(k + 1) {
                    w.protected = Some(self.protect_sub_batch(after, &mut w.out));
                }
            };
            let copied = match protected {
                Ok(()) => self.copy_beside(&self.frame_pieces(sub), &beside, &mut copying),
                Err(why) => {
                    beside();
                    Err(why)
                }
            };
            // The engine ran the work; should one ever fail to, it runs
            // here, late but before anything relies on it.
            beside();
            let mut w = work.lock().unwrap_or_else(PoisonError::into_inner);
            protected = w.protected.take().unwrap_or(Ok(()));
            w.copied = Some((k, copied));
        }
        let mut w = work.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Some((j, copied)) = w.copied.take() {
            self.finish_sub_batch(subs[j], copied, &mut w.out);
        }
        absorb_stages([copying, w.out], started.elapsed(), subs.len(), out);
        self.finish_window(out);
    }

    /// Write-protects the frames of `sub` (a pipelined plain sub-batch).
    fn protect_sub_batch(&self, sub: &[Planned], out: &mut BatchOutcome) -> StepResult {
        let frames: Vec<FrameId> = sub.iter().map(|m| m.frame).collect();
        let t = Instant::now();
        let protected = self.protect(&frames);
        out.report.protect += t.elapsed();
        if protected.is_ok() && self.faults.take_write_wait() {
            self.guard.wait_for_writer(WRITE_WAIT_LIMIT);
        }
        protected
    }

    /// Ends a pipelined plain sub-batch after its copy: remaps and commits
    /// it, or rolls it back.
    fn finish_sub_batch(&self, sub: &[Planned], copied: StepResult, out: &mut BatchOutcome) {
        match copied {
            Ok(()) => {
                let done = self.remap_moves(sub, out);
                self.commit(&done, out);
            }
            Err(why) => self.abort(sub, Hold::Protect, why, out),
        }
    }

    /// The pre-copy protocol over `moves` (writers held by
    /// write-protection), pipelined: while this thread pre-copies
    /// sub-batch k, a helper runs the final groups of k − 1, their size
    /// carried from one sub-batch to the next. The dirty log is reset once
    /// for the batch (a page written before its sub-batch's copy is then
    /// copied again, never missed) and read per sub-batch. The helper
    /// copies its deltas (a few pages a group) on its own thread rather
    /// than with the engine, which the bulk copy holds: a protected group
    /// must not wait behind a sub-batch's copy. At most one pre-copied
    /// sub-batch waits for the helper; what the guest writes meanwhile is
    /// in its final delta. A failed pre-copy of sub-batch k gives up that
    /// sub-batch only.
    fn pipelined_precopy(
        &self,
        cfg: &PrecopyConfig,
        mut moves: Vec<Planned>,
        out: &mut BatchOutcome,
    ) {
        moves.sort_by_key(|m| m.frame);
        let subs = sub_batches(&moves, true);
        let reset = dirty_log(out, None, || cfg.dirty.reset(&self.spans(&moves)));
        if let Err(why) = reset {
            self.drop_all(&moves, why, out);
            return;
        }
        // The stages' span starts after the reset, whose time `out`
        // already counts: the overlap is the stages' alone.
        let started = Instant::now();
        // Protected groups and dirty-log reads take turns (see
        // `final_groups`).
        let turn = Mutex::new(());
        let (precopied_tx, precopied_rx) =
            mpsc::sync_channel::<(usize, Result<Vec<u64>, Failure>)>(1);
        let (me, subs_ref, turn_ref) = (self, &subs, &turn);
        let stages = thread::scope(|s| {
            let finisher = thread::Builder::new()
                .name("migrate-final".to_owned())
                .spawn_scoped(s, move || {
                    let delta = CpuCopy::default();
                    let mut group = 1;
                    let mut o = BatchOutcome::new(0);
                    for (k, precopied) in precopied_rx {
                        let sub = subs_ref[k];
                        match precopied {
                            Ok(carried) => {
                                let turn = Some(turn_ref);
                                me.final_groups(sub, &carried, &delta, turn, &mut group, &mut o);
                            }
                            Err(why) => me.drop_all(sub, why, &mut o),
                        }
                    }
                    o
                })
                .ok()?;
            let mut o = BatchOutcome::new(0);
            for (k, sub) in subs.iter().enumerate() {
                let precopied = self.recopy_rounds(cfg, sub, Some(&turn), &mut o);
                if precopied_tx.send((k, precopied)).is_err() {
                    break;
                }
            }
            drop(precopied_tx);
            Some([o, join_stage(finisher)])
        });
        let Some(stages) = stages else {
            // No thread for the final stage: nothing was protected yet
            // (the sequential protocol resets the dirty log again).
            self.move_sequentially(moves, Hold::Protect, out);
            return;
        };
        absorb_stages(stages, started.elapsed(), subs.len(), out);
    }
}

/// What the work beside a pipelined plain batch's copies hands on.
#[derive(Default)]
struct BesideWork {
    /// The sub-batch whose copy the work last ran beside (it runs once).
    done_beside: Option<usize>,
    /// The sub-batch last copied and how its copy went, to finish.
    copied: Option<(usize, StepResult)>,
    /// How protecting the next sub-batch went.
    protected: Option<StepResult>,
    /// What the work did (protect, remap, commit).
    out: BatchOutcome,
}

/// Adds the outcomes of a pipelined batch's stages, which ran over `span`
/// in `sub_batches` sub-batches, to `out`; their busy time beyond the span
/// is the overlap.
fn absorb_stages<const N: usize>(
    stages: [BatchOutcome; N],
    span: Duration,
    sub_batches: usize,
    out: &mut BatchOutcome,
) {
    let mut busy = Duration::ZERO;
    for o in stages {
        let r = &o.report;
        busy += r.protect + r.copy + r.remap + r.dirty + r.commit;
        out.absorb(o);
    }
    out.report.overlap += busy.saturating_sub(span);
    out.report.sub_batches += sub_batches;
}

/// The outcome of a pipeline stage's thread. A stage that panicked has
/// already unwound through the scope; its panic is passed on.
fn join_stage(stage: thread::ScopedJoinHandle<'_, BatchOutcome>) -> BatchOutcome {
    stage
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// `moves` cut, in order, into the sub-batches of [`sub_batch_sizes`].
fn sub_batches(moves: &[Planned], precopy: bool) -> Vec<&[Planned]> {
    let mut rest = moves;
    sub_batch_sizes(moves.len(), precopy)
        .into_iter()
        .map(|n| {
            let (sub, after) = rest.split_at(n);
            rest = after;
            sub
        })
        .collect()
}

/// The sizes, in order, of the sub-batches of a pipelined batch of
/// `frames` frames. The middle ones hold about a quarter of the batch
/// (8 to 64 frames). The stages a sub-batch's copy cannot hide (the
/// first one's protection before the copy starts, the last one's remap or
/// final groups after it ends) scale with the edge sub-batches, so these
/// hold a quarter of a middle one. Pre-copy's first sub-batch is not
/// protected before its copy and stays whole. The edges matter where the
/// copy is fast against the remap (many copy threads); on 2 cores, where
/// the copy takes most of a batch, they raised the copy engine's busy
/// share of a plain batch from 87 % to 90 % (64 frames).
fn sub_batch_sizes(frames: usize, precopy: bool) -> Vec<usize> {
    let middle_size = frames
        .div_ceil(PIPELINE_DEPTH)
        .clamp(PIPELINE_MIN_FRAMES, PIPELINE_MAX_FRAMES);
    let edge = middle_size / EDGE_SHARE;
    let (head, tail) = match (edge >= EDGE_MIN_FRAMES, precopy) {
        (false, _) => (0, 0),
        (true, true) => (0, edge),
        (true, false) => (edge, edge),
    };
    let middle = frames - head - tail;
    let parts = middle.div_ceil(middle_size);
    let even = (0..parts).map(|i| middle / parts + usize::from(i < middle % parts));
    let mut sizes = Vec::with_capacity(parts + 2);
    sizes.extend((head > 0).then_some(head));
    sizes.extend(even);
    sizes.extend((tail > 0).then_some(tail));
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_batches_are_cut_evenly() {
        assert_eq!(sub_batch_sizes(16, false), [8, 8]);
        assert_eq!(sub_batch_sizes(20, false), [7, 7, 6]);
        assert_eq!(sub_batch_sizes(32, false), [8, 8, 8, 8]);
        assert_eq!(sub_batch_sizes(32, true), [8, 8, 8, 8]);
    }

    #[test]
    fn large_batches_have_small_edges() {
        assert_eq!(sub_batch_sizes(64, false), [4, 14, 14, 14, 14, 4]);
        assert_eq!(sub_batch_sizes(64, true), [15, 15, 15, 15, 4]);
        let plain = sub_batch_sizes(512, false);
        assert_eq!((plain[0], plain[9], plain.len()), (16, 16, 10));
        assert!(plain[1..9].iter().all(|&n| n == 60));
        assert_eq!(
            sub_batch_sizes(512, true),
            [62, 62, 62, 62, 62, 62, 62, 62, 16]
        );
    }

    #[test]
    fn every_frame_is_in_exactly_one_sub_batch() {
        for frames in 16..=2048 {
            for precopy in [false, true] {
                let sizes = sub_batch_sizes(frames, precopy);
                assert_eq!(sizes.iter().sum::<usize>(), frames, "{frames}");
                assert!(sizes.len() >= 2, "{frames}");
                assert!(
                    sizes
                        .iter()
                        .all(|&n| (1..=PIPELINE_MAX_FRAMES).contains(&n))
                );
            }
        }
    }
}

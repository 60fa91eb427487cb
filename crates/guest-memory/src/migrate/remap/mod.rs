//! The remap migrator: each tier is its own backing object, and a frame
//! moves by copying its slot and mapping the destination slot over the
//! frame's (fixed) host range.
//!
//! Plain protocol, per batch: reserve destination slots → open the guard's
//! window and hold the frames (writers block, readers go on) → copy →
//! `mmap(MAP_FIXED)` the destination slots over the frames (runs
//! coalesced) → register the new mappings → wake the writers → commit to
//! the placement map → punch out and release the source slots.
//!
//! Holding a frame: on preallocated 4 KiB-page shmem, its run is
//! registered for minor faults, and only frames with a page mapped are write-protected (their
//! mapped pages). Write-protecting an unmapped page installs a marker in
//! a page table allocated for it, and the remap then zaps 512 markers a
//! 2 MiB frame: on an idle guest most moving frames have nothing mapped
//! since their last move. A touch of an unmapped page in a held run is a
//! minor fault, which the guard resolves by mapping the source page
//! write-protected (readers go on, writers block as on a write-protected
//! page). The new mapping is not registered at all unless the guard takes
//! minor faults for fault sampling: the next hold registers it, and until
//! then the guest's touches of it are ordinary faults, which the kernel
//! serves a neighbourhood at a time. A rolled back run is registered with
//! the guard's own modes again. Hugetlb
//! frames are one entry each and are write-protected whole, and so are
//! frames of shmem that is not preallocated: a touch of a hole there is a
//! missing-page fault, which minor registration does not trap.
//!
//! Pre-copy protocol: the first copy runs while the guest writes freely;
//! the dirty source says which 4 KiB pages changed meanwhile, and those are
//! copied again (a few rounds) before the frames are write-protected, a
//! small group at a time, for the last delta. Write stalls shrink to a
//! group's delta plus its remap (module `precopy`).
//!
//! A write-protected batch of at least two sub-batches runs either
//! protocol as a pipeline over its sub-batches (module `pipeline`).
//!
//! Ordering within a batch: moves that find a free destination slot run
//! first; their source slots are free once they commit, so moves into a
//! full tier retry their reservation after them. What still finds no room
//! is an exchange: paired with a move out of its destination tier in the
//! same batch, the two frames swap slots through a bounce area (module
//! `exchange`).
//!
//! Tiers userfaultfd cannot write-protect (device DAX, regular files):
//! a frame mapped from one is moved under the VM-wide [`WriteStop`]
//! instead (every writer waits from the stop to the resume, which spans
//! the copy or the pre-copy's last delta, and the remap); a frame moving
//! onto one keeps write-protection for its copy, and its new mapping is
//! not registered. Without a stop, such tiers are refused.
//!
//! Rollback: a failure before the remap leaves the source mapping in place
//! (protection removed, writers woken, destination released). A failed
//! remap maps the source slot back (its contents are intact: nothing wrote
//! to it while protected) before waking. In a pipelined batch each
//! sub-batch rolls back on its own. A migration never loses a write.

mod exchange;
mod pipeline;
mod precopy;
mod precopy_config;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use page_copy::{CopyEngine, CopyRange};
use thiserror::Error;

use super::Migrator;
use super::batch::{Batch, Move};
use super::bounce::BounceArea;
use super::faults::{FaultInjection, Step, WRITE_WAIT_LIMIT};
use super::guard::WriteGuard;
use super::outcome::{BatchOutcome, MoveError, MoveStep, StepError};
use super::stop::WriteStop;
use super::urgent::Urgent;
use crate::ids::{FrameId, TierId};
use crate::pagemap::Pagemap;
use crate::placement::Location;
use crate::runs::runs_where;
use crate::tiered::TieredMemory;

pub use self::precopy_config::PrecopyConfig;

/// Errors creating a remap migrator.
#[derive(Debug, Error)]
pub enum RemapError {
    /// A tier's mappings cannot be write-protected with userfaultfd, and
    /// no write stop was given.
    #[error(
        "remap migration needs userfaultfd write-protection, which Linux offers for memfd (shmem, hugetlbfs) mappings only, or a VM-wide write stop; tier '{0}' is a file or device-DAX mapping"
    )]
    NotWriteProtectable(String),
    /// The memory has one backing object for all tiers.
    #[error(
        "remap migration needs one backing object per tier; this memory uses shared-numa backing (use the kernel migrator)"
    )]
    SharedBacking,
}

/// A plain move with its destination reserved.
#[derive(Clone, Copy, Debug)]
struct Planned {
    frame: FrameId,
    from: Location,
    to: Location,
}

/// Why a step failed: the step and its cause.
type Failure = (MoveStep, StepError);

/// The result of a step.
type StepResult = Result<(), Failure>;

/// How a final phase keeps writers out of its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// userfaultfd write-protection: writers into the frames wait.
    Protect,
    /// The VM-wide write stop: every writer waits.
    Stop,
}

/// Writers held by [`RemapMigrator::hold_writers`], to release.
#[derive(Clone, Copy, Debug)]
enum Held {
    /// A guard window is open (its frames may be protected).
    Window,
    /// The write stop holds since then.
    Stopped(Instant),
    /// The stop failed: nothing to release.
    Nothing,
}

/// The remap migrator of one VM.
#[derive(Debug)]
pub struct RemapMigrator {
    memory: Arc<TieredMemory>,
    guard: Arc<WriteGuard>,
    engine: Box<dyn CopyEngine>,
    precopy: Option<PrecopyConfig>,
    stop: Option<Arc<dyn WriteStop>>,
    faults: Arc<FaultInjection>,
    name: &'static str,
    /// Serializes batches; holds the exchange bounce area once needed.
    serial: Mutex<Option<BounceArea>>,
    /// Which frames have pages mapped (see the module docs on holding);
    /// without it every frame is write-protected whole.
    pagemap: Option<Pagemap>,
}

impl RemapMigrator {
    /// A migrator over `memory`, whose RAM `guard` protects: every tier
    /// must be write-protectable.
    pub fn new(
        memory: Arc<TieredMemory>,
        guard: Arc<WriteGuard>,
        engine: Box<dyn CopyEngine>,
        precopy: Option<PrecopyConfig>,
    ) -> Result<Self, RemapError> {
        Self::build(memory, guard, engine, precopy, None)
    }

    /// A migrator that moves frames of tiers userfaultfd cannot protect
    /// under `stop` (see the module docs); `guard` registers the frames
    /// of the other tiers ([`TieredMemory::write_protectable_ranges`]).
    pub fn with_write_stop(
        memory: Arc<TieredMemory>,
        guard: Arc<WriteGuard>,
        engine: Box<dyn CopyEngine>,
        precopy: Option<PrecopyConfig>,
        stop: Arc<dyn WriteStop>,
    ) -> Result<Self, RemapError> {
        Self::build(memory, guard, engine, precopy, Some(stop))
    }

    fn build(
        memory: Arc<TieredMemory>,
        guard: Arc<WriteGuard>,
        engine: Box<dyn CopyEngine>,
        precopy: Option<PrecopyConfig>,
        stop: Option<Arc<dyn WriteStop>>,
    ) -> Result<Self, RemapError> {
        if memory.backing().is_shared() {
            return Err(RemapError::SharedBacking);
        }
        if stop.is_none()
            && let Some(t) = memory
                .tiers()
                .iter()
                .find(|t| !t.kind().write_protectable())
        {
            return Err(RemapError::NotWriteProtectable(t.name().to_owned()));
        }
        let name = if precopy.is_some() {
            "remap-precopy"
        } else {
            "remap"
        };
        Ok(RemapMigrator {
            memory,
            guard,
            engine,
            precopy,
            stop,
            faults: Arc::default(),
            name,
            serial: Mutex::new(None),
            pagemap: Pagemap::open().ok(),
        })
    }

    fn frame_size(&self) -> u64 {
        self.memory.frame_size()
    }

    fn host(&self, frame: FrameId) -> u64 {
        self.memory.frames().host_addr(frame).unwrap_or(0)
    }

    fn view(&self, loc: Location) -> u64 {
        self.memory.tiers()[loc.tier.index()]
            .slot_view_addr(loc.slot)
            .unwrap_or(0)
    }

    /// Whether tier `tier`'s mappings can be write-protected (and so are
    /// registered with the guard).
    fn protectable(&self, tier: TierId) -> bool {
        self.memory.tiers()[tier.index()].kind().write_protectable()
    }

    /// How writers are held out of frames mapped from `locs`.
    fn hold_for(&self, locs: &[Location]) -> Hold {
        if locs.iter().all(|l| self.protectable(l.tier)) {
            Hold::Protect
        } else {
            Hold::Stop
        }
    }

    /// Holds writers out of `frames`: opens the guard's window over them
    /// and write-protects them, or stops every writer. Returns what to
    /// [`release`](Self::release) and whether the hold took.
    fn hold_writers(&self, hold: Hold, frames: &[FrameId]) -> (Held, StepResult) {
        match hold {
            Hold::Protect => {
                self.guard.open_window(&self.runs(frames));
                let protected = self.protect(frames);
                if protected.is_ok() && self.faults.take_write_wait() {
                    self.guard.wait_for_writer(WRITE_WAIT_LIMIT);
                }
                (Held::Window, protected)
            }
            Hold::Stop if self.faults.should_fail(Step::Stop) => {
                (Held::Nothing, Err((MoveStep::Hold, StepError::Injected)))
            }
            Hold::Stop => match &self.stop {
                Some(stop) => match stop.stop() {
                    Ok(()) => (Held::Stopped(Instant::now()), Ok(())),
                    Err(e) => (
                        Held::Nothing,
                        Err((MoveStep::Hold, StepError::Stop(Arc::new(e)))),
                    ),
                },
                None => (Held::Nothing, Err((MoveStep::Hold, StepError::NoWriteStop))),
            },
        }
    }

    /// Ends a hold: closes the window (recording the stalls) or resumes
    /// the writers (one stall of the stop's length).
    fn release(&self, held: Held, out: &mut BatchOutcome) {
        match held {
            Held::Window => self.finish_window(out),
            Held::Stopped(since) => {
                if let Some(stop) = &self.stop {
                    stop.resume();
                }
                let stalled = since.elapsed();
                out.report.stall_max = out.report.stall_max.max(stalled);
                out.report.stalls.push(stalled);
                out.report.stops += 1;
            }
            Held::Nothing => {}
        }
    }

    /// Registers a new mapping of tier `tier` over `[host, host + len)`
    /// with the guard, unless the tier cannot be registered.
    fn register(&self, host: u64, len: u64, tier: TierId) -> Result<(), StepError> {
        if !self.protectable(tier) {
            return Ok(());
        }
        self.guard.reregister(host, len).map_err(StepError::uffd)
    }

    /// Copies `(src, dst, len)` triples with the engine (fault-injectable).
    fn copy(&self, pieces: &[(u64, u64, u64)], out: &mut BatchOutcome) -> StepResult {
        self.copy_beside_with(self.engine.as_ref(), pieces, None, out)
    }

    /// Copies `(src, dst, len)` triples with `engine` (fault-injectable).
    fn copy_with(
        &self,
        engine: &dyn CopyEngine,
        pieces: &[(u64, u64, u64)],
        out: &mut BatchOutcome,
    ) -> StepResult {
        self.copy_beside_with(engine, pieces, None, out)
    }

    /// Copies `(src, dst, len)` triples with the engine and runs `beside`
    /// once meanwhile ([`CopyEngine::copy_beside`]); `beside` runs even
    /// when the copy fails or has nothing to do.
    fn copy_beside(
        &self,
        pieces: &[(u64, u64, u64)],
        beside: &(dyn Fn() + Sync),
        out: &mut BatchOutcome,
    ) -> StepResult {
        self.copy_beside_with(self.engine.as_ref(), pieces, Some(beside), out)
    }

    fn copy_beside_with(
        &self,
        engine: &dyn CopyEngine,
        pieces: &[(u64, u64, u64)],
        beside: Option<&(dyn Fn() + Sync)>,
        out: &mut BatchOutcome,
    ) -> StepResult {
        let run_beside = || beside.iter().for_each(|b| b());
        if pieces.is_empty() {
            run_beside();
            return Ok(());
        }
        if self.faults.should_fail(Step::Copy) {
            run_beside();
            return Err((MoveStep::Copy, StepError::Injected));
        }
        let ranges: Vec<CopyRange> = pieces
            .iter()
            .map(|&(s, d, l)| CopyRange::new(s as *const u8, d as *mut u8, l as usize))
            .collect();
        let started = Instant::now();
        self.populate(pieces);
        // SAFETY: every source and destination lies in a tier's view
        // mapping (live for the memory's lifetime) and is a whole slot, or a
        // page of one, reserved for this batch: destinations are distinct
        // reserved slots no frame maps, so no range overlaps another.
        let result = unsafe {
            match beside {
                Some(beside) => engine.copy_beside(&ranges, beside),
                None => engine.copy(&ranges),
            }
        };
        out.report.copy += started.elapsed();
        let stats = result.map_err(|e| (MoveStep::Copy, StepError::Copy(Arc::new(e))))?;
        out.report.bytes += stats.bytes;
        Ok(())
    }

    /// Holds the host ranges of `frames` (runs coalesced; see the module
    /// docs): write-protects them, but on preallocated 4 KiB-page shmem
    /// registers minor faults and write-protects only the frames with a page mapped. A
    /// range that refuses protection is registered and tried once more:
    /// its frames may have moved in a batch whose registration failed (see
    /// [`register_moved`](Self::register_moved)).
    fn protect(&self, frames: &[FrameId]) -> StepResult {
        if self.faults.should_fail(Step::Protect) {
            return Err((MoveStep::Hold, StepError::Injected));
        }
        let (small, whole) = self.split_preallocated_shmem(frames);
        let mut ranges = self.runs(&whole);
        for (start, len) in self.runs(&small) {
            ranges.extend(self.hold_unmapped(start, len));
        }
        for (start, len) in ranges {
            let uffd = self.guard.uffd();
            uffd.protect(start, len)
                .or_else(|_| {
                    self.guard.register(start, len)?;
                    uffd.protect(start, len)
                })
                .map_err(|e| (MoveStep::Hold, StepError::uffd(e)))?;
        }
        Ok(())
    }

    /// `frames` split into those on preallocated 4 KiB-page shmem tiers,
    /// held by minor faults, and the others (all of them when the page map could not be
    /// opened).
    fn split_preallocated_shmem(&self, frames: &[FrameId]) -> (Vec<FrameId>, Vec<FrameId>) {
        if self.pagemap.is_none() {
            return (Vec::new(), frames.to_vec());
        }
        let tiers = self.memory.tiers();
        self.memory.with_placement(|map| {
            frames.iter().partition(|&&f| {
                map.location(f)
                    .is_some_and(|l| tiers[l.tier.index()].kind().preallocated_small_page_shmem())
            })
        })
    }

    /// Registers minor faults over the run `[start, start + len)`, then
    /// returns the ranges still to write-protect: its frames with a page
    /// mapped, adjacent ones merged. Registering waits for faults in
    /// flight, so a page unmapped when the page map is read can only be
    /// mapped through the guard's handler afterwards. The whole run when
    /// minor faults cannot be registered; a frame whose entries cannot be
    /// read counts as mapped.
    fn hold_unmapped(&self, start: u64, len: u64) -> Vec<(u64, u64)> {
        let Some(pagemap) = &self.pagemap else {
            return vec![(start, len)];
        };
        if self.guard.hold_unmapped(start, len).is_err() {
            return vec![(start, len)];
        }
        let fs = self.frame_size();
        let mut mapped: Vec<(u64, u64)> = Vec::new();
        for at in (start..start + len).step_by(fs as usize) {
            if !pagemap.any_present(at, fs).unwrap_or(true) {
                continue;
            }
            match mapped.last_mut() {
                Some((s, l)) if *s + *l == at => *l += fs,
                _ => mapped.push((at, fs)),
            }
        }
        mapped
    }

    /// Host ranges of `frames`, adjacent frames merged.
    fn runs(&self, frames: &[FrameId]) -> Vec<(u64, u64)> {
        let mut starts: Vec<u64> = frames.iter().map(|&f| self.host(f)).collect();
        starts.sort_unstable();
        let fs = self.frame_size();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for s in starts {
            match runs.last_mut() {
                Some((start, len)) if *start + *len == s => *len += fs,
                _ => runs.push((s, fs)),
            }
        }
        runs
    }

    /// Removes protection from `frames` still on their source mapping and
    /// wakes their writers; frames held by minor faults are registered
    /// with the guard's own modes again.
    fn unprotect(&self, frames: &[FrameId]) {
        for (start, len) in self.runs(frames) {
            // Cannot fail on a registered range; if it did, the guard's
            // handler lifts the protection when a writer faults.
            let _ = self.guard.uffd().unprotect(start, len, false);
        }
        let (small, _) = self.split_preallocated_shmem(frames);
        for (start, len) in self.runs(&small) {
            // If this failed, the range still takes minor faults, which
            // the handler resolves outside a window by mapping the page.
            let _ = self.guard.release_unmapped(start, len);
        }
    }

    /// Maps `loc` over `frame` again after a failed remap, re-registers and
    /// wakes. The source slot holds the frame's latest data.
    fn restore_mapping(&self, frame: FrameId, loc: Location) {
        let (host, fs) = (self.host(frame), self.frame_size());
        // The mapping was replaced or may have been: map the source back.
        // This cannot reasonably fail (same file, offset and size as the
        // mapping it replaces); if it did, the frame keeps whatever mapping
        // the failed call left, and we still wake its writers.
        let _ = self.memory.map_frames(frame, 1, loc);
        let _ = self.register(host, fs, loc.tier);
        let _ = self.guard.uffd().wake(host, fs);
    }

    /// The moves cut into runs of consecutive frames going to consecutive
    /// slots of one tier (one `mmap` each), in frame order.
    fn remap_runs(&self, moves: &[Planned]) -> Vec<Vec<Planned>> {
        let mut sorted = moves.to_vec();
        sorted.sort_by_key(|m| m.frame);
        let frames: Vec<(usize, Location)> =
            sorted.iter().map(|m| (m.frame.index(), m.to)).collect();
        let table = self.memory.frames();
        runs_where(&frames, |first, count| table.is_run(FrameId(first), count))
            .into_iter()
            .map(|run| sorted[run.first..run.first + run.count].to_vec())
            .collect()
    }

    /// Index of the run to remap next: the first one a writer is waiting
    /// on, so a stalled writer waits for one remap rather than for every
    /// run before its own; otherwise the first.
    fn next_run(&self, runs: &[Vec<Planned>]) -> usize {
        let waiting = self.guard.waiting_pages();
        if waiting.is_empty() {
            return 0;
        }
        let fs = self.frame_size();
        runs.iter()
            .position(|run| {
                let start = self.host(run[0].frame);
                let end = start + fs * run.len() as u64;
                waiting.iter().any(|&p| start <= p && p < end)
            })
            .unwrap_or(0)
    }

    /// Maps the destination slots over the moves' frames, coalescing runs
    /// of consecutive frames going to consecutive slots, runs with a
    /// waiting writer first, and wakes each run's writers as soon as it is
    /// mapped; then registers the new mappings with the guard, in as few
    /// calls as it can ([`register_moved`](Self::register_moved)), except
    /// those the next hold registers ([`registered_by_hold`](Self::registered_by_hold)).
    /// Returns the moves that failed (already restored to their source
    /// mapping).
    ///
    /// Once a run is mapped its frames live on their destination: writers
    /// that were not waiting write there at once, since the new mapping is
    /// not protected. So a registration that fails afterwards cannot roll
    /// the move back without losing those writes; the move stands.
    fn remap(&self, moves: &[Planned], out: &mut BatchOutcome) -> Vec<(Planned, StepError)> {
        let started = Instant::now();
        let mut runs = self.remap_runs(moves);
        let mut failed = Vec::new();
        let mut mapped = Vec::new();
        while !runs.is_empty() {
            let run = runs.remove(self.next_run(&runs));
            let first = run[0];
            let count = run.len();
            let (host, len) = (self.host(first.frame), self.frame_size() * count as u64);
            let result = if self.faults.should_fail(Step::Remap) {
                Err(StepError::Injected)
            } else {
                self.memory
                    .map_frames(first.frame, count, first.to)
                    .map_err(StepError::memory)
            };
            match result {
                Ok(()) => {
                    if self.protectable(first.to.tier) {
                        self.guard.replaced(host, len);
                        if !self.registered_by_hold(first.to.tier) {
                            mapped.push((first.frame.index(), count));
                        }
                    }
                    let _ = self.guard.uffd().wake(host, len);
                    self.record_stalls(host, len, out);
                }
                Err(e) => {
                    for m in run {
                        self.restore_mapping(m.frame, m.from);
                        failed.push((m, e.clone()));
                    }
                }
            }
        }
        self.register_moved(mapped, out);
        out.report.remap += started.elapsed();
        failed
    }

    /// Whether a new mapping of tier `tier` is left unregistered: on a
    /// preallocated 4 KiB-page shmem tier the next hold of its frames
    /// registers it anyway ([`hold_unmapped`](Self::hold_unmapped)), unless
    /// the guard takes minor faults itself (fault sampling needs every
    /// mapping registered). Unregistered, a guest's read fault maps 16
    /// neighbours too, writable; registered for write-protection, every
    /// page faults alone, to read and again to write (33 against 1,024
    /// faults for a 2 MiB frame read and then written). Each of those vCPU
    /// faults holds `mmap_lock` for reading, and the next remap's `mmap`
    /// waits for them: under a write-busy guest the remap of 64-frame
    /// batches fell from 73–88 to 49–53 µs a frame (medians, 2 cores;
    /// docs/benchmarks.md).
    fn registered_by_hold(&self, tier: TierId) -> bool {
        !self.guard.minor_faults_enabled()
            && self.pagemap.is_some()
            && self.memory.tiers()[tier.index()]
                .kind()
                .preallocated_small_page_shmem()
    }

    /// Registers the new mappings of `runs` (`(first frame, count)`, on
    /// protectable tiers) with the guard: one call over every stretch of
    /// host-contiguous frames that are all on protectable tiers, since each
    /// call holds `mmap_lock` for writing and a write-busy guest's faults
    /// queue behind it; run by run where a stretch is refused. A run that
    /// cannot be registered keeps its move (its data is there) and is
    /// reported; the next [`protect`](Self::protect) of its frames
    /// registers it.
    fn register_moved(&self, mut runs: Vec<(usize, usize)>, out: &mut BatchOutcome) {
        if runs.is_empty() {
            return;
        }
        let fs = self.frame_size();
        let range = |first: usize, count: usize| (self.host(FrameId(first)), fs * count as u64);
        let to_tier = |first: usize| {
            self.memory
                .location(FrameId(first))
                .map_or(TierId::FAST, |l| l.tier)
        };
        let unregistered = |first: usize, count: usize, source| MoveError {
            frames: first..first + count,
            to_tier: to_tier(first),
            step: MoveStep::Register,
            source,
        };
        if self.faults.should_fail(Step::Register) {
            for (first, count) in runs {
                let e = unregistered(first, count, StepError::Injected);
                out.warnings.push(e);
            }
            return;
        }
        runs.sort_unstable();
        for stretch in self.stretches(&runs) {
            let (first, last) = (stretch[0].0, stretch[stretch.len() - 1]);
            let (host, len) = range(first, last.0 + last.1 - first);
            if self.guard.register(host, len).is_ok() {
                continue;
            }
            for &(f, c) in stretch {
                let (host, len) = range(f, c);
                if let Err(e) = self.guard.register(host, len) {
                    let e = unregistered(f, c, StepError::uffd(e));
                    out.warnings.push(e);
                }
            }
        }
    }

    /// Cuts `runs` (sorted) into stretches one registration can cover:
    /// the frames from a stretch's first run to its last lie in one region
    /// and are all on protectable tiers.
    fn stretches<'a>(&self, runs: &'a [(usize, usize)]) -> Vec<&'a [(usize, usize)]> {
        let frames = self.memory.frames();
        let mut stretches = Vec::new();
        let mut begin = 0;
        // One look at the placement map for every gap, not a lock per frame.
        self.memory.with_placement(|map| {
            for i in 1..runs.len() {
                let (prev_end, next) = (runs[i - 1].0 + runs[i - 1].1, runs[i].0);
                let joins = frames.is_run(FrameId(runs[begin].0), next + runs[i].1 - runs[begin].0)
                    && (prev_end..next).all(|f| {
                        map.location(FrameId(f))
                            .is_some_and(|loc| self.protectable(loc.tier))
                    });
                if !joins {
                    stretches.push(&runs[begin..i]);
                    begin = i;
                }
            }
        });
        stretches.push(&runs[begin..]);
        stretches
    }

    /// Puts `moves` back: protection off (or source re-mapped), writers
    /// woken, destinations released, moves counted as aborted.
    fn abort(&self, moves: &[Planned], hold: Hold, why: Failure, out: &mut BatchOutcome) {
        let frames: Vec<FrameId> = moves.iter().map(|m| m.frame).collect();
        if hold == Hold::Protect {
            self.unprotect(&frames);
        }
        for m in moves {
            self.drop_destination(m.to);
        }
        Self::fail_all(moves, why, out);
    }

    /// Records every move of `moves` as failed with `why`.
    fn fail_all(moves: &[Planned], (step, source): Failure, out: &mut BatchOutcome) {
        for m in moves {
            let e = MoveError::frame(m.frame, m.to.tier, step, source.clone());
            out.record_failed(e);
        }
    }

    /// Frees an unused destination: punched out first, since a copy may
    /// already have filled it (memory the host would otherwise not get
    /// back), then released.
    fn drop_destination(&self, to: Location) {
        let _ = self.memory.tiers()[to.tier.index()].discard_slot(to.slot);
        let _ = self.memory.release_slot(to);
    }

    /// Records moved frames and frees their sources.
    fn commit(&self, moves: &[Planned], out: &mut BatchOutcome) {
        let started = Instant::now();
        for m in moves {
            match self.memory.commit_move(m.frame, m.from, m.to) {
                Ok(()) => {
                    // The data is gone from the source only after commit;
                    // punching fails harmlessly on backings without holes.
                    let _ = self.memory.tiers()[m.from.tier.index()].discard_slot(m.from.slot);
                    let _ = self.memory.release_slot(m.from);
                    out.record_moved(m.frame, m.from.tier, m.to.tier, false);
                }
                Err(e) => {
                    // Cannot happen (the ledger checked the reservation);
                    // the frame is mapped to `to`, so keep `to` allocated.
                    let e = MoveError::frame(
                        m.frame,
                        m.to.tier,
                        MoveStep::Commit,
                        StepError::memory(e),
                    );
                    out.warnings.push(e);
                }
            }
        }
        out.report.commit += started.elapsed();
    }

    /// Full-frame copy pieces for `moves`.
    fn frame_pieces(&self, moves: &[Planned]) -> Vec<(u64, u64, u64)> {
        moves
            .iter()
            .map(|m| (self.view(m.from), self.view(m.to), self.frame_size()))
            .collect()
    }

    /// Moves `moves` (destinations reserved) with the plain or pre-copy
    /// protocol: frames under the write stop one step after another, the
    /// others pipelined when they are enough
    /// ([`move_protected`](Self::move_protected)).
    fn move_frames(&self, moves: Vec<Planned>, out: &mut BatchOutcome) {
        // Frames no write-protection covers move in one stop of the whole
        // VM per batch: every stop costs each vCPU a trip out of the guest.
        let (stopped, protected): (Vec<Planned>, Vec<Planned>) = moves
            .into_iter()
            .partition(|m| self.hold_for(&[m.from]) == Hold::Stop);
        self.move_sequentially(stopped, Hold::Stop, out);
        self.move_protected(protected, out);
    }

    /// Moves `moves`, all held by `hold`, one step after another. Plain
    /// copies hold the whole batch (its copy is the bulk of the work);
    /// pre-copy holds one final group at a time.
    fn move_sequentially(&self, moves: Vec<Planned>, hold: Hold, out: &mut BatchOutcome) {
        if moves.is_empty() {
            return;
        }
        let engine = self.engine.as_ref();
        let Some(cfg) = &self.precopy else {
            self.final_phase(moves, Vec::new(), hold, engine, out);
            return;
        };
        match self.precopy_rounds(cfg, &moves, out) {
            Err(why) => self.drop_all(&moves, why, out),
            Ok(carried) if hold == Hold::Stop => {
                self.final_phase(moves, carried, hold, engine, out);
            }
            Ok(carried) => self.final_groups(&moves, &carried, engine, None, &mut 1, out),
        }
    }

    /// Holds writers out of `moves` (`hold`), copies them (plain: whole
    /// frames; pre-copy: the pages still dirty, `carried` plus what the
    /// final take reports) with `engine`, remaps, lets the writers go and
    /// commits.
    fn final_phase(
        &self,
        moves: Vec<Planned>,
        carried: Vec<u64>,
        hold: Hold,
        engine: &dyn CopyEngine,
        out: &mut BatchOutcome,
    ) {
        if moves.is_empty() {
            return;
        }
        // Writers may wait on this thread from here to the last wake. A
        // pre-copy group copies a few pages only: real-time is safe there.
        let _urgent = if self.precopy.is_some() {
            Urgent::realtime()
        } else {
            Urgent::new()
        };
        let frames: Vec<FrameId> = moves.iter().map(|m| m.frame).collect();
        let started = Instant::now();
        let (held, result) = self.hold_writers(hold, &frames);
        out.report.protect += started.elapsed();
        let copied = result.and_then(|()| match &self.precopy {
            None => self.copy_with(engine, &self.frame_pieces(&moves), out),
            Some(cfg) => self.final_delta(cfg, &moves, carried, engine, out),
        });
        if let Err(e) = copied {
            self.abort(&moves, hold, e, out);
            self.release(held, out);
            return;
        }
        let done = self.remap_moves(&moves, out);
        self.release(held, out);
        self.commit(&done, out);
    }

    /// Remaps the copied `moves` and wakes their writers
    /// ([`remap`](Self::remap)); a move whose remap failed is back on its
    /// source, and here its destination is dropped and its failure
    /// recorded. Returns the moves to commit.
    fn remap_moves(&self, moves: &[Planned], out: &mut BatchOutcome) -> Vec<Planned> {
        let failed = self.remap(moves, out);
        let failed_frames: HashSet<FrameId> = failed.iter().map(|(m, _)| m.frame).collect();
        for (m, why) in failed {
            self.drop_destination(m.to);
            let e = MoveError::frame(m.frame, m.to.tier, MoveStep::Remap, why);
            out.record_failed(e);
        }
        moves
            .iter()
            .filter(|m| !failed_frames.contains(&m.frame))
            .copied()
            .collect()
    }

    /// Records how long the writers into `[host, host + len)`, just
    /// woken, waited.
    fn record_stalls(&self, host: u64, len: u64, out: &mut BatchOutcome) {
        let stalls = self.guard.woken(host, len);
        out.report.stall_max = out
            .report
            .stall_max
            .max(stalls.iter().copied().max().unwrap_or(Duration::ZERO));
        out.report.stalls.extend(stalls);
    }

    fn finish_window(&self, out: &mut BatchOutcome) {
        let stalls = self.guard.close_window();
        out.report.stall_max = out
            .report
            .stall_max
            .max(stalls.iter().copied().max().unwrap_or(Duration::ZERO));
        out.report.stalls.extend(stalls);
    }
}

impl RemapMigrator {
    /// Maps the pages of every copy piece into the views in bulk before the
    /// copy: sources with `MADV_POPULATE_READ` (the guest wrote them through
    /// its own mapping, so the view has no page-table entries), destinations
    /// with `MADV_POPULATE_WRITE` (fresh or punched-out slots have no
    /// pages). One syscall per range instead of a trapping fault per 4 KiB
    /// page: with per-page faults the copy ran at 0.43 GB/s on the
    /// development machines (nested virtualization makes each fault cost
    /// microseconds). Views that stay populated (preallocated tiers) are
    /// skipped: walking 512 present entries per 2 MiB cost as much as the
    /// copy itself. Failure only costs speed: the copy then faults the
    /// pages in itself.
    fn populate(&self, pieces: &[(u64, u64, u64)]) {
        let resident = |addr: u64, len: u64| {
            self.memory
                .tiers()
                .iter()
                .any(|t| t.view_contains(addr, len) && t.view_resident())
        };
        for &(src, dst, len) in pieces {
            for (addr, advice) in [
                (src, libc::MADV_POPULATE_READ),
                (dst, libc::MADV_POPULATE_WRITE),
            ] {
                if resident(addr, len) {
                    continue;
                }
                // SAFETY: `addr..addr + len` is a page-aligned range of a
                // live view mapping (a whole slot or a page of one);
                // populating only faults pages in, it changes no data.
                unsafe { libc::madvise(addr as *mut libc::c_void, len as usize, advice) };
            }
        }
    }
}

impl Migrator for RemapMigrator {
    fn name(&self) -> &str {
        self.name
    }

    fn faults(&self) -> Option<&Arc<FaultInjection>> {
        Some(&self.faults)
    }

    fn memory(&self) -> &TieredMemory {
        &self.memory
    }

    fn migrate(&self, batch: &Batch) -> BatchOutcome {
        let mut bounce = self.serial.lock().unwrap_or_else(PoisonError::into_inner);
        let started = Instant::now();
        let mut out = BatchOutcome::new(batch.frames());
        let mut seen = HashSet::new();
        let (moves, full) = self.reserve_moves(batch.moves(), &mut seen, &mut out);
        // Moves with a free destination go first: committing them frees
        // their source slots, which moves into a full tier can then use.
        let moved_first = !moves.is_empty();
        self.move_frames(moves, &mut out);
        let mut retry = Vec::new();
        for (m, from) in full {
            let from = if moved_first {
                self.memory.location(m.frame).unwrap_or(from)
            } else {
                from
            };
            match self.memory.reserve_slot(m.to_tier) {
                Ok(to) if moved_first => retry.push(Planned {
                    frame: m.frame,
                    from,
                    to,
                }),
                reserved => {
                    if let Ok(to) = reserved {
                        let _ = self.memory.release_slot(to);
                    }
                    let tier = &self.memory.tiers()[m.to_tier.index()];
                    let full = StepError::TierFull {
                        tier: tier.name().to_owned(),
                        quota: self.memory.with_placement(|p| p.slot_count(m.to_tier)),
                    };
                    out.record_failed(MoveError::frame(
                        m.frame,
                        m.to_tier,
                        MoveStep::Reserve,
                        full,
                    ));
                }
            }
        }
        self.move_frames(retry, &mut out);
        let pairs = self.check_exchanges(batch, &mut seen, &mut out);
        self.exchange_all(pairs, &mut bounce, &mut out);
        out.report.total = started.elapsed();
        out
    }
}

impl RemapMigrator {
    /// Checks `moves` and reserves their destinations: returns the moves
    /// with a destination, and those whose tier is full (to retry once
    /// the others have left their slots). Skips and refusals go to `out`.
    fn reserve_moves(
        &self,
        moves: &[Move],
        seen: &mut HashSet<FrameId>,
        out: &mut BatchOutcome,
    ) -> (Vec<Planned>, Vec<(Move, Location)>) {
        let tiers = self.memory.tiers().len();
        let mut planned = Vec::new();
        let mut full = Vec::new();
        // In frame order, each frame asks for the slot after its
        // predecessor's: runs of frames keep consecutive slots and map
        // with one `mmap` (each holds `mmap_lock` for writing).
        let mut ordered: Vec<Move> = moves.to_vec();
        ordered.sort_by_key(|m| m.frame);
        let mut prev: Option<Planned> = None;
        for m in ordered {
            if !seen.insert(m.frame) {
                out.record_skipped();
                continue;
            }
            let from = match self.memory.location(m.frame) {
                Some(from) if m.to_tier.index() < tiers => from,
                found => {
                    let why = match found {
                        None => StepError::NoSuchFrame {
                            frames: self.memory.frame_count(),
                        },
                        Some(_) => StepError::NoSuchTier(m.to_tier),
                    };
                    out.record_failed(MoveError::frame(m.frame, m.to_tier, MoveStep::Check, why));
                    continue;
                }
            };
            if from.tier == m.to_tier {
                out.record_skipped();
                continue;
            }
            if self.faults.should_fail(Step::Reserve) {
                let e =
                    MoveError::frame(m.frame, m.to_tier, MoveStep::Reserve, StepError::Injected);
                out.record_failed(e);
                continue;
            }
            let after = prev
                .filter(|p| p.frame.index() + 1 == m.frame.index())
                .map(|p| p.to);
            match self.memory.reserve_slot_after(m.to_tier, after) {
                Ok(to) => {
                    let p = Planned {
                        frame: m.frame,
                        from,
                        to,
                    };
                    planned.push(p);
                    prev = Some(p);
                }
                Err(_) => full.push((m, from)),
            }
        }
        (planned, full)
    }
}

//! The kernel migrator: guest RAM is one memfd
//! ([`Backing::SharedNuma`]), tiers are host NUMA nodes, and a frame moves
//! when its pages move to another node with `move_pages(2)`. The host
//! kernel unmaps, copies and remaps each page atomically, so no guest
//! write is lost and guest-physical → host-virtual → memfd offset never
//! changes; only the placement map's tier and the pages' node do.
//!
//! A batch: plan (skip no-ops and repeats; reserve each destination within
//! the tier's quota, or over it when another move of the batch leaves that
//! tier — an exchange) → set each frame range's shared NUMA policy to the
//! destination node (`mbind(MPOL_BIND)`, no `MPOL_MF_MOVE`: pages the guest
//! touches from now on are born there) → move all resident pages of the
//! batch in `move_pages` calls of up to 16 Ki pages, retry failed pages
//! once → decide per frame → roll back failed frames → commit.
//!
//! A frame has moved when every page of it that is resident is on the
//! destination node (pages not in memory do not count: the policy places
//! them). Otherwise the move is aborted: the frame's policy goes back to the
//! source node, pages already moved are moved back (best effort; any left
//! behind are reported), its reservation is released and the placement map
//! keeps the source tier. A move that took room another move of the batch
//! frees is aborted with it.
//!
//! Report fields: `bytes` = pages the kernel migrated (forward and back) ×
//! page size; `copy` = time finding and moving pages; `remap` = time setting
//! NUMA policies; `protect` and stalls stay zero (the kernel blocks a
//! writer only for the page being migrated, invisibly to us).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use thiserror::Error;

use super::Migrator;
use super::batch::Batch;
use super::faults::{FaultInjection, Step};
use super::kernel_pages::{FrameJob, PageCounts, PageMover};
use super::kernel_plan::{self, PlannedMove};
use super::outcome::{BatchOutcome, MoveError, MoveStep, StepError};
use crate::backing::Backing;
use crate::ids::{FrameId, TierId};
use crate::move_pages::page_size;
use crate::shared_numa::{FileWindow, bind_range};
use crate::tiered::TieredMemory;

/// Why a planned move failed: the step and its cause.
type Failure = (MoveStep, StepError);

/// Where a batch stands, per planned move.
#[derive(Debug)]
struct Progress {
    /// Still moving (at the end: moved).
    ok: Vec<bool>,
    /// Its policy was changed (restore it if the move fails).
    policy_set: Vec<bool>,
    /// Indices of the moves whose pages were moved.
    jobs: Vec<usize>,
    counts: PageCounts,
}

/// Why a kernel migrator cannot be made for some memory.
#[derive(Debug, Error)]
pub enum KernelError {
    /// The memory is not one memfd over NUMA nodes.
    #[error("the kernel migrator needs backing shared-numa, not {0}")]
    NotSharedNuma(Backing),
    /// A tier without a usable node (validation should have refused it).
    #[error("tier '{0}' has no numa node")]
    NoNode(String),
}

/// Moves frames between NUMA-node tiers with `move_pages(2)`.
#[derive(Debug)]
pub struct KernelMigrator {
    memory: Arc<TieredMemory>,
    /// Each tier's node.
    nodes: Vec<u32>,
    mover: PageMover,
    faults: Arc<FaultInjection>,
    /// Serializes batches; page counts of all batches so far.
    serial: Mutex<PageCounts>,
    /// Tests only: send pages to this node instead of the tier's.
    #[cfg(test)]
    target_override: Option<i32>,
}

impl KernelMigrator {
    /// A migrator over `memory`, which must be backed shared-numa.
    pub fn new(memory: Arc<TieredMemory>) -> Result<Self, KernelError> {
        if !memory.backing().is_shared() {
            return Err(KernelError::NotSharedNuma(memory.backing()));
        }
        let nodes = memory
            .tiers()
            .iter()
            .map(|t| {
                t.numa_node()
                    .filter(|n| i32::try_from(*n).is_ok())
                    .ok_or_else(|| KernelError::NoNode(t.name().to_owned()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            memory,
            nodes,
            mover: PageMover::default(),
            faults: Arc::default(),
            serial: Mutex::new(PageCounts::default()),
            #[cfg(test)]
            target_override: None,
        })
    }

    /// The memory it moves frames of.
    pub fn memory(&self) -> &Arc<TieredMemory> {
        &self.memory
    }

    /// Fault injection switches (tests, soak runs): [`Step::Reserve`] makes
    /// a reservation fail as if the tier were full, [`Step::Remap`] makes
    /// setting a frame's NUMA policy fail, [`Step::Copy`] makes a frame
    /// Whether pages are moved with `MPOL_MF_MOVE_ALL` (pages the guest
    /// shares with other mappings too; needs `CAP_SYS_NICE`) rather than
    /// `MPOL_MF_MOVE`. Starts true, turns false at the first `EPERM`.
    pub fn move_all(&self) -> bool {
        self.mover.move_all()
    }

    /// Page counts summed over all batches so far.
    pub fn page_totals(&self) -> PageCounts {
        self.serial
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Moves what it can of `batch` (see the module docs) and reports it,
    /// with what happened to the pages.
    pub fn migrate_pages(&self, batch: &Batch) -> (BatchOutcome, PageCounts) {
        let mut totals = self.serial.lock().unwrap_or_else(PoisonError::into_inner);
        let started = Instant::now();
        let mut out = BatchOutcome::new(batch.frames());
        let plan = {
            let mut ledger = self.memory.ledger();
            kernel_plan::plan(&mut ledger, batch, &self.faults, &|t| self.tier_name(t))
        };
        out.report.skipped = plan.skipped;
        for refused in plan.refused {
            out.record_failed(refused);
        }
        let mut why = vec![None; plan.moves.len()];
        let (ok, counts) = self.run(&plan.moves, &mut why, &mut out);
        self.finish(&plan.moves, &ok, why, &mut out);
        out.report.bytes = (counts.moved + counts.rolled_back) * page_size() as u64;
        out.report.total = started.elapsed();
        totals.absorb(&counts);
        (out, counts)
    }

    /// Sets policies and moves pages; returns per move whether it moved.
    /// `why` gets each failed move's first cause.
    fn run(
        &self,
        moves: &[PlannedMove],
        why: &mut [Option<Failure>],
        out: &mut BatchOutcome,
    ) -> (Vec<bool>, PageCounts) {
        let (Some(first), Some(last)) = (
            moves.iter().map(|m| m.frame.index()).min(),
            moves.iter().map(|m| m.frame.index()).max(),
        ) else {
            return (Vec::new(), PageCounts::default());
        };
        let fs = self.memory.frame_size();
        let fd = self.memory.tiers()[0].fd();
        // Through this window, resident pages the guest range does not map
        // are found and moved (see `kernel_pages`).
        let window = match FileWindow::open(fd, first as u64 * fs, (last - first + 1) as u64 * fs) {
            Ok(window) => window,
            Err(err) => {
                let err = StepError::memory(err.into());
                for w in why.iter_mut() {
                    *w = Some((MoveStep::MovePages, err.clone()));
                }
                return (vec![false; moves.len()], PageCounts::default());
            }
        };
        let mut progress = self.set_policies(moves, why, out);
        let copying = Instant::now();
        self.move_pages(moves, &mut progress, &window, why, out);
        let before = progress.ok.clone();
        kernel_plan::settle(moves, &mut progress.ok);
        for (i, m) in moves.iter().enumerate() {
            if before[i] && !progress.ok[i] {
                let partner = m.depends_on.map_or(FrameId(0), |c| moves[c].frame);
                why[i] = Some((MoveStep::MovePages, StepError::PartnerFailed(partner)));
            }
        }
        out.report.copy += copying.elapsed();
        self.roll_back(moves, &mut progress, &window, out);
        (progress.ok, progress.counts)
    }

    /// Binds each move's frame range to its destination node.
    fn set_policies(
        &self,
        moves: &[PlannedMove],
        why: &mut [Option<Failure>],
        out: &mut BatchOutcome,
    ) -> Progress {
        let started = Instant::now();
        let ok: Vec<bool> = moves
            .iter()
            .zip(why.iter_mut())
            .map(|(m, why)| match self.set_policy(m.frame, m.to.tier) {
                Ok(()) => true,
                Err(e) => {
                    *why = Some((MoveStep::Remap, e));
                    false
                }
            })
            .collect();
        let jobs = (0..moves.len()).filter(|i| ok[*i]).collect();
        out.report.remap += started.elapsed();
        Progress {
            policy_set: ok.clone(),
            ok,
            jobs,
            counts: PageCounts::default(),
        }
    }

    /// Moves the pages of the moves whose policy is set.
    fn move_pages(
        &self,
        moves: &[PlannedMove],
        progress: &mut Progress,
        window: &FileWindow,
        why: &mut [Option<Failure>],
        out: &mut BatchOutcome,
    ) {
        let jobs: Vec<FrameJob> = progress.jobs.iter().map(|i| self.job(&moves[*i])).collect();
        let fs = self.memory.frame_size() as usize;
        let outcome = self.mover.move_frames(&jobs, fs, window);
        // The page work's errors say why pages stayed behind: the first
        // one is each failed frame's cause, all of them are warnings.
        let cause = outcome
            .errors
            .first()
            .cloned()
            .map_or(StepError::PagesStayed, StepError::Pages);
        for (i, job_ok) in progress.jobs.iter().zip(&outcome.ok) {
            if !job_ok {
                progress.ok[*i] = false;
                why[*i] = Some((MoveStep::MovePages, cause.clone()));
            } else if self.faults.should_fail(Step::Copy) {
                progress.ok[*i] = false;
                why[*i] = Some((MoveStep::MovePages, StepError::Injected));
            }
        }
        let range = batch_range(moves);
        for e in outcome.errors {
            out.warnings.push(MoveError {
                frames: range.clone(),
                to_tier: moves[0].to.tier,
                step: MoveStep::MovePages,
                source: StepError::Pages(e),
            });
        }
        let counts = outcome.counts;
        if !counts.failed_by_status.is_empty() {
            let by_status: Vec<String> = counts
                .failed_by_status
                .iter()
                .map(|(status, n)| format!("{status} x{n}"))
                .collect();
            out.warnings.push(MoveError {
                frames: range,
                to_tier: moves[0].to.tier,
                step: MoveStep::MovePages,
                source: StepError::PagesNotMoved {
                    failed: counts.failed,
                    by_status: by_status.join(", "),
                },
            });
        }
        progress.counts = counts;
    }

    /// Restores the source policy of failed moves and moves their pages home.
    fn roll_back(
        &self,
        moves: &[PlannedMove],
        progress: &mut Progress,
        window: &FileWindow,
        out: &mut BatchOutcome,
    ) {
        let policies = Instant::now();
        for (i, m) in moves.iter().enumerate() {
            if progress.policy_set[i] && !progress.ok[i] {
                if let Err(e) = self.set_policy(m.frame, m.from.tier) {
                    out.warnings
                        .push(MoveError::frame(m.frame, m.to.tier, MoveStep::Rollback, e));
                }
            }
        }
        out.report.remap += policies.elapsed();
        let copying = Instant::now();
        let jobs: Vec<FrameJob> = progress.jobs.iter().map(|i| self.job(&moves[*i])).collect();
        let keep: Vec<bool> = progress.jobs.iter().map(|i| progress.ok[*i]).collect();
        let fs = self.memory.frame_size() as usize;
        let mut errors = Vec::new();
        let (back, stuck) = self.mover.move_back(&jobs, &keep, fs, window, &mut errors);
        progress.counts.rolled_back = back;
        progress.counts.stuck = stuck;
        let range = batch_range(moves);
        let to_tier = moves[0].to.tier;
        let rollback = |source| MoveError {
            frames: range.clone(),
            to_tier,
            step: MoveStep::Rollback,
            source,
        };
        out.warnings
            .extend(errors.into_iter().map(|e| rollback(StepError::Pages(e))));
        if stuck > 0 {
            out.warnings.push(rollback(StepError::PagesStuck(stuck)));
        }
        out.report.copy += copying.elapsed();
    }

    /// Commits moved frames to the placement map and releases slots;
    /// records each move's outcome.
    fn finish(
        &self,
        moves: &[PlannedMove],
        ok: &[bool],
        why: Vec<Option<Failure>>,
        out: &mut BatchOutcome,
    ) {
        let swapped = kernel_plan::exchanged(moves, ok);
        let mut ledger = self.memory.ledger();
        for (((m, moved), why), &exchanged) in moves.iter().zip(ok).zip(why).zip(&swapped) {
            let result = if *moved {
                ledger.commit_move(m.frame, m.from, m.to)
            } else {
                ledger.release(m.to)
            };
            let failure = match result {
                Ok(()) if *moved => {
                    out.record_moved(m.frame, m.from.tier, m.to.tier, exchanged);
                    continue;
                }
                Ok(()) => why.unwrap_or((MoveStep::MovePages, StepError::PagesStayed)),
                Err(err) => (MoveStep::Commit, StepError::memory(err.into())),
            };
            out.record_failed(MoveError::frame(m.frame, m.to.tier, failure.0, failure.1));
        }
        for (m, moved) in moves.iter().zip(ok) {
            if *moved {
                if let Err(err) = ledger.release(m.from) {
                    out.warnings.push(MoveError::frame(
                        m.frame,
                        m.to.tier,
                        MoveStep::Commit,
                        StepError::memory(err.into()),
                    ));
                }
            }
        }
    }

    /// Binds `frame`'s file range to `tier`'s node.
    fn set_policy(&self, frame: FrameId, tier: TierId) -> Result<(), StepError> {
        let node = self.nodes[tier.index()];
        if self.faults.should_fail(Step::Remap) {
            return Err(StepError::Injected);
        }
        let fs = self.memory.frame_size();
        let fd = self.memory.tiers()[0].fd();
        bind_range(fd, frame.index() as u64 * fs, fs, node)
            .map_err(|err| StepError::os("mbind", err))
    }

    fn job(&self, m: &PlannedMove) -> FrameJob {
        let fs = self.memory.frame_size();
        FrameJob {
            host: self.memory.frames().host_addr(m.frame).unwrap_or(0) as usize,
            offset: m.frame.index() as u64 * fs,
            home: self.node(m.from.tier),
            target: self.target_node(m.to.tier),
        }
    }

    fn node(&self, tier: TierId) -> i32 {
        // Checked to fit when the migrator was made.
        i32::try_from(self.nodes[tier.index()]).unwrap_or(i32::MAX)
    }

    #[cfg(not(test))]
    fn target_node(&self, tier: TierId) -> i32 {
        self.node(tier)
    }

    #[cfg(test)]
    fn target_node(&self, tier: TierId) -> i32 {
        self.target_override.unwrap_or_else(|| self.node(tier))
    }

    fn tier_name(&self, tier: TierId) -> String {
        self.memory
            .tiers()
            .get(tier.index())
            .map_or_else(|| format!("#{tier}"), |t| t.name().to_owned())
    }
}

/// The frames from the batch's first to its last (page work is done for
/// the batch as a whole).
fn batch_range(moves: &[PlannedMove]) -> std::ops::Range<usize> {
    let first = moves.iter().map(|m| m.frame.index()).min().unwrap_or(0);
    let last = moves.iter().map(|m| m.frame.index()).max().unwrap_or(first);
    first..last + 1
}

impl Migrator for KernelMigrator {
    fn name(&self) -> &str {
        "kernel"
    }

    fn faults(&self) -> Option<&Arc<FaultInjection>> {
        Some(&self.faults)
    }

    fn memory(&self) -> &TieredMemory {
        &self.memory
    }

    fn migrate(&self, batch: &Batch) -> BatchOutcome {
        self.migrate_pages(batch).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TierSpec;
    use crate::config::MemoryConfig;
    use crate::migrate::{Move, PageError};
    use crate::size::MIB;

    fn memory() -> Arc<TieredMemory> {
        let tier = |name: &str| -> TierSpec {
            format!("name={name},backend=memfd,size=4M,numa-node=0")
                .parse()
                .unwrap()
        };
        let cfg = MemoryConfig {
            size: 4 * MIB,
            tiers: vec![tier("fast"), tier("slow")],
            backing: Backing::SharedNuma {
                allow_same_node: true,
            },
            ..MemoryConfig::default()
        };
        Arc::new(TieredMemory::new(&cfg).unwrap())
    }

    fn touch(memory: &TieredMemory, frame: usize) {
        let host = memory.frames().host_addr(FrameId(frame)).unwrap();
        for page in 0..memory.frame_size() / 4096 {
            // SAFETY: inside the guest range of a live memory; nothing
            // else uses it in this test.
            unsafe { std::ptr::write_volatile((host + page * 4096) as *mut u64, page) };
        }
    }

    /// `move_pages` refusing the whole call (no such node): every page of
    /// the frame is left unattempted, so the frame is aborted, its policy
    /// restored and the placement map unchanged.
    #[test]
    fn a_target_node_that_does_not_exist_aborts_cleanly() {
        let memory = memory();
        touch(&memory, 0);
        let mut migrator = KernelMigrator::new(Arc::clone(&memory)).unwrap();
        migrator.target_override = Some(4000);
        let before = memory.placement();
        let (out, pages) = migrator.migrate_pages(&Batch::from(
            &[Move {
                frame: FrameId(0),
                to_tier: TierId(1),
            }][..],
        ));
        let report = &out.report;
        assert_eq!((report.moved, report.aborted), (0, 1), "{out:?}");
        assert!(
            out.errors().any(|e| matches!(
                &e.source,
                StepError::Pages(PageError::MovePages { nodes, .. }) if nodes == &[4000]
            )),
            "{out:?}"
        );
        assert_eq!(pages.present, 512);
        assert_eq!(pages.failed, 512);
        assert_eq!(
            pages.failed_by_status.get("not attempted"),
            Some(&512),
            "{pages:?}"
        );
        assert_eq!(memory.placement(), before);
        assert_eq!(
            (
                memory.reserved_slots(TierId(0)),
                memory.reserved_slots(TierId(1))
            ),
            (0, 0)
        );
        assert_eq!(report.bytes, 0);
        // The call was made with MPOL_MF_MOVE_ALL where this thread may.
        assert_eq!(migrator.move_all(), has_cap_sys_nice(false));
    }

    /// `capget`/`capset` header (version 3).
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: i32,
    }

    /// `capget`/`capset` data word (version 3 takes two).
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }

    /// Whether the calling thread has `CAP_SYS_NICE` (23) in effect; with
    /// `drop`, takes it away from this thread only (capabilities are per
    /// thread, so other tests keep theirs).
    fn has_cap_sys_nice(drop: bool) -> bool {
        let mut header = CapHeader {
            version: 0x2008_0522,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        // SAFETY: a header and the two data words capget v3 writes.
        let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        let had = data[0].effective & (1 << 23) != 0;
        if drop {
            data[0].effective &= !(1 << 23);
            // SAFETY: as above; capset changes only this thread's credentials.
            let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        }
        had
    }

    /// Without `CAP_SYS_NICE` the kernel refuses `MPOL_MF_MOVE_ALL` with
    /// `EPERM` (before looking at the node); the migrator switches to
    /// `MPOL_MF_MOVE` for good and retries, reaching the node error.
    #[test]
    fn without_cap_sys_nice_the_migrator_falls_back_to_mpol_mf_move() {
        let memory = memory();
        touch(&memory, 1);
        let mut migrator = KernelMigrator::new(Arc::clone(&memory)).unwrap();
        migrator.target_override = Some(4000);
        let migrator = Arc::new(migrator);
        let worker = {
            let migrator = Arc::clone(&migrator);
            std::thread::spawn(move || {
                has_cap_sys_nice(true);
                migrator.migrate_pages(&Batch::from(
                    &[Move {
                        frame: FrameId(1),
                        to_tier: TierId(1),
                    }][..],
                ))
            })
        };
        let (out, _) = worker.join().unwrap();
        assert!(!migrator.move_all());
        assert_eq!(out.report.aborted, 1);
        // One failed call reported (the EPERM one was retried, not
        // reported), with the node's error.
        let mut calls: Vec<&std::io::Error> = out
            .errors()
            .filter_map(|e| match &e.source {
                StepError::Pages(PageError::MovePages { source, .. }) => Some(&**source),
                _ => None,
            })
            .collect();
        calls.dedup_by_key(|e| e.to_string());
        assert_eq!(calls.len(), 1, "{out:?}");
        assert_eq!(calls[0].raw_os_error(), Some(libc::ENODEV), "{calls:?}");
    }
}

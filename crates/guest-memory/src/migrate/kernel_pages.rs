//! The page work of a kernel-migrator batch: find the resident 4 KiB pages
//! of the batch's frames, move the ones not yet on their target node with
//! `move_pages(2)` (in chunks), retry failed pages once, establish where
//! every page ended up, and move pages of aborted frames back.
//!
//! Finding pages: `move_pages` sees only pages mapped at the address given.
//! A page of the memfd can be resident yet unmapped from the guest range
//! (`MADV_DONTNEED` by a fault-sampling tracker, or written only through
//! another mapping); `mincore` on the guest range (the page cache, for a
//! shared mapping) finds those, and they are mapped read-only in the
//! batch's [`FileWindow`] (`MADV_POPULATE_READ`, no fault in the guest
//! range, no allocation) and moved through the window instead.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use thiserror::Error;

use crate::move_pages::{
    self, MPOL_MF_MOVE, MPOL_MF_MOVE_ALL, NOT_ATTEMPTED, page_size, status_name,
};
use crate::shared_numa::FileWindow;

/// Pages per `move_pages` call.
pub(crate) const CHUNK_PAGES: usize = 16 * 1024;

/// What happened to the 4 KiB pages of a batch (or of many, summed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PageCounts {
    /// Resident pages of the frames that were asked to move.
    pub present: u64,
    /// Pages not in memory: nothing to move; the node policy places them
    /// when the guest first touches them.
    pub not_present: u64,
    /// Of `present`: resident but not mapped in the guest range, moved
    /// through a temporary mapping.
    pub unmapped_resident: u64,
    /// Of `present`: already on the target node.
    pub already_there: u64,
    /// Pages the kernel migrated to their target node.
    pub moved: u64,
    /// Pages that failed the first attempt and were tried again.
    pub retried: u64,
    /// Pages still not on their target after the retry.
    pub failed: u64,
    /// `failed` by the status of the last attempt ("EBUSY", "ENOMEM", …).
    pub failed_by_status: BTreeMap<String, u64>,
    /// Pages of aborted frames moved back to their source node.
    pub rolled_back: u64,
    /// Pages of aborted frames that could not be moved back.
    pub stuck: u64,
}

impl PageCounts {
    /// Adds `other` to `self`.
    pub fn absorb(&mut self, other: &PageCounts) {
        self.present += other.present;
        self.not_present += other.not_present;
        self.unmapped_resident += other.unmapped_resident;
        self.already_there += other.already_there;
        self.moved += other.moved;
        self.retried += other.retried;
        self.failed += other.failed;
        for (status, n) in &other.failed_by_status {
            *self.failed_by_status.entry(status.clone()).or_default() += n;
        }
        self.rolled_back += other.rolled_back;
        self.stuck += other.stuck;
    }
}

/// A page operation of a batch that failed; the frames it concerned are
/// not moved (or, moving back, stay where they are).
#[derive(Clone, Debug, Error)]
pub enum PageError {
    /// A `move_pages` call failed as a whole.
    #[error("move_pages to node {nodes:?} failed")]
    MovePages {
        /// The target nodes of the call.
        nodes: Vec<i32>,
        /// What the kernel said.
        #[source]
        source: Arc<io::Error>,
    },
    /// `mincore` on a frame failed.
    #[error("mincore failed")]
    Mincore(#[source] Arc<io::Error>),
    /// A page's location came back as an error status.
    #[error("cannot locate guest pages: {0}")]
    Locate(String),
    /// Resident pages could not be mapped in the batch's window.
    #[error("cannot map resident pages")]
    MapResident(#[source] Arc<io::Error>),
    /// Asking where pages are failed.
    #[error("cannot ask where pages are ({what})")]
    Query {
        /// Which pages ("guest range", "window", "after moving").
        what: &'static str,
        /// What the kernel said.
        #[source]
        source: Arc<io::Error>,
    },
}

/// One frame to move: where its pages are and where they go.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameJob {
    /// Host address of the frame in the guest range.
    pub host: usize,
    /// Offset of the frame in the memfd.
    pub offset: u64,
    /// Node of the frame's source tier.
    pub home: i32,
    /// Node of the destination tier.
    pub target: i32,
}

/// A resident page to move.
#[derive(Clone, Copy, Debug)]
struct Page {
    /// Index of its frame's job.
    job: usize,
    /// Address to hand to `move_pages` (guest range or window).
    addr: usize,
    /// Last known status (a node, or a negative errno).
    status: i32,
}

/// How a page stands after a `move_pages` attempt towards `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageState {
    /// On the target node.
    Done,
    /// Not mapped any more (unmapped or freed meanwhile): nothing to move.
    Gone,
    /// Failed or not attempted: try again, or ask where it is.
    Failed,
}

/// Classifies a `move_pages` status for a page headed to `target`.
pub(crate) fn page_state(status: i32, target: i32) -> PageState {
    if status == target {
        PageState::Done
    } else if status == -libc::ENOENT {
        PageState::Gone
    } else {
        PageState::Failed
    }
}

/// Moves pages with `move_pages`, using `MPOL_MF_MOVE_ALL` until the kernel
/// says this process may not (`EPERM`: no `CAP_SYS_NICE`), then
/// `MPOL_MF_MOVE` (pages mapped more than once then fail with `EACCES`).
#[derive(Debug)]
pub(crate) struct PageMover {
    move_all: AtomicBool,
}

impl Default for PageMover {
    fn default() -> Self {
        Self {
            move_all: AtomicBool::new(true),
        }
    }
}

/// The result of the page work for a batch.
#[derive(Debug, Default)]
pub(crate) struct PageOutcome {
    /// Per job: whether all its resident pages are on the target node.
    pub ok: Vec<bool>,
    /// Counters.
    pub counts: PageCounts,
    /// Problems worth a line in the report.
    pub errors: Vec<PageError>,
}

impl PageMover {
    /// Whether `MPOL_MF_MOVE_ALL` is in use.
    pub(crate) fn move_all(&self) -> bool {
        self.move_all.load(Ordering::Relaxed)
    }

    /// Moves every resident page of `jobs` to its target node; `window`
    /// maps the memfd over all the jobs' frames.
    pub(crate) fn move_frames(
        &self,
        jobs: &[FrameJob],
        frame_size: usize,
        window: &FileWindow,
    ) -> PageOutcome {
        let mut out = PageOutcome {
            ok: vec![true; jobs.len()],
            ..PageOutcome::default()
        };
        let mut pages = find_resident(jobs, frame_size, window, &mut out);
        out.counts.present = pages.len() as u64;
        pages.retain(|p| {
            let there = p.status == jobs[p.job].target;
            out.counts.already_there += u64::from(there);
            !there
        });
        self.attempt(&mut pages, jobs, &mut out.errors);
        let (mut retry, rest): (Vec<Page>, Vec<Page>) = pages
            .into_iter()
            .partition(|p| page_state(p.status, jobs[p.job].target) == PageState::Failed);
        out.counts.moved += rest
            .iter()
            .filter(|p| page_state(p.status, jobs[p.job].target) == PageState::Done)
            .count() as u64;
        out.counts.retried = retry.len() as u64;
        self.attempt(&mut retry, jobs, &mut out.errors);
        for page in settle_unknown(retry, jobs, &mut out.errors) {
            match page_state(page.1, jobs[page.0.job].target) {
                PageState::Done => out.counts.moved += 1,
                PageState::Gone => {}
                PageState::Failed => {
                    out.ok[page.0.job] = false;
                    out.counts.failed += 1;
                    *out.counts
                        .failed_by_status
                        .entry(status_name(page.0.status))
                        .or_default() += 1;
                }
            }
        }
        out
    }

    /// Moves the pages of the aborted jobs (`!keep[job]`) that are on their
    /// target node back to their home node (one attempt, best effort).
    /// Returns (pages moved back, pages left behind).
    pub(crate) fn move_back(
        &self,
        jobs: &[FrameJob],
        keep: &[bool],
        frame_size: usize,
        window: &FileWindow,
        errors: &mut Vec<PageError>,
    ) -> (u64, u64) {
        // A job whose home is its target (tiers sharing a node) has nothing
        // to move back.
        let back: Vec<FrameJob> = jobs
            .iter()
            .zip(keep)
            .filter(|(job, keep)| !**keep && job.home != job.target)
            .map(|(job, _)| FrameJob {
                home: job.target,
                target: job.home,
                ..*job
            })
            .collect();
        let mut ignored = PageOutcome {
            ok: vec![true; back.len()],
            ..PageOutcome::default()
        };
        let mut pages = find_resident(&back, frame_size, window, &mut ignored);
        errors.append(&mut ignored.errors);
        // Only pages on the node they were sent to go back; others stay.
        pages.retain(|p| p.status == back[p.job].home);
        self.attempt(&mut pages, &back, errors);
        let home = pages
            .iter()
            .filter(|p| page_state(p.status, back[p.job].target) != PageState::Failed)
            .count() as u64;
        (home, pages.len() as u64 - home)
    }

    /// One `move_pages` attempt for `pages` (chunked), statuses updated.
    fn attempt(&self, pages: &mut [Page], jobs: &[FrameJob], errors: &mut Vec<PageError>) {
        for chunk in pages.chunks_mut(CHUNK_PAGES) {
            let addrs: Vec<usize> = chunk.iter().map(|p| p.addr).collect();
            let nodes: Vec<i32> = chunk.iter().map(|p| jobs[p.job].target).collect();
            let mut status = vec![NOT_ATTEMPTED; chunk.len()];
            let mut result = self.call(&addrs, &nodes, &mut status);
            if let Err(err) = &result {
                if err.raw_os_error() == Some(libc::EPERM) && self.move_all() {
                    self.move_all.store(false, Ordering::Relaxed);
                    result = self.call(&addrs, &nodes, &mut status);
                }
            }
            if let Err(err) = result {
                let mut targets: Vec<i32> = nodes.clone();
                targets.sort_unstable();
                targets.dedup();
                note(
                    errors,
                    PageError::MovePages {
                        nodes: targets,
                        source: Arc::new(err),
                    },
                );
            }
            for (page, status) in chunk.iter_mut().zip(status) {
                page.status = status;
            }
        }
    }

    fn call(&self, addrs: &[usize], nodes: &[i32], status: &mut [i32]) -> std::io::Result<usize> {
        let flags = if self.move_all() {
            MPOL_MF_MOVE_ALL
        } else {
            MPOL_MF_MOVE
        };
        move_pages::move_to(addrs, nodes, status, flags)
    }
}

/// Adds `error` to `errors` unless one that reads the same is there.
fn note(errors: &mut Vec<PageError>, error: PageError) {
    use std::error::Error as _;
    let text = |e: &PageError| (e.to_string(), e.source().map(ToString::to_string));
    if !errors.iter().any(|e| text(e) == text(&error)) {
        errors.push(error);
    }
}

/// The resident pages of `jobs` with their current node: pages mapped in
/// the guest range by address, pages resident but unmapped through
/// `window`. A frame whose pages cannot be examined is marked failed.
fn find_resident(
    jobs: &[FrameJob],
    frame_size: usize,
    window: &FileWindow,
    out: &mut PageOutcome,
) -> Vec<Page> {
    let ps = page_size();
    let per_frame = frame_size / ps;
    let mut guest: Vec<Page> = jobs
        .iter()
        .enumerate()
        .flat_map(|(job, j)| {
            (0..per_frame).map(move |p| Page {
                job,
                addr: j.host + p * ps,
                status: NOT_ATTEMPTED,
            })
        })
        .collect();
    query_pages(&mut guest, out, "guest range");
    let mut found = Vec::with_capacity(guest.len());
    let mut in_cache = vec![false; per_frame];
    for (job, frame) in guest.chunks(per_frame.max(1)).enumerate() {
        if !out.ok[job] {
            continue;
        }
        let unmapped = frame.iter().any(|p| p.status == -libc::ENOENT);
        if unmapped {
            if let Err(err) = move_pages::resident(jobs[job].host, frame_size, &mut in_cache) {
                note(&mut out.errors, PageError::Mincore(Arc::new(err)));
                out.ok[job] = false;
                continue;
            }
        }
        let mut hidden = Vec::new();
        for (index, page) in frame.iter().enumerate() {
            match page.status {
                s if s >= 0 => found.push(*page),
                s if s == -libc::ENOENT && in_cache[index] => {
                    let offset = jobs[job].offset + (index * ps) as u64;
                    match window.addr_of(offset) {
                        Some(addr) => hidden.push(Page { addr, ..*page }),
                        None => out.ok[job] = false,
                    }
                }
                s if s == -libc::ENOENT => out.counts.not_present += 1,
                s => {
                    note(&mut out.errors, PageError::Locate(status_name(s)));
                    out.ok[job] = false;
                }
            }
        }
        if hidden.is_empty() {
            continue;
        }
        for (start, len) in address_runs(&hidden, ps) {
            if let Err(err) = move_pages::populate_read(start, len) {
                note(&mut out.errors, PageError::MapResident(Arc::new(err)));
                out.ok[job] = false;
            }
        }
        query_pages(&mut hidden, out, "window");
        for page in hidden {
            if page.status >= 0 {
                out.counts.unmapped_resident += 1;
                found.push(page);
            } else if page.status == -libc::ENOENT {
                // Freed between mincore and now.
                out.counts.not_present += 1;
            } else {
                out.ok[job] = false;
            }
        }
    }
    found
}

/// Runs of adjacent page addresses, as (start, length).
fn address_runs(pages: &[Page], ps: usize) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for page in pages {
        match runs.last_mut() {
            Some((start, len)) if *start + *len == page.addr => *len += ps,
            _ => runs.push((page.addr, ps)),
        }
    }
    runs
}

/// Fills each page's status with where it is (chunked queries); a failed
/// query marks the pages' frames failed.
fn query_pages(pages: &mut [Page], out: &mut PageOutcome, what: &'static str) {
    for chunk in pages.chunks_mut(CHUNK_PAGES) {
        let addrs: Vec<usize> = chunk.iter().map(|p| p.addr).collect();
        let mut status = vec![NOT_ATTEMPTED; chunk.len()];
        if let Err(err) = move_pages::query(&addrs, &mut status) {
            note(
                &mut out.errors,
                PageError::Query {
                    what,
                    source: Arc::new(err),
                },
            );
            for page in chunk.iter() {
                out.ok[page.job] = false;
            }
        }
        for (page, status) in chunk.iter_mut().zip(status) {
            page.status = status;
        }
    }
}

/// For pages whose last attempt failed, asks where they are now: a chunk
/// that failed part-way may have moved pages without reporting them.
/// Returns each page (with its last attempt's status) and where it is.
fn settle_unknown(
    pages: Vec<Page>,
    jobs: &[FrameJob],
    errors: &mut Vec<PageError>,
) -> Vec<(Page, i32)> {
    let unresolved: Vec<Page> = pages
        .iter()
        .copied()
        .filter(|p| page_state(p.status, jobs[p.job].target) == PageState::Failed)
        .collect();
    let mut truth = unresolved.clone();
    let mut scratch = PageOutcome {
        ok: vec![true; jobs.len()],
        ..PageOutcome::default()
    };
    query_pages(&mut truth, &mut scratch, "after moving");
    errors.extend(scratch.errors);
    let mut settled: Vec<(Page, i32)> = pages
        .into_iter()
        .filter(|p| page_state(p.status, jobs[p.job].target) != PageState::Failed)
        .map(|p| (p, p.status))
        .collect();
    settled.extend(
        unresolved
            .into_iter()
            .zip(truth.into_iter().map(|t| t.status)),
    );
    settled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_states() {
        assert_eq!(page_state(1, 1), PageState::Done);
        assert_eq!(page_state(-libc::ENOENT, 1), PageState::Gone);
        assert_eq!(page_state(-libc::EBUSY, 1), PageState::Failed);
        assert_eq!(page_state(NOT_ATTEMPTED, 1), PageState::Failed);
        assert_eq!(page_state(0, 1), PageState::Failed);
    }

    #[test]
    fn adjacent_addresses_make_one_run() {
        let page = |addr| Page {
            job: 0,
            addr,
            status: 0,
        };
        let pages = [page(0x1000), page(0x2000), page(0x4000), page(0x5000)];
        assert_eq!(
            address_runs(&pages, 0x1000),
            vec![(0x1000, 0x2000), (0x4000, 0x2000)]
        );
    }

    #[test]
    fn counts_add_up() {
        let mut a = PageCounts {
            moved: 2,
            failed: 1,
            failed_by_status: BTreeMap::from([("EBUSY".into(), 1)]),
            ..PageCounts::default()
        };
        let b = PageCounts {
            moved: 3,
            failed: 2,
            failed_by_status: BTreeMap::from([("EBUSY".into(), 1), ("ENOMEM".into(), 1)]),
            ..PageCounts::default()
        };
        a.absorb(&b);
        assert_eq!((a.moved, a.failed), (5, 3));
        assert_eq!(
            a.failed_by_status,
            BTreeMap::from([("EBUSY".into(), 2), ("ENOMEM".into(), 1)])
        );
    }
}

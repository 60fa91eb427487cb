//! The `damon` tracker: how often the guest touches (reads or writes) a
//! sample of each frame's pages, from the host kernel's DAMON in
//! physical-address mode. DAMON clears and tests the pages' accessed bits
//! through the MMU notifier, which reaches KVM's aging of its secondary
//! MMU (the EPT/NPT accessed bits): the guest takes no exit and no fault.
//!
//! The tracker owns one kdamond ([`OwnedKdamond`]) watching one-page
//! regions: the host PFNs (`/proc/self/pagemap`) of the sampled pages.
//! DAMON checks each region [`CHECKS_PER_AGGREGATION`] times per
//! aggregation (the window period of [`SamplingSettings`], 200 ms by
//! default) and reports how many checks found it accessed
//! (`damon_aggregated`, [`DamonTrace`]): a frequency. The budget is
//! [`SamplingSettings`]' pages per second: regions × checks per second,
//! so the kdamond's CPU is fixed whatever the guest's size. When the budget covers fewer pages
//! than the guest has frames, the sampled frames rotate every
//! [`ROTATE_EVERY`] aggregations.
//!
//! A migration gives a frame new host pages (new PFNs). Every `collect()`
//! reads the sampled pages' PFNs again and commits the regions anew when
//! one changed; a region's reports count only from the first aggregation
//! that began after its commit, so a partial aggregation is never taken
//! for a whole one, and a PFN handed to another frame is never credited to
//! the old one from then on.
//!
//! Needs: DAMON sysfs with `paddr` and the tracepoint (tracefs mounted),
//! root (PFNs), no other program's kdamond, and tiers whose pages are on
//! the LRU (shmem memfd or files: hugetlb and device-DAX pages are
//! invisible to DAMON, so such tiers are refused).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use guest_memory::{BackendKind, FrameId, TieredMemory};

use crate::damon_sysfs::{
    DAMON_ADMIN, DamonError, DamonIntervals, MIN_DAMON_REGIONS, OwnedKdamond,
};
use crate::damon_trace::{Aggregated, DamonTrace, DamonTraceError, TRACEFS};
use crate::sample::{AccessSample, AccessTracker, Coverage, TrackerError, TrackerStatus};
use crate::sampling_settings::SamplingSettings;
use crate::window_sampler::SamplerReport;
use crate::xorshift::XorShift;
use crate::{Pagemap, PagemapError};

const PAGE: u64 = 4096;
/// Checks of each region per aggregation (DAMON's own default ratio:
/// 5 ms samples, 100 ms aggregations).
pub const CHECKS_PER_AGGREGATION: u32 = 20;
/// Aggregations between two draws of the sampled pages.
pub const ROTATE_EVERY: u32 = 5;

/// Why the `damon` tracker could not start or collect.
#[derive(Debug, Error)]
pub enum DamonTrackerError {
    /// A tier whose pages DAMON cannot see.
    #[error(
        "damon: tier '{0}' is {1}: its pages are not on the LRU, so DAMON cannot see them \
         (use shmem memfd tiers)"
    )]
    InvisibleTier(String, &'static str),
    /// DAMON's sysfs interface refused.
    #[error("damon")]
    Damon(#[from] DamonError),
    /// The tracepoint could not be read.
    #[error("damon")]
    Trace(#[from] DamonTraceError),
    /// PFNs could not be read.
    #[error("damon")]
    Pagemap(#[from] PagemapError),
}

/// One sampled page.
#[derive(Clone, Copy, Debug)]
struct Watched {
    frame: usize,
    /// Host-virtual address of the page.
    addr: u64,
    /// Its PFN when last read (`None`: not present, not watched).
    pfn: Option<u64>,
    /// CLOCK_MONOTONIC seconds of the commit that started watching `pfn`.
    since: f64,
}

/// The `damon` tracker of one VM.
#[derive(Debug)]
pub struct DamonTracker {
    memory: Arc<TieredMemory>,
    settings: SamplingSettings,
    intervals: DamonIntervals,
    /// Regions afforded by the budget.
    regions: usize,
    kdamond: OwnedKdamond,
    /// Whether the kdamond was started (it waits for three present pages).
    running: bool,
    trace: DamonTrace,
    pagemap: Pagemap,
    rng: XorShift,
    watched: Vec<Watched>,
    /// PFN → index into `watched`.
    by_pfn: HashMap<u64, usize>,
    /// The next frame to sample when rotating.
    next_frame: usize,
    collects: u32,
    /// When the kdamond started.
    started_at: Option<Instant>,
    last: Instant,
    report: SamplerReport,
    /// The kdamond's CPU time when the tracker started (clock ticks).
    cpu_start: Option<u64>,
}

impl DamonTracker {
    /// Starts a kdamond watching `memory` on `settings`' budget, the
    /// aggregation every window period; refuses when the host cannot.
    pub fn new(
        memory: Arc<TieredMemory>,
        settings: SamplingSettings,
    ) -> Result<Self, DamonTrackerError> {
        Self::with_paths(memory, settings, Path::new(DAMON_ADMIN), Path::new(TRACEFS))
    }

    /// Like [`new`](Self::new), with DAMON's sysfs and tracefs at the
    /// given paths.
    pub fn with_paths(
        memory: Arc<TieredMemory>,
        settings: SamplingSettings,
        admin: &Path,
        tracefs: &Path,
    ) -> Result<Self, DamonTrackerError> {
        for tier in memory.tiers() {
            let invisible = match tier.kind() {
                BackendKind::Memfd { hugetlb: true, .. } => Some("hugetlb"),
                BackendKind::DevDax { .. } => Some("device-DAX"),
                _ => None,
            };
            if let Some(what) = invisible {
                return Err(DamonTrackerError::InvisibleTier(
                    tier.name().to_owned(),
                    what,
                ));
            }
        }
        let aggregation = settings.period();
        let sample = (aggregation / CHECKS_PER_AGGREGATION).max(Duration::from_micros(100));
        let intervals = DamonIntervals {
            sample,
            aggregation,
        };
        let pages = memory.frame_count() as u64 * (memory.frame_size() / PAGE).max(1);
        let afforded =
            u64::from(settings.budget_pages_per_sec) * sample.as_micros() as u64 / 1_000_000;
        let regions = afforded.clamp(
            MIN_DAMON_REGIONS as u64,
            pages.max(MIN_DAMON_REGIONS as u64),
        );
        let pagemap = Pagemap::open()?;
        let trace = DamonTrace::open(tracefs)?;
        let kdamond = OwnedKdamond::create(admin, intervals)?;
        let seed = Instant::now().elapsed().as_nanos() as u64 ^ memory.frame_count() as u64;
        let report = SamplerReport {
            budget_pages_per_sec: settings.budget_pages_per_sec,
            window: sample,
            ..SamplerReport::default()
        };
        let mut tracker = DamonTracker {
            memory,
            settings,
            intervals,
            regions: regions as usize,
            kdamond,
            running: false,
            trace,
            pagemap,
            rng: XorShift::new(seed),
            watched: Vec::new(),
            by_pfn: HashMap::new(),
            next_frame: 0,
            collects: 0,
            started_at: None,
            last: Instant::now(),
            report,
            cpu_start: None,
        };
        tracker.draw();
        tracker.refresh(true)?;
        Ok(tracker)
    }

    /// Draws the pages to watch: every frame's share of the regions when
    /// they cover every frame, else one page each of the next frames.
    fn draw(&mut self) {
        let frames = self.memory.frames();
        let count = frames.len();
        let pages_per_frame = (frames.frame_size() / PAGE).max(1);
        self.watched.clear();
        if count == 0 {
            return;
        }
        let (first, n, per_frame) = if self.regions >= count {
            let per = (self.regions / count) as u64;
            (0, count, per.min(pages_per_frame))
        } else {
            (self.next_frame, self.regions, 1)
        };
        for i in 0..n {
            let frame = (first + i) % count;
            let Some(host) = frames.host_addr(FrameId(frame)) else {
                continue;
            };
            // `per_frame` distinct pages: a random start, evenly strided.
            let stride = pages_per_frame / per_frame;
            let offset = self.rng.below(stride.max(1));
            for p in 0..per_frame {
                self.watched.push(Watched {
                    frame,
                    addr: host + (offset + p * stride) * PAGE,
                    pfn: None,
                    since: 0.0,
                });
            }
        }
        self.next_frame = (first + n) % count;
    }

    /// Reads the watched pages' PFNs and commits the regions when they
    /// changed (or when `force`d).
    fn refresh(&mut self, force: bool) -> Result<(), DamonTrackerError> {
        let mut changed = force;
        let now = monotonic_secs();
        for w in &mut self.watched {
            let pfn = self.pagemap.pfn(w.addr)?;
            if pfn != w.pfn || force {
                // DAMON keeps the counts of regions a commit leaves in
                // place; only a new one starts afresh.
                w.since = now;
            }
            if pfn != w.pfn {
                w.pfn = pfn;
                changed = true;
            }
        }
        if !changed {
            return Ok(());
        }
        self.by_pfn.clear();
        for (i, w) in self.watched.iter().enumerate() {
            if let Some(pfn) = w.pfn {
                self.by_pfn.entry(pfn).or_insert(i);
            }
        }
        let mut pfns: Vec<u64> = self.by_pfn.keys().copied().collect();
        if pfns.len() < MIN_DAMON_REGIONS {
            // Too few pages present yet (a guest that has touched almost
            // nothing): keep the old regions until there are enough.
            return Ok(());
        }
        pfns.sort_unstable();
        let regions: Vec<(u64, u64)> = pfns.iter().map(|&p| (p * PAGE, (p + 1) * PAGE)).collect();
        self.kdamond.set_regions(&regions)?;
        if self.running {
            self.kdamond.commit()?;
        } else {
            self.kdamond.start()?;
            self.running = true;
            self.started_at = Some(Instant::now());
            self.cpu_start = self.kdamond.pid().and_then(thread_ticks);
        }
        self.report.regions = regions.len();
        Ok(())
    }

    /// Credits one aggregated report to the watched page it covers.
    fn credit(&mut self, a: Aggregated, sample: &mut AccessSample, observed: &mut [u16]) {
        let checks = (self.intervals.aggregation.as_micros()
            / self.intervals.sample.as_micros().max(1)) as u16;
        let aggregation = self.intervals.aggregation.as_secs_f64();
        // Reports cover the aggregation that ended at `a.at`; a sample
        // interval of slack for DAMON's timing.
        let began = a.at - aggregation + self.intervals.sample.as_secs_f64();
        let mut pfn = a.start / PAGE;
        while pfn * PAGE < a.end {
            if let Some(&i) = self.by_pfn.get(&pfn) {
                let w = self.watched[i];
                if began >= w.since && w.pfn == Some(pfn) {
                    let f = w.frame;
                    let hits = a.nr_accesses.min(u32::from(checks)) as u16;
                    sample.accessed[f] = sample.accessed[f].saturating_add(hits);
                    observed[f] = observed[f].saturating_add(checks);
                    self.report.hits += u64::from(hits);
                    self.report.looks += u64::from(checks);
                    self.report.armed_pages += u64::from(checks);
                }
            }
            pfn += 1;
        }
    }
}

impl AccessTracker for DamonTracker {
    fn name(&self) -> &str {
        "damon"
    }

    fn collect(&mut self) -> Result<AccessSample, TrackerError> {
        let frames = self.memory.frame_count();
        let now = Instant::now();
        let mut sample = AccessSample::for_memory(&self.memory, now - self.last)?;
        let mut observed = vec![0u16; frames];
        let mut reports = Vec::new();
        if let Err(e) = self.trace.drain(|a| reports.push(a)) {
            return Err(TrackerError::collect(self.name(), e));
        }
        for a in reports {
            self.credit(a, &mut sample, &mut observed);
        }
        self.collects += 1;
        if self.regions < frames && self.collects % ROTATE_EVERY == 0 {
            self.draw();
            if let Err(e) = self.refresh(true) {
                return Err(TrackerError::collect(self.name(), e));
            }
        } else if let Err(e) = self.refresh(false) {
            return Err(TrackerError::collect(self.name(), e));
        }
        sample.coverage = Coverage::PerFrame(observed);
        self.last = now;
        Ok(sample)
    }

    fn status(&self) -> TrackerStatus {
        TrackerStatus {
            sees_reads: true,
            sees_writes: true,
            limitations: vec![
                format!(
                    "damon: {} one-page regions checked every {} us ({} pages/s), reported \
                     every {} us",
                    self.regions,
                    self.intervals.sample.as_micros(),
                    self.settings.budget_pages_per_sec,
                    self.intervals.aggregation.as_micros()
                ),
                "damon: cannot tell reads from writes".into(),
            ],
        }
    }

    fn sampler_report(&self) -> Option<SamplerReport> {
        let mut report = self.report;
        // The kdamond aggregates on its own clock, collected or not.
        report.windows = self.started_at.map_or(0, |t| {
            (t.elapsed().as_micros() / self.intervals.aggregation.as_micros().max(1)) as u64
        });
        let ticks = self.kdamond.pid().and_then(thread_ticks);
        if let (Some(start), Some(now)) = (self.cpu_start, ticks) {
            report.cpu_ns = now.saturating_sub(start) * (1_000_000_000 / clock_ticks_per_sec());
        }
        Some(report)
    }
}

/// CLOCK_MONOTONIC in seconds (the trace instance's `mono` clock).
fn monotonic_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// User and system CPU of thread `pid` (a kernel thread: the kdamond), in
/// clock ticks, from `/proc/PID/stat`.
fn thread_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|&t| t > 0).unwrap_or(100)
}

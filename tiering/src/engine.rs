//! The engine handle: starts a VM's engine thread, takes policy changes
//! and rebalance requests (checked here, in the caller's thread, so a bad
//! one is refused before anything changes), and reads the published
//! snapshots.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use access_track::{AccessTracker, SamplingSettings};
use guest_memory::{GpaRange, Migrator, TierId, TieredMemory};

use crate::engine_error::{EngineError, MAX_DEADLINE_MS, TrackerSourceError};
use crate::engine_loop::{Command, EngineLoop};
use crate::policy::{PolicyError, PolicyLimits, TieringPolicy};
use crate::stats::{EngineStats, FrameView, Published};

/// Where the engine gets trackers: the VM, which knows what its host and
/// configuration offer.
pub trait TrackerSource: Send {
    /// Names of the trackers this VM can build.
    fn offered(&self) -> Vec<String>;
    /// A new tracker by name, for an engine interval of `interval`,
    /// sampling at `sampling` (valid).
    fn build(
        &self,
        name: &str,
        interval: Duration,
        sampling: SamplingSettings,
    ) -> Result<Box<dyn AccessTracker>, TrackerSourceError>;
}

/// What the engine works with.
pub struct EngineParts {
    /// The VM's memory.
    pub memory: Arc<TieredMemory>,
    /// The VM's migrator.
    pub migrator: Arc<dyn Migrator>,
    /// Where trackers come from.
    pub trackers: Box<dyn TrackerSource>,
}

impl std::fmt::Debug for EngineParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineParts")
            .field("migrator", &self.migrator.name())
            .finish_non_exhaustive()
    }
}

struct Control {
    policy: TieringPolicy,
    trackers: Box<dyn TrackerSource>,
    commands: Sender<Command>,
}

/// A running engine. Dropping it stops the thread.
pub struct Engine {
    control: Mutex<Control>,
    memory: Arc<TieredMemory>,
    published: Arc<Published>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// Checks `policy` against the VM and starts the engine thread.
    pub fn start(parts: EngineParts, policy: TieringPolicy) -> Result<Self, EngineError> {
        Self::check(&parts.memory, parts.trackers.as_ref(), &policy)?;
        let tracker = build_tracker(parts.trackers.as_ref(), &policy)?;
        let published = Arc::new(Published::default());
        let (tx, rx) = mpsc::channel();
        let engine_loop = EngineLoop::new(
            parts.memory.clone(),
            parts.migrator,
            tracker,
            policy.clone(),
            published.clone(),
            rx,
        )?;
        let thread = std::thread::Builder::new()
            .name("tiering-engine".into())
            .spawn(move || engine_loop.run())
            .map_err(EngineError::Thread)?;
        Ok(Engine {
            control: Mutex::new(Control {
                policy,
                trackers: parts.trackers,
                commands: tx,
            }),
            memory: parts.memory,
            published,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The checks [`start`](Self::start) makes before it builds anything:
    /// two tiers, `policy` valid for this VM, and a quota that holds the
    /// frames pinned on the fast tier. (The tracker is built only at
    /// start.) For a policy kept until the VM boots.
    pub fn check(
        memory: &TieredMemory,
        trackers: &dyn TrackerSource,
        policy: &TieringPolicy,
    ) -> Result<(), EngineError> {
        if memory.tiers().len() < 2 {
            return Err(EngineError::OneTier);
        }
        check(memory, &limits(memory, trackers), policy)
    }

    /// The policy in force (or about to be, at the next interval).
    pub fn policy(&self) -> TieringPolicy {
        self.control().policy.clone()
    }

    /// Replaces the policy as a whole; an invalid one changes nothing.
    pub fn set_policy(&self, policy: TieringPolicy) -> Result<(), EngineError> {
        let mut control = self.control();
        self.send_checked(&mut control, policy, None)
    }

    /// Starts moving the fast tier to a new quota of `max_bytes` (the
    /// minimum is lowered to it if above), within `deadline_ms`; progress
    /// shows in [`EngineStats::rebalance`].
    pub fn rebalance(&self, max_bytes: u64, deadline_ms: u64) -> Result<(), EngineError> {
        if !(1..=MAX_DEADLINE_MS).contains(&deadline_ms) {
            return Err(EngineError::Deadline(deadline_ms));
        }
        let mut control = self.control();
        let mut policy = control.policy.clone();
        policy.fast_quota.max_bytes = max_bytes;
        policy.fast_quota.min_bytes = policy.fast_quota.min_bytes.min(max_bytes);
        self.send_checked(
            &mut control,
            policy,
            Some(Duration::from_millis(deadline_ms)),
        )
    }

    /// The latest counters (never waits for the engine).
    pub fn stats(&self) -> Arc<EngineStats> {
        self.published.stats()
    }

    /// The latest per-frame view.
    pub fn frames(&self) -> Arc<FrameView> {
        self.published.frames()
    }

    /// Stops the engine thread and waits for it (idempotent). Snapshots
    /// stay readable.
    pub fn stop(&self) {
        let _ = self.control().commands.send(Command::Stop);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    fn control(&self) -> std::sync::MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn send_checked(
        &self,
        control: &mut Control,
        policy: TieringPolicy,
        rebalance: Option<Duration>,
    ) -> Result<(), EngineError> {
        let limits = limits(&self.memory, control.trackers.as_ref());
        check(&self.memory, &limits, &policy)?;
        // A new interval or sampling rebuilds the tracker too: the fault
        // sampler sizes its rounds by the interval, the dirty-log sampler
        // its regions and windows by the sampling settings.
        let tracker = if policy.tracker == control.policy.tracker
            && policy.interval_ms == control.policy.interval_ms
            && policy.sampling == control.policy.sampling
        {
            None
        } else {
            Some(build_tracker(control.trackers.as_ref(), &policy)?)
        };
        control
            .commands
            .send(Command::Policy {
                policy: Box::new(policy.clone()),
                tracker,
                rebalance,
            })
            .map_err(|_| EngineError::Stopped)?;
        control.policy = policy;
        Ok(())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

fn limits(memory: &TieredMemory, trackers: &dyn TrackerSource) -> PolicyLimits {
    PolicyLimits {
        frame_size: memory.frame_size(),
        fast_capacity: memory.with_placement(|m| m.slot_count(TierId::FAST)) as u64
            * memory.frame_size(),
        slow_capacity: memory.with_placement(|m| {
            (1..memory.tiers().len())
                .map(|t| m.slot_count(TierId(t)) as u64)
                .sum::<u64>()
        }) * memory.frame_size(),
        ram: memory
            .regions()
            .iter()
            .map(|r| GpaRange::new(r.gpa, r.len))
            .collect(),
        trackers: trackers.offered(),
    }
}

/// Validates `policy` as a whole, including what depends on where frames
/// are now: the quota must hold the frames pinned on the fast tier.
fn check(
    memory: &TieredMemory,
    limits: &PolicyLimits,
    policy: &TieringPolicy,
) -> Result<(), EngineError> {
    policy.validate(limits)?;
    let pinned = crate::engine_loop::pinned_frames(memory, &policy.pinned);
    let pinned_fast = memory.with_placement(|m| {
        m.frames_on(TierId::FAST)
            .filter(|f| pinned[f.index()])
            .count() as u64
            * memory.frame_size()
    });
    if pinned_fast > policy.fast_quota.max_bytes {
        return Err(PolicyError::QuotaBelowPinned {
            max: policy.fast_quota.max_bytes,
            pinned: pinned_fast,
        }
        .into());
    }
    Ok(())
}

fn build_tracker(
    source: &dyn TrackerSource,
    policy: &TieringPolicy,
) -> Result<Box<dyn AccessTracker>, EngineError> {
    source
        .build(&policy.tracker, policy.interval(), policy.sampling)
        .map_err(|source| EngineError::Tracker {
            name: policy.tracker.clone(),
            source,
        })
}

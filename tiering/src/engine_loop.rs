//! The engine thread of one VM: every interval, collect the tracker's
//! sample → update heat → plan → migrate → publish. Commands (a new
//! policy, a rebalance, stop) arrive between intervals and apply whole.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use access_track::AccessTracker;
use guest_memory::{Batch, BatchOutcome, FrameId, Migrator, TierId, TieredMemory};

use crate::engine_cost::EngineCost;
use crate::engine_error::EngineError;
use crate::engine_warning::EngineWarning;
use crate::error_chain::error_chain;
use crate::heat_model::HeatModel;
use crate::planner::{self, Plan, PlanInput};
use crate::policy::{PinnedRange, TieringPolicy};
use crate::rate::RateBudget;
use crate::rebalance::Rebalance;
use crate::stats::{EngineStats, FrameView, IntervalRecord, Published, Recent};

/// Most moves handed to the migrator in one call (keeps each call's
/// write-protect window short).
const MAX_BATCH: usize = 64;

/// Share of all heat the estimated hot set holds.
const HOT_SET_HEAT_SHARE: f64 = 0.9;

/// What the handle sends the thread.
pub(crate) enum Command {
    /// A new policy (already validated), its tracker if it changed, and a
    /// rebalance deadline if this is a rebalance.
    Policy {
        /// Boxed: a policy is large and `Stop` is nothing.
        policy: Box<TieringPolicy>,
        tracker: Option<Box<dyn AccessTracker>>,
        rebalance: Option<Duration>,
    },
    /// End the thread.
    Stop,
}

/// Which frames `pins` cover (a frame partly covered counts).
pub(crate) fn pinned_frames(memory: &TieredMemory, pins: &[PinnedRange]) -> Vec<bool> {
    let table = memory.frames();
    let size = memory.frame_size();
    (0..memory.frame_count())
        .map(|f| {
            table.gpa(FrameId(f)).is_some_and(|g| {
                pins.iter()
                    .any(|p| p.gpa < g.saturating_add(size) && g < p.gpa.saturating_add(p.len))
            })
        })
        .collect()
}

/// The engine thread's state.
pub(crate) struct EngineLoop {
    memory: Arc<TieredMemory>,
    migrator: Arc<dyn Migrator>,
    tracker: Box<dyn AccessTracker>,
    policy: TieringPolicy,
    heat: HeatModel,
    promote: RateBudget,
    demote: RateBudget,
    pinned: Vec<bool>,
    /// Interval index of each frame's last move (0: never).
    last_moved: Vec<u64>,
    /// Guest-physical address of each frame (fixed for the VM's life).
    gpas: Vec<u64>,
    rebalance: Option<Rebalance>,
    stats: EngineStats,
    recent: Recent,
    published: Arc<Published>,
    commands: Receiver<Command>,
    started: Instant,
    last_step: Instant,
}

impl EngineLoop {
    pub fn new(
        memory: Arc<TieredMemory>,
        migrator: Arc<dyn Migrator>,
        tracker: Box<dyn AccessTracker>,
        policy: TieringPolicy,
        published: Arc<Published>,
        commands: Receiver<Command>,
    ) -> Result<Self, EngineError> {
        let frame_size = memory.frame_size();
        let pages = u32::try_from(frame_size / 4096).unwrap_or(u32::MAX);
        let heat = HeatModel::new(memory.frame_count(), pages, policy.heat)?;
        let now = Instant::now();
        let mut engine = EngineLoop {
            promote: RateBudget::new(policy.promote_rate_mbps, policy.interval(), frame_size),
            demote: RateBudget::new(policy.demote_rate_mbps, policy.interval(), frame_size),
            pinned: pinned_frames(&memory, &policy.pinned),
            last_moved: vec![0; memory.frame_count()],
            gpas: (0..memory.frame_count())
                .map(|f| memory.frames().gpa(FrameId(f)).unwrap_or(0))
                .collect(),
            stats: EngineStats {
                tracker: tracker.name().to_owned(),
                fast_quota: Some(policy.fast_quota),
                tiers: memory.tier_usage(),
                ..EngineStats::default()
            },
            memory,
            migrator,
            tracker,
            policy,
            heat,
            rebalance: None,
            recent: Recent::default(),
            published,
            commands,
            started: now,
            last_step: now,
        };
        let tiers = engine.tiers();
        engine.publish(Some(&tiers));
        Ok(engine)
    }

    /// Runs until told to stop or the handle is gone.
    pub fn run(mut self) {
        let mut next = Instant::now() + self.policy.interval();
        loop {
            let wait = next.saturating_duration_since(Instant::now());
            match self.commands.recv_timeout(wait) {
                Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Command::Policy {
                    policy,
                    tracker,
                    rebalance,
                }) => {
                    let interval_changed = policy.interval_ms != self.policy.interval_ms;
                    self.apply(*policy, tracker, rebalance);
                    if interval_changed {
                        next = Instant::now() + self.policy.interval();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.step();
                    next += self.policy.interval();
                    let now = Instant::now();
                    if next < now {
                        next = now + self.policy.interval();
                    }
                }
            }
        }
    }

    fn apply(
        &mut self,
        policy: TieringPolicy,
        tracker: Option<Box<dyn AccessTracker>>,
        rebalance: Option<Duration>,
    ) {
        let frame_size = self.memory.frame_size();
        if let Some(t) = tracker {
            self.tracker = t;
            self.stats.tracker = self.tracker.name().to_owned();
        }
        // Validated by the handle: the heat settings are valid.
        let _ = self.heat.set_config(policy.heat);
        self.promote = RateBudget::new(policy.promote_rate_mbps, policy.interval(), frame_size);
        self.demote = RateBudget::new(policy.demote_rate_mbps, policy.interval(), frame_size);
        self.pinned = pinned_frames(&self.memory, &policy.pinned);
        self.stats.fast_quota = Some(policy.fast_quota);
        if let Some(deadline) = rebalance {
            let fast = self.memory.with_placement(|m| m.used_frames(TierId::FAST));
            self.rebalance = Some(Rebalance::new(
                policy.fast_quota.max_bytes,
                fast as u64 * frame_size,
                deadline,
            ));
        }
        self.policy = policy;
        self.publish(None);
    }

    fn step(&mut self) {
        let frame_size = self.memory.frame_size();
        let t0 = Instant::now();
        self.promote.refill(t0 - self.last_step);
        self.demote.refill(t0 - self.last_step);
        self.last_step = t0;
        self.stats.intervals += 1;
        let index = self.stats.intervals;

        let sample = match self.tracker.collect() {
            Ok(s) => s,
            Err(e) => {
                self.stats.tracker_errors += 1;
                self.stats.last_error = Some(error_chain(&e));
                self.publish(None);
                return;
            }
        };
        let t1 = Instant::now();
        self.stats.cost.sampled(self.tracker.sampler_report());
        if let Err(e) = self.heat.update(&sample) {
            self.stats.last_error = Some(error_chain(&e));
        }
        let t2 = Instant::now();

        let tiers = self.tiers();
        let plan = self.plan(&tiers, index);
        let t3 = Instant::now();
        let outcome = self.execute(&plan, &tiers);
        let t4 = Instant::now();

        // The outcome says where each moved frame went: the view follows
        // it without reading the placement again.
        let mut after = tiers;
        let (mut promoted, mut demoted) = (Vec::new(), Vec::new());
        for m in &outcome.moved {
            after[m.frame.index()] = m.to_tier.index();
            if m.to_tier == TierId::FAST {
                promoted.push(m.frame);
            } else if m.from_tier == TierId::FAST {
                demoted.push(m.frame);
            }
        }
        let report = &outcome.report;
        for &f in promoted.iter().chain(&demoted) {
            self.last_moved[f.index()] = index;
        }
        self.promote.spend(promoted.len() as u64 * frame_size);
        self.demote.spend(demoted.len() as u64 * frame_size);
        self.stats.promotions.add(promoted.len(), frame_size);
        self.stats.demotions.add(demoted.len(), frame_size);
        self.stats.exchanges += report.exchanged as u64;
        let cost = &mut self.stats.cost;
        cost.bytes_moved += report.bytes;
        cost.write_stall_us += report.stalls.iter().map(|s| micros(*s)).sum::<u64>();
        cost.fast_heat_share = EngineCost::fast_share(self.heat.heats(), &after);
        // Read each interval: a measurement on request may change them.
        let latency_ns: Vec<Option<u64>> = self
            .memory
            .tier_usage()
            .iter()
            .map(|t| t.speed.profile().map(|p| p.read_latency_ns))
            .collect();
        cost.estimate_latency(self.heat.heats(), &after, &latency_ns);
        cost.engine_cpu_us = access_track::thread_cpu_time().map_or(cost.engine_cpu_us, micros);
        self.stats.aborted += report.aborted as u64;
        if let Some(e) = outcome.errors().last() {
            self.stats.last_error = Some(error_chain(e));
        }
        let fast = after.iter().filter(|&&t| t == 0).count();
        let moved = promoted.len() + demoted.len();
        let elapsed = self.started.elapsed();
        if let Some(r) = &mut self.rebalance {
            let slow_movable = (0..after.len())
                .filter(|&f| after[f] != 0 && !self.pinned[f])
                .count();
            r.advance(
                fast,
                slow_movable,
                moved,
                frame_size,
                self.policy.headroom_bytes,
            );
        }
        let s = &mut self.stats.stage_micros;
        s.collect += micros(t1 - t0);
        s.heat += micros(t2 - t1);
        s.plan += micros(t3 - t2);
        s.migrate += micros(t4 - t3);
        // JSON has no infinity: an impassable threshold is published as
        // none.
        let threshold = plan.threshold.is_finite().then_some(plan.threshold);
        self.stats.threshold = threshold;
        self.stats.threshold_pages = threshold.and_then(|h| {
            self.policy
                .heat
                .pages_per_interval(h, self.policy.interval())
        });
        self.recent.push(IntervalRecord {
            index,
            at_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            threshold,
            candidates: plan.candidates,
            promoted: promoted.len(),
            demoted: demoted.len(),
            aborted: report.aborted,
            bytes: moved as u64 * frame_size,
            fast_frames: fast,
        });
        self.publish(Some(&after));
    }

    /// Tier of every frame now.
    fn tiers(&self) -> Vec<usize> {
        self.memory
            .with_placement(|m| m.iter().map(|(_, loc)| loc.tier.index()).collect())
    }

    fn plan(&mut self, tiers: &[usize], index: u64) -> Plan {
        let frame_size = self.memory.frame_size();
        let residency = self.policy.min_residency_ms / self.policy.interval_ms.max(1);
        let cooling: Vec<bool> = self
            .last_moved
            .iter()
            .map(|&m| m != 0 && index - m <= residency)
            .collect();
        let quota = self.policy.fast_quota;
        let quota_max = usize::try_from(quota.max_bytes / frame_size).unwrap_or(usize::MAX);
        let mut quota_min =
            usize::try_from(quota.min_bytes.div_ceil(frame_size)).unwrap_or(usize::MAX);
        let headroom =
            usize::try_from(self.policy.headroom_bytes.div_ceil(frame_size)).unwrap_or(0);
        let mut promote_budget = self.promote.frames(frame_size);
        let demote_budget = self.demote.frames(frame_size);
        let mut forced_budget = demote_budget;
        if let Some(r) = self.rebalance.as_ref().filter(|r| r.running()) {
            // A rebalance fills the new quota (less the headroom) and is
            // paced to its deadline, above the rate limits if need be.
            let fast = tiers.iter().filter(|&&t| t == 0).count();
            quota_min = quota_min.max(quota_max.saturating_sub(headroom));
            let pace = r.pace(fast, quota_max, self.policy.interval());
            promote_budget = promote_budget.max(pace);
            forced_budget = forced_budget.max(pace);
        }
        planner::plan(&PlanInput {
            heat: self.heat.heats(),
            variance: self.heat.variances(),
            tier: tiers,
            pinned: &self.pinned,
            cooling: &cooling,
            recurring: self.heat.recurring(),
            quota_max,
            quota_min: quota_min.min(quota_max),
            headroom,
            promote_budget,
            demote_budget,
            forced_budget,
            threshold: self.policy.threshold,
            significance: self.policy.significance,
            exchange: self.policy.exchange,
        })
    }

    /// Hands the plan to the migrator in batches of at most [`MAX_BATCH`]
    /// frames: demotions, then exchanges (each swaps a promoted frame with
    /// a demoted one), then promotions.
    fn execute(&self, plan: &Plan, tiers: &[usize]) -> BatchOutcome {
        let slow = self.demotion_tier(tiers);
        let paired: std::collections::HashSet<FrameId> =
            plan.exchanges.iter().flat_map(|&(a, b)| [a, b]).collect();
        let mut total = BatchOutcome::default();
        let mut batch = Batch::new();
        let mut room_for = |batch: &mut Batch, frames: usize| {
            if batch.frames() + frames > MAX_BATCH {
                total.absorb(self.migrator.migrate(batch));
                *batch = Batch::new();
            }
        };
        for &f in plan.demote.iter().filter(|f| !paired.contains(f)) {
            room_for(&mut batch, 1);
            batch.push_move(f, slow);
        }
        for &(up, down) in &plan.exchanges {
            room_for(&mut batch, 2);
            batch.push_exchange(up, down);
        }
        for &f in plan.promote.iter().filter(|f| !paired.contains(f)) {
            room_for(&mut batch, 1);
            batch.push_move(f, TierId::FAST);
        }
        if !batch.is_empty() {
            total.absorb(self.migrator.migrate(&batch));
        }
        total
    }

    /// The fastest slow tier with a free slot (tier 1 when all are full:
    /// only exchanges can then demote).
    fn demotion_tier(&self, tiers: &[usize]) -> TierId {
        let count = self.memory.tiers().len();
        self.memory.with_placement(|m| {
            (1..count)
                .find(|&t| tiers.iter().filter(|&&x| x == t).count() < m.slot_count(TierId(t)))
                .map_or(TierId(1), TierId)
        })
    }

    /// Publishes the counters, and the per-frame view when `tiers` (every
    /// frame's tier, just read) is given.
    fn publish(&mut self, tiers: Option<&[usize]>) {
        let frame_size = self.memory.frame_size();
        let heats = self.heat.heats();
        self.stats.hot_frames = hot_set_frames(heats);
        self.stats.hot_set_bytes = self.stats.hot_frames as u64 * frame_size;
        self.stats.hot_page_bytes =
            (self.heat.hot_page_counts().iter().sum::<f64>() * 4096.0) as u64;
        self.stats.tiers = self.memory.tier_usage();
        self.stats.rebalance = self
            .rebalance
            .as_ref()
            .map(|r| r.progress(self.stats.tiers[0].used_frames as u64 * frame_size));
        self.stats.recent = self.recent.to_vec();
        self.stats.warnings = EngineWarning::of(
            self.stats.hot_set_bytes,
            self.stats.fast_quota,
            &self.stats.tiers,
        );
        let view = tiers.map(|tiers| FrameView {
            gpa: self.gpas.clone(),
            tier: tiers.iter().map(|&t| t as u8).collect(),
            heat: heats.iter().map(|&h| h as f32).collect(),
        });
        self.published.publish(self.stats.clone(), view);
    }
}

/// The fewest hottest frames that hold [`HOT_SET_HEAT_SHARE`] of all heat.
fn hot_set_frames(heats: &[f64]) -> usize {
    let total: f64 = heats.iter().sum();
    if total <= 0.0 {
        return 0;
    }
    let mut sorted = heats.to_vec();
    sorted.sort_unstable_by(|a, b| b.total_cmp(a));
    let mut sum = 0.0;
    for (i, h) in sorted.iter().enumerate() {
        sum += h;
        if sum >= total * HOT_SET_HEAT_SHARE {
            return i + 1;
        }
    }
    sorted.len()
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_set_is_the_frames_holding_most_heat() {
        assert_eq!(hot_set_frames(&[0.0; 4]), 0);
        assert_eq!(hot_set_frames(&[100.0, 0.0, 1.0, 0.0]), 1);
        assert_eq!(hot_set_frames(&[1.0; 10]), 9);
    }
}

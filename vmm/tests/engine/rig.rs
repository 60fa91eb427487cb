//! The engine harness: a payload VM on a fast and a slow memfd tier with
//! the tiering engine on, and a watcher that samples, every 100 ms, which
//! of the current phase's hot frames (from the payload's ground truth,
//! which the engine never sees) are on the fast tier.
//!
//! `ENGINE_DEBUG=1 cargo test -p vmm --test engine -- --nocapture`
//! prints, per sample, the engine's last interval (threshold, candidates,
//! moves), the heat of the hot frames against the hottest others, and the
//! coldest fast frames.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use guest_memory::{FrameId, TierId};
use guest_memory::{Placement, TierSpec, TieredMemory};
use tiering::{Engine, TieringPolicy};
use vmm::devices::hypercall::LogSink;
use vmm::guest_state::GuestState;
use vmm::migration::{MigrationConfig, MigratorKind};
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd};

pub const MIB: u64 = 1 << 20;
pub const FRAME: u64 = 2 * MIB;

static ONE_VM: Mutex<()> = Mutex::new(());

/// Held by every test of this binary: the engine's view comes from
/// wall-clock windows, and two guests sharing the two cores touch less
/// within them.
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_VM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn tier(name: &str, size: u64) -> TierSpec {
    format!("name={name},backend=memfd,size={}M", size / MIB)
        .parse()
        .unwrap()
}

/// A 512 MiB, 2-vCPU VM running `args` with the fast tier holding
/// `fast` bytes (filled first), the plain remap migrator and `policy` in
/// force.
pub fn config(args: &str, fast: u64, policy: TieringPolicy) -> VmConfig {
    let memory = 512 * MIB;
    VmConfig {
        vcpus: 2,
        memory: guest_memory::MemoryConfig {
            size: memory,
            frame_size: FRAME,
            tiers: vec![tier("fast", fast), tier("slow", memory)],
            placement: Placement::FastFirst,
            ..Default::default()
        },
        payload: PayloadSource::Embedded,
        args: args.into(),
        timeout: Some(Duration::from_secs(120)),
        dirty_log_tracking: false,
        migration: MigrationConfig {
            migrator: MigratorKind::Remap,
            ..Default::default()
        },
        tiering: Some(policy),
    }
}

pub fn vm(config: &VmConfig) -> Vm {
    let log: LogSink = Arc::new(|_, _| {});
    Vm::with_trackers(config, log, &[]).unwrap()
}

/// One watcher sample.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Seconds since the phase began.
    pub at: f64,
    pub phase: u64,
    /// Hot frames of the phase (the ground truth's first range).
    pub hot: usize,
    /// Of them, on the fast tier.
    pub hot_fast: usize,
    /// Frames on the fast tier.
    pub fast: usize,
}

fn hot_frames(memory: &TieredMemory, state: &GuestState) -> Option<(u64, Vec<usize>)> {
    let truth = state.ground_truth().last().cloned()?;
    let hot = truth.ranges.first()?;
    let frames = (0..memory.frame_count())
        .filter(|&f| {
            memory
                .frames()
                .gpa(FrameId(f))
                .is_some_and(|g| hot.gpa < g + FRAME && g < hot.gpa + hot.len)
        })
        .collect();
    Some((truth.phase, frames))
}

/// Runs the guest to its end, sampling every 100 ms; `during` runs in a
/// thread of its own alongside (rebalances, policy changes).
pub fn run(vm: &mut Vm, during: impl FnOnce(&Engine, &GuestState) + Send) -> Vec<Sample> {
    let engine = vm.engine().unwrap().clone();
    let memory = vm.memory().clone();
    let state = vm.state().clone();
    let samples = Mutex::new(Vec::new());
    let done = AtomicBool::new(false);
    let end = std::thread::scope(|s| {
        s.spawn(|| {
            let mut phase_start: Option<(u64, Instant)> = None;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let Some((phase, hot)) = hot_frames(&memory, &state) else {
                    continue;
                };
                // A vCPU reported the phase: it is over.
                if state.reports().iter().any(|r| r.phase == phase) {
                    continue;
                }
                if phase_start.is_none_or(|(p, _)| p != phase) {
                    phase_start = Some((phase, Instant::now()));
                }
                let at = phase_start.map_or(0.0, |(_, t)| t.elapsed().as_secs_f64());
                let (hot_fast, fast) = memory.with_placement(|m| {
                    (
                        hot.iter()
                            .filter(|&&f| m.location(FrameId(f)).is_some_and(|l| l.tier == TierId(0)))
                            .count(),
                        m.used_frames(TierId(0)),
                    )
                });
                if std::env::var("ENGINE_DEBUG").is_ok() {
                    let view = engine.frames();
                    let st = engine.stats();
                    let r = st.recent.last().copied().unwrap_or_default();
                    let mut hh: Vec<f32> = hot.iter().map(|&f| view.heat[f]).collect();
                    hh.sort_by(f32::total_cmp);
                    let mut cold: Vec<f32> = (0..view.heat.len())
                        .filter(|f| !hot.contains(f))
                        .map(|f| view.heat[f])
                        .collect();
                    cold.sort_by(|a, b| b.total_cmp(a));
                    let mut fast_cold: Vec<(usize, f32)> = (0..view.heat.len())
                        .filter(|&f| view.tier[f] == 0)
                        .map(|f| (f, view.heat[f]))
                        .collect();
                    fast_cold.sort_by(|a, b| a.1.total_cmp(&b.1));
                    eprintln!("  coldest fast: {:?}", &fast_cold[..5.min(fast_cold.len())]);
                    eprintln!(
                        "p{phase} t={at:.1} hot_fast={hot_fast}/{} fast={fast} thr={:.0} cand={} +{} -{} ab={} hot heat min {:.0} max {:.0}; cold top {:?}",
                        hot.len(), r.threshold.unwrap_or(f64::INFINITY), r.candidates, r.promoted, r.demoted, r.aborted,
                        hh.first().unwrap_or(&0.0), hh.last().unwrap_or(&0.0),
                        &cold[..6.min(cold.len())]
                    );
                }
                samples.lock().unwrap().push(Sample {
                    at,
                    phase,
                    hot: hot.len(),
                    hot_fast,
                    fast,
                });
            }
        });
        let during = s.spawn(|| during(&engine, &state));
        let end = vm.run(Duration::from_millis(100), &mut |_, _| {}).unwrap();
        done.store(true, Ordering::Relaxed);
        during.join().unwrap();
        end
    });
    assert_eq!(
        end,
        VmEnd::Success,
        "the guest ran (and verified) to its end"
    );
    vm.memory().verify_backing().unwrap();
    samples.into_inner().unwrap()
}

/// Waits until `f` holds or `limit` passes.
pub fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

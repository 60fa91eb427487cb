//! The VMM side of the operator API: [`VmController`]
//! implements [`api::VmmControl`] over at most one VM, a state machine
//! `created → running ⇄ paused → shutdown` (and deleted).
//!
//! The VM runs on a thread of its own ([`Vm::run`]); the controller keeps
//! what the API reads without waiting on vCPUs or the engine: the guest's
//! counters (atomics), the placement map (locked briefly per read) and
//! the engine's published snapshots. Lifecycle changes are serialized by
//! one lock and may wait (building a VM, parking vCPUs, a graceful
//! shutdown); the VM's record has a lock of its own that is only ever held
//! for a few field reads, so reads go on meanwhile.
//!
//! A created VM's tiering engine starts when it boots
//! ([`EngineStart::AtBoot`], by default): its policy is checked at
//! creation, and a VM that is created but not booted moves nothing.
//!
//! Pausing parks the vCPUs only: the engine keeps running (a rebalance
//! goes on while the guest is paused; heat decays meanwhile). Paused time
//! does not count towards the VM's timeout; it does count in `uptime_ms`
//! and in the guest's own clock (a payload's timed phase that spans a
//! pause ends early).
//!
//! `vm.shutdown` is graceful first: it stops the tiering engine (after its
//! batch in flight), then sets the payload's stop word (the payload ends
//! its phase, runs its checks and exits), resuming a paused guest so it
//! can; after [`ControllerOptions::shutdown_grace`] it stops the vCPUs
//! hard ([`VmEnd::Stopped`]).

mod config;
mod errors;
mod record;

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use api::types::{
    FrameSnapshot, RebalanceRequest, VcpuCounters, VmConfigBody, VmCounters, VmInfo, VmState,
    VmmPingResponse,
};
use api::{ControlError, VmmControl};
use guest_memory::{Migrator, TieredMemory};
use tiering::{Engine, EngineStats, RebalanceProgress, TieringPolicy};

use crate::devices::console::ConsoleConfig;
use crate::devices::hypercall::LogSink;
use crate::guest_state::GuestState;
use crate::host_limits::{HostResources, host_warnings};
use crate::vm::{EngineStart, Vm, VmEnd, VmOptions};
use record::{Phase, RunOutcome, Running, VmRecord, poll_until};

pub use config::{MAX_ID_LEN, config_body, vm_config};
use errors::{create_error, engine_error, internal, rebalance_error};

/// How often the VM's run loop wakes (for its timeout); nothing else
/// depends on it.
const RUN_TICK: Duration = Duration::from_millis(100);

/// How long the controller waits for what it waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerOptions {
    /// Longest wait in `vm.pause` for every vCPU to park.
    pub pause_timeout: Duration,
    /// How long `vm.shutdown` lets the payload finish on its own (the
    /// stop word: it ends its phase, runs its checks and exits) before
    /// stopping the vCPUs hard.
    pub shutdown_grace: Duration,
    /// Longest wait for a hard stop to end the run.
    pub stop_timeout: Duration,
    /// When a created VM's tiering engine starts.
    pub engine_start: EngineStart,
    /// Keep each VM that ends for [`VmController::take_ended`] (`tiervisor
    /// serve` prints its report); off, nothing is kept.
    pub keep_ended: bool,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            pause_timeout: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(2),
            stop_timeout: Duration::from_secs(5),
            engine_start: EngineStart::AtBoot,
            keep_ended: false,
        }
    }
}

/// What a caller beside the API (the `tiervisor` binary: its status line,
/// report and `--shuffle`) reads of the VM.
#[derive(Clone, Debug)]
pub struct VmParts {
    /// The guest's reports and counters.
    pub guest: Arc<GuestState>,
    /// Its memory.
    pub memory: Arc<TieredMemory>,
    /// Its tiering engine, once started.
    pub engine: Option<Arc<Engine>>,
    /// Its migrator.
    pub migrator: Option<Arc<dyn Migrator>>,
}

/// A VM that ended, as [`VmController::take_ended`] hands it out: what its
/// end-of-run report needs, kept after the VM is deleted.
#[derive(Clone, Debug)]
pub struct EndedVm {
    /// Its configuration.
    pub config: VmConfigBody,
    /// How it ended.
    pub end: VmEnd,
    /// Its guest state, memory and engine.
    pub parts: VmParts,
    /// The engine's last counters.
    pub tiering: Option<EngineStats>,
}

/// One VMM's VM, driven through [`VmmControl`].
pub struct VmController {
    log: LogSink,
    options: ControllerOptions,
    /// Serializes lifecycle changes.
    lifecycle: Mutex<()>,
    /// The VM; held only for a few field reads or writes.
    vm: Mutex<Option<VmRecord>>,
    /// VMs that ended and were not taken yet (with `keep_ended`).
    ended: Mutex<Vec<EndedVm>>,
    exit: Mutex<bool>,
    exit_changed: Condvar,
}

impl std::fmt::Debug for VmController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmController")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the record whole (fields are replaced,
    // not edited in steps that can panic), so a poisoned lock is usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wrong(state: VmState, action: &'static str) -> ControlError {
    ControlError::WrongState { state, action }
}

impl VmController {
    /// A controller with no VM; guests log through `log`.
    pub fn new(log: LogSink) -> Arc<Self> {
        Self::with_options(log, ControllerOptions::default())
    }

    /// [`new`](Self::new) with other waits.
    pub fn with_options(log: LogSink, options: ControllerOptions) -> Arc<Self> {
        Arc::new(VmController {
            log,
            options,
            lifecycle: Mutex::new(()),
            vm: Mutex::new(None),
            ended: Mutex::new(Vec::new()),
            exit: Mutex::new(false),
            exit_changed: Condvar::new(),
        })
    }

    /// Takes a VM built outside the controller (`tiervisor run` builds it
    /// from its options) as the created VM, `config` its configuration as
    /// the API shows it ([`config_body`]). Boot it with
    /// [`boot_vm`](VmmControl::boot_vm). A VM built with
    /// [`EngineStart::AtCreate`] has its engine running already.
    pub fn adopt(&self, vm: Vm, config: VmConfigBody) -> Result<(), ControlError> {
        let _life = lock(&self.lifecycle);
        let mut slot = lock(&self.vm);
        if let Some(rec) = slot.as_mut() {
            rec.refresh();
            return Err(wrong(rec.state, "adopt a VM"));
        }
        *slot = Some(VmRecord::new(Box::new(vm), config));
        Ok(())
    }

    /// The VM's parts, if there is a VM.
    pub fn parts(&self) -> Option<VmParts> {
        self.with_vm(|rec| {
            Ok(VmParts {
                guest: rec.guest.clone(),
                memory: rec.memory.clone(),
                engine: rec.engine.clone(),
                migrator: rec.migrator.clone(),
            })
        })
        .ok()
    }

    /// The VMs that ended since the last call, oldest first (with
    /// [`ControllerOptions::keep_ended`]; empty without). A VM counts once,
    /// whether it is still there or was deleted since.
    pub fn take_ended(&self) -> Vec<EndedVm> {
        // Notices a run that ended with nobody asking.
        let _ = self.with_vm(|_| Ok(()));
        std::mem::take(&mut *lock(&self.ended))
    }

    /// The VM's state, if there is a VM.
    pub fn state(&self) -> Option<VmState> {
        self.with_vm(|rec| Ok(rec.state)).ok()
    }

    /// How the guest ended, once it has (`None` also for a run that failed
    /// to start: [`vm_info`](VmmControl::vm_info) says why).
    pub fn end(&self) -> Option<VmEnd> {
        self.with_vm(|rec| Ok(rec.end.clone())).ok().flatten()
    }

    /// Waits up to `limit` for the VM to be shut down (or gone); whether it
    /// is.
    pub fn wait_for_shutdown(&self, limit: Duration) -> bool {
        poll_until(limit, || {}, || self.is_ended())
    }

    /// Whether `vmm.shutdown` asked the VMM to exit.
    pub fn exit_requested(&self) -> bool {
        *lock(&self.exit)
    }

    /// Waits until `vmm.shutdown` asks the VMM to exit, at most `limit`
    /// (forever with `None`); whether it did.
    pub fn wait_for_exit_request(&self, limit: Option<Duration>) -> bool {
        let exit = lock(&self.exit);
        let not_yet = |e: &mut bool| !*e;
        match limit {
            None => *self
                .exit_changed
                .wait_while(exit, not_yet)
                .unwrap_or_else(PoisonError::into_inner),
            Some(limit) => {
                *self
                    .exit_changed
                    .wait_timeout_while(exit, limit, not_yet)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        }
    }

    /// Runs `f` on the VM's record, brought up to date, under its lock.
    fn with_vm<R>(
        &self,
        f: impl FnOnce(&mut VmRecord) -> Result<R, ControlError>,
    ) -> Result<R, ControlError> {
        let mut slot = lock(&self.vm);
        let rec = slot.as_mut().ok_or(ControlError::NoVm)?;
        rec.refresh();
        if self.options.keep_ended {
            self.keep_if_ended(rec);
        }
        f(rec)
    }

    /// Keeps `rec` for [`take_ended`](Self::take_ended) once, when it has
    /// ended.
    fn keep_if_ended(&self, rec: &mut VmRecord) {
        let Some(end) = rec.end.clone().filter(|_| !rec.kept) else {
            return;
        };
        rec.kept = true;
        lock(&self.ended).push(EndedVm {
            config: rec.config.clone(),
            end,
            parts: VmParts {
                guest: rec.guest.clone(),
                memory: rec.memory.clone(),
                engine: rec.engine.clone(),
                migrator: rec.migrator.clone(),
            },
            tiering: rec.engine.as_ref().map(|e| (*e.stats()).clone()),
        });
    }

    fn is_ended(&self) -> bool {
        self.with_vm(|rec| Ok(rec.state == VmState::Shutdown))
            .unwrap_or(true)
    }

    /// The running engine, for `action`.
    fn engine(&self, action: &'static str) -> Result<Arc<Engine>, ControlError> {
        self.with_vm(|rec| {
            if !rec.tiering {
                return Err(ControlError::NoTiering);
            }
            rec.engine.clone().ok_or(wrong(rec.state, action))
        })
    }

    /// Stops a running or paused guest: the tiering engine first (it
    /// finishes its batch in flight, moving or rolling back every frame),
    /// then the guest's stop word, so a payload ends its phase, runs its
    /// checks and exits; after the grace period the vCPUs are stopped
    /// hard. A paused guest is resumed for the grace period, since a
    /// parked payload cannot finish. Call with the lifecycle lock held.
    fn stop_vm(&self, action: &'static str) -> Result<(), ControlError> {
        let (control, stop, paused, engine) =
            self.with_vm(|rec| match (rec.state, rec.running()) {
                (VmState::Running | VmState::Paused, Some(r)) => Ok((
                    r.control.clone(),
                    r.stop.clone(),
                    rec.state == VmState::Paused,
                    rec.engine.clone(),
                )),
                (state, _) => Err(wrong(state, action)),
            })?;
        if let Some(engine) = engine {
            engine.stop();
        }
        stop.request();
        if paused {
            control.resume();
            self.with_vm(|rec| {
                if rec.state == VmState::Paused {
                    rec.state = VmState::Running;
                }
                Ok(())
            })?;
        }
        let grace = self.options.shutdown_grace;
        if poll_until(grace, || {}, || self.is_ended()) {
            return Ok(());
        }
        let limit = self.options.stop_timeout;
        if poll_until(limit, || control.stop(), || self.is_ended()) {
            return Ok(());
        }
        Err(ControlError::Internal(format!(
            "the guest did not stop within {:?} of a hard stop",
            limit
        )))
    }
}

impl VmmControl for VmController {
    fn ping(&self) -> VmmPingResponse {
        VmmPingResponse {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        }
    }

    fn shutdown_vmm(&self) -> Result<(), ControlError> {
        let _life = lock(&self.lifecycle);
        let runs = self
            .with_vm(|rec| Ok(matches!(rec.state, VmState::Running | VmState::Paused)))
            .unwrap_or(false);
        let stopped = if runs {
            self.stop_vm("shut down")
        } else {
            Ok(())
        };
        *lock(&self.exit) = true;
        self.exit_changed.notify_all();
        stopped
    }

    fn create_vm(&self, body: VmConfigBody) -> Result<(), ControlError> {
        let _life = lock(&self.lifecycle);
        if let Ok(state) = self.with_vm(|rec| Ok(rec.state)) {
            return Err(wrong(state, "create a VM"));
        }
        let config = vm_config(&body)?;
        // Not errors (an operator may overcommit on purpose): the VMM's
        // log, as for `tiervisor run`.
        let host = HostResources::of_this_host();
        for warning in host_warnings(config.vcpus, &config.memory, &host) {
            eprintln!("tiervisor: vm.create {}: warning: {warning}", body.id);
        }
        // A Linux guest's console goes to the server's stdout; the API
        // has no console input.
        let options = VmOptions {
            trackers: Vec::new(),
            engine_start: self.options.engine_start,
            console: ConsoleConfig::default(),
        };
        let vm = Vm::with_options(&config, self.log.clone(), &options)
            .map_err(|e| create_error(e, &body))?;
        // vm.info shows the migrator in use (tiering picks remap for none).
        let mut body = body;
        body.migration.migrator = config.migration.migrator;
        *lock(&self.vm) = Some(VmRecord::new(Box::new(vm), body));
        Ok(())
    }

    fn boot_vm(&self) -> Result<(), ControlError> {
        let _life = lock(&self.lifecycle);
        self.with_vm(|rec| {
            let Phase::Created(vm) = &mut rec.phase else {
                return Err(wrong(rec.state, "boot"));
            };
            // The run thread first: if it cannot start, nothing has.
            let (tx, rx) = mpsc::channel::<Box<Vm>>();
            let thread = std::thread::Builder::new()
                .name("vm-run".into())
                .spawn(move || {
                    let mut vm = rx.recv().ok()?;
                    let result = vm.run(RUN_TICK, &mut |_, _| {});
                    Some(RunOutcome {
                        vm,
                        result,
                        ended: Instant::now(),
                    })
                })
                .map_err(|e| internal(&e))?;
            // Dropping `tx` on failure ends the thread with no VM.
            vm.start_engine()
                .map_err(|e| create_error(e, &rec.config))?;
            let control = vm.control_handle();
            let stop = vm.stop_handle();
            let engine = vm.engine().cloned();
            let Phase::Created(vm) = std::mem::replace(&mut rec.phase, Phase::Ended { _vm: None })
            else {
                return Err(ControlError::Internal(
                    "the VM changed while booting".into(),
                ));
            };
            if let Err(mpsc::SendError(vm)) = tx.send(vm) {
                rec.phase = Phase::Created(vm);
                return Err(ControlError::Internal(
                    "the VM's run thread ended before it got the VM".into(),
                ));
            }
            rec.phase = Phase::Running(Running {
                control,
                stop,
                thread,
            });
            rec.engine = engine;
            rec.state = VmState::Running;
            rec.booted = Some(Instant::now());
            Ok(())
        })
    }

    fn pause_vm(&self) -> Result<(), ControlError> {
        let _life = lock(&self.lifecycle);
        let control = self.with_vm(|rec| match (rec.state, rec.running()) {
            (VmState::Running, Some(r)) => Ok(r.control.clone()),
            (state, _) => Err(wrong(state, "pause")),
        })?;
        control
            .pause(self.options.pause_timeout)
            .map_err(|e| internal(&e))?;
        self.with_vm(|rec| match rec.state {
            VmState::Running => {
                rec.state = VmState::Paused;
                Ok(())
            }
            // The guest ended while its vCPUs were parking.
            state => Err(wrong(state, "pause")),
        })
    }

    fn resume_vm(&self) -> Result<(), ControlError> {
        let _life = lock(&self.lifecycle);
        self.with_vm(|rec| match (rec.state, rec.running()) {
            (VmState::Paused, Some(r)) => {
                r.control.resume();
                rec.state = VmState::Running;
                Ok(())
            }
            (state, _) => Err(wrong(state, "resume")),
        })
    }

    fn shutdown_vm(&self) -> Result<(), ControlError> {
        let _life = lock(&self.lifecycle);
        self.stop_vm("shut down")
    }

    fn delete_vm(&self) -> Result<(), ControlError> {
        let _life = lock(&self.lifecycle);
        let state = self.with_vm(|rec| Ok(rec.state))?;
        if matches!(state, VmState::Running | VmState::Paused) {
            self.stop_vm("delete")?;
        }
        // Keeps its end for the report before it goes.
        let _ = self.with_vm(|_| Ok(()));
        let record = lock(&self.vm).take();
        // Freed outside the lock: unmapping guest RAM takes a while.
        drop(record);
        Ok(())
    }

    fn vm_info(&self) -> Result<VmInfo, ControlError> {
        let (mut info, memory) = self.with_vm(|rec| {
            let info = VmInfo {
                config: rec.config.clone(),
                state: rec.state,
                memory_bytes: rec.config.memory.size,
                frame_size: rec.memory.frame_size(),
                tiers: Vec::new(),
                measuring_tiers: false,
                tiering: rec.tiering,
                uptime_ms: rec.uptime_ms(),
                end: rec.end_info.clone(),
            };
            Ok((info, rec.memory.clone()))
        })?;
        info.tiers = memory.tier_usage();
        info.measuring_tiers = memory.measuring_speeds();
        Ok(info)
    }

    fn measure_tiers(&self) -> Result<(), ControlError> {
        let memory = self.with_vm(|rec| match rec.state {
            VmState::Created | VmState::Running | VmState::Paused => Ok(rec.memory.clone()),
            state => Err(wrong(state, "measure tiers")),
        })?;
        if !memory.begin_measuring_speeds() {
            return Err(ControlError::Busy("a tier measurement"));
        }
        // The probes take a tenth of a second or more per node: the API
        // thread must not wait for them.
        let probing = Arc::clone(&memory);
        let spawned = std::thread::Builder::new()
            .name("tier-probe".into())
            .spawn(move || probing.measure_speeds());
        if spawned.is_err() {
            // No thread to spare: measure here rather than leave the
            // measurement marked as running for ever.
            memory.measure_speeds();
        }
        Ok(())
    }

    fn vm_counters(&self) -> Result<VmCounters, ControlError> {
        let (guest, memory) = self.with_vm(|rec| Ok((rec.guest.clone(), rec.memory.clone())))?;
        let vcpus = guest
            .vcpus
            .iter()
            .zip(0u32..)
            .map(|(p, index)| VcpuCounters {
                index,
                phase: p.phase.load(Ordering::Relaxed),
                ops: p.ops.load(Ordering::Relaxed),
                hypercalls: p.hypercalls.load(Ordering::Relaxed),
            })
            .collect();
        Ok(VmCounters {
            vcpus,
            log_lines: guest.log_printed.load(Ordering::Relaxed),
            log_lines_suppressed: guest.log_suppressed.load(Ordering::Relaxed),
            tiers: memory.tier_usage(),
            frame_size: memory.frame_size(),
        })
    }

    fn tiering_policy(&self) -> Result<TieringPolicy, ControlError> {
        /// Where the policy is read: engines are asked outside the lock.
        enum Source {
            Pending(TieringPolicy),
            Engine(Arc<Engine>),
        }
        let source = self.with_vm(|rec| {
            if !rec.tiering {
                return Err(ControlError::NoTiering);
            }
            match (&rec.phase, &rec.engine) {
                (_, Some(engine)) => Ok(Source::Engine(engine.clone())),
                (Phase::Created(vm), None) => vm
                    .tiering_policy()
                    .map(Source::Pending)
                    .ok_or(ControlError::NoTiering),
                // An engine that never started: the run failed.
                (_, None) => Err(wrong(rec.state, "read the tiering policy")),
            }
        })?;
        Ok(match source {
            Source::Pending(policy) => policy,
            Source::Engine(engine) => engine.policy(),
        })
    }

    fn set_tiering_policy(&self, policy: TieringPolicy) -> Result<(), ControlError> {
        const ACTION: &str = "change the tiering policy";
        let engine = self.with_vm(|rec| {
            if !rec.tiering {
                return Err(ControlError::NoTiering);
            }
            if rec.state == VmState::Shutdown {
                return Err(wrong(rec.state, ACTION));
            }
            match &mut rec.phase {
                // Not booted: the pending policy (or an adopted VM's
                // running engine's) changes.
                Phase::Created(vm) => match vm.set_tiering_policy(policy.clone()) {
                    Some(result) => result
                        .map(|()| None)
                        .map_err(|e| engine_error(e, "", ACTION)),
                    None => Err(ControlError::NoTiering),
                },
                _ => rec.engine.clone().map(Some).ok_or(wrong(rec.state, ACTION)),
            }
        })?;
        match engine {
            Some(engine) => engine
                .set_policy(policy)
                .map_err(|e| engine_error(e, "", ACTION)),
            None => Ok(()),
        }
    }

    fn tiering_stats(&self) -> Result<Arc<EngineStats>, ControlError> {
        Ok(self.engine("read tiering stats")?.stats())
    }

    fn tiering_frames(&self) -> Result<FrameSnapshot, ControlError> {
        let engine = self.engine("read the frame map")?;
        let memory = self.with_vm(|rec| Ok(rec.memory.clone()))?;
        Ok(FrameSnapshot {
            frame_size: memory.frame_size(),
            tier_names: memory.tiers().iter().map(|t| t.name().to_owned()).collect(),
            view: engine.frames(),
        })
    }

    fn rebalance(&self, request: RebalanceRequest) -> Result<(), ControlError> {
        let engine = self.with_vm(|rec| {
            if !rec.tiering {
                return Err(ControlError::NoTiering);
            }
            match (rec.state, &rec.engine) {
                (VmState::Running | VmState::Paused, Some(engine)) => Ok(engine.clone()),
                (state, _) => Err(wrong(state, "rebalance")),
            }
        })?;
        engine
            .rebalance(request.fast_bytes, request.deadline_ms)
            .map_err(rebalance_error)
    }

    fn rebalance_progress(&self) -> Result<Option<RebalanceProgress>, ControlError> {
        let engine = self.with_vm(|rec| {
            if !rec.tiering {
                return Err(ControlError::NoTiering);
            }
            Ok(rec.engine.clone())
        })?;
        Ok(engine.and_then(|e| e.stats().rebalance.clone()))
    }
}

impl Drop for VmController {
    /// Stops a VM still running (hard: nobody is left to wait for a
    /// graceful end), so its threads do not outlive the controller.
    fn drop(&mut self) {
        let record = self
            .vm
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(VmRecord {
            phase: Phase::Running(running),
            ..
        }) = record
        {
            let ended = poll_until(
                self.options.stop_timeout,
                || running.control.stop(),
                || running.thread.is_finished(),
            );
            if ended {
                let _ = running.thread.join();
            }
        }
    }
}

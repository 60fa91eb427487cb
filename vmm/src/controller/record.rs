//! What the controller keeps about its VM: the configuration, the parts
//! the API reads without waiting on the VM (guest state, memory, engine),
//! and the VM itself in its phase: built, running on a thread of its own,
//! or ended.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use api::types::{VmConfigBody, VmEndInfo, VmEndKind, VmState};
use guest_memory::{Migrator, TieredMemory};
use tiering::Engine;

use crate::error_chain;
use crate::guest_state::GuestState;
use crate::vcpu_control::VcpuControl;
use crate::vm::{StopHandle, Vm, VmEnd, VmError};

/// What the VM's run thread hands back.
#[derive(Debug)]
pub(crate) struct RunOutcome {
    /// The VM, kept until deleted.
    pub vm: Box<Vm>,
    /// How its run ended.
    pub result: Result<VmEnd, VmError>,
    /// When.
    pub ended: Instant,
}

/// A VM whose vCPUs run.
#[derive(Debug)]
pub(crate) struct Running {
    /// Pause, resume, hard stop.
    pub control: VcpuControl,
    /// Graceful stop (the payload's stop word).
    pub stop: StopHandle,
    /// The thread in [`Vm::run`]; `None` if it got no VM to run.
    pub thread: JoinHandle<Option<RunOutcome>>,
}

/// Where the VM is in its life.
#[derive(Debug)]
pub(crate) enum Phase {
    /// Built, not booted.
    Created(Box<Vm>),
    /// Booted: running or paused.
    Running(Running),
    /// The run ended; the VM is kept (KVM VM, migrator, memory) until
    /// deleted. `None` if the run thread panicked and lost it.
    Ended {
        /// Held only to be freed on delete.
        _vm: Option<Box<Vm>>,
    },
}

/// The controller's VM.
#[derive(Debug)]
pub(crate) struct VmRecord {
    /// As created.
    pub config: VmConfigBody,
    /// The API's view of `phase` (running or paused, in `Phase::Running`).
    pub state: VmState,
    pub phase: Phase,
    pub guest: Arc<GuestState>,
    pub memory: Arc<TieredMemory>,
    pub migrator: Option<Arc<dyn Migrator>>,
    /// Whether the configuration has a tiering policy.
    pub tiering: bool,
    /// The engine once it has started.
    pub engine: Option<Arc<Engine>>,
    pub booted: Option<Instant>,
    pub ended: Option<Instant>,
    /// How the guest ended.
    pub end: Option<VmEnd>,
    /// The end for the API (also for runs that failed without a guest
    /// end).
    pub end_info: Option<VmEndInfo>,
    /// Whether the controller kept this VM's end for its report.
    pub kept: bool,
}

impl VmRecord {
    /// A record for a built VM.
    pub fn new(vm: Box<Vm>, config: VmConfigBody) -> Self {
        VmRecord {
            state: VmState::Created,
            guest: vm.state().clone(),
            memory: vm.memory().clone(),
            migrator: vm.migrator().cloned(),
            tiering: vm.tiering_policy().is_some(),
            engine: vm.engine().cloned(),
            config,
            phase: Phase::Created(vm),
            booted: None,
            ended: None,
            end: None,
            end_info: None,
            kept: false,
        }
    }

    /// Notices a run that has ended (the guest exited, failed or timed
    /// out, or was stopped) and moves to [`VmState::Shutdown`]. Never
    /// waits: the run thread is joined only once it has finished.
    pub fn refresh(&mut self) {
        let finished = matches!(&self.phase, Phase::Running(r) if r.thread.is_finished());
        if !finished {
            return;
        }
        let Phase::Running(running) =
            std::mem::replace(&mut self.phase, Phase::Ended { _vm: None })
        else {
            return;
        };
        let (end, info, vm) = match running.thread.join() {
            Ok(Some(outcome)) => {
                self.ended = Some(outcome.ended);
                match outcome.result {
                    Ok(end) => {
                        let info = VmEndInfo {
                            success: end.is_success(),
                            kind: end_kind(&end),
                            description: end.describe(),
                        };
                        (Some(end), info, Some(outcome.vm))
                    }
                    Err(e) => {
                        let info = VmEndInfo {
                            success: false,
                            kind: VmEndKind::VmmError,
                            description: format!("the VM could not run: {}", error_chain(&e)),
                        };
                        (None, info, Some(outcome.vm))
                    }
                }
            }
            Ok(None) | Err(_) => {
                let info = VmEndInfo {
                    success: false,
                    kind: VmEndKind::VmmError,
                    description: "the VM's run thread failed".into(),
                };
                (None, info, None)
            }
        };
        self.ended.get_or_insert_with(Instant::now);
        self.phase = Phase::Ended { _vm: vm };
        self.state = VmState::Shutdown;
        self.end = end;
        self.end_info = Some(info);
    }

    /// Milliseconds from boot to now or to the end.
    pub fn uptime_ms(&self) -> u64 {
        let Some(booted) = self.booted else {
            return 0;
        };
        let until = self.ended.unwrap_or_else(Instant::now);
        let up = until.saturating_duration_since(booted);
        u64::try_from(up.as_millis()).unwrap_or(u64::MAX)
    }

    /// The running VM's controls.
    pub fn running(&self) -> Option<&Running> {
        match &self.phase {
            Phase::Running(r) => Some(r),
            _ => None,
        }
    }
}

/// Polls `done` every few milliseconds, calling `nudge` before each poll,
/// until it holds or `limit` passes; whether it held.
pub(crate) fn poll_until(
    limit: Duration,
    mut nudge: impl FnMut(),
    mut done: impl FnMut() -> bool,
) -> bool {
    let start = Instant::now();
    loop {
        nudge();
        if done() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The API's kind of `end`.
fn end_kind(end: &VmEnd) -> VmEndKind {
    match end {
        VmEnd::Success => VmEndKind::Success,
        VmEnd::PowerOff { .. } => VmEndKind::PowerOff,
        VmEnd::GuestReset { .. } => VmEndKind::GuestReset,
        VmEnd::Stopped => VmEndKind::Stopped,
        VmEnd::GuestExit { .. } => VmEndKind::GuestExit,
        VmEnd::Failed { .. } => VmEndKind::Failed,
        VmEnd::TimedOut { .. } => VmEndKind::TimedOut,
    }
}

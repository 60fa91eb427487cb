//! A graceful stop of a running VM, driven from its run loop's ticks (the
//! `tiervisor run` path; the API path's is the controller's `vm.shutdown`,
//! in the same order):
//! 1. stop the tiering engine: it finishes the migration batch in flight
//!    (every batch moves its frames or rolls them back), then moves
//!    nothing more;
//! 2. ask the guest to stop ([`StopHandle::request`]): a payload's stop
//!    word (it ends its phase, runs its own data checks and exits), a
//!    Linux guest's ACPI power button (its init shuts down);
//! 3. after the grace period, stop the vCPUs hard ([`VmEnd::Stopped`]).
//!
//! [`VmEnd::Stopped`]: crate::vm::VmEnd::Stopped

use std::sync::Arc;
use std::time::{Duration, Instant};

use tiering::Engine;

use crate::vcpu_control::VcpuControl;
use crate::vm::{StopHandle, Vm};

/// How long a stop waits for the guest by default (`--stop-grace`).
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(5);

/// A graceful stop of one VM, begun at most once.
#[derive(Debug)]
pub struct GracefulStop {
    engine: Option<Arc<Engine>>,
    stop: StopHandle,
    control: VcpuControl,
    grace: Duration,
    begun: Option<Instant>,
    hard: bool,
}

impl GracefulStop {
    /// A stop for `vm`, whose engine (if any) has started, waiting `grace`
    /// for the guest.
    pub fn new(vm: &Vm, grace: Duration) -> Self {
        GracefulStop {
            engine: vm.engine().cloned(),
            stop: vm.stop_handle(),
            control: vm.control_handle(),
            grace,
            begun: None,
            hard: false,
        }
    }

    /// Whether the stop has begun.
    pub fn begun(&self) -> bool {
        self.begun.is_some()
    }

    /// Whether the grace period ran out and the vCPUs were stopped hard.
    pub fn stopped_hard(&self) -> bool {
        self.hard
    }

    /// Begins the stop (once): stops the engine, which returns once its
    /// batch in flight is done, and asks the guest to stop.
    pub fn begin(&mut self) {
        if self.begun.is_some() {
            return;
        }
        if let Some(engine) = &self.engine {
            engine.stop();
        }
        self.stop.request();
        self.begun = Some(Instant::now());
    }

    /// Call on every tick of the run loop: once the grace period has
    /// passed, stops the vCPUs hard (and keeps kicking them until the run
    /// ends).
    pub fn poll(&mut self) {
        let Some(begun) = self.begun else {
            return;
        };
        if self.hard || begun.elapsed() >= self.grace {
            self.hard = true;
            self.control.stop();
        }
    }
}

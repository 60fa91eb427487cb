//! Control of a VM's vCPU threads from other threads: pause, resume and
//! stop, through a cloneable [`VcpuControl`] that works while
//! [`Vm::run`](crate::vm::Vm::run) blocks the thread that runs the VM.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use vmm_sys_util::signal::Killable;

use crate::pause::{PauseError, PauseGate};
use crate::vcpu;

/// The running vCPU threads, kept so they can be kicked out of KVM_RUN.
///
/// A thread is kicked only while its `JoinHandle` is here, that is before
/// it is joined, so its pthread id is never stale when signalled.
#[derive(Debug, Default)]
pub(crate) struct VcpuThreads {
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl VcpuThreads {
    fn lock(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.handles.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a started thread.
    pub fn push(&self, handle: JoinHandle<()>) {
        self.lock().push(handle);
    }

    /// Signals every thread that has not finished: a thread in KVM_RUN
    /// returns to the VMM with EINTR.
    pub fn kick(&self) {
        for h in self.lock().iter().filter(|h| !h.is_finished()) {
            // A thread that ends between the check and the kick makes the
            // kill fail harmlessly: it is not joined yet, so its id is
            // still its own.
            let _ = h.kill(vcpu::kick_signal());
        }
    }

    /// Takes the threads out to join them; no kick reaches them after.
    pub fn take(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.lock())
    }
}

/// Pauses, resumes and stops one VM's vCPUs from any thread. Clones share
/// the VM's state.
#[derive(Clone, Debug)]
pub struct VcpuControl {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) gate: Arc<PauseGate>,
    pub(crate) threads: Arc<VcpuThreads>,
}

impl VcpuControl {
    /// Parks every vCPU and returns once all have parked (vCPUs that have
    /// ended count as parked; vCPUs not started yet park before they first
    /// enter the guest). Fails after `limit`, leaving the VM running.
    pub fn pause(&self, limit: Duration) -> Result<(), PauseError> {
        self.gate.pause(&|| self.threads.kick(), limit)
    }

    /// Lets parked vCPUs run again.
    pub fn resume(&self) {
        self.gate.resume();
    }

    /// Whether the vCPUs are paused (or being paused).
    pub fn is_paused(&self) -> bool {
        self.gate.is_paused()
    }

    /// Time the VM has spent paused.
    pub fn paused_time(&self) -> Duration {
        self.gate.paused_time()
    }

    /// Stops the guest hard: raises the stop flag, wakes parked vCPUs and
    /// kicks the others out of KVM_RUN. Returns at once; repeat it until
    /// the VM's run has ended, since a kick that lands just before a vCPU
    /// enters KVM_RUN is lost. The run then ends as
    /// [`VmEnd::Stopped`](crate::vm::VmEnd::Stopped) unless the guest had
    /// already ended otherwise.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.gate.wake();
        self.threads.kick();
    }

    /// Whether [`stop`](Self::stop) was called (or the VM's run is
    /// stopping its vCPUs after its end).
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

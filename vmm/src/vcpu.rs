//! vCPU threads: the KVM_RUN loop, exit handling, and stopping or pausing
//! a vCPU from another thread (a stop flag or the pause gate, plus a
//! signal that interrupts KVM_RUN).

use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use kvm_ioctls::{VcpuExit, VcpuFd};
use serde::Serialize;
use vmm_sys_util::signal::{SIGRTMIN, register_signal_handler};

use crate::devices::hypercall::{HypercallDevice, Outcome};
use crate::pause::PauseGate;

/// Signal used to kick a vCPU thread out of KVM_RUN.
pub fn kick_signal() -> libc::c_int {
    SIGRTMIN()
}

extern "C" fn on_kick(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Nothing to do: the signal's only job is to make KVM_RUN return EINTR.
}

/// Installs the kick handler once per process.
pub fn install_kick_handler() -> std::io::Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = register_signal_handler(kick_signal(), on_kick)
            .map_err(|e| std::io::Error::from_raw_os_error(e.errno()));
    });
    result
}

/// How a vCPU ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum VcpuEnd {
    /// The guest called `Exit(code)`.
    Exited {
        /// The exit code.
        code: u64,
    },
    /// Stopped by the VMM (another vCPU failed, timeout, shutdown).
    Stopped,
    /// The guest did something fatal.
    Failed {
        /// What happened.
        reason: String,
        /// Instruction pointer at the failure (if it could be read).
        rip: Option<u64>,
    },
}

/// A vCPU and what it needs to run.
#[derive(Debug)]
pub struct Vcpu {
    /// Index.
    pub index: u32,
    fd: VcpuFd,
    hypercalls: HypercallDevice,
    stop: Arc<AtomicBool>,
    gate: Arc<PauseGate>,
}

impl Vcpu {
    /// Wraps a configured vCPU that stops when `stop` is raised and parks
    /// while `gate` is closed.
    pub fn new(
        index: u32,
        fd: VcpuFd,
        hypercalls: HypercallDevice,
        stop: Arc<AtomicBool>,
        gate: Arc<PauseGate>,
    ) -> Self {
        Vcpu {
            index,
            fd,
            hypercalls,
            stop,
            gate,
        }
    }

    fn failed(&self, reason: String) -> VcpuEnd {
        let rip = self.fd.get_regs().ok().map(|r| r.rip);
        VcpuEnd::Failed { reason, rip }
    }

    /// Runs until the guest exits, fails, or the stop flag is raised;
    /// parks at the pause gate between exits while it is closed.
    pub fn run(mut self) -> VcpuEnd {
        loop {
            self.gate.park_if_closed(&self.stop);
            if self.stop.load(Ordering::Acquire) {
                return VcpuEnd::Stopped;
            }
            let exit = match self.fd.run() {
                Ok(exit) => exit,
                Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => continue,
                Err(e) => return self.failed(format!("KVM_RUN failed: {e}")),
            };
            let reason = match exit {
                VcpuExit::IoOut(port, data) => {
                    match self.hypercalls.handle_out(self.index, port, data) {
                        Ok(Outcome::Continue) => continue,
                        Ok(Outcome::Exit(code)) => return VcpuEnd::Exited { code },
                        Err(e) => format!("bad hypercall: {e}"),
                    }
                }
                VcpuExit::IoIn(port, _) => format!("port in from unclaimed port {port:#x}"),
                VcpuExit::MmioRead(addr, _) => {
                    format!("read of unbacked guest-physical address {addr:#x}")
                }
                VcpuExit::MmioWrite(addr, _) => {
                    format!("write to unbacked guest-physical address {addr:#x}")
                }
                VcpuExit::Shutdown => {
                    "triple fault (KVM_EXIT_SHUTDOWN): the guest took an exception it cannot handle"
                        .into()
                }
                VcpuExit::Hlt => "halted (hlt) with interrupts off".into(),
                VcpuExit::InternalError => {
                    let run = self.fd.get_kvm_run();
                    // SAFETY: the exit reason is KVM_EXIT_INTERNAL_ERROR, for
                    // which KVM fills the `internal` member of the union.
                    let suberror = unsafe { run.__bindgen_anon_1.internal.suberror };
                    format!("KVM internal error (suberror {suberror})")
                }
                VcpuExit::FailEntry(reason, cpu) => {
                    format!("VM entry failed (hardware reason {reason:#x}, cpu {cpu})")
                }
                VcpuExit::Intr => continue,
                other => format!("unexpected exit {other:?}"),
            };
            return self.failed(reason);
        }
    }
}

//! vCPU threads: the KVM_RUN loop, exit handling (the hypercall port of a
//! payload guest, the port I/O bus of a Linux guest), and stopping or
//! pausing a vCPU from another thread (a stop flag or the pause gate, plus
//! a signal that interrupts KVM_RUN).

use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use kvm_ioctls::{VcpuExit, VcpuFd};
use serde::Serialize;
use vmm_sys_util::signal::{SIGRTMIN, register_signal_handler};

use crate::devices::hypercall::{HypercallDevice, Outcome};
use crate::devices::pio_bus::{PioBus, PioOutcome};
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
    /// The guest asked for a CPU reset (Linux: the i8042 reset command).
    /// tiervisor does not reboot guests: the VM ends.
    Reset,
    /// The guest powered itself off (ACPI S5 through the sleep control
    /// register).
    PowerOff,
    /// The guest did something fatal.
    Failed {
        /// What happened.
        reason: String,
        /// Instruction pointer at the failure (if it could be read).
        rip: Option<u64>,
    },
}

/// Where a vCPU's I/O exits go.
#[derive(Clone, Debug)]
pub enum VcpuIo {
    /// A payload guest: the hypercall port; any other access is fatal.
    Payload(HypercallDevice),
    /// A Linux guest: its port devices; unclaimed ports and MMIO read as
    /// all ones and ignore writes.
    Linux(Arc<PioBus>),
}

/// A vCPU and what it needs to run.
#[derive(Debug)]
pub struct Vcpu {
    /// Index.
    pub index: u32,
    fd: VcpuFd,
    io: VcpuIo,
    stop: Arc<AtomicBool>,
    gate: Arc<PauseGate>,
}

/// What the run loop does after an exit.
enum Step {
    Continue,
    End(VcpuEnd),
    Fail(String),
    /// KVM_EXIT_INTERNAL_ERROR: details are in the vCPU's run structure.
    InternalError,
}

impl Vcpu {
    /// Wraps a configured vCPU that stops when `stop` is raised and parks
    /// while `gate` is closed.
    pub fn new(
        index: u32,
        fd: VcpuFd,
        io: VcpuIo,
        stop: Arc<AtomicBool>,
        gate: Arc<PauseGate>,
    ) -> Self {
        Vcpu {
            index,
            fd,
            io,
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
            let step = match &self.io {
                VcpuIo::Payload(hypercalls) => payload_exit(hypercalls, self.index, exit),
                VcpuIo::Linux(bus) => linux_exit(bus, exit),
            };
            let reason = match step {
                Step::Continue => continue,
                Step::End(end) => return end,
                Step::Fail(reason) => reason,
                Step::InternalError => {
                    let run = self.fd.get_kvm_run();
                    // SAFETY: the exit reason is KVM_EXIT_INTERNAL_ERROR, for
                    // which KVM fills the `internal` member of the union.
                    let suberror = unsafe { run.__bindgen_anon_1.internal.suberror };
                    internal_error(suberror)
                }
            };
            return self.failed(reason);
        }
    }
}

/// `KVM_INTERNAL_ERROR_EMULATION`.
const INTERNAL_ERROR_EMULATION: u32 = 1;

/// What a KVM internal error means. Emulation failures are what a guest
/// kernel meets on hosts whose KVM emulates guest kernel mode (PVM) with
/// an emulator that lacks some instructions.
fn internal_error(suberror: u32) -> String {
    match suberror {
        INTERNAL_ERROR_EMULATION => format!(
            "KVM internal error (suberror {suberror}: KVM could not emulate the guest's instruction)"
        ),
        _ => format!("KVM internal error (suberror {suberror})"),
    }
}

/// Exits that end a vCPU of either kind of guest.
fn fatal_exit(exit: VcpuExit<'_>) -> Step {
    Step::Fail(match exit {
        VcpuExit::Shutdown => {
            "triple fault (KVM_EXIT_SHUTDOWN): the guest took an exception it cannot handle".into()
        }
        VcpuExit::InternalError => return Step::InternalError,
        VcpuExit::FailEntry(reason, cpu) => {
            format!("VM entry failed (hardware reason {reason:#x}, cpu {cpu})")
        }
        other => format!("unexpected exit {other:?}"),
    })
}

/// A payload guest's exit: the hypercall port or a fatal error.
fn payload_exit(hypercalls: &HypercallDevice, index: u32, exit: VcpuExit<'_>) -> Step {
    match exit {
        VcpuExit::IoOut(port, data) => match hypercalls.handle_out(index, port, data) {
            Ok(Outcome::Continue) => Step::Continue,
            Ok(Outcome::Exit(code)) => Step::End(VcpuEnd::Exited { code }),
            Err(e) => Step::Fail(format!("bad hypercall: {e}")),
        },
        VcpuExit::IoIn(port, _) => Step::Fail(format!("port in from unclaimed port {port:#x}")),
        VcpuExit::MmioRead(addr, _) => {
            Step::Fail(format!("read of unbacked guest-physical address {addr:#x}"))
        }
        VcpuExit::MmioWrite(addr, _) => Step::Fail(format!(
            "write to unbacked guest-physical address {addr:#x}"
        )),
        VcpuExit::Hlt => Step::Fail("halted (hlt) with interrupts off".into()),
        VcpuExit::Intr => Step::Continue,
        other => fatal_exit(other),
    }
}

/// A Linux guest's exit: port devices, empty MMIO, a reset request.
fn linux_exit(bus: &PioBus, exit: VcpuExit<'_>) -> Step {
    match exit {
        VcpuExit::IoOut(port, data) => match bus.write(port, data) {
            PioOutcome::Continue => Step::Continue,
            PioOutcome::Reset => Step::End(VcpuEnd::Reset),
            PioOutcome::PowerOff => Step::End(VcpuEnd::PowerOff),
        },
        VcpuExit::IoIn(port, data) => {
            bus.read(port, data);
            Step::Continue
        }
        // No MMIO devices: reads find nothing, writes go nowhere.
        VcpuExit::MmioRead(_, data) => {
            data.fill(0xff);
            Step::Continue
        }
        VcpuExit::MmioWrite(..) | VcpuExit::Intr | VcpuExit::Hlt => Step::Continue,
        VcpuExit::SystemEvent(kind, _) if kind == kvm_bindings::KVM_SYSTEM_EVENT_RESET => {
            Step::End(VcpuEnd::Reset)
        }
        other => fatal_exit(other),
    }
}

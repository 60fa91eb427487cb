//! `GuestVm`: one benchmark VM, booted, run alongside a migration driver
//! thread and stopped when the driver is done.
//!
//! The VM runs on the calling thread (its vCPUs on their own threads), the
//! driver on a scoped thread. When the driver returns (or fails, or
//! panics) the payload is asked to stop gracefully: it finishes its round,
//! runs its own final check and exits. If the guest ends first, the driver
//! sees it through [`Driving::guest_running`] and stops.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use thiserror::Error;

use guest_abi::GpaRange;
use guest_memory::{Migrator, TieredMemory};
use vmm::devices::hypercall::LogSink;
use vmm::guest_state::GuestState;
use vmm::vm::{StopHandle, Vm, VmConfig, VmEnd, VmError};

/// Guest log lines kept for error messages.
const LOG_TAIL: usize = 20;
/// How often the VM runner wakes while the guest runs.
const TICK: Duration = Duration::from_millis(200);

/// Why a benchmark VM could not be created or run.
#[derive(Debug, Error)]
pub enum GuestError {
    /// The VMM refused the configuration or could not create the VM.
    #[error("create VM")]
    Create(#[source] VmError),
    /// The VM has no migrator (a bug in the benchmark's configuration).
    #[error("the VM has no migrator")]
    NoMigrator,
    /// The VM has no free RAM for a workload.
    #[error("the VM reports no free RAM")]
    NoFreeRange,
    /// The driver thread could not start.
    #[error("start the migration driver thread")]
    Spawn(#[source] io::Error),
    /// The vCPU threads could not start.
    #[error("run the VM")]
    Run(#[source] VmError),
    /// The driver thread panicked.
    #[error("the migration driver thread panicked")]
    DriverPanicked,
}

/// What the driver thread works with.
#[derive(Debug)]
pub struct Driving<'a> {
    /// The VM's migrator.
    pub migrator: &'a dyn Migrator,
    /// The VM's memory.
    pub memory: &'a TieredMemory,
    /// What the guest reports.
    pub state: &'a GuestState,
    running: &'a AtomicBool,
}

impl Driving<'_> {
    /// Whether the guest is still running.
    pub fn guest_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Waits until every vCPU reports progress in its first phase (its
    /// buffer is written and the workload is running); false if the guest
    /// ended or `limit` passed first.
    pub fn wait_for_workload(&self, limit: Duration) -> bool {
        let started = Instant::now();
        while self.guest_running() && started.elapsed() < limit {
            let all = self
                .state
                .vcpus
                .iter()
                .all(|v| v.ops.load(Ordering::Relaxed) > 0);
            if all {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

/// A created benchmark VM.
#[derive(Debug)]
pub struct GuestVm {
    vm: Vm,
    args: String,
    vcpus: u32,
    free: GpaRange,
    log: Arc<Mutex<VecDeque<String>>>,
}

/// Asks the payload to stop when dropped (driver return, error or panic).
struct StopOnDrop<'a>(&'a StopHandle);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.request();
    }
}

impl GuestVm {
    /// Creates the VM of `config` (memory, payload, migrator); the guest
    /// does not run yet.
    pub fn boot(config: &VmConfig) -> Result<Self, GuestError> {
        let log: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let sink_log = log.clone();
        let sink: LogSink = Arc::new(move |vcpu, line| {
            let mut tail = sink_log.lock().unwrap_or_else(PoisonError::into_inner);
            if tail.len() == LOG_TAIL {
                tail.pop_front();
            }
            tail.push_back(format!("vcpu{vcpu}: {line}"));
        });
        let vm = Vm::new(config, sink).map_err(GuestError::Create)?;
        if vm.migrator().is_none() {
            return Err(GuestError::NoMigrator);
        }
        let free = vm.first_free_range().ok_or(GuestError::NoFreeRange)?;
        Ok(Self {
            vm,
            args: config.args.clone(),
            vcpus: config.vcpus,
            free,
            log,
        })
    }

    /// The VM's memory.
    pub fn memory(&self) -> &Arc<TieredMemory> {
        self.vm.memory()
    }

    /// The guest's first free RAM range (where the workload's buffer is).
    pub fn free(&self) -> GpaRange {
        self.free
    }

    /// The workload string the guest runs.
    pub fn args(&self) -> &str {
        &self.args
    }

    /// vCPUs of the guest.
    pub fn vcpus(&self) -> u32 {
        self.vcpus
    }

    /// The last lines the guest logged.
    pub fn log_tail(&self) -> Vec<String> {
        let tail = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        tail.iter().cloned().collect()
    }

    /// Runs the guest and `drive` side by side; when `drive` is done the
    /// guest is asked to stop, and this returns once it has ended: how it
    /// ended and what `drive` returned.
    pub fn run<T: Send, E: Send>(
        &mut self,
        drive: impl FnOnce(&Driving<'_>) -> Result<T, E> + Send,
    ) -> Result<(VmEnd, Result<T, E>), GuestError> {
        let migrator = self.vm.migrator().ok_or(GuestError::NoMigrator)?.clone();
        let memory = self.vm.memory().clone();
        let state = self.vm.state().clone();
        let stop = self.vm.stop_handle();
        let running = AtomicBool::new(true);
        let driving = Driving {
            migrator: migrator.as_ref(),
            memory: &memory,
            state: &state,
            running: &running,
        };
        let (driving, stop, running) = (&driving, &stop, &running);
        let vm = &mut self.vm;
        thread::scope(|scope| {
            let driver = thread::Builder::new()
                .name("tierbench-migrate".to_owned())
                .spawn_scoped(scope, move || {
                    let _stop = StopOnDrop(stop);
                    drive(driving)
                })
                .map_err(GuestError::Spawn)?;
            let end = vm.run(TICK, &mut |_, _| {});
            running.store(false, Ordering::Release);
            // The driver sees `running` and returns; join it before
            // reporting anything (the scope would re-raise its panic).
            let driven = driver.join().map_err(|_| GuestError::DriverPanicked);
            let end = end.map_err(GuestError::Run)?;
            Ok((end, driven?))
        })
    }
}

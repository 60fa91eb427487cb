//! A VM: validates its configuration, builds tiered guest memory, the KVM
//! VM and its vCPUs, loads the guest (a payload, or a Linux kernel with
//! the devices it needs, see [`crate::vm_linux`]), and runs the vCPU
//! threads until the guest exits, fails, resets, times out or is stopped;
//! other threads pause, resume and stop it through a [`VcpuControl`].
//! Memory, memslots, migration, trackers and the tiering engine are the
//! same for both kinds of guest.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kvm_ioctls::{Kvm, VcpuFd, VmFd};

use access_track::{AccessTracker, FaultSampleConfig, KvmDirtyLog, TrackerKind};
use guest_abi::GpaRange;
use guest_memory::migrate::{HostWriteLog, WriteGuard};
use guest_memory::{MemoryConfig, Migrator, TierUsage, TieredMemory};
use tiering::{Engine, EngineError, TieringPolicy};

use crate::arch::regs::{self, EntryState};
use crate::devices::console::ConsoleConfig;
use crate::devices::hypercall::{HypercallDevice, LogSink};
use crate::devices::power_button::PowerButton;
use crate::guest_state::GuestState;
use crate::linux::{LinuxBoot, LinuxPlan};
use crate::pause::PauseGate;
use crate::payload::boot::BootPlan;
use crate::payload::elf::{self, PayloadImage};
use crate::payload::embedded::WORKLOADS_ELF;
use crate::vcpu::{self, Vcpu, VcpuEnd, VcpuIo};
use crate::vcpu_control::{VcpuControl, VcpuThreads};
pub use crate::vm_error::VmError;
use crate::vm_error::kvm_err;
use crate::vm_linux::{self, LinuxDevices};
pub use crate::vm_tiering::engine_lifecycle::EngineStart;
use crate::vm_tiering::migration::MigrationConfig;
use crate::vm_tiering::trackers::VmTrackers;
use crate::vm_tiering::write_stop::VcpuWriteStop;
use crate::vm_tiering::{TieringParts, TieringPlan, TieringRequest, VmTiering};

/// What the guest runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayloadSource {
    /// The workloads built into `tiervisor`.
    Embedded,
    /// A payload ELF file.
    File(PathBuf),
    /// A Linux kernel, initramfs and command line (the argument string is
    /// not used).
    Linux(LinuxBoot),
}

/// Everything needed to run a VM.
#[derive(Clone, Debug)]
pub struct VmConfig {
    /// Number of vCPUs.
    pub vcpus: u32,
    /// Guest RAM and its tiers.
    pub memory: MemoryConfig,
    /// The payload.
    pub payload: PayloadSource,
    /// Argument string passed to the payload (for the embedded payload:
    /// `NAME[:ARGS]`).
    pub args: String,
    /// Stop the guest after this long.
    pub timeout: Option<Duration>,
    /// How frames move between tiers.
    pub migration: MigrationConfig,
    /// Keep the KVM dirty log on (for the dirty-log access tracker) even
    /// when the migrator does not need it.
    pub dirty_log_tracking: bool,
    /// The tiering engine's policy; `None` runs no engine. Needs a
    /// migrator.
    pub tiering: Option<TieringPolicy>,
}

/// How the whole VM ended.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum VmEnd {
    /// Every vCPU exited with code 0.
    Success,
    /// A vCPU exited with a non-zero code.
    GuestExit {
        /// The vCPU.
        vcpu: u32,
        /// Its exit code.
        code: u64,
    },
    /// A vCPU failed.
    Failed {
        /// The vCPU.
        vcpu: u32,
        /// What happened.
        reason: String,
        /// Instruction pointer, if known.
        rip: Option<u64>,
    },
    /// The timeout elapsed.
    TimedOut {
        /// Seconds allowed.
        seconds: f64,
    },
    /// Stopped through [`VcpuControl::stop`] before every vCPU exited.
    Stopped,
    /// The guest asked for a CPU reset (Linux's reboot, or its poweroff
    /// fallback without ACPI): tiervisor does not reboot guests, so the VM
    /// ends, as a success.
    GuestReset {
        /// The vCPU that asked.
        vcpu: u32,
    },
    /// The guest powered itself off (Linux's `poweroff`, through ACPI S5).
    PowerOff {
        /// The vCPU that asked.
        vcpu: u32,
    },
}

impl VmEnd {
    /// One line for humans.
    pub fn describe(&self) -> String {
        match self {
            VmEnd::Success => "guest exited successfully".into(),
            VmEnd::GuestExit { vcpu, code } => {
                format!("guest exited with code {code} on vCPU {vcpu}")
            }
            VmEnd::Failed { vcpu, reason, rip } => match rip {
                Some(rip) => format!("vCPU {vcpu} failed at RIP {rip:#x}: {reason}"),
                None => format!("vCPU {vcpu} failed: {reason}"),
            },
            VmEnd::TimedOut { seconds } => format!("guest timed out after {seconds} s"),
            VmEnd::Stopped => "guest stopped by the VMM".into(),
            VmEnd::GuestReset { vcpu } => {
                format!("guest reset itself on vCPU {vcpu} (reboot); the VM ended")
            }
            VmEnd::PowerOff { vcpu } => format!("guest powered off on vCPU {vcpu}"),
        }
    }

    /// Whether the guest ended well: every vCPU exited with code 0, the
    /// guest reset or powered itself off, or the VMM stopped it on request.
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            VmEnd::Success | VmEnd::Stopped | VmEnd::GuestReset { .. } | VmEnd::PowerOff { .. }
        )
    }
}

/// How a VM is built, beyond its [`VmConfig`].
#[derive(Clone, Debug, Default)]
pub struct VmOptions {
    /// Access trackers to be ready for (see [`Vm::with_trackers`]).
    pub trackers: Vec<TrackerKind>,
    /// When the tiering engine starts.
    pub engine_start: EngineStart,
    /// Where a Linux guest's serial console goes (payloads have none).
    pub console: ConsoleConfig,
}

/// Asks the guest to finish gracefully; usable from any thread while the
/// VM runs. A payload gets its stop word (in the boot info); a Linux guest
/// a press of its ACPI power button.
#[derive(Clone, Debug)]
pub struct StopHandle {
    payload: Option<(Arc<TieredMemory>, Arc<HostWriteLog>)>,
    power_button: Option<PowerButton>,
}

impl StopHandle {
    /// Sets the stop word: the payload ends its current phase, runs its
    /// final checks and exits. Or presses a Linux guest's power button:
    /// its init shuts down as it sees fit (`tests/nested`'s guest ends its
    /// workload, checks its data and powers off).
    pub fn request(&self) {
        use vm_memory::Bytes;
        if let Some(button) = &self.power_button {
            // A full eventfd counter only means a press is pending.
            let _ = button.press();
        }
        let Some((memory, writes)) = &self.payload else {
            return;
        };
        let gpa = crate::arch::layout::STOP_FLAG_GPA;
        // The stop word is in RAM (the boot plan wrote it), so this write
        // cannot fail.
        let _ = writes.write_section(gpa, 8, || {
            memory
                .guest_memory()
                .write_slice(&1u64.to_le_bytes(), vm_memory::GuestAddress(gpa))
        });
    }
}

/// The guest, planned before anything is built.
enum GuestPlan<'a> {
    /// A payload image and its boot plan.
    Payload {
        image: PayloadImage<'a>,
        plan: BootPlan,
    },
    /// A Linux boot.
    Linux(LinuxPlan),
}

impl<'a> GuestPlan<'a> {
    /// Plans the guest of `config` in `ram`: a Linux boot, or a payload
    /// image (`file`, the payload file's bytes, or else the embedded
    /// workloads) and its boot plan, the embedded workload's arguments
    /// checked against the room the plan leaves them.
    fn new(config: &VmConfig, ram: &[GpaRange], file: Option<&'a [u8]>) -> Result<Self, VmError> {
        if let PayloadSource::Linux(boot) = &config.payload {
            return Ok(GuestPlan::Linux(LinuxPlan::new(boot, ram)?));
        }
        let workload = match &config.payload {
            PayloadSource::Embedded => Some(
                workloads::Spec::parse(&config.args)
                    .map_err(|e| VmError::Workload(e.to_string()))?,
            ),
            _ => None,
        };
        let image = elf::parse(file.unwrap_or(WORKLOADS_ELF), ram)?;
        let plan = BootPlan::new(&image, ram, config.vcpus, &config.args, 0)?;
        if let Some(spec) = &workload {
            spec.buffer_bytes(plan.first_free_bytes())
                .map_err(|e| VmError::Workload(e.to_string()))?;
        }
        Ok(GuestPlan::Payload { image, plan })
    }

    /// A Linux guest's platform and devices; none for a payload. The
    /// interrupt controllers come before the vCPUs (their local APICs
    /// come with them), the devices after the controllers (the serial
    /// IRQ needs the irqchip).
    fn create_devices(
        &self,
        vm_fd: &VmFd,
        console: &ConsoleConfig,
    ) -> Result<Option<LinuxDevices>, VmError> {
        match self {
            GuestPlan::Linux(_) => {
                vm_linux::create_platform(vm_fd)?;
                Ok(Some(LinuxDevices::new(vm_fd, console)?))
            }
            GuestPlan::Payload { .. } => Ok(None),
        }
    }

    /// Writes the boot image into `memory` and sets up the vCPUs `fds`
    /// to enter it.
    fn write_boot(
        &mut self,
        kvm: &Kvm,
        fds: &[VcpuFd],
        memory: &TieredMemory,
        config: &VmConfig,
    ) -> Result<(), VmError> {
        match self {
            GuestPlan::Payload { image, plan } => {
                plan.info.tsc_khz = fds[0].get_tsc_khz().map_or(0, u64::from);
                plan.write(memory.guest_memory(), image, &config.args)?;
                let cpuid = regs::guest_cpuid(kvm)?;
                for (index, fd) in (0..config.vcpus).zip(fds) {
                    regs::setup_payload_vcpu(
                        fd,
                        &cpuid,
                        &EntryState {
                            rip: image.entry,
                            stack_top: plan.stack_tops[index as usize],
                            vcpu_index: u64::from(index),
                            vcpu_count: u64::from(config.vcpus),
                            boot_info: crate::arch::layout::BOOT_INFO_GPA,
                        },
                    )?;
                }
            }
            GuestPlan::Linux(plan) => {
                let entry = vm_linux::write_boot(plan, memory.guest_memory(), config.vcpus)?;
                vm_linux::setup_vcpus(kvm, fds, &entry)?;
            }
        }
        Ok(())
    }

    /// The guest's free RAM as its boot info describes it; none for a
    /// Linux guest.
    fn free(&self) -> Vec<GpaRange> {
        match self {
            GuestPlan::Payload { plan, .. } => plan.info.free().to_vec(),
            GuestPlan::Linux(_) => Vec::new(),
        }
    }
}

/// Opens `/dev/kvm` and checks that it runs `vcpus` vCPUs.
fn open_kvm(vcpus: u32) -> Result<Kvm, VmError> {
    let kvm = Kvm::new().map_err(kvm_err("opening /dev/kvm"))?;
    let max = u32::try_from(kvm.get_max_vcpus()).unwrap_or(u32::MAX);
    if vcpus == 0 || vcpus > max {
        return Err(VmError::VcpuCount {
            requested: vcpus,
            max,
        });
    }
    Ok(kvm)
}

/// Guest RAM of `memory`'s size, as GPA ranges.
fn ram_ranges(memory: &MemoryConfig) -> Vec<GpaRange> {
    guest_memory::ram_regions(memory.size)
        .iter()
        .map(|r| GpaRange {
            start: r.gpa,
            len: r.len,
        })
        .collect()
}

/// The payload file's bytes, when the payload is a file.
fn read_payload_file(payload: &PayloadSource) -> Result<Option<Vec<u8>>, VmError> {
    let PayloadSource::File(path) = payload else {
        return Ok(None);
    };
    std::fs::read(path)
        .map(Some)
        .map_err(|source| VmError::ReadPayload {
            path: path.clone(),
            source,
        })
}

/// What the VM asks of its tiering side.
fn tiering_request<'a>(config: &'a VmConfig, options: &'a VmOptions) -> TieringRequest<'a> {
    TieringRequest {
        migration: &config.migration,
        dirty_log_tracking: config.dirty_log_tracking,
        policy: config.tiering.as_ref(),
        trackers: &options.trackers,
        engine_start: options.engine_start,
    }
}

/// The KVM vCPUs `0..count`.
fn create_vcpu_fds(vm_fd: &VmFd, count: u32) -> Result<Vec<VcpuFd>, VmError> {
    (0..count)
        .map(|index| {
            vm_fd
                .create_vcpu(u64::from(index))
                .map_err(kvm_err("creating a vCPU"))
        })
        .collect()
}

/// The end of guest RAM: the host write log covers the GPAs below it.
fn ram_end(memory: &TieredMemory) -> u64 {
    memory
        .regions()
        .iter()
        .map(|r| r.gpa + r.len)
        .max()
        .unwrap_or(0)
}

/// Where the vCPUs' exits go: a Linux guest's port I/O bus, or a
/// payload's hypercall device.
fn vcpu_io(
    linux: Option<&LinuxDevices>,
    memory: &TieredMemory,
    state: &Arc<GuestState>,
    log: LogSink,
    writes: &Arc<HostWriteLog>,
) -> VcpuIo {
    match linux {
        Some(devices) => VcpuIo::Linux(devices.bus.clone()),
        None => VcpuIo::Payload(HypercallDevice::new(
            memory.guest_memory().clone(),
            state.clone(),
            log,
            writes.clone(),
        )),
    }
}

/// A created, not yet running VM.
#[derive(Debug)]
pub struct Vm {
    // Field order is drop order: the tiering side (engine, migrator,
    // guard, dirty log) and the vCPUs go before the VM (and its
    // memslots), which goes before the memory that backs them.
    tiering: VmTiering,
    vcpus: Vec<Vcpu>,
    threads: Arc<VcpuThreads>,
    gate: Arc<PauseGate>,
    _vm_fd: Arc<VmFd>,
    memory: Arc<TieredMemory>,
    writes: Arc<HostWriteLog>,
    state: Arc<GuestState>,
    stop: Arc<AtomicBool>,
    timeout: Option<Duration>,
    free: Vec<GpaRange>,
    linux: Option<LinuxDevices>,
}

impl Vm {
    /// Validates `config`, creates the VM and loads the payload. Nothing is
    /// created before every check that does not need KVM has passed.
    pub fn new(config: &VmConfig, log: LogSink) -> Result<Self, VmError> {
        Self::with_trackers(config, log, &[])
    }

    /// Like [`new`](Self::new), and ready for the access trackers
    /// `trackers` (see [`Vm::tracker`]): the KVM dirty log on for
    /// `dirty-log` and `combined`, the userfaultfd guard registered for
    /// minor faults for `fault-sample` and `combined` (the remap
    /// migrators' guard when there is one, else a guard of its own; not on
    /// hugetlb or file tiers, where the fault sampler says it cannot run).
    pub fn with_trackers(
        config: &VmConfig,
        log: LogSink,
        trackers: &[TrackerKind],
    ) -> Result<Self, VmError> {
        let options = VmOptions {
            trackers: trackers.to_vec(),
            engine_start: EngineStart::AtCreate,
            console: ConsoleConfig::default(),
        };
        Self::with_options(config, log, &options)
    }

    /// Like [`with_trackers`](Self::with_trackers), with the trackers and
    /// the engine's start as `options` say. With [`EngineStart::AtBoot`]
    /// the policy is checked here (an invalid one fails the creation) and
    /// the engine starts in [`start_engine`](Self::start_engine) or
    /// [`run`](Self::run).
    pub fn with_options(
        config: &VmConfig,
        log: LogSink,
        options: &VmOptions,
    ) -> Result<Self, VmError> {
        let kvm = open_kvm(config.vcpus)?;
        let ram = ram_ranges(&config.memory);
        let payload_file = read_payload_file(&config.payload)?;
        let mut guest = GuestPlan::new(config, &ram, payload_file.as_deref())?;

        let memory = Arc::new(TieredMemory::new(&config.memory)?);
        let vm_fd = Arc::new(kvm.create_vm().map_err(kvm_err("creating the VM"))?);
        let tiering = TieringPlan::new(tiering_request(config, options), &memory)?;
        let memslots = tiering.register_memslots(&vm_fd, &memory)?;
        let linux = guest.create_devices(&vm_fd, &options.console)?;
        let fds = create_vcpu_fds(&vm_fd, config.vcpus)?;
        guest.write_boot(&kvm, &fds, &memory, config)?;

        // The migrator and the engine come after the boot image: the
        // guard write-protects guest memory, the engine moves frames.
        let writes = Arc::new(HostWriteLog::new(ram_end(&memory)));
        let gate = Arc::new(PauseGate::new());
        let threads = Arc::new(VcpuThreads::default());
        let write_stop = VcpuWriteStop::new(gate.clone(), threads.clone(), writes.clone());
        let tiering = VmTiering::new(
            tiering,
            TieringParts {
                vm_fd: &vm_fd,
                memslots,
                memory: &memory,
                writes: &writes,
                write_stop: Arc::new(write_stop),
            },
        )?;

        let state = Arc::new(GuestState::new(config.vcpus));
        let stop = Arc::new(AtomicBool::new(false));
        let io = vcpu_io(linux.as_ref(), &memory, &state, log, &writes);
        let vcpus = (0..config.vcpus)
            .zip(fds)
            .map(|(index, fd)| Vcpu::new(index, fd, io.clone(), stop.clone(), gate.clone()))
            .collect();
        Ok(Vm {
            tiering,
            vcpus,
            threads,
            gate,
            _vm_fd: vm_fd,
            memory,
            writes,
            state,
            stop,
            timeout: config.timeout,
            free: guest.free(),
            linux,
        })
    }

    /// The VM's tiering engine, when the configuration has a policy and
    /// the engine has started. It runs from VM creation (or, with
    /// [`EngineStart::AtBoot`], from [`start_engine`](Self::start_engine)
    /// or [`run`](Self::run)) until `run` returns; its snapshots stay
    /// readable after.
    pub fn engine(&self) -> Option<&Arc<Engine>> {
        self.tiering.engine()
    }

    /// Starts a tiering engine deferred by [`EngineStart::AtBoot`]
    /// (nothing to do otherwise). On failure nothing has started, and the
    /// engine stays deferred.
    pub fn start_engine(&mut self) -> Result<(), VmError> {
        Ok(self.tiering.start_engine()?)
    }

    /// The tiering policy in force or waiting for the engine to start;
    /// `None` without tiering.
    pub fn tiering_policy(&self) -> Option<TieringPolicy> {
        self.tiering.policy()
    }

    /// Replaces the tiering policy as a whole, before or after the engine
    /// starts; an invalid one changes nothing. `None` without tiering.
    pub fn set_tiering_policy(&mut self, policy: TieringPolicy) -> Option<Result<(), EngineError>> {
        self.tiering.set_policy(policy)
    }

    /// A handle that pauses, resumes and stops the vCPUs from any thread,
    /// also while [`run`](Self::run) blocks another.
    pub fn control_handle(&self) -> VcpuControl {
        VcpuControl {
            stop: self.stop.clone(),
            gate: self.gate.clone(),
            threads: self.threads.clone(),
        }
    }

    /// The VM's migrator, if one is configured: `migrate(frames, to_tier)`
    /// for whoever moves frames (the tiering engine, tests, benchmarks).
    pub fn migrator(&self) -> Option<&Arc<dyn Migrator>> {
        self.tiering.migrator()
    }

    /// The VM's KVM dirty log, when it is on (pre-copy migration or the
    /// dirty-log tracker); subscribe to read it.
    pub fn dirty_log(&self) -> Option<&KvmDirtyLog> {
        self.tiering.dirty_log()
    }

    /// The VM's userfaultfd guard: the remap migrators' write guard, or
    /// the fault sampler's.
    pub fn guard(&self) -> Option<&Arc<WriteGuard>> {
        self.tiering.guard()
    }

    /// What builds this VM's trackers, for a caller that builds them while
    /// the VM runs (and so cannot borrow it).
    pub fn trackers(&self) -> &VmTrackers {
        self.tiering.trackers()
    }

    /// A new access tracker of `kind` for this VM (`fault` sets the fault
    /// sampler of `fault-sample` and `combined`). Build the VM with
    /// [`with_trackers`](Self::with_trackers) naming the kind, or the
    /// dirty log is missing (an error) and the fault sampler observes
    /// nothing (its status says why).
    pub fn tracker(
        &self,
        kind: TrackerKind,
        fault: FaultSampleConfig,
    ) -> Result<Box<dyn AccessTracker>, VmError> {
        Ok(self.tiering.tracker(kind, fault)?)
    }

    /// [`tracker`](Self::tracker) by name: `dirty-log`, `fault-sample` or
    /// `combined`, with default fault-sampler settings.
    pub fn tracker_by_name(&self, name: &str) -> Result<Box<dyn AccessTracker>, VmError> {
        self.tracker(name.parse()?, FaultSampleConfig::default())
    }

    /// A handle that asks the guest to finish gracefully (see
    /// [`StopHandle`]).
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            payload: self
                .linux
                .is_none()
                .then(|| (self.memory.clone(), self.writes.clone())),
            power_button: self.linux.as_ref().map(|l| l.power_button.clone()),
        }
    }

    /// The guest's free RAM as its boot info describes it (where payload
    /// buffers live); `None` for a Linux guest.
    pub fn first_free_range(&self) -> Option<GpaRange> {
        self.free.first().copied()
    }

    /// The guest's shared state (reports, progress).
    pub fn state(&self) -> &Arc<GuestState> {
        &self.state
    }

    /// The VM's tiered memory.
    pub fn memory(&self) -> &Arc<TieredMemory> {
        &self.memory
    }

    /// Runs the guest to its end. `tick` is called about every `tick_every`
    /// from the calling thread while the guest runs. Starts a deferred
    /// tiering engine first, and stops the engine at the end. Time spent
    /// paused does not count towards the timeout.
    pub fn run(
        &mut self,
        tick_every: Duration,
        tick: &mut dyn FnMut(&GuestState, &[TierUsage]),
    ) -> Result<VmEnd, VmError> {
        vcpu::install_kick_handler().map_err(VmError::Thread)?;
        // Console input for as long as the vCPUs run; dropped at the end.
        let _input = match &self.linux {
            Some(devices) => devices.start_input()?,
            None => None,
        };
        self.start_engine()?;
        let (tx, rx) = mpsc::channel::<(u32, VcpuEnd)>();
        let mut started_threads = 0;
        for vcpu in std::mem::take(&mut self.vcpus) {
            let tx = tx.clone();
            let index = vcpu.index;
            // Counted live before the thread exists, so that a pause in
            // between waits for it; dropped with the closure if the spawn
            // fails.
            let live = self.gate.vcpu_started();
            let handle = std::thread::Builder::new()
                .name(format!("vcpu{index}"))
                .spawn(move || {
                    let _live = live;
                    let end = vcpu.run();
                    // The receiver outlives every vCPU thread (joined below).
                    let _ = tx.send((index, end));
                })
                .map_err(VmError::Thread);
            match handle {
                Ok(h) => {
                    self.threads.push(h);
                    started_threads += 1;
                }
                Err(e) => {
                    self.stop_all(&rx, started_threads);
                    self.join_vcpus();
                    if let Some(engine) = self.engine() {
                        engine.stop();
                    }
                    return Err(e);
                }
            }
        }
        drop(tx);

        let started = Instant::now();
        let total = started_threads;
        let mut finished = 0;
        let mut stopped = false;
        let mut end = None;
        while finished < total {
            match rx.recv_timeout(tick_every) {
                Ok((index, vcpu_end)) => {
                    finished += 1;
                    let failure = match vcpu_end {
                        VcpuEnd::Exited { code: 0 } => None,
                        VcpuEnd::Stopped => {
                            stopped = true;
                            None
                        }
                        VcpuEnd::Exited { code } => Some(VmEnd::GuestExit { vcpu: index, code }),
                        VcpuEnd::Reset => Some(VmEnd::GuestReset { vcpu: index }),
                        VcpuEnd::PowerOff => Some(VmEnd::PowerOff { vcpu: index }),
                        VcpuEnd::Failed { reason, rip } => Some(VmEnd::Failed {
                            vcpu: index,
                            reason,
                            rip,
                        }),
                    };
                    if let Some(f) = failure {
                        end.get_or_insert(f);
                        break;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            let active = started.elapsed().saturating_sub(self.gate.paused_time());
            if let Some(limit) = self.timeout.filter(|&t| active >= t) {
                end = Some(VmEnd::TimedOut {
                    seconds: limit.as_secs_f64(),
                });
                break;
            }
            tick(&self.state, &self.memory.tier_usage());
        }
        self.stop_all(&rx, total - finished);
        self.join_vcpus();
        // No frame moves once the guest is gone: callers verify memory.
        if let Some(e) = self.engine() {
            e.stop();
        }
        tick(&self.state, &self.memory.tier_usage());
        // Only a stop from outside (VcpuControl::stop) ends a vCPU as
        // stopped before the VM's end is decided here.
        let fallback = if stopped {
            VmEnd::Stopped
        } else {
            VmEnd::Success
        };
        Ok(end.unwrap_or(fallback))
    }

    /// Raises the stop flag, wakes paused vCPUs and kicks the others until
    /// `pending` of them have reported.
    fn stop_all(&self, rx: &mpsc::Receiver<(u32, VcpuEnd)>, mut pending: usize) {
        let control = self.control_handle();
        while pending > 0 {
            control.stop();
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(_) => pending -= 1,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        control.stop();
    }

    fn join_vcpus(&self) {
        for h in self.threads.take() {
            // A vCPU thread that panicked has already reported nothing; its
            // VM ends as stopped, the VMM carries on.
            let _ = h.join();
        }
    }
}

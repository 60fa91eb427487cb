//! Request and response bodies of the API. Request bodies refuse unknown
//! fields; the OpenAPI document is generated from these types.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use guest_memory::migrate::MigratorKind;
use guest_memory::{MemoryConfig, TierUsage};
use tiering::{FrameView, TieringPolicy};

/// The full configuration of a VM (`PUT /api/v1/vm.create`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VmConfigBody {
    /// Name of the VM in metrics labels and messages (letters, digits,
    /// `-`, `_`; at most 64).
    #[serde(default = "default_vm_id")]
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$", default = "vm0")]
    pub id: String,
    /// Number of vCPUs.
    #[serde(default = "default_vcpus")]
    #[schema(minimum = 1, default = 1)]
    pub vcpus: u32,
    /// Guest RAM and its tiers, fastest first. Sizes in bytes.
    pub memory: MemoryConfig,
    /// What the guest runs.
    pub payload: PayloadConfig,
    /// How frames move between tiers.
    #[serde(default)]
    pub migration: MigrationBody,
    /// The tiering policy; absent runs no tiering engine. Needs a
    /// migrator.
    #[serde(default)]
    pub tiering: Option<TieringPolicy>,
    /// Stop the guest after this many seconds.
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

fn default_vm_id() -> String {
    "vm0".into()
}

fn default_vcpus() -> u32 {
    1
}

/// What the guest runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PayloadConfig {
    /// A workload built into tiervisor: `NAME[:KEY=VALUE,...]`
    /// (hotset, zipf, pmbench, stream, memcheck, idle;
    /// docs/payload-abi.md).
    Workload {
        /// The workload and its arguments.
        spec: String,
    },
    /// A payload ELF file on the host.
    Elf {
        /// The file.
        #[schema(value_type = String)]
        path: PathBuf,
        /// Argument string passed to the payload.
        #[serde(default)]
        args: String,
    },
    /// An unmodified Linux kernel on the host: a bzImage (64-bit boot
    /// protocol) or an ELF vmlinux with a PVH entry, with an optional
    /// initramfs; its serial console (COM1) goes to the VMM's stdout.
    Kernel {
        /// The kernel image.
        #[schema(value_type = String)]
        kernel: PathBuf,
        /// An initramfs.
        #[serde(default)]
        #[schema(value_type = Option<String>)]
        initramfs: Option<PathBuf>,
        /// The kernel command line, passed as given.
        #[serde(default = "default_cmdline")]
        #[schema(default = "console=ttyS0")]
        cmdline: String,
    },
}

fn default_cmdline() -> String {
    "console=ttyS0".into()
}

/// Migration settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrationBody {
    /// The migrator; with a tiering policy and `none`, `remap` is used.
    #[serde(default)]
    pub migrator: MigratorKind,
    /// Copy engine of the remap migrators: `cpu`, `threads[:N][:pin]`.
    #[serde(default)]
    pub copy_engine: Option<String>,
}

/// `vmm.ping`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VmmPingResponse {
    /// tiervisor's version.
    pub version: String,
    /// The VMM's process id.
    pub pid: u32,
}

/// Lifecycle of the VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum VmState {
    /// Built, not booted.
    Created,
    /// vCPUs running.
    Running,
    /// vCPUs parked.
    Paused,
    /// The guest ended (it exited, failed, timed out, or was shut down).
    Shutdown,
}

impl std::fmt::Display for VmState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VmState::Created => "created",
            VmState::Running => "running",
            VmState::Paused => "paused",
            VmState::Shutdown => "shutdown",
        })
    }
}

/// How the guest ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VmEndInfo {
    /// Every vCPU exited with code 0 (or stopped on request).
    pub success: bool,
    /// The kind of end, for machines (the `/metrics` label).
    pub kind: VmEndKind,
    /// One line for humans.
    pub description: String,
}

/// The kinds of end a VM can come to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum VmEndKind {
    /// Every vCPU exited with code 0.
    Success,
    /// The guest powered itself off.
    PowerOff,
    /// The guest asked for a CPU reset; tiervisor ends the VM (a success).
    GuestReset,
    /// Stopped on request (`vm.shutdown`, a stop signal) before the guest
    /// ended on its own.
    Stopped,
    /// A vCPU exited with a non-zero code: the guest reported an error.
    GuestExit,
    /// A vCPU failed (a triple fault, an exit the VMM refuses): the guest
    /// crashed.
    Failed,
    /// The VM's timeout elapsed.
    TimedOut,
    /// The VM could not run: an error of the VMM, not the guest.
    VmmError,
}

impl VmEndKind {
    /// Every kind, in a fixed order.
    pub const ALL: [VmEndKind; 8] = [
        VmEndKind::Success,
        VmEndKind::PowerOff,
        VmEndKind::GuestReset,
        VmEndKind::Stopped,
        VmEndKind::GuestExit,
        VmEndKind::Failed,
        VmEndKind::TimedOut,
        VmEndKind::VmmError,
    ];

    /// Its name, as serialized.
    pub fn name(self) -> &'static str {
        match self {
            VmEndKind::Success => "success",
            VmEndKind::PowerOff => "power-off",
            VmEndKind::GuestReset => "guest-reset",
            VmEndKind::Stopped => "stopped",
            VmEndKind::GuestExit => "guest-exit",
            VmEndKind::Failed => "failed",
            VmEndKind::TimedOut => "timed-out",
            VmEndKind::VmmError => "vmm-error",
        }
    }
}

/// `vm.info`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmInfo {
    /// The configuration the VM was created with.
    pub config: VmConfigBody,
    /// Its state.
    pub state: VmState,
    /// Guest RAM in bytes.
    pub memory_bytes: u64,
    /// Bytes per frame.
    pub frame_size: u64,
    /// Per-tier occupancy now.
    pub tiers: Vec<TierUsage>,
    /// Whether a measurement of the tiers' speeds (`vm.tiers.measure`)
    /// runs now.
    #[serde(default)]
    pub measuring_tiers: bool,
    /// Whether a tiering engine runs.
    pub tiering: bool,
    /// Milliseconds since boot (0 before).
    pub uptime_ms: u64,
    /// How the guest ended, once it has.
    pub end: Option<VmEndInfo>,
}

/// Counters of one vCPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VcpuCounters {
    /// vCPU index.
    pub index: u32,
    /// Workload phase it is in.
    pub phase: u64,
    /// Operations the guest reported in its current phase.
    pub ops: u64,
    /// Hypercalls it made.
    pub hypercalls: u64,
}

/// `vm.counters`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VmCounters {
    /// Per vCPU.
    pub vcpus: Vec<VcpuCounters>,
    /// Guest log lines printed.
    pub log_lines: u64,
    /// Guest log lines dropped by the rate limit.
    pub log_lines_suppressed: u64,
    /// Per-tier occupancy.
    pub tiers: Vec<TierUsage>,
    /// Bytes per frame (what a tier's frames come to in bytes).
    pub frame_size: u64,
}

/// Every frame's tier and heat, as the VMM hands it to the server.
#[derive(Clone, Debug)]
pub struct FrameSnapshot {
    /// Bytes per frame.
    pub frame_size: u64,
    /// Tier names, fastest first (indices in `view.tier`).
    pub tier_names: Vec<String>,
    /// Tier and heat per frame.
    pub view: Arc<FrameView>,
}

/// Query of `vm.tiering.frames`: a page of frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FramesQuery {
    /// First frame index, at most 2^63 - 1 (a page past the last frame is
    /// empty).
    #[serde(default)]
    #[param(minimum = 0, maximum = 9223372036854775807_i64, default = 0)]
    pub offset: u64,
    /// Frames per page, at most 65536 (default 4096).
    #[serde(default = "default_frames_limit")]
    #[param(minimum = 0, maximum = 65536, default = 4096)]
    pub limit: u64,
}

/// Largest page of `vm.tiering.frames`.
pub const MAX_FRAMES_PAGE: u64 = 65_536;

fn default_frames_limit() -> u64 {
    4096
}

/// One frame in `vm.tiering.frames`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FrameEntry {
    /// Frame index.
    pub index: u64,
    /// Guest-physical address of its first byte.
    pub gpa: u64,
    /// Tier index (into `tiers`).
    pub tier: u8,
    /// Heat (decayed access evidence; 0 = never seen).
    pub heat: f32,
}

/// A page of `vm.tiering.frames`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FramesPage {
    /// Bytes per frame.
    pub frame_size: u64,
    /// Frames in the guest.
    pub total_frames: u64,
    /// First frame of this page.
    pub offset: u64,
    /// Tier names, fastest first.
    pub tiers: Vec<String>,
    /// The frames.
    pub frames: Vec<FrameEntry>,
}

/// `PUT vm.rebalance`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RebalanceRequest {
    /// The new fast-tier quota in bytes.
    pub fast_bytes: u64,
    /// Milliseconds allowed to get there.
    pub deadline_ms: u64,
}

/// Body of every error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, in one line.
    pub error: String,
    /// Details: the field and the reason for bad input, or null.
    #[schema(value_type = Object, nullable)]
    pub detail: serde_json::Value,
}

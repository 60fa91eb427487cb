//! How the VMM's errors read to an API caller: the caller's mistakes as
//! [`ControlError::Invalid`] naming the field as a JSON path
//! (`memory.tiers[1].size`), the VMM's own failures as
//! [`ControlError::Internal`].

use api::ControlError;
use api::types::{PayloadConfig, VmConfigBody, VmState};
use guest_memory::ConfigError;
use tiering::{EngineError, HeatSettingsError, PolicyError};

use crate::error_chain;
use crate::linux::LinuxError;
use crate::payload::boot::BootError;
use crate::payload::elf::ElfError;
use crate::vm_error::VmError;
use crate::vm_tiering::migration::MigrationError;

/// An internal error with its causes.
pub(crate) fn internal(e: &dyn std::error::Error) -> ControlError {
    ControlError::Internal(error_chain(e))
}

fn invalid(field: impl Into<String>, e: &dyn std::error::Error) -> ControlError {
    ControlError::invalid(field, error_chain(e))
}

/// A failed [`Vm::with_options`](crate::vm::Vm::with_options) for the VM
/// `body` describes.
pub(crate) fn create_error(e: VmError, body: &VmConfigBody) -> ControlError {
    let e = match e {
        VmError::Engine(engine) => {
            return engine_error(engine, "tiering.", "create the VM");
        }
        other => other,
    };
    let (payload_field, args_field) = match body.payload {
        PayloadConfig::Workload { .. } => ("payload.spec", "payload.spec"),
        PayloadConfig::Elf { .. } => ("payload.path", "payload.args"),
        PayloadConfig::Kernel { .. } => ("payload.kernel", "payload.cmdline"),
    };
    match &e {
        VmError::VcpuCount { .. } => invalid("vcpus", &e),
        VmError::Workload(_) => invalid("payload.spec", &e),
        VmError::ReadPayload { .. } => invalid("payload.path", &e),
        // Guest RAM too small to hold the image where it must load.
        VmError::Elf(ElfError::OutsideRam { .. }) => invalid("memory.size", &e),
        VmError::Elf(_) => invalid(payload_field, &e),
        VmError::Boot(b) => match b {
            BootError::ArgsTooLong(_) => invalid(args_field, &e),
            BootError::NoRoomForStacks { .. } => invalid("memory.size", &e),
            _ => internal(&e),
        },
        VmError::Linux(l) => match linux_field(l) {
            Some(field) => invalid(field, &e),
            None => internal(&e),
        },
        VmError::Memory(guest_memory::Error::Config(c)) => invalid(memory_field(c, body), c),
        VmError::Migration(m) => match m {
            MigrationError::Remap(_) | MigrationError::Kernel(_) => {
                invalid("migration.migrator", m)
            }
            _ => internal(&e),
        },
        VmError::UnknownTracker(_) | VmError::Tracker(_) => invalid("tiering.tracker", &e),
        VmError::TieringWithoutMigrator => invalid("migration.migrator", &e),
        _ => internal(&e),
    }
}

/// The field of a Linux payload a [`LinuxError`] is about; `None` for the
/// VMM's own failures.
fn linux_field(e: &LinuxError) -> Option<&'static str> {
    Some(match e {
        LinuxError::Read {
            what: "initramfs", ..
        }
        | LinuxError::EmptyInitramfs(_) => "payload.initramfs",
        LinuxError::Read { .. }
        | LinuxError::NotAKernel
        | LinuxError::BadBzImage(_)
        | LinuxError::BadElf(_)
        | LinuxError::Load(_) => "payload.kernel",
        LinuxError::CmdlineTooLong { .. } | LinuxError::CmdlineNul => "payload.cmdline",
        // The kernel or initramfs fits in a larger guest.
        LinuxError::KernelTooBig { .. }
        | LinuxError::InitramfsTooBig { .. }
        | LinuxError::RamTooSmall(_) => "memory.size",
        LinuxError::TooManyMemoryMapEntries(..) | LinuxError::Write { .. } => return None,
    })
}

/// An error of the tiering engine for a policy whose fields are under
/// `prefix` (`""` for a policy body, `"tiering."` inside a VM
/// configuration), refusing `action`.
pub(crate) fn engine_error(e: EngineError, prefix: &str, action: &'static str) -> ControlError {
    let field = |f: &str| format!("{prefix}{f}");
    match &e {
        EngineError::Policy(p) => invalid(field(&policy_field(p)), p),
        EngineError::Tracker { .. } => invalid(field("tracker"), &e),
        EngineError::Heat(_) => invalid(field("heat"), &e),
        EngineError::OneTier => invalid(prefix.trim_end_matches('.'), &e),
        EngineError::Deadline(_) => invalid("deadline_ms", &e),
        // The engine stops only when the guest has ended.
        EngineError::Stopped => ControlError::WrongState {
            state: VmState::Shutdown,
            action,
        },
        EngineError::Thread(_) => internal(&e),
    }
}

/// An error of [`Engine::rebalance`](tiering::Engine::rebalance): the
/// request has two fields, and every policy error is about the quota.
pub(crate) fn rebalance_error(e: EngineError) -> ControlError {
    match &e {
        EngineError::Policy(p) => invalid("fast_bytes", p),
        _ => engine_error(e, "", "rebalance"),
    }
}

/// The policy field a [`PolicyError`] is about.
fn policy_field(e: &PolicyError) -> String {
    match e {
        PolicyError::QuotaOrder { .. } => "fast_quota.min_bytes".into(),
        PolicyError::QuotaAboveCapacity { .. }
        | PolicyError::QuotaBelowSlowCapacity { .. }
        | PolicyError::QuotaBelowPinned { .. } => "fast_quota.max_bytes".into(),
        PolicyError::Headroom { .. } => "headroom_bytes".into(),
        PolicyError::Rate { field, .. } => (*field).into(),
        PolicyError::Threshold(_) => "threshold.heat".into(),
        PolicyError::Significance(_) => "significance".into(),
        PolicyError::Sampling(_) => "sampling".into(),
        PolicyError::Interval(_) => "interval_ms".into(),
        PolicyError::Heat(HeatSettingsError::Weight { which, .. }) => {
            format!("heat.{which}_weight")
        }
        PolicyError::Heat(HeatSettingsError::HalfLife { .. }) => "heat.half_life_ms".into(),
        PolicyError::UnknownTracker { .. } => "tracker".into(),
        PolicyError::TooManyPins(_) => "pinned".into(),
        PolicyError::PinOutside { index, .. } => format!("pinned[{index}]"),
        PolicyError::PinsOverlap { second, .. } => format!("pinned[{second}]"),
    }
}

/// The memory field a [`ConfigError`] is about.
fn memory_field(e: &ConfigError, body: &VmConfigBody) -> String {
    let tiers = &body.memory.tiers;
    // The tier a message names; the last of that name (a duplicate name is
    // the second one's fault).
    let tier = |name: &str, sub: &str| match tiers.iter().rposition(|t| t.name == name) {
        Some(i) => format!("memory.tiers[{i}]{sub}"),
        None => "memory.tiers".into(),
    };
    match e {
        ConfigError::NoTiers
        | ConfigError::TiersTooSmall { .. }
        | ConfigError::HugepagePool(_)
        | ConfigError::NotEnoughHugepages { .. } => "memory.tiers".into(),
        ConfigError::FrameSizeNotPowerOfTwo(_)
        | ConfigError::FrameSizeTooSmall { .. }
        | ConfigError::DaxAlignment { .. } => "memory.frame_size".into(),
        ConfigError::ZeroMemory
        | ConfigError::MemoryTooLarge(_)
        | ConfigError::MemoryNotFrameMultiple { .. }
        | ConfigError::RegionNotFrameMultiple { .. } => "memory.size".into(),
        ConfigError::DuplicateTierName(name) => tier(name, ".name"),
        ConfigError::ZeroProfile(name) => tier(name, ".profile"),
        ConfigError::MemfdWithoutSize(tier_name) => tier(tier_name, ".size"),
        ConfigError::TierNotFrameMultiple { tier: t, .. }
        | ConfigError::TierBelowOneFrame { tier: t, .. }
        | ConfigError::TierTooLarge { tier: t, .. }
        | ConfigError::SizeBeyondDevice { tier: t, .. } => tier(t, ".size"),
        ConfigError::NoSuchNumaNode { tier: t, .. } => tier(t, ".backend.numa_node"),
        ConfigError::HugetlbFrameSize { tier: t, .. } => tier(t, ".backend.hugetlb"),
        ConfigError::Stat { tier: t, .. }
        | ConfigError::NotFileOrDevice { tier: t, .. }
        | ConfigError::NotDax { tier: t, .. } => tier(t, ".backend.path"),
        ConfigError::SharedNumaNeedsMemfd(t) => tier(t, ".backend.kind"),
        ConfigError::HostNodes { tier: t, .. } | ConfigError::NoHostNodeLeft { tier: t, .. } => {
            tier(t, ".backend.numa_node")
        }
        ConfigError::SharedNumaHugetlb(t) => tier(t, ".backend.hugetlb"),
        ConfigError::SharedNumaSameNode { second, .. } => tier(second, ".backend.numa_node"),
    }
}

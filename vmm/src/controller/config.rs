//! The API's VM configuration ([`VmConfigBody`]) and the VMM's
//! ([`VmConfig`]) in both directions. What can be checked without KVM or
//! building anything is checked here, so the first error a caller sees
//! names the field that caused it; the rest is checked as the VM is built
//! (see [`errors`](super::errors)).

use std::time::Duration;

use api::ControlError;
use api::types::{MigrationBody, PayloadConfig, VmConfigBody};
use guest_memory::{MAX_SIZE, MIN_FRAME_SIZE};
use page_copy::EngineSpec;

use crate::linux::LinuxBoot;
use crate::vm::{PayloadSource, VmConfig};
use crate::vm_tiering::migration::{MigrationConfig, MigratorKind};

/// Longest VM id.
pub const MAX_ID_LEN: usize = 64;

/// Whether `name` is a usable id or tier name: 1 to [`MAX_ID_LEN`]
/// letters, digits, `-` and `_` (it ends up in metrics labels).
fn is_name(name: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The VM `body` describes, or the first field that is wrong.
pub fn vm_config(body: &VmConfigBody) -> Result<VmConfig, ControlError> {
    if !is_name(&body.id) {
        return Err(ControlError::invalid(
            "id",
            format!(
                "'{}' is not 1 to {MAX_ID_LEN} letters, digits, '-' and '_'",
                body.id
            ),
        ));
    }
    if body.vcpus == 0 {
        return Err(ControlError::invalid("vcpus", "a VM needs at least 1 vCPU"));
    }
    check_memory_shape(body)?;
    let timeout = match body.timeout_s {
        None => None,
        Some(t) => Some(
            Duration::try_from_secs_f64(t)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    ControlError::invalid("timeout_s", format!("{t} is not a positive number"))
                })?,
        ),
    };
    let (payload, args) = match &body.payload {
        PayloadConfig::Workload { spec } => {
            workloads::Spec::parse(spec)
                .map_err(|e| ControlError::invalid("payload.spec", e.to_string()))?;
            (PayloadSource::Embedded, spec.clone())
        }
        PayloadConfig::Elf { path, args } => (PayloadSource::File(path.clone()), args.clone()),
        PayloadConfig::Kernel {
            kernel,
            initramfs,
            cmdline,
        } => (
            PayloadSource::Linux(LinuxBoot {
                kernel: kernel.clone(),
                initramfs: initramfs.clone(),
                cmdline: cmdline.clone(),
            }),
            String::new(),
        ),
    };
    let copy_engine = match &body.migration.copy_engine {
        None => MigrationConfig::default().copy_engine,
        Some(spec) => spec
            .parse::<EngineSpec>()
            .map_err(|e| ControlError::invalid("migration.copy_engine", e.to_string()))?,
    };
    // As in `tiervisor run`: tiering needs a migrator, and plain remap is
    // the one that serves it best (docs/policy.md).
    let migrator = match (body.migration.migrator, &body.tiering) {
        (MigratorKind::None, Some(_)) => MigratorKind::Remap,
        (m, _) => m,
    };
    Ok(VmConfig {
        vcpus: body.vcpus,
        memory: body.memory.clone(),
        payload,
        args,
        timeout,
        migration: MigrationConfig {
            migrator,
            copy_engine,
        },
        dirty_log_tracking: false,
        tiering: body.tiering.clone(),
    })
}

/// The checks on guest RAM's shape that must come before the payload is
/// placed in it (a payload that does not fit a RAM of size 0 would blame
/// the payload), and the tier names, which deserializing does not check.
fn check_memory_shape(body: &VmConfigBody) -> Result<(), ControlError> {
    let memory = &body.memory;
    let frame = memory.frame_size;
    if !frame.is_power_of_two() || frame < MIN_FRAME_SIZE {
        return Err(ControlError::invalid(
            "memory.frame_size",
            format!("{frame} is not a power of two of at least {MIN_FRAME_SIZE}"),
        ));
    }
    if memory.size == 0 || memory.size > MAX_SIZE || memory.size % frame != 0 {
        return Err(ControlError::invalid(
            "memory.size",
            format!(
                "{} is not a multiple of the frame size {frame} in 1..={MAX_SIZE}",
                memory.size
            ),
        ));
    }
    if memory.tiers.is_empty() {
        return Err(ControlError::invalid(
            "memory.tiers",
            "no tiers: give at least one",
        ));
    }
    for (i, tier) in memory.tiers.iter().enumerate() {
        if !is_name(&tier.name) {
            return Err(ControlError::invalid(
                format!("memory.tiers[{i}].name"),
                format!(
                    "'{}' is not 1 to {MAX_ID_LEN} letters, digits, '-' and '_'",
                    tier.name
                ),
            ));
        }
    }
    Ok(())
}

/// The API's form of `config`, for a VM built outside the controller
/// (`tiervisor run`) and handed to it with
/// [`VmController::adopt`](super::VmController::adopt).
pub fn config_body(config: &VmConfig, id: &str) -> VmConfigBody {
    let payload = match &config.payload {
        PayloadSource::Embedded => PayloadConfig::Workload {
            spec: config.args.clone(),
        },
        PayloadSource::File(path) => PayloadConfig::Elf {
            path: path.clone(),
            args: config.args.clone(),
        },
        PayloadSource::Linux(boot) => PayloadConfig::Kernel {
            kernel: boot.kernel.clone(),
            initramfs: boot.initramfs.clone(),
            cmdline: boot.cmdline.clone(),
        },
    };
    VmConfigBody {
        id: id.into(),
        vcpus: config.vcpus,
        memory: config.memory.clone(),
        payload,
        migration: MigrationBody {
            migrator: config.migration.migrator,
            copy_engine: Some(config.migration.copy_engine.to_string()),
        },
        tiering: config.tiering.clone(),
        timeout_s: config.timeout.map(|t| t.as_secs_f64()),
    }
}

#[cfg(test)]
mod tests {
    use guest_memory::{MemoryConfig, TierSpec};
    use tiering::TieringPolicy;

    use super::*;

    const MIB: u64 = 1 << 20;

    fn body() -> VmConfigBody {
        let tier = |name: &str, size: u64| -> TierSpec {
            format!("name={name},backend=memfd,size={size}")
                .parse()
                .unwrap()
        };
        VmConfigBody {
            id: "vm0".into(),
            vcpus: 2,
            memory: MemoryConfig::new(
                64 * MIB,
                vec![tier("fast", 16 * MIB), tier("slow", 64 * MIB)],
            ),
            payload: PayloadConfig::Workload {
                spec: "hotset:verify=1".into(),
            },
            migration: MigrationBody::default(),
            tiering: Some(TieringPolicy::with_quota(16 * MIB)),
            timeout_s: Some(2.5),
        }
    }

    /// A change that breaks one field.
    type Edit = fn(&mut VmConfigBody);

    fn field(body: &VmConfigBody) -> String {
        match vm_config(body).unwrap_err() {
            ControlError::Invalid { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_body_becomes_the_config_tiervisor_run_would_build() {
        let config = vm_config(&body()).unwrap();
        assert_eq!(config.vcpus, 2);
        assert_eq!(config.payload, PayloadSource::Embedded);
        assert_eq!(config.args, "hotset:verify=1");
        assert_eq!(config.timeout, Some(Duration::from_millis(2500)));
        // Tiering without a migrator gets plain remap, as on the CLI.
        assert_eq!(config.migration.migrator, MigratorKind::Remap);
        assert_eq!(
            config.migration.copy_engine,
            MigrationConfig::default().copy_engine
        );
        let back = config_body(&config, "vm0");
        assert_eq!(back.migration.migrator, MigratorKind::Remap);
        assert_eq!(back.memory, body().memory);
        assert_eq!(back.payload, body().payload);
        assert_eq!(back.timeout_s, Some(2.5));
    }

    #[test]
    fn a_kernel_payload_becomes_a_linux_guest_and_back() {
        let mut b = body();
        b.payload = PayloadConfig::Kernel {
            kernel: "/boot/vmlinuz".into(),
            initramfs: Some("/boot/initrd.img".into()),
            cmdline: "console=ttyS0 quiet".into(),
        };
        let config = vm_config(&b).unwrap();
        assert_eq!(
            config.payload,
            PayloadSource::Linux(LinuxBoot {
                kernel: "/boot/vmlinuz".into(),
                initramfs: Some("/boot/initrd.img".into()),
                cmdline: "console=ttyS0 quiet".into(),
            })
        );
        assert_eq!(config_body(&config, "vm0").payload, b.payload);
        // The command line defaults to the serial console.
        let parsed: PayloadConfig =
            serde_json::from_str(r#"{"kind": "kernel", "kernel": "/k"}"#).unwrap();
        assert_eq!(
            parsed,
            PayloadConfig::Kernel {
                kernel: "/k".into(),
                initramfs: None,
                cmdline: "console=ttyS0".into(),
            }
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases: Vec<(&str, Edit)> = vec![
            ("id", (|b| b.id = "no spaces".into())),
            ("id", (|b| b.id = String::new())),
            ("vcpus", (|b| b.vcpus = 0)),
            ("memory.frame_size", (|b| b.memory.frame_size = 3 * MIB)),
            ("memory.size", (|b| b.memory.size = 0)),
            ("memory.size", (|b| b.memory.size = 3 * MIB + 4096)),
            ("memory.tiers", (|b| b.memory.tiers.clear())),
            (
                "memory.tiers[1].name",
                (|b| b.memory.tiers[1].name = "a/b".into()),
            ),
            ("timeout_s", (|b| b.timeout_s = Some(-1.0))),
            ("timeout_s", (|b| b.timeout_s = Some(f64::NAN))),
            ("timeout_s", (|b| b.timeout_s = Some(1e300))),
            (
                "payload.spec",
                (|b| {
                    b.payload = PayloadConfig::Workload {
                        spec: "hotset:hot-frac=7".into(),
                    }
                }),
            ),
            (
                "migration.copy_engine",
                (|b| b.migration.copy_engine = Some("warp".into())),
            ),
        ];
        for (want, break_it) in cases {
            let mut b = body();
            break_it(&mut b);
            assert_eq!(field(&b), want, "{b:?}");
        }
    }
}

//! The VM and the VMM: `ping`, `info` and `counters`.

use guest_memory::migrate::MigratorKind;
use guest_memory::{BackendSpec, TierSpec};

use api::types::{PayloadConfig, VmCounters, VmInfo, VmmPingResponse};

use crate::render::stats::tier_table;
use crate::render::table::{Table, key_values};
use crate::render::units::{duration_ms, size};

/// `tierctl ping`: the server's version and pid, and where it was reached.
pub fn render_ping(ping: &VmmPingResponse, target: &str) -> String {
    format!(
        "tiervisor {} (pid {}) at {target}\n",
        ping.version, ping.pid
    )
}

/// A migrator's name as the configuration spells it.
pub fn migrator_name(kind: MigratorKind) -> &'static str {
    match kind {
        MigratorKind::None => "none",
        MigratorKind::Remap => "remap",
        MigratorKind::RemapPrecopy => "remap-precopy",
        MigratorKind::Kernel => "kernel",
    }
}

/// A tier's backend in the `--tier` spelling (`memfd, numa-node=1,
/// hugetlb=on`, `file /dev/dax0.0`).
pub fn backend_text(spec: &TierSpec) -> String {
    match &spec.backend {
        BackendSpec::Memfd {
            numa_node,
            hugetlb,
            prealloc,
        } => {
            let mut text = "memfd".to_owned();
            if let Some(node) = numa_node {
                text.push_str(&format!(", numa-node={node}"));
            }
            if *hugetlb {
                text.push_str(", hugetlb=on");
            }
            if *prealloc {
                text.push_str(", prealloc=on");
            }
            text
        }
        BackendSpec::File { path } => format!("file {}", path.display()),
    }
}

/// `tierctl info`.
pub fn render_info(info: &VmInfo) -> String {
    let config = &info.config;
    let memory = &config.memory;
    let state = if info.uptime_ms > 0 {
        format!("{}, up {}", info.state, duration_ms(info.uptime_ms))
    } else {
        info.state.to_string()
    };
    let payload = match &config.payload {
        PayloadConfig::Workload { spec } => format!("workload {spec}"),
        PayloadConfig::Elf { path, args } if args.is_empty() => format!("elf {}", path.display()),
        PayloadConfig::Elf { path, args } => format!("elf {} {args:?}", path.display()),
        PayloadConfig::Kernel {
            kernel,
            initramfs: Some(initramfs),
            cmdline,
        } => format!(
            "kernel {} initramfs {} {cmdline:?}",
            kernel.display(),
            initramfs.display()
        ),
        PayloadConfig::Kernel {
            kernel, cmdline, ..
        } => format!("kernel {} {cmdline:?}", kernel.display()),
    };
    let migration = match &config.migration.copy_engine {
        Some(engine) => format!(
            "{}, copy engine {engine}",
            migrator_name(config.migration.migrator)
        ),
        None => migrator_name(config.migration.migrator).to_owned(),
    };
    let mut pairs = vec![
        ("vm", config.id.clone()),
        ("state", state),
        ("vcpus", config.vcpus.to_string()),
        (
            "memory",
            format!(
                "{} in {} frames of {}, placement {}, backing {}",
                size(info.memory_bytes),
                info.memory_bytes.checked_div(info.frame_size).unwrap_or(0),
                size(info.frame_size),
                memory.placement,
                memory.backing
            ),
        ),
        ("payload", payload),
        ("migration", migration),
        (
            "tiering",
            if info.tiering { "on" } else { "off" }.to_owned(),
        ),
    ];
    if let Some(timeout) = config.timeout_s {
        pairs.push(("timeout", format!("{timeout} s")));
    }
    if let Some(end) = &info.end {
        let how = if end.success { "success" } else { "failure" };
        pairs.push(("end", format!("{how}: {}", end.description)));
    }
    if info.measuring_tiers {
        pairs.push((
            "tier speeds",
            "being measured (vm.tiers.measure): ask again for the new figures".to_owned(),
        ));
    }
    let mut out = key_values(&pairs);
    out.push('\n');
    out.push_str(&tier_table(&info.tiers, Some(info.frame_size)));
    if !memory.tiers.is_empty() {
        out.push('\n');
        let mut backends = Table::new(&["TIER", "SIZE", "BACKEND"]).right_align(&[1]);
        for (index, spec) in memory.tiers.iter().enumerate() {
            backends.row(vec![
                format!("{index} {}", spec.name),
                spec.size.map_or("file size".to_owned(), size),
                backend_text(spec),
            ]);
        }
        out.push_str(&backends.render());
    }
    out
}

/// `tierctl counters`.
pub fn render_counters(counters: &VmCounters) -> String {
    let mut vcpus = Table::new(&["VCPU", "PHASE", "OPS", "HYPERCALLS"]).right_align(&[0, 1, 2, 3]);
    for v in &counters.vcpus {
        vcpus.row(vec![
            v.index.to_string(),
            v.phase.to_string(),
            v.ops.to_string(),
            v.hypercalls.to_string(),
        ]);
    }
    let mut out = vcpus.render();
    out.push('\n');
    out.push_str(&format!(
        "guest log: {} lines printed, {} suppressed\n\n",
        counters.log_lines, counters.log_lines_suppressed
    ));
    out.push_str(&tier_table(&counters.tiers, Some(counters.frame_size)));
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use guest_memory::{MemoryConfig, TierProfile, TierSpeed, TierUsage};

    use api::types::{MigrationBody, VcpuCounters, VmConfigBody, VmEndInfo, VmEndKind, VmState};

    use super::*;

    const MIB: u64 = 1 << 20;

    fn info() -> VmInfo {
        let tier = |name: &str, size, backend| TierSpec {
            name: name.into(),
            backend,
            size,
            profile: None,
        };
        VmInfo {
            config: VmConfigBody {
                id: "web-1".into(),
                vcpus: 2,
                memory: MemoryConfig::new(
                    1024 * MIB,
                    vec![
                        tier(
                            "dram",
                            Some(256 * MIB),
                            BackendSpec::Memfd {
                                numa_node: Some(0),
                                hugetlb: true,
                                prealloc: true,
                            },
                        ),
                        tier(
                            "pmem",
                            None,
                            BackendSpec::File {
                                path: PathBuf::from("/dev/dax0.0"),
                            },
                        ),
                    ],
                ),
                payload: PayloadConfig::Workload {
                    spec: "hotset:phases=3".into(),
                },
                migration: MigrationBody {
                    migrator: MigratorKind::Remap,
                    copy_engine: Some("threads:4".into()),
                },
                tiering: None,
                timeout_s: Some(30.0),
            },
            state: VmState::Running,
            memory_bytes: 1024 * MIB,
            frame_size: 2 * MIB,
            measuring_tiers: false,
            tiers: vec![
                TierUsage {
                    name: "dram".into(),
                    capacity_frames: 128,
                    used_frames: 128,
                    speed: TierSpeed::Declared {
                        profile: TierProfile {
                            read_latency_ns: 100,
                            read_bandwidth: 10 << 30,
                        },
                    },
                },
                TierUsage {
                    name: "pmem".into(),
                    capacity_frames: 1024,
                    used_frames: 384,
                    speed: TierSpeed::Declared {
                        profile: TierProfile {
                            read_latency_ns: 300,
                            read_bandwidth: 4 << 30,
                        },
                    },
                },
            ],
            tiering: true,
            uptime_ms: 83_000,
            end: None,
        }
    }

    #[test]
    fn info_shows_state_memory_payload_and_tiers() {
        let text = render_info(&info());
        for expected in [
            "vm         web-1\n",
            "state      running, up 1m 23s\n",
            "memory     1 GiB in 512 frames of 2 MiB, placement fast-first, backing per-tier\n",
            "payload    workload hotset:phases=3\n",
            "migration  remap, copy engine threads:4\n",
            "tiering    on\n",
            "timeout    30 s\n",
            "0 dram  256 MiB   256 MiB   128/128  [####################] 100.0%",
            "0 dram    256 MiB  memfd, numa-node=0, hugetlb=on, prealloc=on\n",
            "1 pmem  file size  file /dev/dax0.0\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert!(!text.contains("end "), "{text}");
        let mut ended = info();
        ended.state = VmState::Shutdown;
        ended.end = Some(VmEndInfo {
            success: false,
            kind: VmEndKind::GuestExit,
            description: "vCPU 1 exited with code 3".into(),
        });
        let text = render_info(&ended);
        assert!(
            text.contains("end        failure: vCPU 1 exited with code 3\n"),
            "{text}"
        );
    }

    #[test]
    fn counters_list_vcpus_log_and_tiers() {
        let counters = VmCounters {
            vcpus: vec![
                VcpuCounters {
                    index: 0,
                    phase: 2,
                    ops: 123_456,
                    hypercalls: 40,
                },
                VcpuCounters {
                    index: 1,
                    phase: 2,
                    ops: 7,
                    hypercalls: 41,
                },
            ],
            log_lines: 12,
            log_lines_suppressed: 3,
            tiers: info().tiers,
            frame_size: 2 * MIB,
        };
        let text = render_counters(&counters);
        assert!(text.starts_with(
            "VCPU  PHASE     OPS  HYPERCALLS\n   0      2  123456          40\n   1      2       7          41\n"
        ), "{text}");
        assert!(
            text.contains("guest log: 12 lines printed, 3 suppressed"),
            "{text}"
        );
        assert!(text.contains("384/1024"), "{text}");
        // Bytes, not "-": the counters carry the frame size.
        assert!(!text.contains(" - "), "{text}");
        assert!(text.contains("768 MiB     2 GiB"), "{text}");
    }

    #[test]
    fn ping_names_the_server() {
        let ping = VmmPingResponse {
            version: "0.1.0".into(),
            pid: 4242,
        };
        assert_eq!(
            render_ping(&ping, "unix socket /run/tiervisor.sock"),
            "tiervisor 0.1.0 (pid 4242) at unix socket /run/tiervisor.sock\n"
        );
    }
}

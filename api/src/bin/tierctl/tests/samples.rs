//! Response bodies the test server answers with, built from the API's
//! own types.

use guest_memory::{BackendSpec, MemoryConfig, TierProfile, TierSpec, TierSpeed, TierUsage};

use api::types::{MigrationBody, PayloadConfig, VmConfigBody, VmInfo, VmState};

pub const MIB: u64 = 1 << 20;

fn memfd() -> BackendSpec {
    BackendSpec::Memfd {
        numa_node: None,
        hugetlb: false,
        prealloc: false,
    }
}

/// A VM configuration as an operator would write it.
pub fn config() -> VmConfigBody {
    VmConfigBody {
        id: "vm-test".into(),
        vcpus: 2,
        memory: MemoryConfig::new(
            512 * MIB,
            vec![
                TierSpec {
                    name: "dram".into(),
                    backend: memfd(),
                    size: Some(128 * MIB),
                    profile: None,
                },
                TierSpec {
                    name: "slow".into(),
                    backend: memfd(),
                    size: Some(384 * MIB),
                    profile: None,
                },
            ],
        ),
        payload: PayloadConfig::Workload {
            spec: "hotset".into(),
        },
        migration: MigrationBody::default(),
        tiering: None,
        timeout_s: None,
    }
}

/// Tier occupancy of [`config`]'s VM.
pub fn tiers() -> Vec<TierUsage> {
    vec![
        TierUsage {
            name: "dram".into(),
            capacity_frames: 64,
            used_frames: 64,
            speed: TierSpeed::Declared {
                profile: TierProfile {
                    read_latency_ns: 100,
                    read_bandwidth: 10 << 30,
                },
            },
        },
        TierUsage {
            name: "slow".into(),
            capacity_frames: 192,
            used_frames: 192,
            speed: TierSpeed::Declared {
                profile: TierProfile {
                    read_latency_ns: 300,
                    read_bandwidth: 4 << 30,
                },
            },
        },
    ]
}

/// `vm.info` of a running VM.
pub fn info() -> VmInfo {
    VmInfo {
        config: config(),
        state: VmState::Running,
        memory_bytes: 512 * MIB,
        frame_size: 2 * MIB,
        tiers: tiers(),
        measuring_tiers: false,
        tiering: true,
        uptime_ms: 5_000,
        end: None,
    }
}

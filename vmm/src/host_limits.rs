//! Warnings for a VM configuration the host can run but not run well:
//! more vCPUs than host CPUs (they time-share, and every phase and timeout
//! stretches), and tiers that may take more host memory than is available
//! (the kernel then reclaims or kills). Not errors: an operator may mean
//! to overcommit. `tiervisor run` prints them before the guest starts; the
//! API's `vm.create` logs them.

use std::path::Path;

use guest_memory::{BackendSpec, MemoryConfig, format_size};

/// What the host has, as the warnings compare it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostResources {
    /// CPUs this process may run on.
    pub cpus: usize,
    /// `MemAvailable` of `/proc/meminfo`, bytes.
    pub mem_available: u64,
    /// Free hugetlb pages (`HugePages_Free` × `Hugepagesize`), bytes.
    pub hugepages_free: u64,
}

impl HostResources {
    /// This host's. Memory this process cannot read (`/proc/meminfo`
    /// absent) counts as unlimited: no warning is better than a wrong one.
    pub fn of_this_host() -> Self {
        let meminfo = std::fs::read_to_string(Path::new("/proc/meminfo")).unwrap_or_default();
        // The number after a field's name: KiB, or a count of pages.
        let field = |name: &str| -> Option<u64> {
            meminfo
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let huge_page = field("Hugepagesize:").unwrap_or(0).saturating_mul(1024);
        HostResources {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mem_available: field("MemAvailable:").map_or(u64::MAX, |k| k.saturating_mul(1024)),
            hugepages_free: field("HugePages_Free:")
                .map_or(u64::MAX, |pages| pages.saturating_mul(huge_page)),
        }
    }
}

/// The warnings for `vcpus` vCPUs over `memory` on `host`, one line each.
pub fn host_warnings(vcpus: u32, memory: &MemoryConfig, host: &HostResources) -> Vec<String> {
    let mut warnings = Vec::new();
    if vcpus as usize > host.cpus {
        warnings.push(format!(
            "{vcpus} vCPUs on a host with {} CPUs: they time-share, so the guest runs \
             slower and its phases and --timeout stretch",
            host.cpus
        ));
    }
    // Memfd tiers take host memory for the frames they hold (at most
    // guest RAM in all), a preallocated one for its whole size; file and
    // device-DAX tiers take none.
    let (mut regular, mut huge, mut on_demand) = (0u64, 0u64, 0u64);
    for tier in &memory.tiers {
        let BackendSpec::Memfd {
            hugetlb, prealloc, ..
        } = tier.backend
        else {
            continue;
        };
        let size = tier.size.unwrap_or(memory.size);
        let takes = if prealloc {
            size
        } else {
            let left = memory.size.saturating_sub(on_demand);
            on_demand += size.min(left);
            size.min(left)
        };
        if hugetlb {
            huge += takes;
        } else {
            regular += takes;
        }
    }
    if regular > host.mem_available {
        warnings.push(format!(
            "the memfd tiers may take {} of host memory, {} is available",
            format_size(regular),
            format_size(host.mem_available)
        ));
    }
    if huge > host.hugepages_free {
        warnings.push(format!(
            "the hugetlb tiers may take {} of huge pages, {} are free",
            format_size(huge),
            format_size(host.hugepages_free)
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use guest_memory::{Placement, TierSpec};

    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn memfd(name: &str, size: u64, hugetlb: bool, prealloc: bool) -> TierSpec {
        TierSpec {
            name: name.into(),
            backend: BackendSpec::Memfd {
                numa_node: None,
                hugetlb,
                prealloc,
            },
            size: Some(size),
            profile: None,
        }
    }

    fn memory(size: u64, tiers: Vec<TierSpec>) -> MemoryConfig {
        MemoryConfig {
            placement: Placement::FastFirst,
            ..MemoryConfig::new(size, tiers)
        }
    }

    const HOST: HostResources = HostResources {
        cpus: 2,
        mem_available: 4 * GIB,
        hugepages_free: 512 * MIB,
    };

    #[test]
    fn a_vm_that_fits_has_no_warning() {
        let m = memory(
            GIB,
            vec![
                memfd("dram", 256 * MIB, false, false),
                memfd("slow", GIB, false, false),
            ],
        );
        assert!(host_warnings(2, &m, &HOST).is_empty());
    }

    #[test]
    fn more_vcpus_than_cpus_is_named() {
        let m = memory(GIB, vec![memfd("dram", GIB, false, false)]);
        let w = host_warnings(1024, &m, &HOST);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("1024 vCPUs on a host with 2 CPUs"),
            "{w:?}"
        );
    }

    #[test]
    fn tiers_count_what_they_can_hold() {
        // Two on-demand tiers of 8 GiB hold at most the 2 GiB guest: fits.
        let m = memory(
            2 * GIB,
            vec![
                memfd("a", 8 * GIB, false, false),
                memfd("b", 8 * GIB, false, false),
            ],
        );
        assert!(host_warnings(2, &m, &HOST).is_empty());
        // A preallocated 8 GiB tier takes all of it: more than available.
        let m = memory(
            2 * GIB,
            vec![
                memfd("a", 8 * GIB, false, true),
                memfd("b", 2 * GIB, false, false),
            ],
        );
        let w = host_warnings(2, &m, &HOST);
        assert_eq!(
            w,
            ["the memfd tiers may take 10 GiB of host memory, 4 GiB is available"]
        );
        // Huge pages are counted against the free pool.
        let m = memory(GIB, vec![memfd("a", GIB, true, false)]);
        let w = host_warnings(2, &m, &HOST);
        assert_eq!(
            w,
            ["the hugetlb tiers may take 1 GiB of huge pages, 512 MiB are free"]
        );
    }
}

//! The `tiervisor` command line and its translation into a [`VmConfig`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use thiserror::Error;

use guest_memory::{BackendSpec, Backing, MemoryConfig, Placement, TierSpec};
use page_copy::EngineSpec;

use crate::migration::{MigrationConfig, MigratorKind};
use crate::vm::{PayloadSource, VmConfig};

/// The demo workload `tiervisor run` runs without arguments.
pub const DEFAULT_WORKLOAD: &str = "hotset";

/// tiervisor: a KVM virtual machine monitor with hypervisor-level memory
/// tiering.
#[derive(Debug, Parser)]
#[command(name = "tiervisor", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one VM in the foreground with a live status line.
    ///
    /// Without options it runs the embedded demo: the `hotset` workload on
    /// 2 vCPUs over a 1 GiB guest whose RAM is split between a 256 MiB
    /// `dram` tier and a 768 MiB `slow` tier (both memfd).
    Run(RunArgs),
}

/// Options of `tiervisor run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Embedded workload and its arguments, `NAME[:KEY=VALUE,...]`
    /// (hotset, zipf, pmbench, stream, memcheck; see docs/payload-abi.md).
    /// With --payload, this string is passed to that payload instead.
    #[arg(long, value_name = "NAME[:ARGS]")]
    pub workload: Option<String>,
    /// Run this payload ELF instead of the embedded workloads.
    #[arg(long, value_name = "PATH")]
    pub payload: Option<PathBuf>,
    /// Number of vCPUs.
    #[arg(long, default_value_t = 2)]
    pub vcpus: u32,
    /// Guest RAM size (K/M/G/T suffixes, binary).
    #[arg(long, default_value = "1G", value_parser = parse_size_arg)]
    pub memory: u64,
    /// A memory tier, fastest first; repeat for each tier:
    /// `name=NAME,backend=memfd|file,size=SIZE[,numa-node=N][,hugetlb=on][,path=PATH]`.
    /// Default: `dram` with a quarter of guest RAM and `slow` with the rest.
    #[arg(long = "tier", value_name = "SPEC")]
    pub tiers: Vec<TierSpec>,
    /// Frame size: the unit of placement and migration (power of two, >= 4K).
    #[arg(long, default_value = "2M", value_parser = parse_size_arg)]
    pub frame_size: u64,
    /// Initial placement of frames on tiers.
    #[arg(
        long,
        default_value = "fast-first",
        value_name = "fast-first|slow-first|interleave"
    )]
    pub placement: Placement,
    /// How tiers are backed: one memfd/file per tier (`per-tier`), or one
    /// memfd for all with tiers as NUMA nodes (`shared-numa`, for the
    /// kernel migrator).
    #[arg(long, default_value = "per-tier", value_name = "per-tier|shared-numa")]
    pub backing: Backing,
    /// How frames move between tiers: `none`, `remap` (userfaultfd
    /// write-protect, copy, remap), `remap-precopy` (copy while the guest
    /// runs, KVM dirty log for the delta) or `kernel` (move_pages).
    #[arg(long, default_value = "none", value_name = "KIND")]
    pub migrator: MigratorKind,
    /// Copy engine of the remap migrators: `cpu`, `threads[:N][:pin]`.
    #[arg(long, value_name = "SPEC")]
    pub copy_engine: Option<EngineSpec>,
    /// Move this many random frames per second to another tier while the
    /// guest runs (needs --migrator): live migration under a real workload,
    /// before the tiering engine decides moves itself.
    #[arg(long, value_name = "FRAMES_PER_SECOND", default_value_t = 0)]
    pub shuffle: u32,
    /// Write the final report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// Stop the guest after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    guest_memory::parse_size(s).map_err(|e| e.to_string())
}

/// Errors turning options into a configuration.
#[derive(Debug, Error, PartialEq)]
pub enum CliError {
    /// A timeout that is not a positive finite number.
    #[error("--timeout must be a positive number of seconds")]
    BadTimeout,
    /// --shuffle without a migrator.
    #[error("--shuffle needs --migrator (remap, remap-precopy or kernel)")]
    ShuffleWithoutMigrator,
    /// Default tiers need a guest of at least two frames.
    #[error("--memory {0} is too small to split into default tiers; give --tier options")]
    TooSmallForDefaultTiers(String),
}

impl RunArgs {
    /// The VM configuration these options describe.
    pub fn to_config(&self) -> Result<VmConfig, CliError> {
        let timeout = match self.timeout {
            Some(t) if !(t.is_finite() && t > 0.0) => return Err(CliError::BadTimeout),
            Some(t) => Some(Duration::from_secs_f64(t)),
            None => None,
        };
        if self.shuffle > 0 && self.migrator == MigratorKind::None {
            return Err(CliError::ShuffleWithoutMigrator);
        }
        let tiers = if self.tiers.is_empty() {
            default_tiers(self.memory, self.frame_size)?
        } else {
            self.tiers.clone()
        };
        let (payload, args) = match &self.payload {
            Some(path) => (
                PayloadSource::File(path.clone()),
                self.workload.clone().unwrap_or_default(),
            ),
            None => (
                PayloadSource::Embedded,
                self.workload
                    .clone()
                    .unwrap_or_else(|| DEFAULT_WORKLOAD.into()),
            ),
        };
        Ok(VmConfig {
            vcpus: self.vcpus,
            memory: MemoryConfig {
                size: self.memory,
                frame_size: self.frame_size,
                tiers,
                placement: self.placement,
                backing: self.backing,
            },
            payload,
            args,
            timeout,
            dirty_log_tracking: false,
            migration: MigrationConfig {
                migrator: self.migrator,
                copy_engine: self
                    .copy_engine
                    .unwrap_or_else(|| MigrationConfig::default().copy_engine),
            },
        })
    }
}

/// `dram` gets a quarter of guest RAM (whole frames, at least one), `slow`
/// the rest.
fn default_tiers(memory: u64, frame_size: u64) -> Result<Vec<TierSpec>, CliError> {
    let frames = memory.checked_div(frame_size).unwrap_or(0);
    if frames < 2 {
        return Err(CliError::TooSmallForDefaultTiers(
            guest_memory::format_size(memory),
        ));
    }
    let fast = (frames / 4).max(1) * frame_size;
    let memfd = || BackendSpec::Memfd {
        numa_node: None,
        hugetlb: false,
        prealloc: false,
    };
    Ok(vec![
        TierSpec {
            name: "dram".into(),
            backend: memfd(),
            size: Some(fast),
        },
        TierSpec {
            name: "slow".into(),
            backend: memfd(),
            size: Some(memory - fast),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(argv: &[&str]) -> RunArgs {
        let mut full = vec!["tiervisor", "run"];
        full.extend_from_slice(argv);
        match Cli::try_parse_from(full).unwrap().command {
            Command::Run(args) => args,
        }
    }

    #[test]
    fn demo_defaults() {
        let cfg = run_args(&[]).to_config().unwrap();
        assert_eq!(cfg.vcpus, 2);
        assert_eq!(cfg.memory.size, 1 << 30);
        assert_eq!(cfg.args, "hotset");
        assert_eq!(cfg.payload, PayloadSource::Embedded);
        let sizes: Vec<_> = cfg
            .memory
            .tiers
            .iter()
            .map(|t| (t.name.as_str(), t.size))
            .collect();
        assert_eq!(
            sizes,
            [("dram", Some(256 << 20)), ("slow", Some(768 << 20))]
        );
    }

    #[test]
    fn options_are_parsed() {
        let cfg = run_args(&[
            "--workload",
            "zipf:theta=0.8",
            "--vcpus",
            "1",
            "--memory",
            "512M",
            "--tier",
            "name=a,backend=memfd,size=512M",
            "--frame-size",
            "4K",
            "--placement",
            "interleave",
            "--timeout",
            "2.5",
        ])
        .to_config()
        .unwrap();
        assert_eq!(cfg.args, "zipf:theta=0.8");
        assert_eq!(cfg.memory.frame_size, 4096);
        assert_eq!(cfg.memory.tiers.len(), 1);
        assert_eq!(cfg.timeout, Some(Duration::from_millis(2500)));
    }

    #[test]
    fn malformed_options_are_refused() {
        let parse = |argv: &[&str]| {
            let mut full = vec!["tiervisor", "run"];
            full.extend_from_slice(argv);
            Cli::try_parse_from(full).map(|_| ())
        };
        assert!(parse(&["--tier", "backend=memfd"]).is_err());
        assert!(parse(&["--tier", "name=a,backend=floppy,size=1G"]).is_err());
        assert!(parse(&["--memory", "lots"]).is_err());
        assert!(parse(&["--placement", "random"]).is_err());
        assert_eq!(
            run_args(&["--timeout=-1"]).to_config().unwrap_err(),
            CliError::BadTimeout
        );
        assert!(matches!(
            run_args(&["--memory", "2M"]).to_config().unwrap_err(),
            CliError::TooSmallForDefaultTiers(_)
        ));
    }
}

//! The `tiervisor` command line and its translation into a [`VmConfig`].

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use api::ServerConfig;
use clap::{Args, Parser, Subcommand};
use thiserror::Error;

use guest_memory::{BackendSpec, Backing, MemoryConfig, Placement, TierSpec};
use page_copy::EngineSpec;
use tiering::TieringPolicy;

use crate::devices::console::{ConsoleConfig, ConsoleOutput};
use crate::graceful_stop::DEFAULT_STOP_GRACE;
use crate::linux::{DEFAULT_CMDLINE, LinuxBoot};
use crate::output_check::{OutputPathError, check_output_path};
use crate::vm::{PayloadSource, VmConfig};
use crate::vm_tiering::migration::{MigrationConfig, MigratorKind};

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
    Run(Box<RunArgs>),
    /// Serve the operator API and wait for `vm.create` (docs/api.md).
    Serve(ServeArgs),
}

/// Where the operator API listens (docs/api.md).
#[derive(Debug, Default, Args)]
pub struct ApiArgs {
    /// Serve the API on this unix socket (created with mode 0600; a stale
    /// socket file is replaced).
    #[arg(long, value_name = "PATH")]
    pub api_socket: Option<PathBuf>,
    /// Also serve it over TCP: `PORT` binds loopback (127.0.0.1),
    /// `ADDR:PORT` binds that address. Needs --api-token-file.
    #[arg(long, value_name = "[ADDR:]PORT", value_parser = parse_tcp_addr, requires = "api_token_file")]
    pub api_tcp: Option<SocketAddr>,
    /// File holding the bearer token TCP clients must send.
    #[arg(long, value_name = "FILE", requires = "api_tcp")]
    pub api_token_file: Option<PathBuf>,
}

impl ApiArgs {
    /// The server configuration, or `None` when no API was asked for.
    pub fn server_config(&self) -> Result<Option<ServerConfig>, CliError> {
        if self.api_socket.is_none() && self.api_tcp.is_none() {
            return Ok(None);
        }
        let token = match &self.api_token_file {
            Some(path) => Some(
                ServerConfig::read_token_file(path)
                    .map_err(|e| CliError::Api(crate::error_chain(&e)))?,
            ),
            None => None,
        };
        Ok(Some(ServerConfig {
            unix_socket: self.api_socket.clone(),
            tcp: self.api_tcp,
            token,
            ..ServerConfig::default()
        }))
    }
}

/// How a stop (SIGINT or SIGTERM, or `vm.shutdown`) waits for the guest.
#[derive(Debug, Default, Args)]
pub struct StopArgs {
    /// On SIGINT/SIGTERM or vm.shutdown, how long the guest may take to
    /// finish on its own (a payload ends its phase and runs its checks; a
    /// Linux guest gets an ACPI power button press) before its vCPUs are
    /// stopped [default: 5]. A second signal stops at once.
    #[arg(long, value_name = "SECONDS")]
    pub stop_grace: Option<f64>,
}

impl StopArgs {
    /// The grace period.
    pub fn stop_grace(&self) -> Result<Duration, CliError> {
        match self.stop_grace {
            None => Ok(DEFAULT_STOP_GRACE),
            Some(s) if s.is_finite() && (0.0..=86_400.0).contains(&s) => {
                Ok(Duration::from_secs_f64(s))
            }
            Some(_) => Err(CliError::BadStopGrace),
        }
    }
}

/// Options of `tiervisor serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where the API listens (a socket or TCP address is required).
    #[command(flatten)]
    pub api: ApiArgs,
    /// How a stop waits for the guest.
    #[command(flatten)]
    pub stop: StopArgs,
}

impl ServeArgs {
    /// The grace period of a stop.
    pub fn stop_grace(&self) -> Result<Duration, CliError> {
        self.stop.stop_grace()
    }
}

fn parse_tcp_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    s.parse()
        .map_err(|_| format!("'{s}' is neither a port nor ADDR:PORT"))
}

/// Options of `tiervisor run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Embedded workload and its arguments, `NAME[:KEY=VALUE,...]`
    /// (hotset, zipf, pmbench, stream, memcheck, idle; see
    /// docs/payload-abi.md).
    /// With --payload, this string is passed to that payload instead.
    #[arg(long, value_name = "NAME[:ARGS]")]
    pub workload: Option<String>,
    /// Run this payload ELF instead of the embedded workloads.
    #[arg(long, value_name = "PATH", conflicts_with = "kernel")]
    pub payload: Option<PathBuf>,
    /// Boot this Linux kernel instead of a payload: a bzImage (64-bit
    /// boot protocol) or an ELF vmlinux with a PVH entry. Its serial
    /// console (COM1) is tiervisor's stdout and stdin.
    #[arg(long, value_name = "PATH", conflicts_with = "workload")]
    pub kernel: Option<PathBuf>,
    /// The initramfs of --kernel.
    #[arg(long, value_name = "PATH", requires = "kernel")]
    pub initramfs: Option<PathBuf>,
    /// The kernel command line of --kernel [default: console=ttyS0].
    #[arg(long, value_name = "TEXT", requires = "kernel")]
    pub cmdline: Option<String>,
    /// Write the kernel's serial console to this file instead of stdout
    /// (console input from stdin is then off).
    #[arg(long, value_name = "FILE", requires = "kernel")]
    pub console_log: Option<PathBuf>,
    /// Number of vCPUs.
    #[arg(long, default_value_t = 2)]
    pub vcpus: u32,
    /// Guest RAM size: a number with K, M, G or T (binary: K = 1024;
    /// `1.5G` allowed; `GB` refused as ambiguous).
    #[arg(long, default_value = "1G", value_parser = parse_size_arg)]
    pub memory: u64,
    /// A memory tier, fastest first; repeat for each tier:
    /// `name=NAME,backend=memfd|file,size=SIZE[,numa-node=N][,hugetlb=on][,prealloc=on][,path=PATH]`
    /// `[,read-latency=250ns,read-bandwidth=8G]` (a declared speed, used
    /// instead of measuring the tier).
    /// Default: `dram` with a quarter of guest RAM and `slow` with the rest.
    #[arg(long = "tier", value_name = "SPEC", value_parser = parse_tier_arg)]
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
    /// Default: `remap` while the tiering engine runs, `none` with
    /// --no-tiering.
    #[arg(
        long,
        default_value = "none",
        hide_default_value = true,
        value_name = "KIND"
    )]
    pub migrator: MigratorKind,
    /// Copy engine of the remap migrators: `cpu`, `threads[:N][:pin]`,
    /// `kernel[:auto|:threads|:dma]` (the host-kernel offload device).
    #[arg(long, value_name = "SPEC")]
    pub copy_engine: Option<EngineSpec>,
    /// Move this many random frames per second to another tier while the
    /// guest runs (needs --migrator): live migration under a real workload,
    /// before the tiering engine decides moves itself.
    #[arg(long, value_name = "FRAMES_PER_SECOND", default_value_t = 0)]
    pub shuffle: u32,
    /// Run without the tiering engine (frames stay where placement put
    /// them, unless --shuffle moves them).
    #[arg(long)]
    pub no_tiering: bool,
    /// The tiering policy as a JSON file (docs/policy.md). Default: the
    /// first tier's whole size as the fast-tier quota, the dirty-log
    /// tracker, auto threshold.
    #[arg(long, value_name = "FILE", conflicts_with = "no_tiering")]
    pub policy: Option<PathBuf>,
    /// Write the final report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// Stop the guest after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Also serve the operator API for this VM.
    #[command(flatten)]
    pub api: ApiArgs,
    /// How a stop waits for the guest.
    #[command(flatten)]
    pub stop: StopArgs,
}

/// A `--tier` spec; the message names the cause too (`bad value for
/// 'size': '64MB' is ambiguous ...`).
fn parse_tier_arg(s: &str) -> Result<TierSpec, String> {
    s.parse::<TierSpec>().map_err(|e| crate::error_chain(&e))
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
    /// A stop grace period out of range.
    #[error("--stop-grace must be between 0 and 86400 seconds")]
    BadStopGrace,
    /// A file to write cannot be.
    #[error(transparent)]
    Output(#[from] OutputPathError),
    /// --shuffle without a migrator.
    #[error("--shuffle needs --migrator (remap, remap-precopy or kernel)")]
    ShuffleWithoutMigrator,
    /// The policy file could not be read or parsed.
    #[error("--policy {path}: {reason}")]
    Policy {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The API server options are unusable.
    #[error("API: {0}")]
    Api(String),
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
        // One tier: nothing to tier, and the engine stays off.
        let tiering = match (&self.policy, self.no_tiering || tiers.len() < 2) {
            (Some(path), _) => Some(read_policy(path)?),
            (None, true) => None,
            (None, false) => Some(TieringPolicy::with_quota(
                tiers[0].size.unwrap_or(self.memory).min(self.memory),
            )),
        };
        // Tiering needs a migrator. Plain remap: the frames it promotes
        // are the guest's most written, which pre-copy copies over and
        // over (docs/policy.md).
        let migrator = match (self.migrator, &tiering) {
            (MigratorKind::None, Some(_)) => MigratorKind::Remap,
            (m, _) => m,
        };
        let (payload, args) = match (&self.payload, &self.kernel) {
            (_, Some(kernel)) => (
                PayloadSource::Linux(LinuxBoot {
                    kernel: kernel.clone(),
                    initramfs: self.initramfs.clone(),
                    cmdline: self
                        .cmdline
                        .clone()
                        .unwrap_or_else(|| DEFAULT_CMDLINE.into()),
                }),
                String::new(),
            ),
            (Some(path), None) => (
                PayloadSource::File(path.clone()),
                self.workload.clone().unwrap_or_default(),
            ),
            (None, None) => (
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
            tiering,
            migration: MigrationConfig {
                migrator,
                copy_engine: self
                    .copy_engine
                    .unwrap_or_else(|| MigrationConfig::default().copy_engine),
            },
        })
    }
}

impl RunArgs {
    /// Checks every file the run will write (`--report-json`,
    /// `--console-log`, `--api-socket`) before the guest starts.
    pub fn check_outputs(&self) -> Result<(), CliError> {
        let outputs = [
            ("--report-json", &self.report_json),
            ("--console-log", &self.console_log),
            ("--api-socket", &self.api.api_socket),
        ];
        for (option, path) in outputs {
            if let Some(path) = path {
                check_output_path(option, path)?;
            }
        }
        Ok(())
    }

    /// The grace period of a stop.
    pub fn stop_grace(&self) -> Result<Duration, CliError> {
        self.stop.stop_grace()
    }

    /// Where a Linux guest's serial console goes: stdout with stdin as its
    /// input, or the --console-log file without input.
    pub fn console(&self) -> ConsoleConfig {
        match &self.console_log {
            Some(path) => ConsoleConfig {
                output: ConsoleOutput::File(path.clone()),
                stdin: false,
            },
            None => ConsoleConfig {
                output: ConsoleOutput::Stdout,
                stdin: true,
            },
        }
    }
}

fn read_policy(path: &std::path::Path) -> Result<TieringPolicy, CliError> {
    let fail = |reason: String| CliError::Policy {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| fail(e.to_string()))
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
            profile: None,
        },
        TierSpec {
            name: "slow".into(),
            backend: memfd(),
            size: Some(memory - fast),
            profile: None,
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
            Command::Run(args) => *args,
            Command::Serve(_) => unreachable!("a run command line"),
        }
    }

    /// The help names every embedded workload and every `--tier` key, and
    /// the migrator's real default.
    #[test]
    fn run_help_matches_what_run_accepts() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("run")
            .unwrap()
            .render_long_help()
            .to_string();
        for name in workloads::NAMES {
            assert!(help.contains(name), "run --help omits workload {name}");
        }
        for key in guest_memory::TIER_SPEC_KEYS {
            assert!(help.contains(&format!("{key}=")), "run --help omits {key}=");
        }
        assert!(!help.contains("[default: none]"), "{help}");
        assert!(
            help.contains("Default: `remap` while the tiering engine runs"),
            "{help}"
        );
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
        // Tiering is on, over the remap migrator, with the fast tier as
        // the quota.
        assert_eq!(cfg.migration.migrator, MigratorKind::Remap);
        assert_eq!(cfg.tiering.unwrap().fast_quota.max_bytes, 256 << 20);
        let off = run_args(&["--no-tiering"]).to_config().unwrap();
        assert_eq!(
            (off.tiering, off.migration.migrator),
            (None, MigratorKind::None)
        );
    }

    #[test]
    fn policy_files_are_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("tiervisor-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.json");
        std::fs::write(
            &good,
            r#"{"fast_quota": {"max_bytes": 1048576}, "tracker": "combined"}"#,
        )
        .unwrap();
        let cfg = run_args(&["--policy", good.to_str().unwrap()])
            .to_config()
            .unwrap();
        assert_eq!(cfg.tiering.unwrap().tracker, "combined");
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"fast_quota": {"max_bytes": 1}, "colour": "red"}"#).unwrap();
        let e = run_args(&["--policy", bad.to_str().unwrap()])
            .to_config()
            .unwrap_err();
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
        let missing = run_args(&["--policy", "/nonexistent/p.json"])
            .to_config()
            .unwrap_err();
        assert!(matches!(missing, CliError::Policy { .. }));
        std::fs::remove_dir_all(&dir).unwrap();
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
        // TCP needs a token file and the other way round.
        assert!(parse(&["--api-tcp", "8080"]).is_err());
        assert!(parse(&["--api-token-file", "/tmp/t"]).is_err());
        assert!(parse(&["--api-tcp", "no:port", "--api-token-file", "/t"]).is_err());
    }

    #[test]
    fn kernel_options_make_a_linux_guest() {
        let cfg = run_args(&[
            "--kernel",
            "/boot/vmlinuz",
            "--initramfs",
            "/boot/initrd.img",
            "--cmdline",
            "console=ttyS0 quiet",
        ])
        .to_config()
        .unwrap();
        assert_eq!(
            cfg.payload,
            PayloadSource::Linux(LinuxBoot {
                kernel: "/boot/vmlinuz".into(),
                initramfs: Some("/boot/initrd.img".into()),
                cmdline: "console=ttyS0 quiet".into(),
            })
        );
        let plain = run_args(&["--kernel", "/k"]).to_config().unwrap();
        let PayloadSource::Linux(boot) = plain.payload else {
            panic!("not a Linux guest");
        };
        assert_eq!(boot.cmdline, DEFAULT_CMDLINE);
        assert!(run_args(&["--kernel", "/k"]).console().stdin);
        let logged = run_args(&["--kernel", "/k", "--console-log", "/tmp/c"]).console();
        assert!(!logged.stdin);
        assert!(matches!(logged.output, ConsoleOutput::File(p) if p.as_os_str() == "/tmp/c"));
        let parse = |argv: &[&str]| {
            let mut full = vec!["tiervisor", "run"];
            full.extend_from_slice(argv);
            Cli::try_parse_from(full).map(|_| ())
        };
        // Linux options need a kernel; a kernel is not a payload.
        assert!(parse(&["--initramfs", "/i"]).is_err());
        assert!(parse(&["--cmdline", "x"]).is_err());
        assert!(parse(&["--console-log", "/c"]).is_err());
        assert!(parse(&["--kernel", "/k", "--payload", "/p"]).is_err());
        assert!(parse(&["--kernel", "/k", "--workload", "hotset"]).is_err());
    }

    #[test]
    fn api_tcp_binds_loopback_unless_told_otherwise() {
        assert_eq!(
            parse_tcp_addr("8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            parse_tcp_addr("0.0.0.0:9000").unwrap(),
            "0.0.0.0:9000".parse().unwrap()
        );
        assert!(run_args(&[]).api.server_config().unwrap().is_none());
        let socket = run_args(&["--api-socket", "/tmp/x.sock"]).api;
        let cfg = socket.server_config().unwrap().unwrap();
        assert_eq!(
            cfg.unix_socket.as_deref(),
            Some(std::path::Path::new("/tmp/x.sock"))
        );
        assert_eq!((cfg.tcp, cfg.token), (None, None));
        let missing = run_args(&["--api-tcp", "1", "--api-token-file", "/nonexistent/t"]).api;
        assert!(matches!(missing.server_config(), Err(CliError::Api(_))));
    }
}

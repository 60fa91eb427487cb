//! tierctl's command line: where the API is, and one subcommand per
//! endpoint.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Environment variable naming the API socket when `--api-socket` is not
/// given.
pub const SOCKET_ENV: &str = "TIERVISOR_API_SOCKET";
/// The API socket when neither `--api-socket` nor the environment names one.
pub const DEFAULT_SOCKET: &str = "/run/tiervisor.sock";

/// Help heading of the options that say where the API is.
const SERVER: &str = "Server";

/// tierctl: drive a running tiervisor VMM through its REST API.
///
/// Exit status: 0 on success, 1 when the server refused the request (its
/// error is printed) or an input file is bad, 2 when the server cannot be
/// reached (or the command line is wrong).
#[derive(Debug, Parser)]
#[command(name = "tierctl", version, about, long_about)]
pub struct Cli {
    /// Where the API is.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print the server's JSON response as it is (for scripts).
    #[arg(long, global = true, help_heading = "Output")]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Where the API is: a unix socket, or TCP with a bearer token.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// The API's unix socket [default: $TIERVISOR_API_SOCKET, else
    /// /run/tiervisor.sock].
    #[arg(long, value_name = "PATH", global = true, help_heading = SERVER)]
    pub api_socket: Option<PathBuf>,
    /// Talk to the API over TCP at ADDR (HOST:PORT) instead.
    #[arg(
        long,
        value_name = "ADDR",
        global = true,
        help_heading = SERVER,
        conflicts_with = "api_socket",
        value_parser = parse_addr
    )]
    pub api_tcp: Option<SocketAddr>,
    /// File holding the bearer token of the TCP API (surrounding
    /// whitespace ignored).
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        requires = "api_tcp",
        help_heading = SERVER
    )]
    pub token_file: Option<PathBuf>,
}

impl TargetArgs {
    /// The unix socket to use: the option, else `$TIERVISOR_API_SOCKET`,
    /// else [`DEFAULT_SOCKET`]. `env` is the variable's value.
    pub fn socket(&self, env: Option<std::ffi::OsString>) -> PathBuf {
        match (&self.api_socket, env) {
            (Some(path), _) => path.clone(),
            (None, Some(value)) if !value.is_empty() => PathBuf::from(value),
            (None, _) => PathBuf::from(DEFAULT_SOCKET),
        }
    }
}

/// Subcommands, one per endpoint.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check that the VMM answers: its version and pid (vmm.ping).
    Ping,
    /// Stop the VM if one runs and end the VMM process (vmm.shutdown).
    ShutdownVmm,
    /// Create the VM from a JSON configuration (vm.create).
    Create {
        /// The configuration (VmConfigBody, docs/api.md); `-` reads stdin.
        file: PathBuf,
    },
    /// Start the created VM's vCPUs (vm.boot).
    Boot,
    /// Park every vCPU (vm.pause).
    Pause,
    /// Let paused vCPUs run again (vm.resume).
    Resume,
    /// Stop the guest; the VM stays until deleted (vm.shutdown).
    Shutdown,
    /// Shut the VM down if it runs and free it (vm.delete).
    Delete,
    /// The VM's configuration, state and tier occupancy (vm.info).
    Info,
    /// Per-vCPU and per-tier counters (vm.counters).
    Counters,
    /// Measure the tiers' read speeds again, in the background
    /// (vm.tiers.measure); `tierctl info` shows the new figures.
    MeasureTiers,
    /// The tiering policy in force (GET vm.tiering).
    Policy,
    /// Replace the tiering policy (PUT vm.tiering); applied whole at the
    /// engine's next interval, or refused whole.
    SetPolicy {
        /// The policy as JSON (docs/policy.md); `-` reads stdin.
        file: PathBuf,
    },
    /// The tiering engine's counters (vm.tiering.stats).
    Stats(StatsArgs),
    /// Every frame's tier and heat (vm.tiering.frames): a table, or a heat
    /// map with --svg.
    Frames(FramesArgs),
    /// Move to a new fast-tier quota by a deadline (PUT vm.rebalance), or
    /// show the last rebalance's progress (--status).
    Rebalance(RebalanceArgs),
    /// The Prometheus metrics, as text (GET /metrics).
    Metrics,
}

/// Options of `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Refresh until interrupted (Ctrl-C): redrawn in place on a terminal,
    /// one table per refresh otherwise.
    #[arg(long)]
    pub watch: bool,
    /// Seconds between refreshes.
    #[arg(
        long,
        value_name = "SECS",
        default_value = "1",
        requires = "watch",
        value_parser = parse_interval
    )]
    pub interval: f64,
}

/// Options of `frames`.
#[derive(Debug, Args)]
pub struct FramesArgs {
    /// First frame listed.
    #[arg(long, value_name = "N", conflicts_with = "svg")]
    pub offset: Option<u64>,
    /// Frames listed (the server's default when absent).
    #[arg(long, value_name = "N", conflicts_with = "svg")]
    pub limit: Option<u64>,
    /// Fetch every frame and write a heat map of guest memory to FILE
    /// (SVG: one cell per frame in GPA order, hue = tier, shade = heat).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Options of `rebalance`.
#[derive(Debug, Args)]
pub struct RebalanceArgs {
    /// The new fast-tier quota: a number with K, M, G or T (binary: K =
    /// 1024; `1.5G` allowed; `GB` refused as ambiguous).
    #[arg(
        long,
        value_name = "SIZE",
        value_parser = parse_size_arg,
        required_unless_present = "status",
        requires = "deadline_ms"
    )]
    pub fast_bytes: Option<u64>,
    /// Milliseconds allowed to get there.
    #[arg(long, value_name = "N", requires = "fast_bytes")]
    pub deadline_ms: Option<u64>,
    /// Show the last rebalance's progress instead (GET vm.rebalance).
    #[arg(long, conflicts_with_all = ["fast_bytes", "deadline_ms"])]
    pub status: bool,
}

fn parse_size_arg(text: &str) -> Result<u64, String> {
    guest_memory::parse_size(text).map_err(|e| e.to_string())
}

/// Shortest refresh interval accepted.
const MIN_INTERVAL_SECS: f64 = 0.05;

fn parse_interval(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= MIN_INTERVAL_SECS => Ok(secs),
        _ => Err(format!(
            "'{text}' is not a number of seconds >= {MIN_INTERVAL_SECS}"
        )),
    }
}

fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.to_socket_addrs()
        .map_err(|e| format!("'{text}': {e}"))?
        .next()
        .ok_or_else(|| format!("'{text}' resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("tierctl").chain(args.iter().copied()))
    }

    #[test]
    fn socket_comes_from_the_option_then_the_environment_then_the_default() {
        let cli = parse(&["ping"]).unwrap();
        assert_eq!(cli.target.socket(None), PathBuf::from(DEFAULT_SOCKET));
        assert_eq!(
            cli.target.socket(Some("/tmp/a.sock".into())),
            PathBuf::from("/tmp/a.sock")
        );
        assert_eq!(
            cli.target.socket(Some("".into())),
            PathBuf::from(DEFAULT_SOCKET)
        );
        // Global options may follow the subcommand.
        let cli = parse(&["info", "--api-socket", "/tmp/b.sock", "--json"]).unwrap();
        assert_eq!(
            cli.target.socket(Some("/tmp/a.sock".into())),
            PathBuf::from("/tmp/b.sock")
        );
        assert!(cli.json);
    }

    #[test]
    fn tcp_excludes_the_socket_and_the_token_needs_tcp() {
        let cli = parse(&["--api-tcp", "127.0.0.1:8080", "--token-file", "t", "ping"]).unwrap();
        assert_eq!(cli.target.api_tcp, Some("127.0.0.1:8080".parse().unwrap()));
        assert!(parse(&["--api-tcp", "127.0.0.1:1", "--api-socket", "s", "ping"]).is_err());
        assert!(parse(&["--token-file", "t", "ping"]).is_err());
        assert!(parse(&["--api-tcp", "not an address", "ping"]).is_err());
    }

    #[test]
    fn rebalance_takes_a_size_and_a_deadline_or_status() {
        let cli = parse(&["rebalance", "--fast-bytes", "256M", "--deadline-ms", "5000"]).unwrap();
        let Command::Rebalance(r) = cli.command else {
            panic!("not rebalance")
        };
        assert_eq!((r.fast_bytes, r.deadline_ms), (Some(256 << 20), Some(5000)));
        assert!(parse(&["rebalance", "--status"]).is_ok());
        assert!(parse(&["rebalance"]).is_err());
        assert!(parse(&["rebalance", "--fast-bytes", "1G"]).is_err());
        assert!(parse(&["rebalance", "--deadline-ms", "5"]).is_err());
        assert!(parse(&["rebalance", "--fast-bytes", "1Q", "--deadline-ms", "5"]).is_err());
        assert!(
            parse(&[
                "rebalance",
                "--status",
                "--fast-bytes",
                "1G",
                "--deadline-ms",
                "5"
            ])
            .is_err()
        );
    }

    #[test]
    fn stats_interval_needs_watch_and_a_sane_value() {
        let cli = parse(&["stats", "--watch", "--interval", "0.5"]).unwrap();
        let Command::Stats(s) = cli.command else {
            panic!("not stats")
        };
        assert!(s.watch);
        assert_eq!(s.interval, 0.5);
        assert!(parse(&["stats", "--interval", "2"]).is_err());
        for bad in ["0", "-1", "nan", "inf", "x"] {
            assert!(
                parse(&["stats", "--watch", "--interval", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn frames_lists_a_page_or_draws_all() {
        assert!(parse(&["frames", "--offset", "10", "--limit", "5"]).is_ok());
        assert!(parse(&["frames", "--svg", "m.svg"]).is_ok());
        assert!(parse(&["frames", "--svg", "m.svg", "--limit", "5"]).is_err());
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

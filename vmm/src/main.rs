//! The `tiervisor` binary.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use api::types::PayloadConfig;
use api::{ApiServer, VmmControl};
use clap::Parser;

use vmm::cli::{Cli, Command, RunArgs, ServeArgs};
use vmm::controller::{ControllerOptions, EndedVm, VmController, config_body};
use vmm::devices::hypercall::LogSink;
use vmm::error_chain;
use vmm::graceful_stop::GracefulStop;
use vmm::guest_state::GuestState;
use vmm::host_limits::{HostResources, host_warnings};
use vmm::output_check::check_output_path;
use vmm::report::{RunReport, SignalStop};
use vmm::shuffle::Shuffler;
use vmm::status::StatusLine;
use vmm::stop_signals::StopSignals;
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd, VmOptions};

/// Exit status when the VM could not be created (bad configuration).
const EXIT_SETUP: u8 = 2;
/// Exit status when the guest exited with a non-zero code.
const EXIT_GUEST_CODE: u8 = 1;
/// Exit status when the guest crashed or misbehaved.
const EXIT_GUEST_FAILED: u8 = 3;
/// Exit status when the guest timed out.
const EXIT_TIMEOUT: u8 = 4;
/// Exit status of `run` when an operator's stop signal (SIGINT, SIGTERM)
/// ended it gracefully and the guest did not fail. (A second signal ends
/// the process at once with 128 + the signal's number.)
const EXIT_SIGNAL: u8 = 5;

fn main() -> ExitCode {
    // Before any other thread exists, so that every thread blocks them.
    let signals = match StopSignals::install() {
        Ok(s) => s,
        Err(e) => return fail(EXIT_SETUP, &format!("error: taking stop signals: {e}")),
    };
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(&args, &signals),
        Command::Serve(args) => serve(&args, &signals),
    }
}

/// Guest log lines on stderr, each prefixed with its vCPU.
fn stderr_log() -> LogSink {
    Arc::new(|vcpu, line| eprintln!("[guest vcpu{vcpu}] {line}"))
}

fn serve(args: &ServeArgs, signals: &StopSignals) -> ExitCode {
    let config = match args.api.server_config() {
        Ok(Some(c)) => c,
        Ok(None) => return fail(EXIT_SETUP, "error: serve needs --api-socket or --api-tcp"),
        Err(e) => return fail(EXIT_SETUP, &format!("error: {e}")),
    };
    let grace = match args.stop_grace() {
        Ok(g) => g,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {e}")),
    };
    if let Some(Err(e)) = args
        .api
        .api_socket
        .as_deref()
        .map(|p| check_output_path("--api-socket", p))
    {
        return fail(EXIT_SETUP, &format!("error: {e}"));
    }
    let options = ControllerOptions {
        keep_ended: true,
        ..controller_options(grace)
    };
    let controller = VmController::with_options(stderr_log(), options);
    let server = match ApiServer::start(config, controller.clone()) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {}", error_chain(&e))),
    };
    if let Some(path) = server.unix_socket() {
        eprintln!("tiervisor: API on {}", path.display());
        signals.remove_on_exit(path.to_path_buf());
    }
    if let Some(addr) = server.tcp_addr() {
        eprintln!("tiervisor: API on http://{addr}");
    }
    // Until vmm.shutdown has been answered (stopping the server sooner
    // would cut off that answer), or a stop signal: then the VM (if one
    // runs) stops as on vm.shutdown and the server ends.
    while !server.wait_for_shutdown_timeout(SIGNAL_POLL) {
        print_ended(&controller);
        if let Some(signal) = signals.received() {
            if let Err(e) = controller.shutdown_vmm() {
                eprintln!("tiervisor: {}: {e}", signal.name());
            }
            if let Some(end) = controller.end() {
                eprintln!("tiervisor: {}: {}", signal.name(), end.describe());
            }
            break;
        }
    }
    let _ = controller.delete_vm();
    server.stop();
    print_ended(&controller);
    ExitCode::SUCCESS
}

/// Prints the end-of-run report (phases, tiering, placement check) of
/// each VM that ended since the last call, as `tiervisor run` does for
/// its one VM.
fn print_ended(controller: &VmController) {
    for ended in controller.take_ended() {
        let EndedVm {
            config,
            end,
            parts,
            tiering,
        } = ended;
        let label = match &config.payload {
            PayloadConfig::Workload { spec } => spec.clone(),
            PayloadConfig::Elf { path, args } => format!("{} {args}", path.display()),
            PayloadConfig::Kernel { kernel, .. } => format!("linux {}", kernel.display()),
        };
        let report = RunReport::of_stopped_run(
            &label,
            config.vcpus,
            &parts.memory,
            &parts.guest,
            end,
            tiering,
        );
        println!("vm {}:", config.id);
        print!("{}", report.render());
    }
}

/// How often a waiting loop looks for a stop signal.
const SIGNAL_POLL: Duration = Duration::from_millis(100);
/// Longest wait for the answer to `vmm.shutdown` to be written.
const EXIT_ANSWER_WAIT: Duration = Duration::from_secs(10);

/// The controller's options with `grace` for stopping a guest.
fn controller_options(grace: Duration) -> ControllerOptions {
    ControllerOptions {
        shutdown_grace: grace,
        ..ControllerOptions::default()
    }
}

fn run(args: &RunArgs, signals: &StopSignals) -> ExitCode {
    let config = match args.to_config() {
        Ok(c) => c,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {e}")),
    };
    let server_config = match args.api.server_config() {
        Ok(c) => c,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {e}")),
    };
    // Outputs are checked before the guest starts: a report that cannot
    // be written should not cost a whole run.
    if let Err(e) = args.check_outputs() {
        return fail(EXIT_SETUP, &format!("error: {e}"));
    }
    let grace = match args.stop_grace() {
        Ok(g) => g,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {e}")),
    };
    let linux = matches!(config.payload, PayloadSource::Linux(_));
    // A Linux guest's console on stdout owns the terminal: no status line.
    let mut status = if linux && args.console_log.is_none() {
        StatusLine::hidden(config.vcpus as usize)
    } else {
        StatusLine::new(config.vcpus as usize)
    };
    let bar = status.bar();
    let log: LogSink = Arc::new(move |vcpu, line| {
        let line = format!("[guest vcpu{vcpu}] {line}");
        // A hidden bar (stderr not a terminal) drops println output.
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
    });
    let options = VmOptions {
        console: args.console(),
        ..VmOptions::default()
    };
    let host = HostResources::of_this_host();
    for warning in host_warnings(config.vcpus, &config.memory, &host) {
        eprintln!("tiervisor: warning: {warning}");
    }
    let mut vm = match Vm::with_options(&config, log, &options) {
        Ok(vm) => vm,
        Err(e) => {
            status.finish();
            return fail(EXIT_SETUP, &format!("error: {}", error_chain(&e)));
        }
    };
    let shuffler = match (args.shuffle, vm.migrator()) {
        (rate, Some(m)) if rate > 0 => {
            match Shuffler::start(m.clone(), vm.memory().clone(), rate) {
                Ok(s) => Some(s),
                Err(e) => return fail(EXIT_SETUP, &format!("error: starting --shuffle: {e}")),
            }
        }
        _ => None,
    };
    let memory = vm.memory().clone();
    let outcome = match &server_config {
        None => run_here(&mut vm, &mut status, signals, grace),
        Some(cfg) => run_with_api(vm, &config, cfg.clone(), &mut status, signals, grace),
    };
    let migrations = shuffler.map(Shuffler::stop);
    status.finish();
    let RunOutcome {
        end,
        guest,
        tiering,
        stopped_by_signal,
    } = match outcome {
        Ok(o) => o,
        Err(message) => return fail(EXIT_SETUP, &format!("error: {message}")),
    };
    let label = match &config.payload {
        PayloadSource::Linux(boot) => format!("linux {}", boot.kernel.display()),
        _ => config.args.clone(),
    };
    // Only now that the engine and the shuffler have stopped does no
    // exchange run, so the placement check sees no frame mid-exchange.
    let mut report =
        RunReport::of_stopped_run(&label, config.vcpus, &memory, &guest, end.clone(), tiering);
    report.migrations = migrations;
    report.stopped_by_signal = stopped_by_signal;
    print!("{}", report.render());
    if let Some(path) = &args.report_json {
        let written = serde_json::to_vec_pretty(&report)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(path, json));
        if let Err(e) = written {
            return fail(
                EXIT_SETUP,
                &format!("error: writing {}: {e}", path.display()),
            );
        }
    }
    match end {
        _ if end.is_success() && report.stopped_by_signal.is_some() => {
            eprintln!("tiervisor: stopped by a signal: {}", end.describe());
            ExitCode::from(EXIT_SIGNAL)
        }
        VmEnd::Success | VmEnd::Stopped => ExitCode::SUCCESS,
        VmEnd::GuestReset { .. } | VmEnd::PowerOff { .. } => {
            eprintln!("{}", end.describe());
            ExitCode::SUCCESS
        }
        VmEnd::GuestExit { .. } => fail(EXIT_GUEST_CODE, &format!("error: {}", end.describe())),
        VmEnd::Failed { .. } => fail(EXIT_GUEST_FAILED, &format!("error: {}", end.describe())),
        VmEnd::TimedOut { .. } => fail(EXIT_TIMEOUT, &format!("error: {}", end.describe())),
    }
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(code)
}

/// What a finished run leaves for its report.
struct RunOutcome {
    /// How it ended.
    end: VmEnd,
    /// The guest's reports.
    guest: Arc<GuestState>,
    /// The engine's last counters.
    tiering: Option<tiering::EngineStats>,
    /// The stop signal that ended it, if one did.
    stopped_by_signal: Option<SignalStop>,
}

/// Runs the VM on this thread; a stop signal stops it gracefully
/// ([`GracefulStop`], waiting `grace` for the guest).
fn run_here(
    vm: &mut Vm,
    status: &mut StatusLine,
    signals: &StopSignals,
    grace: Duration,
) -> Result<RunOutcome, String> {
    // Started here rather than in `run`, so that the stop has its engine.
    vm.start_engine().map_err(|e| error_chain(&e))?;
    let mut stop = GracefulStop::new(vm, grace);
    let mut signal = None;
    let end = vm
        .run(Duration::from_millis(200), &mut |state, tiers| {
            status.update(state, tiers);
            if !stop.begun()
                && let Some(s) = signals.received()
            {
                signal = Some(s);
                stop.begin();
            }
            stop.poll();
        })
        .map_err(|e| error_chain(&e))?;
    Ok(RunOutcome {
        end,
        guest: vm.state().clone(),
        tiering: vm.engine().map(|e| (*e.stats()).clone()),
        stopped_by_signal: signal.map(|s| SignalStop {
            signal: s.name().into(),
            hard_stop: stop.stopped_hard(),
        }),
    })
}

/// Runs the VM through a controller that also serves the API, until the
/// guest ends, an operator shuts it down or a stop signal comes (then it
/// stops as on `vm.shutdown`, waiting `grace` for the guest).
fn run_with_api(
    vm: Vm,
    config: &VmConfig,
    server: api::ServerConfig,
    status: &mut StatusLine,
    signals: &StopSignals,
    grace: Duration,
) -> Result<RunOutcome, String> {
    let controller = VmController::with_options(stderr_log(), controller_options(grace));
    let server = ApiServer::start(server, controller.clone()).map_err(|e| error_chain(&e))?;
    if let Some(path) = server.unix_socket() {
        signals.remove_on_exit(path.to_path_buf());
    }
    let body = config_body(config, "vm0");
    let (guest, memory) = (vm.state().clone(), vm.memory().clone());
    controller.adopt(vm, body).map_err(|e| e.to_string())?;
    controller.boot_vm().map_err(|e| e.to_string())?;
    let mut engine = None;
    let mut stopped_by_signal = None;
    while !controller.wait_for_shutdown(Duration::from_millis(200)) {
        status.update(&guest, &memory.tier_usage());
        if controller.exit_requested() {
            break;
        }
        if let Some(signal) = signals.received() {
            let stopped = controller.shutdown_vm();
            stopped_by_signal = Some(SignalStop {
                signal: signal.name().into(),
                hard_stop: controller.end() == Some(VmEnd::Stopped),
            });
            if let Err(e) = stopped {
                eprintln!("tiervisor: {}: {e}", signal.name());
            }
            break;
        }
    }
    if controller.exit_requested() {
        // vmm.shutdown stopped the VM, then answers: let the answer go
        // out before the server closes its connections.
        server.wait_for_shutdown_timeout(EXIT_ANSWER_WAIT);
    }
    if let Some(parts) = controller.parts() {
        engine = parts.engine;
    }
    let end = controller.end().unwrap_or(VmEnd::Stopped);
    let tiering = engine.map(|e| (*e.stats()).clone());
    // The VM is done: release it before the server, so a client that
    // asks meanwhile sees it shut down, not gone.
    let _ = controller.delete_vm();
    server.stop();
    Ok(RunOutcome {
        end,
        guest,
        tiering,
        stopped_by_signal,
    })
}

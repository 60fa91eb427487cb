//! The `tiervisor` binary.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use api::{ApiServer, VmmControl};
use clap::Parser;

use vmm::cli::{Cli, Command, RunArgs, ServeArgs};
use vmm::controller::{VmController, config_body};
use vmm::devices::hypercall::LogSink;
use vmm::error_chain;
use vmm::guest_state::GuestState;
use vmm::placement_check::PlacementCheck;
use vmm::report::RunReport;
use vmm::shuffle::Shuffler;
use vmm::status::StatusLine;
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd, VmOptions};

/// Exit status when the VM could not be created (bad configuration).
const EXIT_SETUP: u8 = 2;
/// Exit status when the guest exited with a non-zero code.
const EXIT_GUEST_CODE: u8 = 1;
/// Exit status when the guest crashed or misbehaved.
const EXIT_GUEST_FAILED: u8 = 3;
/// Exit status when the guest timed out.
const EXIT_TIMEOUT: u8 = 4;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(&args),
        Command::Serve(args) => serve(&args),
    }
}

/// Guest log lines on stderr, each prefixed with its vCPU.
fn stderr_log() -> LogSink {
    Arc::new(|vcpu, line| eprintln!("[guest vcpu{vcpu}] {line}"))
}

fn serve(args: &ServeArgs) -> ExitCode {
    let config = match args.api.server_config() {
        Ok(Some(c)) => c,
        Ok(None) => return fail(EXIT_SETUP, "error: serve needs --api-socket or --api-tcp"),
        Err(e) => return fail(EXIT_SETUP, &format!("error: {e}")),
    };
    let controller = VmController::new(stderr_log());
    let server = match ApiServer::start(config, controller.clone()) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {}", error_chain(&e))),
    };
    if let Some(path) = server.unix_socket() {
        eprintln!("tiervisor: API on {}", path.display());
    }
    if let Some(addr) = server.tcp_addr() {
        eprintln!("tiervisor: API on http://{addr}");
    }
    server.wait_for_shutdown();
    server.stop();
    ExitCode::SUCCESS
}

fn run(args: &RunArgs) -> ExitCode {
    let config = match args.to_config() {
        Ok(c) => c,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {e}")),
    };
    let server_config = match args.api.server_config() {
        Ok(c) => c,
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
    let outcome = match &server_config {
        None => run_here(&mut vm, &mut status),
        Some(cfg) => run_with_api(vm, &config, cfg.clone(), &mut status),
    };
    let migrations = shuffler.map(Shuffler::stop);
    status.finish();
    let (end, guest, tiers, tiering, check) = match outcome {
        Ok(o) => o,
        Err(message) => return fail(EXIT_SETUP, &format!("error: {message}")),
    };
    let label = match &config.payload {
        PayloadSource::Linux(boot) => format!("linux {}", boot.kernel.display()),
        _ => config.args.clone(),
    };
    let mut report = RunReport::collect(
        &label,
        config.vcpus,
        config.memory.size,
        config.memory.frame_size,
        &guest,
        &tiers,
        end.clone(),
    );
    report.migrations = migrations;
    report.tiering = tiering;
    report.placement_check = Some(check);
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

/// What a finished run leaves for its report: how it ended, the guest's
/// reports, tier occupancy, the engine's last counters and the placement
/// check.
type RunOutcome = (
    VmEnd,
    Arc<GuestState>,
    Vec<guest_memory::TierUsage>,
    Option<tiering::EngineStats>,
    PlacementCheck,
);

/// Runs the VM on this thread.
fn run_here(vm: &mut Vm, status: &mut StatusLine) -> Result<RunOutcome, String> {
    let end = vm
        .run(Duration::from_millis(200), &mut |state, tiers| {
            status.update(state, tiers)
        })
        .map_err(|e| error_chain(&e))?;
    Ok((
        end,
        vm.state().clone(),
        vm.memory().tier_usage(),
        vm.engine().map(|e| (*e.stats()).clone()),
        PlacementCheck::run(vm.memory()),
    ))
}

/// Runs the VM through a controller that also serves the API, until the
/// guest ends or an operator shuts it down.
fn run_with_api(
    vm: Vm,
    config: &VmConfig,
    server: api::ServerConfig,
    status: &mut StatusLine,
) -> Result<RunOutcome, String> {
    let controller = VmController::new(stderr_log());
    let server = ApiServer::start(server, controller.clone()).map_err(|e| error_chain(&e))?;
    let body = config_body(config, "vm0");
    let (guest, memory) = (vm.state().clone(), vm.memory().clone());
    controller.adopt(vm, body).map_err(|e| e.to_string())?;
    controller.boot_vm().map_err(|e| e.to_string())?;
    let mut engine = None;
    while !controller.wait_for_shutdown(Duration::from_millis(200)) {
        status.update(&guest, &memory.tier_usage());
        if controller.exit_requested() {
            break;
        }
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
    let check = PlacementCheck::run(&memory);
    Ok((end, guest, memory.tier_usage(), tiering, check))
}

//! The `tiervisor` binary.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use vmm::cli::{Cli, Command, RunArgs};
use vmm::devices::hypercall::LogSink;
use vmm::error_chain;
use vmm::report::RunReport;
use vmm::shuffle::Shuffler;
use vmm::status::StatusLine;
use vmm::vm::{Vm, VmEnd};

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
    }
}

fn run(args: &RunArgs) -> ExitCode {
    let config = match args.to_config() {
        Ok(c) => c,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {e}")),
    };
    let mut status = StatusLine::new(config.vcpus as usize);
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
    let mut vm = match Vm::new(&config, log) {
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
    let end = vm.run(
        std::time::Duration::from_millis(200),
        &mut |state, tiers| status.update(state, tiers),
    );
    let migrations = shuffler.map(Shuffler::stop);
    status.finish();
    let end = match end {
        Ok(end) => end,
        Err(e) => return fail(EXIT_SETUP, &format!("error: {}", error_chain(&e))),
    };
    let mut report = RunReport::collect(
        &config.args,
        config.vcpus,
        config.memory.size,
        config.memory.frame_size,
        vm.state(),
        &vm.memory().tier_usage(),
        end.clone(),
    );
    report.migrations = migrations;
    report.tiering = vm.engine().map(|e| (*e.stats()).clone());
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
        VmEnd::GuestExit { .. } => fail(EXIT_GUEST_CODE, &format!("error: {}", end.describe())),
        VmEnd::Failed { .. } => fail(EXIT_GUEST_FAILED, &format!("error: {}", end.describe())),
        VmEnd::TimedOut { .. } => fail(EXIT_TIMEOUT, &format!("error: {}", end.describe())),
    }
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(code)
}

//! `/init` (PID 1) of the tiered-host Linux guest: mounts the pseudo file systems, runs a
//! data-verifying memory workload while tiervisor migrates the guest's frames underneath it,
//! reports `@@guest ...` lines on the console and powers the guest off. As PID 1 it also
//! watches the ACPI power button: a press ends the workload early (after at least two
//! rounds), and the guest checks its data and powers off as usual.
//!
//! Run as an ordinary process it takes its settings from `GUEST_CMDLINE` instead of
//! `/proc/cmdline` and exits with 0 on pass / 1 on fail instead of powering off.

use std::error::Error;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use std::{env, fs, panic, process};

/// Prints one `@@guest` line and flushes it, ignoring console errors (nowhere to report them).
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut out = ::std::io::stdout().lock();
        let _ = ::std::io::Write::write_fmt(&mut out, format_args!("@@guest {}\n", format_args!($($arg)*)));
        let _ = ::std::io::Write::flush(&mut out);
    }};
}

mod pattern;
mod pid1;
mod power_button;
mod settings;
mod workload;

use settings::{Settings, mem_total_kib, parse_cmdline, resolve};

/// Why the guest could not run its workload.
#[derive(Debug, thiserror::Error)]
enum InitError {
    #[error(transparent)]
    Pid1(#[from] pid1::Pid1Error),
    #[error(transparent)]
    Settings(#[from] settings::SettingsError),
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    #[error("cannot read {path}")]
    Read {
        path: &'static str,
        #[source]
        source: io::Error,
    },
}

/// Raised by a power button press: the workload stops after its current round.
static STOP: AtomicBool = AtomicBool::new(false);

fn read(path: &'static str) -> Result<String, InitError> {
    fs::read_to_string(path).map_err(|source| InitError::Read { path, source })
}

/// The error and its causes on one line.
fn describe(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text = format!("{text}: {e}");
        cause = e.source();
    }
    text
}

/// Sets up, runs the workload and reports; `Ok(true)` on pass.
fn run(pid1: bool) -> Result<bool, InitError> {
    let cmdline = if pid1 {
        pid1::set_up()?;
        // Not fatal: without the button the guest still runs its workload.
        if let Err(e) = power_button::watch(&STOP) {
            say!("power-button unavailable: {}", describe(&e));
        }
        read("/proc/cmdline")?
    } else {
        env::var("GUEST_CMDLINE").unwrap_or_default()
    };
    let overrides = parse_cmdline(&cmdline)?;
    let total_kib = mem_total_kib(&read("/proc/meminfo")?)?;
    // SAFETY: sysconf only reads system configuration.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let settings = resolve(&overrides, total_kib, usize::try_from(online).unwrap_or(1))?;
    let Settings {
        mib,
        seconds,
        threads,
        cpus,
        read_rounds,
        hot_mib,
    } = settings;
    say!(
        "start mib={mib} threads={threads} seconds={seconds} cpus={cpus} \
         read-rounds={read_rounds} hot-mib={hot_mib}"
    );
    let started = Instant::now();
    let reports = workload::run_workload(&settings, &STOP)?;
    let elapsed = started.elapsed().as_secs_f64();
    for (i, r) in reports.iter().enumerate() {
        say!(
            "thread={i} rounds={} words={} errors={}",
            r.rounds,
            r.words,
            r.mismatches.errors
        );
    }
    let errors: u64 = reports.iter().map(|r| r.mismatches.errors).sum();
    if errors > 0 {
        say!("result=fail errors={errors}");
        return Ok(false);
    }
    let rounds = reports.iter().map(|r| r.rounds).min().unwrap_or(0);
    let stopped = if STOP.load(Ordering::SeqCst) {
        " stopped=power-button"
    } else {
        ""
    };
    say!("result=pass rounds={rounds} mib={mib} seconds={elapsed:.1}{stopped}");
    Ok(true)
}

/// Ends the run: power off as PID 1, exit with 0 (pass) or 1 (fail) otherwise.
fn finish(pid1: bool, passed: bool) -> ! {
    if pid1 {
        pid1::power_off()
    }
    let _ = io::stdout().flush();
    process::exit(if passed { 0 } else { 1 })
}

fn main() {
    let pid1 = process::id() == 1;
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        default_hook(info);
        say!("result=fail reason=panic");
        finish(pid1, false);
    }));
    let passed = run(pid1).unwrap_or_else(|e| {
        say!("result=fail reason={}", describe(&e));
        false
    });
    finish(pid1, passed)
}

//! `tierctl`: the command-line client of tiervisor's REST API, in the
//! manner of Cloud Hypervisor's `ch-remote` (docs/api.md).

mod cli;
mod commands;
mod endpoint;
mod error;
mod heatmap;
mod render;
mod watch;

#[cfg(test)]
mod tests;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, SOCKET_ENV};
use crate::commands::Output;
use crate::endpoint::Endpoint;
use crate::error::{TierctlError, report_text};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    let mut lock = stdout.lock();
    let result = Endpoint::new(&cli.target, std::env::var_os(SOCKET_ENV)).and_then(|endpoint| {
        let mut output = Output {
            out: &mut lock,
            json: cli.json,
            terminal,
        };
        commands::run(&cli, &endpoint, &mut output)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&e, cli.json);
            ExitCode::from(e.exit_code())
        }
    }
}

/// Prints `e` on stderr (nothing for a closed stdout).
fn report(e: &TierctlError, json: bool) {
    if let Some(text) = report_text(e, json) {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

//! The `tierbench` binary: parses the command line, runs the selected
//! suites (tables on stdout, progress on stderr) and writes the files
//! asked for.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use thiserror::Error;
use vmm::error_chain;

use bench::cli::Cli;
use bench::invocation::Invocation;
use bench::machine::MachineInfo;
use bench::output::{self, OutputError};
use bench::report::{BenchReport, render_suite_text};
use bench::suite::{self, Suite, SuiteError};
use bench::table::RowWidthError;

/// Why a run failed.
#[derive(Debug, Error)]
enum RunError {
    #[error(transparent)]
    Suite(#[from] SuiteError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("render results")]
    Table(#[from] RowWidthError),
    #[error("write to stdout")]
    Stdout(#[source] io::Error),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let suites = match cli.suites() {
        Ok(suites) => suites,
        Err(message) => Cli::command()
            .error(ErrorKind::ArgumentConflict, message)
            .exit(),
    };
    match run(&cli, &suites) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tierbench: error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli, suites: &[Suite]) -> Result<(), RunError> {
    let mut report = BenchReport::new(Invocation::capture(cli.quick), MachineInfo::detect());
    let mut stdout = io::stdout().lock();
    let mut print = |text: &str| {
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(RunError::Stdout)
    };
    print(&report.render_header())?;
    let options = cli.run_options();
    for &suite in suites {
        let result = suite::run(suite, &options)?;
        print(&render_suite_text(&result)?)?;
        report.results.push(result);
    }
    report.invocation.finish();
    print(&format!("load: {}\n", report.invocation.describe_load()))?;

    if let Some(path) = &cli.json {
        output::write_json(&report, path)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &cli.markdown {
        output::write_markdown(&report, path)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(dir) = &cli.svg {
        for path in output::write_svgs(&report, dir)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

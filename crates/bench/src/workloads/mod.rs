//! The `workloads` suite: every payload under every placement
//! configuration, with modeled memory performance.
//!
//! Each workload (`hotset`, `zipf`, `pmbench`, `stream`, phased) runs in
//! a fresh VM once per [`RunCase`]: the bounds all-fast and all-slow, and
//! first-touch, tiering-dirty-log and tiering-fault-sample at each DRAM
//! share. The harness samples the placement every 100 ms (the policy
//! suite's [`run_spec`](crate::policy::run_spec)); afterwards each sample
//! is scored against the oracle built from the payload's ground truth,
//! which the engine never sees. Since both tiers here run at DRAM speed,
//! the cost of a placement on real tiered memory is *modeled*
//! ([`crate::model`]) from its DRAM-hit ratio and the guest's measured
//! operations. The two-VM mix is not part of it yet.

mod analysis;
mod charts;
mod result;
mod settings;

use thiserror::Error;

use crate::policy::{RunError, run_spec};
use crate::progress;

pub use analysis::{AnalysisError, analyze};
pub use charts::{hit_chart, hit_chart_name, write_svgs};
pub use result::{HitPoint, ModeledCost, PhaseResult, RunResult, WorkloadsResult};
pub use settings::{Config, RunCase, SettingsError, WorkloadsSettings};

/// Why the workloads suite failed.
#[derive(Debug, Error)]
pub enum WorkloadsSuiteError {
    /// Bad settings (e.g. a `--bytes` override).
    #[error("workloads suite settings")]
    Settings(#[from] SettingsError),
    /// One guest run failed.
    #[error("{workload} with {case}")]
    Run {
        /// The workload.
        workload: String,
        /// The configuration.
        case: String,
        /// What went wrong (boxed: VM errors are large).
        #[source]
        source: Box<RunError>,
    },
    /// A run's trace could not be scored.
    #[error("{workload} with {case}: analysis")]
    Analysis {
        /// The workload.
        workload: String,
        /// The configuration.
        case: String,
        /// What went wrong.
        #[source]
        source: AnalysisError,
    },
}

/// Runs the suite with `settings`, showing progress on stderr.
pub fn run(settings: WorkloadsSettings) -> Result<WorkloadsResult, WorkloadsSuiteError> {
    let cases = settings.cases();
    let total = settings.workloads.len() * cases.len();
    let bar = progress::bar("workloads", total as u64);
    let mut runs = Vec::with_capacity(total);
    for workload in &settings.workloads {
        let args = settings.workload_args(workload);
        for case in &cases {
            bar.set_message(format!("{workload}, {}", case.label()));
            let trace = run_spec(&settings.run_spec(case), &args).map_err(|source| {
                WorkloadsSuiteError::Run {
                    workload: workload.clone(),
                    case: case.label(),
                    source: Box::new(source),
                }
            })?;
            let result = analyze(&settings, case, workload, &trace).map_err(|source| {
                WorkloadsSuiteError::Analysis {
                    workload: workload.clone(),
                    case: case.label(),
                    source,
                }
            })?;
            runs.push(result);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(WorkloadsResult { settings, runs })
}

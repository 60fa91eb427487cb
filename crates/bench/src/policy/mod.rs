//! The `policy` suite: the tiering engine against the oracle.
//!
//! Each workload (`hotset`, `zipf`, `pmbench`, phased so the hot set
//! shifts) runs in a fresh VM whose fast tier is the quota, with the
//! engine on (`VmConfig.tiering`), once per engine configuration
//! ([`Case`]: tracker and quota). The harness samples where every frame
//! lies every 100 ms and, after the run, scores each sample against the
//! oracle built from the payload's ground truth: the DRAM-hit ratio as a
//! share of the oracle's, steady and after a shift, and the bytes the
//! engine moved against the fewest that reach the oracle's placement.
//! The ground truth is only read, after the fact; the engine never sees
//! it. The targets are judged (reported, never asserted).

mod analysis;
mod charts;
mod guest;
mod metrics;
mod result;
mod settings;

use thiserror::Error;

use crate::progress;

pub use analysis::{
    AnalysisError, analyze, convergence_secs, engine_summary, longest_convergence, migration_rates,
    phase_mops,
};
pub use charts::{hit_chart, hit_chart_name, migration_chart, write_svgs};
pub use guest::{RunError, RunSpec, Sample, Trace, run_once, run_spec, spec_config, vm_config};
pub use metrics::{MinMoves, dram_hit, min_moves, oracle_hit};
pub use result::{
    EngineSummary, PhaseResult, PolicyResult, RatePoint, RunResult, Targets, TimePoint, Verdict,
    format_ratio,
};
pub use settings::{
    Case, PolicySettings, SettingsError, TARGET_AFTER_SHIFT, TARGET_BYTES_RATIO, TARGET_SHIFT_SECS,
    TARGET_STEADY, format_share,
};

/// Why the policy suite failed.
#[derive(Debug, Error)]
pub enum PolicySuiteError {
    /// Bad settings (e.g. a `--bytes` override).
    #[error("policy suite settings")]
    Settings(#[from] SettingsError),
    /// One guest run failed.
    #[error("{workload} with {case}")]
    Run {
        /// The workload.
        workload: String,
        /// The engine configuration.
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
        /// The engine configuration.
        case: String,
        /// What went wrong.
        #[source]
        source: AnalysisError,
    },
}

/// Runs the suite with `settings`, showing progress on stderr.
pub fn run(settings: PolicySettings) -> Result<PolicyResult, PolicySuiteError> {
    let total = settings.workloads.len() * settings.cases.len();
    let bar = progress::bar("policy", total as u64);
    let mut runs = Vec::with_capacity(total);
    for workload in &settings.workloads {
        let args = settings.workload_args(workload);
        for case in &settings.cases {
            bar.set_message(format!("{workload}, {}", case.label()));
            let trace =
                run_once(&settings, case, &args).map_err(|source| PolicySuiteError::Run {
                    workload: workload.clone(),
                    case: case.label(),
                    source: Box::new(source),
                })?;
            let result = analyze(&settings, case, workload, &trace).map_err(|source| {
                PolicySuiteError::Analysis {
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
    Ok(PolicyResult::new(settings, runs))
}

//! The `workloads` suite: every payload under every placement
//! configuration, with modeled memory performance.
//!
//! Each workload (`hotset`, `zipf`, `pmbench`, `stream`, phased) runs in
//! a fresh VM once per [`RunCase`]: the bounds all-fast and all-slow, and
//! first-touch, tiering-dirty-log and tiering-fault-sample at each DRAM
//! share. The harness samples the placement every 100 ms (the suites'
//! shared [`run_spec`](crate::suite_common::run_spec)); afterwards each sample
//! is scored against the oracle built from the payload's ground truth,
//! which the engine never sees. Since both tiers here run at DRAM speed,
//! the cost of a placement on real tiered memory is *modeled*
//! ([`crate::model`]) from its DRAM-hit ratio and the guest's measured
//! operations. The two-VM mix runs pairs of workloads side by side, each
//! in its own VM with its own DRAM share (and engine).

mod analysis;
mod chart_names;
mod charts;
mod host_tiers;
mod result;
mod settings;
mod tier_map;

use std::thread;

use crate::progress;
use crate::suite_common::{RunError, SuiteError, run_case, run_spec};

pub use crate::suite_common::SettingsError;
pub use crate::suite_common::analyze;
pub use chart_names::{chart_kinds, hit_chart_name, migration_chart_name, tier_map_name};
pub use charts::{hit_chart, migration_chart, tier_map_chart, write_svgs};
pub use host_tiers::HostTiers;
pub use result::{HitPoint, ModeledCost, PhaseResult, RunResult, WorkloadsResult};
pub use settings::{Config, RUN_DEFAULTS, RunCase, WorkloadsSettings};
pub use tier_map::{LEVELS, MAX_COLUMNS, MAX_ROWS, TierMap};

/// Why the workloads suite failed: the suites' shared error.
pub type WorkloadsSuiteError = SuiteError;

/// Runs the suite with `settings`, showing progress on stderr.
pub fn run(settings: WorkloadsSettings) -> Result<WorkloadsResult, WorkloadsSuiteError> {
    let cases = settings.cases();
    let total = settings.run.workloads.len() * cases.len()
        + settings.mixes.len() * settings.mix_cases().len();
    let bar = progress::bar("workloads", total as u64);
    let mut runs = Vec::with_capacity(total);
    for workload in &settings.run.workloads {
        let args = settings.run.workload_args(workload);
        for case in &cases {
            let label = case.label();
            bar.set_message(format!("{workload}, {label}"));
            let trace = run_spec(&settings.run_spec(case), &args);
            let result = run_case(workload, &label, trace, |trace| {
                analyze(&settings, case, workload, trace)
            })?;
            runs.push(result);
            bar.inc(1);
        }
    }
    for pair in &settings.mixes {
        for case in &settings.mix_cases() {
            bar.set_message(format!("{} + {}, {}", pair[0], pair[1], case.label()));
            runs.extend(run_mix(&settings, case, pair)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(WorkloadsResult { settings, runs })
}

/// Runs the two workloads of `pair` side by side, each in its own VM
/// under `case`, and scores each.
fn run_mix(
    settings: &WorkloadsSettings,
    case: &RunCase,
    pair: &[String; 2],
) -> Result<Vec<RunResult>, WorkloadsSuiteError> {
    let spec = settings.run_spec(case);
    let traces = thread::scope(|scope| {
        let handles = pair.clone().map(|workload| {
            let (spec, args) = (&spec, settings.run.workload_args(&workload));
            scope.spawn(move || run_spec(spec, &args))
        });
        handles.map(|h| h.join())
    });
    let label = format!("{} (mix)", case.label());
    let mut results = Vec::with_capacity(2);
    for (i, (workload, joined)) in pair.iter().zip(traces).enumerate() {
        let trace =
            joined.unwrap_or_else(|_| Err(RunError::Guest("its run thread panicked".to_owned())));
        let mut result = run_case(workload, &label, trace, |trace| {
            analyze(settings, case, workload, trace)
        })?;
        result.mix = Some(pair[1 - i].clone());
        results.push(result);
    }
    Ok(results)
}

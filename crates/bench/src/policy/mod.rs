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
mod result;
mod settings;

use vmm::vm::VmConfig;

use crate::progress;
use crate::suite_common::{SuiteError, run_case};

pub use crate::suite_common::analyze;
pub use crate::suite_common::{
    AnalysisError, EngineSummary, MinMoves, RatePoint, RunError, RunSpec, Sample, SettingsError,
    Trace, convergence_secs, dram_hit, engine_summary, format_share, longest_convergence,
    migration_rates, min_moves, oracle_hit, phase_mops, run_spec, spec_config,
};
pub use charts::{hit_chart, hit_chart_name, migration_chart, write_svgs};
pub use result::{PhaseResult, PolicyResult, RunResult, Targets, TimePoint, Verdict, format_ratio};
pub use settings::{
    Case, PolicySettings, RUN_DEFAULTS, TARGET_AFTER_SHIFT, TARGET_BYTES_RATIO, TARGET_SHIFT_SECS,
    TARGET_STEADY,
};

/// Why the policy suite failed: the suites' shared error.
pub type PolicySuiteError = SuiteError;

/// The VM configuration of a run of `args` under `case`: the fast tier is
/// exactly the quota (the VM's DRAM budget) and starts empty (slow-first:
/// the slow tier holds all of RAM), so no frame is in the right place by
/// accident of its address and the engine alone fills DRAM.
pub fn vm_config(settings: &PolicySettings, case: &Case, args: &str) -> VmConfig {
    spec_config(&settings.run_spec(case), args)
}

/// Runs `args` in a fresh VM under `case`, sampling the placement every
/// `settings.run.sample_ms`.
pub fn run_once(settings: &PolicySettings, case: &Case, args: &str) -> Result<Trace, RunError> {
    run_spec(&settings.run_spec(case), args)
}

/// Runs the suite with `settings`, showing progress on stderr.
pub fn run(settings: PolicySettings) -> Result<PolicyResult, PolicySuiteError> {
    let total = settings.run.workloads.len() * settings.cases.len();
    let bar = progress::bar("policy", total as u64);
    let mut runs = Vec::with_capacity(total);
    for workload in &settings.run.workloads {
        let args = settings.run.workload_args(workload);
        for case in &settings.cases {
            let label = case.label();
            bar.set_message(format!("{workload}, {label}"));
            let trace = run_once(&settings, case, &args);
            let result = run_case(workload, &label, trace, |trace| {
                analyze(&settings, case, workload, trace)
            })?;
            runs.push(result);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(PolicyResult::new(settings, runs))
}

#[cfg(test)]
mod tests {
    use vmm::migration::MigratorKind;

    use super::*;

    #[test]
    fn vm_config_gives_the_fast_tier_the_quota_and_runs_the_engine() {
        let settings = PolicySettings::new(true, None).unwrap();
        let case = Case {
            tracker: "combined".to_owned(),
            quota_share: 0.25,
        };
        let config = vm_config(&settings, &case, "hotset");
        assert_eq!(
            config.memory.tiers[0].size,
            Some(settings.run.guest_bytes / 4)
        );
        assert_eq!(config.memory.tiers[1].size, Some(settings.run.guest_bytes));
        assert_eq!(config.migration.migrator, MigratorKind::RemapPrecopy);
        let policy = config.tiering.unwrap();
        assert_eq!(policy.tracker, "combined");
        assert_eq!(policy.fast_quota.max_bytes, settings.run.guest_bytes / 4);
    }
}

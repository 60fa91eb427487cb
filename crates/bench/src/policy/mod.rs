//! The `policy` suite: the tiering engine against the oracle.
//!
//! Each workload (`hotset`, `zipf`, `pmbench`, in two or three phases so
//! the hot set shifts: hotset moves its hot set, pmbench its center, and
//! zipf's phases move its hot keys, the scatter of its records re-keyed
//! per phase — though its records fill an eighth of the buffer, which
//! every quota holds, so its hot frames stay put) runs in a fresh VM whose
//! fast tier is the quota, with the engine on (`VmConfig.tiering`), once
//! per engine configuration ([`Case`]: tracker, quota and the guest's
//! emulated speed). A guest s× faster (speeds [`SPEEDS`]) is emulated by
//! the engine's policy on a clock s× slower
//! (`TieringPolicy::at_guest_speed`) and phases s× longer in real time,
//! and its times are read and reported in emulated seconds. The harness
//! samples where every frame lies every 100 emulated ms and, after the
//! run, scores each sample against the
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
pub use crate::verdict::Verdict;
pub use charts::{hit_chart, hit_chart_name, migration_chart, write_svgs};
pub use result::{PhaseResult, PolicyResult, RunResult, Targets, TimePoint, format_ratio};
pub use settings::{
    Case, PolicySettings, RUN_DEFAULTS, SPEEDS, TARGET_AFTER_SHIFT, TARGET_BYTES_RATIO,
    TARGET_SHIFT_SECS, TARGET_STEADY, format_speed,
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
/// `settings.run.sample_ms` emulated (`case.speed` × as many real) ms.
pub fn run_once(settings: &PolicySettings, case: &Case, args: &str) -> Result<Trace, RunError> {
    run_spec(&settings.run_spec(case), args)
}

/// Runs the suite with `settings`, showing progress on stderr.
pub fn run(settings: PolicySettings) -> Result<PolicyResult, PolicySuiteError> {
    let total = settings.run.workloads.len() * settings.cases.len();
    let bar = progress::bar("policy", total as u64);
    let mut runs = Vec::with_capacity(total);
    for workload in &settings.run.workloads {
        for case in &settings.cases {
            let args = settings.workload_args(case, workload);
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
        let case = Case::new("combined", 0.25, 1);
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

//! The file names of the workloads suite's charts, and the summary line
//! that tells what each kind of chart shows and how its files are named.

use super::settings::Config;
use crate::suite_common::format_share;

/// The file name of the DRAM-hit chart of `workload` at `share`.
pub fn hit_chart_name(workload: &str, share: f64) -> String {
    format!(
        "workloads-hit-{workload}-dram{}.svg",
        format_share(share).trim_end_matches('%')
    )
}

/// The file name of the migration-rate chart of `workload` at `share`.
pub fn migration_chart_name(workload: &str, share: f64) -> String {
    format!(
        "workloads-migration-{workload}-dram{}.svg",
        format_share(share).trim_end_matches('%')
    )
}

/// The file name of the tier map of `workload` under `config` at `share`.
pub fn tier_map_name(workload: &str, share: f64, config: Config) -> String {
    format!(
        "workloads-tiers-{workload}-dram{}-{}.svg",
        format_share(share).trim_end_matches('%'),
        config.name()
    )
}

/// What each kind of chart shows and its file names, for the summary.
pub fn chart_kinds() -> Vec<String> {
    vec![
        "DRAM-hit over time against the oracle, workloads-hit-WORKLOAD-dramSHARE.svg".to_owned(),
        "engine migration rate over time, workloads-migration-WORKLOAD-dramSHARE.svg".to_owned(),
        "every guest frame's tier over time (blue fast, orange slow, blended where a cell \
         groups frames or samples), workloads-tiers-WORKLOAD-dramSHARE-CONFIG.svg"
            .to_owned(),
    ]
}

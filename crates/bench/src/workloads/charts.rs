//! The workloads suite's pictures: per workload and DRAM share, the
//! DRAM-hit ratio over time of every configuration against the oracle's.

use std::path::{Path, PathBuf};

use super::result::{RunResult, WorkloadsResult};
use crate::plot::{LineChart, PlotError, Rgb, Series, Stroke, XAxis, YAxis};
use crate::policy::format_share;

const ORACLE: Rgb = Rgb(0, 0, 0);
/// Colours of the configurations, in [`super::Config::ALL`] order.
const CONFIGS: [Rgb; 5] = [
    Rgb(44, 160, 44),
    Rgb(214, 39, 40),
    Rgb(127, 127, 127),
    Rgb(31, 119, 180),
    Rgb(148, 103, 189),
];

/// The file name of the DRAM-hit chart of `workload` at `share`.
pub fn hit_chart_name(workload: &str, share: f64) -> String {
    format!(
        "workloads-hit-{workload}-dram{}.svg",
        format_share(share).trim_end_matches('%')
    )
}

/// Writes the DRAM-hit chart of every workload at every share into `dir`
/// (which must exist); returns the paths.
pub fn write_svgs(result: &WorkloadsResult, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut written = Vec::new();
    for workload in &result.settings.workloads {
        for &share in &result.settings.shares {
            let runs: Vec<&RunResult> = result
                .runs
                .iter()
                .filter(|r| {
                    &r.workload == workload && r.mix.is_none() && r.share.is_none_or(|s| s == share)
                })
                .collect();
            if runs.is_empty() {
                continue;
            }
            let path = dir.join(hit_chart_name(workload, share));
            hit_chart(workload, share, &runs).write_svg(&path)?;
            written.push(path);
        }
    }
    Ok(written)
}

/// Every configuration's DRAM-hit ratio over time, and the oracle's with
/// room for `share` of RAM.
pub fn hit_chart(workload: &str, share: f64, runs: &[&RunResult]) -> LineChart {
    let last = runs
        .iter()
        .flat_map(|r| r.timeline.iter().map(|p| p.secs))
        .fold(0.0, f64::max);
    let mut series = Vec::new();
    if let Some(r) = runs.iter().find(|r| r.share.is_some()) {
        series.push(Series {
            label: format!("oracle (DRAM {})", format_share(share)),
            points: r.timeline.iter().map(|p| (p.secs, p.oracle_hit)).collect(),
            color: ORACLE,
            stroke: Stroke::Dashed,
        });
    }
    for r in runs {
        let index = super::Config::ALL
            .iter()
            .position(|c| *c == r.config)
            .unwrap_or(0);
        series.push(Series {
            label: r.config.name().to_owned(),
            points: r.timeline.iter().map(|p| (p.secs, p.dram_hit)).collect(),
            color: CONFIGS[index % CONFIGS.len()],
            stroke: Stroke::Solid,
        });
    }
    LineChart {
        title: format!(
            "workloads: DRAM-hit ratio, {workload} (DRAM {})",
            format_share(share)
        ),
        x_label: "seconds since phase 0 began (phases shift the hot set)".to_owned(),
        y_label: "share of accesses served from DRAM".to_owned(),
        x_range: (0.0, last.ceil().max(1.0)),
        x_axis: XAxis::WholeNumbers,
        y_axis: YAxis::LinearFromZero,
        series: series
            .into_iter()
            .filter(|s| !s.points.is_empty())
            .collect(),
    }
}

//! The policy suite's pictures: per run, the engine's DRAM-hit ratio over
//! time against the oracle's (and their ratio); per workload, the
//! migration rate over time of every engine configuration. Times are the
//! guest's emulated seconds.

use std::path::{Path, PathBuf};

use super::result::{PolicyResult, RunResult};
use super::settings::{TARGET_AFTER_SHIFT, TARGET_STEADY, format_speed};
use crate::palette::{ENGINE, ORACLE, RATIO, SERIES, TARGET, cycled};
use crate::plot::{LineChart, PlotError, Series, Stroke, XAxis, YAxis};
use crate::size::format_size;

/// The file name of `run`'s DRAM-hit chart.
pub fn hit_chart_name(run: &RunResult) -> String {
    format!("policy-hit-{}-{}.svg", run.row.workload, run.case().tag())
}

/// Writes every run's DRAM-hit chart and every workload's migration-rate
/// chart into `dir` (which must exist); returns the paths.
pub fn write_svgs(result: &PolicyResult, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut charts: Vec<(String, LineChart)> = result
        .runs
        .iter()
        .map(|r| (hit_chart_name(r), hit_chart(r)))
        .collect();
    for workload in &result.settings.run.workloads {
        if result.runs.iter().any(|r| &r.row.workload == workload) {
            charts.push((
                format!("policy-migration-{workload}.svg"),
                migration_chart(result, workload),
            ));
        }
    }
    let mut written = Vec::new();
    for (name, chart) in charts {
        let path = dir.join(name);
        chart.write_svg(&path)?;
        written.push(path);
    }
    Ok(written)
}

fn x_range(points: impl Iterator<Item = f64>) -> (f64, f64) {
    let last = points.fold(0.0, f64::max);
    (0.0, last.ceil().max(1.0))
}

/// The engine's and the oracle's DRAM-hit ratio over time, their ratio,
/// and the targets.
pub fn hit_chart(run: &RunResult) -> LineChart {
    let points = |value: fn(&super::result::TimePoint) -> Option<f64>| -> Vec<(f64, f64)> {
        run.timeline
            .iter()
            .filter_map(|p| value(p).map(|v| (p.secs, v)))
            .collect()
    };
    let x_range = x_range(run.timeline.iter().map(|p| p.secs));
    LineChart {
        title: format!(
            "policy: DRAM-hit ratio, {} ({} quota = {}, guest {})",
            run.row.workload,
            run.tracker,
            format_size(run.quota_bytes),
            format_speed(run.speed)
        ),
        x_label: "emulated seconds since phase 0 began (phases shift the hot set)".to_owned(),
        y_label: "share of accesses served from DRAM".to_owned(),
        x_range,
        x_axis: XAxis::WholeNumbers,
        y_axis: YAxis::LinearFromZero,
        series: vec![
            Series {
                label: "oracle (top-Q frames)".to_owned(),
                points: points(|p| Some(p.oracle_hit)),
                color: ORACLE,
                stroke: Stroke::Dashed,
            },
            Series {
                label: "engine placement".to_owned(),
                points: points(|p| Some(p.engine_hit)),
                color: ENGINE,
                stroke: Stroke::Solid,
            },
            Series {
                label: "engine / oracle".to_owned(),
                points: points(|p| p.ratio),
                color: RATIO,
                stroke: Stroke::Solid,
            },
            Series::horizontal(
                format!("steady target {:.0}%", TARGET_STEADY * 100.0),
                TARGET_STEADY,
                x_range,
                TARGET,
            ),
            Series::horizontal(
                format!("after-shift target {:.0}%", TARGET_AFTER_SHIFT * 100.0),
                TARGET_AFTER_SHIFT,
                x_range,
                TARGET,
            ),
        ]
        .into_iter()
        .filter(|s| !s.points.is_empty())
        .collect(),
    }
}

/// Migration rate per engine interval over time, one line per engine
/// configuration that ran `workload`.
pub fn migration_chart(result: &PolicyResult, workload: &str) -> LineChart {
    let runs: Vec<&RunResult> = result
        .runs
        .iter()
        .filter(|r| r.row.workload == workload)
        .collect();
    let x_range = x_range(runs.iter().flat_map(|r| r.row.rates.iter().map(|p| p.secs)));
    LineChart {
        title: format!("policy: migration rate, {workload}"),
        x_label: "emulated seconds since phase 0 began".to_owned(),
        y_label: "MB per emulated second moved (promotions + demotions)".to_owned(),
        x_range,
        x_axis: XAxis::WholeNumbers,
        y_axis: YAxis::LinearFromZero,
        series: runs
            .iter()
            .enumerate()
            .map(|(i, r)| Series {
                label: r.case().label(),
                points: r.row.rates.iter().map(|p| (p.secs, p.mbps)).collect(),
                color: cycled(&SERIES, i),
                stroke: Stroke::Solid,
            })
            .filter(|s| !s.points.is_empty())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_policy_result;

    #[test]
    fn hit_chart_has_engine_oracle_ratio_and_targets() {
        let r = sample_policy_result();
        let chart = hit_chart(&r.runs[0]);
        let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "oracle (top-Q frames)",
                "engine placement",
                "engine / oracle",
                "steady target 97%",
                "after-shift target 90%"
            ]
        );
        assert_eq!(chart.series[1].points.len(), r.runs[0].timeline.len());
        assert_eq!(chart.x_range, (0.0, 4.0));
        assert_eq!(
            hit_chart_name(&r.runs[0]),
            "policy-hit-hotset-dirty-log-q25.svg"
        );
        assert!(chart.title.ends_with("guest 1×)"), "{}", chart.title);
        assert!(chart.x_label.starts_with("emulated seconds"));
        let fast = hit_chart(&r.runs[1]);
        assert!(fast.title.ends_with("guest 4×)"), "{}", fast.title);
        assert_eq!(
            hit_chart_name(&r.runs[1]),
            "policy-hit-zipf-dirty-log-q25-4x.svg"
        );
        let rates = migration_chart(&r, "zipf");
        assert_eq!(rates.series[0].label, "dirty-log, quota 25%, 4×");
    }

    #[test]
    fn writes_a_chart_per_run_and_workload() {
        let dir = std::env::temp_dir().join(format!("bench-policy-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let written = write_svgs(&sample_policy_result(), &dir).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "policy-hit-hotset-dirty-log-q25.svg",
                "policy-hit-zipf-dirty-log-q25-4x.svg",
                "policy-migration-hotset.svg",
                "policy-migration-zipf.svg"
            ]
        );
        for path in &written {
            assert!(std::fs::read_to_string(path).unwrap().contains("</svg>"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

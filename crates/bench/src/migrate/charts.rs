//! The migrate suite's pictures: migration bandwidth against batch size
//! for every protocol and guest load, with the best copy for reference;
//! the share of the copy each scenario is judged on (issue 27's targets,
//! [`judged_share`]) against batch size, with the plain and pre-copy
//! targets; and the write stalls (p50 / p99 / max, log scale) against
//! batch size for every scenario in which writes waited, with the 1 ms
//! pre-copy target.

use std::path::{Path, PathBuf};

use super::result::MigrateResult;
use super::scenario::{GuestLoad, Protocol};
use super::scenario_result::{BatchSizeResult, ScenarioResult};
use super::stalls::StallSummary;
use super::targets::{
    TARGET_MIN_BATCH, TARGET_PLAIN, TARGET_PRECOPY, TARGET_PRECOPY_P99_US, judged_share,
};
use crate::plot::{LineChart, PlotError, Rgb, Series, Stroke, XAxis, YAxis};
use crate::size::format_size;

/// Colours: remap blue, pre-copy orange (lighter for the idle guest;
/// for stalls, darker for higher percentiles), the best copy red, the
/// target grey.
const REMAP: Rgb = Rgb(31, 119, 180);
const REMAP_IDLE: Rgb = Rgb(120, 180, 230);
const REMAP_DARK: Rgb = Rgb(10, 50, 100);
const PRECOPY: Rgb = Rgb(230, 120, 20);
const PRECOPY_IDLE: Rgb = Rgb(245, 180, 110);
const PRECOPY_DARK: Rgb = Rgb(140, 60, 0);
const BEST: Rgb = Rgb(214, 39, 40);
const TARGET: Rgb = Rgb(120, 120, 120);

/// Writes `migrate-bandwidth.svg`, `migrate-vs-copy.svg` and, when any
/// write stalled, `migrate-stalls.svg` into `dir` (which must exist);
/// returns the paths.
pub fn write_svgs(result: &MigrateResult, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut written = Vec::new();
    for (name, chart) in [
        ("migrate-bandwidth.svg", bandwidth_chart(result)),
        ("migrate-vs-copy.svg", share_chart(result)),
    ] {
        let path = dir.join(name);
        chart.write_svg(&path)?;
        written.push(path);
    }
    let stalls = stall_chart(result);
    if !stalls.series.iter().all(|s| s.stroke == Stroke::Dashed) {
        let path = dir.join("migrate-stalls.svg");
        stalls.write_svg(&path)?;
        written.push(path);
    }
    Ok(written)
}

/// The colour of a stall statistic: light p50, mid p99, dark max.
fn stall_color(protocol: Protocol, statistic: &str) -> Rgb {
    match (protocol, statistic) {
        (Protocol::Remap, "p50") => REMAP_IDLE,
        (Protocol::Remap, "p99") => REMAP,
        (Protocol::Remap, _) => REMAP_DARK,
        (Protocol::RemapPrecopy, "p50") => PRECOPY_IDLE,
        (Protocol::RemapPrecopy, "p99") => PRECOPY,
        (Protocol::RemapPrecopy, _) => PRECOPY_DARK,
    }
}

fn color(s: &ScenarioResult) -> Rgb {
    match (s.protocol, s.guest) {
        (Protocol::Remap, GuestLoad::Idle) => REMAP_IDLE,
        (Protocol::Remap, GuestLoad::WriteBusy) => REMAP,
        (Protocol::RemapPrecopy, GuestLoad::Idle) => PRECOPY_IDLE,
        (Protocol::RemapPrecopy, GuestLoad::WriteBusy) => PRECOPY,
    }
}

/// One statistic of a stall summary.
type Statistic = fn(&StallSummary) -> Option<f64>;

/// x of a batch size: its log2.
fn x_of(frames_per_batch: usize) -> f64 {
    (frames_per_batch.max(1) as f64).log2()
}

/// The x interval covering every batch size with half a step to spare.
fn x_range(result: &MigrateResult) -> (f64, f64) {
    let largest = result.settings.batch_sizes.last().copied().unwrap_or(1);
    (-0.5, x_of(largest) + 0.5)
}

/// One line per scenario with a value: `value` of each batch size against
/// the batch size.
fn scenario_series(
    result: &MigrateResult,
    value: impl Fn(&ScenarioResult, &BatchSizeResult) -> Option<f64>,
) -> Vec<Series> {
    result
        .scenarios
        .iter()
        .map(|s| Series {
            label: s.scenario().label(),
            points: s
                .batch_sizes
                .iter()
                .filter_map(|b| Some((x_of(b.frames_per_batch), value(s, b)?)))
                .collect(),
            color: color(s),
            stroke: Stroke::Solid,
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// Bandwidth against batch size.
pub fn bandwidth_chart(result: &MigrateResult) -> LineChart {
    let x_range = x_range(result);
    let best = &result.copy_reference.best;
    let mut series = scenario_series(result, |_, b| Some(b.gbps));
    series.push(Series::horizontal(
        format!(
            "best copy {:.2} GB/s ({}×{})",
            best.median_gbps, best.threads, best.mode
        ),
        best.median_gbps,
        x_range,
        BEST,
    ));
    LineChart {
        title: format!(
            "migrate: {} frames, {} guest on {} vCPUs",
            format_size(result.settings.frame_size),
            format_size(result.settings.guest_bytes),
            result.settings.vcpus
        ),
        x_label: "frames per batch".to_owned(),
        y_label: "GB/s (frames moved / time in migrate())".to_owned(),
        x_range,
        x_axis: XAxis::PowersOfTwo,
        y_axis: YAxis::LinearFromZero,
        series,
    }
}

/// The share of the copy each scenario is judged on against batch size,
/// with the plain and pre-copy targets.
pub fn share_chart(result: &MigrateResult) -> LineChart {
    let x_range = x_range(result);
    let mut series = scenario_series(result, |s, b| judged_share(s.guest, b));
    for (who, bound, colour) in [
        ("remap", TARGET_PLAIN, REMAP),
        ("pre-copy", TARGET_PRECOPY, PRECOPY),
    ] {
        series.push(Series::horizontal(
            format!("target: {who} ≥ {bound:.2}× (batches ≥ {TARGET_MIN_BATCH} frames)"),
            bound,
            x_range,
            colour,
        ));
    }
    LineChart {
        title: "migrate: bandwidth × the copy each scenario is judged against (issue 27)"
            .to_owned(),
        x_label: "frames per batch".to_owned(),
        y_label: "× the copy".to_owned(),
        x_range,
        x_axis: XAxis::PowersOfTwo,
        y_axis: YAxis::LinearFromZero,
        series,
    }
}

/// Write stalls (p50, p99, max) against batch size, log scale, for every
/// scenario in which writes waited; the reference line is the pre-copy
/// p99 target.
pub fn stall_chart(result: &MigrateResult) -> LineChart {
    let x_range = x_range(result);
    let mut series = Vec::new();
    for s in &result.scenarios {
        // Max first: where p99 equals max (few samples), p99 is drawn
        // over it and stays visible.
        let pick: [(&str, Statistic); 3] = [
            ("max", |st| st.max_us),
            ("p99", |st| st.p99_us),
            ("p50", |st| st.p50_us),
        ];
        for (name, value) in pick {
            let points: Vec<(f64, f64)> = s
                .batch_sizes
                .iter()
                .filter_map(|b| Some((x_of(b.frames_per_batch), value(&b.stalls)? / 1e3)))
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    label: format!("{} {name}", s.scenario().label()),
                    points,
                    color: stall_color(s.protocol, name),
                    stroke: Stroke::Solid,
                });
            }
        }
    }
    series.push(Series::horizontal(
        format!("target: pre-copy p99 ≤ {} ms", TARGET_PRECOPY_P99_US / 1e3),
        TARGET_PRECOPY_P99_US / 1e3,
        x_range,
        TARGET,
    ));
    LineChart {
        title: "migrate: guest write stalls (host-side, userfaultfd fault → wake)".to_owned(),
        x_label: "frames per batch".to_owned(),
        y_label: "stall, ms (log scale)".to_owned(),
        x_range,
        x_axis: XAxis::PowersOfTwo,
        y_axis: YAxis::Log,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_migrate_result;

    #[test]
    fn bandwidth_chart_has_every_scenario_and_the_references() {
        let result = sample_migrate_result();
        let chart = bandwidth_chart(&result);
        assert_eq!(chart.x_axis, XAxis::PowersOfTwo);
        assert_eq!(chart.x_range, (-0.5, 6.5));
        let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels[..4],
            [
                "remap, idle guest",
                "remap, write-busy guest",
                "remap-precopy, idle guest",
                "remap-precopy, write-busy guest"
            ]
        );
        assert_eq!(chart.series[1].points, [(0.0, 1.0), (4.0, 4.0), (6.0, 8.0)]);
        assert!(labels[4].starts_with("best copy 10.00 GB/s"));
        assert_eq!(chart.series.len(), 5);
    }

    #[test]
    fn share_chart_draws_the_judged_shares_and_both_targets() {
        let chart = share_chart(&sample_migrate_result());
        assert_eq!(chart.series.len(), 6);
        let busy = &chart.series[1];
        assert_eq!(busy.label, "remap, write-busy guest");
        // 1, 4 and 8 GB/s against the copy under the load, 5 GB/s.
        assert_eq!(busy.points, [(0.0, 0.2), (4.0, 0.8), (6.0, 1.6)]);
        assert_eq!(chart.series[4].points, [(-0.5, 0.9), (6.5, 0.9)]);
        assert_eq!(chart.series[5].stroke, Stroke::Dashed);
        assert!(chart.series[5].label.contains("pre-copy ≥ 0.80×"));
    }

    #[test]
    fn stall_chart_shows_only_scenarios_that_stalled() {
        let result = sample_migrate_result();
        let chart = stall_chart(&result);
        assert_eq!(chart.y_axis, YAxis::Log);
        let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
        assert!(labels.contains(&"remap, write-busy guest p99"));
        assert!(labels.contains(&"remap-precopy, write-busy guest max"));
        assert!(!labels.iter().any(|l| l.contains("idle")), "{labels:?}");
        let p99 = chart
            .series
            .iter()
            .find(|s| s.label == "remap, write-busy guest p99")
            .unwrap();
        assert_eq!(p99.points, [(0.0, 2.0), (4.0, 2.0), (6.0, 2.0)]);
    }

    #[test]
    fn writes_both_files() {
        let dir = std::env::temp_dir().join(format!("bench-migrate-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let written = write_svgs(&sample_migrate_result(), &dir).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "migrate-bandwidth.svg",
                "migrate-vs-copy.svg",
                "migrate-stalls.svg"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

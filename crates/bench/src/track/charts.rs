//! The track suite's pictures: guest throughput of every run in
//! repetition order (tracked runs next to the untracked ones they are
//! compared with), tracked against untracked throughput of every block of
//! the paired runs, and heat-model time against the number of frames.

use std::path::{Path, PathBuf};

use super::result::TrackResult;
use super::settings::TARGET_MAX_SLOWDOWN;
use super::trackers::NONE;
use crate::plot::{LineChart, PlotError, Rgb, Series, Stroke, XAxis, YAxis};

/// Colours per workload (untracked, then each tracker a shade further).
const PALETTE: [[Rgb; 4]; 2] = [
    [
        Rgb(0, 0, 0),
        Rgb(31, 119, 180),
        Rgb(120, 180, 230),
        Rgb(20, 60, 120),
    ],
    [
        Rgb(100, 100, 100),
        Rgb(230, 120, 20),
        Rgb(245, 180, 110),
        Rgb(150, 70, 10),
    ],
];
const UPDATE_FULL: Rgb = Rgb(31, 119, 180);
const UPDATE_SAMPLED: Rgb = Rgb(44, 160, 44);
const HOTTEST: Rgb = Rgb(214, 39, 40);
const TARGET: Rgb = Rgb(214, 39, 40);

/// Writes `track-throughput.svg`, `track-paired.svg` and `track-heat.svg`
/// into `dir` (which must exist) and returns the paths; a chart of what
/// was not measured (`--paired-only`) is not written.
pub fn write_svgs(result: &TrackResult, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut written = Vec::new();
    for (name, chart, measured) in [
        (
            "track-throughput.svg",
            throughput_chart(result),
            !result.workloads.is_empty(),
        ),
        ("track-paired.svg", paired_chart(result), true),
        (
            "track-heat.svg",
            heat_chart(result),
            !result.heat.is_empty(),
        ),
    ] {
        if !measured {
            continue;
        }
        let path = dir.join(name);
        chart.write_svg(&path)?;
        written.push(path);
    }
    Ok(written)
}

/// Guest throughput of each run against its repetition.
pub fn throughput_chart(result: &TrackResult) -> LineChart {
    let mut series = Vec::new();
    for (w_index, w) in result.workloads.iter().enumerate() {
        let colors = PALETTE[w_index % PALETTE.len()];
        for (t_index, t) in w.trackers.iter().enumerate() {
            series.push(Series {
                label: format!("{}, {}", w.workload, t.label()),
                points: t
                    .throughput
                    .samples_mops
                    .iter()
                    .enumerate()
                    .map(|(r, &mops)| ((r + 1) as f64, mops))
                    .collect(),
                color: colors[t_index.min(colors.len() - 1)],
                stroke: if t.tracker == NONE {
                    Stroke::Dashed
                } else {
                    Stroke::Solid
                },
            });
        }
    }
    LineChart {
        title: format!(
            "track: guest throughput per run, tracked and untracked, {} guest",
            crate::size::format_size(result.settings.guest_bytes)
        ),
        x_label: "repetition (runs interleaved)".to_owned(),
        y_label: "Mops/s (guest phase reports)".to_owned(),
        x_range: (0.5, result.settings.repetitions as f64 + 0.5),
        x_axis: XAxis::WholeNumbers,
        y_axis: YAxis::LinearFromZero,
        series: series
            .into_iter()
            .filter(|s| !s.points.is_empty())
            .collect(),
    }
}

/// Per block of the paired runs, tracked phases' throughput as a share of
/// the untracked phases', with the target as a reference line.
pub fn paired_chart(result: &TrackResult) -> LineChart {
    let blocks = result
        .paired
        .iter()
        .map(|p| p.block_slowdowns.len())
        .max()
        .unwrap_or(1);
    let x_range = (0.5, blocks as f64 + 0.5);
    let workloads: Vec<&str> = result
        .workloads
        .iter()
        .map(|w| w.workload.as_str())
        .collect();
    let mut series: Vec<Series> = result
        .paired
        .iter()
        .map(|p| {
            let w_index = workloads.iter().position(|w| *w == p.workload).unwrap_or(0);
            let t_index = result
                .settings
                .trackers
                .iter()
                .position(|t| *t == p.tracker)
                .unwrap_or(1);
            let colors = PALETTE[w_index % PALETTE.len()];
            Series {
                label: format!("{}, {}", p.workload, p.label()),
                points: p
                    .block_slowdowns
                    .iter()
                    .enumerate()
                    .map(|(b, s)| ((b + 1) as f64, (1.0 - s) * 100.0))
                    .collect(),
                color: colors[t_index.min(colors.len() - 1)],
                stroke: Stroke::Solid,
            }
        })
        .collect();
    series.push(Series::horizontal(
        format!(
            "target: {:.0}% (≤ {:.0}% slower)",
            (1.0 - TARGET_MAX_SLOWDOWN) * 100.0,
            TARGET_MAX_SLOWDOWN * 100.0
        ),
        (1.0 - TARGET_MAX_SLOWDOWN) * 100.0,
        x_range,
        TARGET,
    ));
    LineChart {
        title: "track: tracked against untracked phases of the same VM, per block".to_owned(),
        x_label: "block of 4 phases (ABBA, BAAB; runs one after another)".to_owned(),
        y_label: "tracked / untracked throughput, %".to_owned(),
        x_range,
        x_axis: XAxis::WholeNumbers,
        y_axis: YAxis::LinearFromZero,
        series,
    }
}

/// Heat-model time per call against frames (log–log).
pub fn heat_chart(result: &TrackResult) -> LineChart {
    let x_of = |frames: usize| (frames.max(1) as f64).log2();
    let line = |label: &str, color: Rgb, value: fn(&super::heat::HeatSizeResult) -> f64| Series {
        label: label.to_owned(),
        points: result
            .heat
            .iter()
            .map(|h| (x_of(h.frames), value(h)))
            .collect(),
        color,
        stroke: Stroke::Solid,
    };
    let smallest = result.heat.first().map_or(0, |h| h.frames);
    let largest = result.heat.last().map_or(1, |h| h.frames);
    LineChart {
        title: "track: heat-model time per call (synthetic samples)".to_owned(),
        x_label: "2 MiB frames (512 = 1 GiB, 524288 = 1 TiB)".to_owned(),
        y_label: "µs per call (log scale)".to_owned(),
        x_range: (x_of(smallest) - 0.5, x_of(largest) + 0.5),
        x_axis: XAxis::PowersOfTwo,
        y_axis: YAxis::Log,
        series: vec![
            line("update, full coverage", UPDATE_FULL, |h| h.update_full_us),
            line("update, sampled", UPDATE_SAMPLED, |h| h.update_sampled_us),
            line("hottest(n/4)", HOTTEST, |h| h.hottest_quarter_us),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_track_result;

    #[test]
    fn throughput_chart_has_a_line_per_workload_and_tracker() {
        let chart = throughput_chart(&sample_track_result());
        let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "hotset, none",
                "hotset, dirty-log every 200 ms",
                "zipf, none",
                "zipf, dirty-log every 200 ms"
            ]
        );
        assert_eq!(chart.series[0].stroke, Stroke::Dashed);
        assert_eq!(chart.series[0].points.len(), 3);
        assert_eq!(chart.series[0].points[0].0, 1.0);
    }

    #[test]
    fn paired_chart_has_a_line_per_workload_and_the_target() {
        let chart = paired_chart(&sample_track_result());
        let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "hotset, dirty-log every 200 ms",
                "zipf, dirty-log every 200 ms",
                "target: 98% (≤ 2% slower)"
            ]
        );
        let hotset = &chart.series[0].points;
        assert_eq!(hotset.len(), 2, "two runs of one block");
        assert!((hotset[0].1 - 97.0).abs() < 1e-9, "{hotset:?}");
        assert_eq!(chart.x_range, (0.5, 2.5));
        assert_eq!(chart.series[2].stroke, Stroke::Dashed);
    }

    #[test]
    fn heat_chart_spans_every_size() {
        let chart = heat_chart(&sample_track_result());
        assert_eq!(chart.x_range, (8.5, 19.5));
        assert_eq!(chart.series.len(), 3);
        assert!(chart.series.iter().all(|s| s.points.len() == 3));
    }

    #[test]
    fn writes_every_file() {
        let dir = std::env::temp_dir().join(format!("bench-track-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let written = write_svgs(&sample_track_result(), &dir).unwrap();
        assert_eq!(written.len(), 3);
        for path in &written {
            assert!(std::fs::read_to_string(path).unwrap().contains("</svg>"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The workloads suite's pictures, per workload and DRAM share: the
//! DRAM-hit ratio over time of every configuration against the oracle's;
//! the migration rate over time of each engine configuration; and per
//! configuration but the bounds, the tier of every guest frame over time.

use std::path::{Path, PathBuf};

use super::chart_names::{hit_chart_name, migration_chart_name, tier_map_name};
use super::result::{RunResult, WorkloadsResult};
use super::settings::Config;
use super::tier_map::{TierMap, share as level_share};
use crate::grid_chart::{GridChart, GridRun, Marker};
use crate::palette::{BLUE, FAST_TIER, GREEN, GREY, ORACLE, PURPLE, RED, SLOW_TIER, cycled};
use crate::plot::{LineChart, PlotError, Rgb, Series, Stroke, XAxis, YAxis};
use crate::suite_common::format_share;

/// Colours of the configurations, in [`super::Config::ALL`] order.
const CONFIGS: [Rgb; 5] = [GREEN, RED, GREY, BLUE, PURPLE];

/// Writes every chart of every workload at every share into `dir`
/// (which must exist): the DRAM-hit chart, the migration-rate chart when
/// an engine ran, and a tier map per configuration that has one; returns
/// the paths.
pub fn write_svgs(result: &WorkloadsResult, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut written = Vec::new();
    let mut write = |name: String, draw: &dyn Fn(&Path) -> Result<(), PlotError>| {
        let path = dir.join(name);
        draw(&path)?;
        written.push(path);
        Ok::<(), PlotError>(())
    };
    for workload in &result.settings.run.workloads {
        for &share in &result.settings.shares {
            let runs: Vec<&RunResult> = result
                .runs
                .iter()
                .filter(|r| {
                    &r.row.workload == workload
                        && r.mix.is_none()
                        && r.share.is_none_or(|s| s == share)
                })
                .collect();
            if runs.is_empty() {
                continue;
            }
            let hit = hit_chart(workload, share, &runs);
            write(hit_chart_name(workload, share), &|p| hit.write_svg(p))?;
            let migration = migration_chart(workload, share, &runs);
            if !migration.series.is_empty() {
                write(migration_chart_name(workload, share), &|p| {
                    migration.write_svg(p)
                })?;
            }
            for r in &runs {
                if let Some(chart) = tier_map_chart(r) {
                    write(tier_map_name(workload, share, r.config), &|p| {
                        chart.write_svg(p)
                    })?;
                }
            }
        }
    }
    Ok(written)
}

/// The colour of `config` in the line charts.
fn config_color(config: Config) -> Rgb {
    let index = Config::ALL.iter().position(|c| *c == config).unwrap_or(0);
    cycled(&CONFIGS, index)
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
        series.push(Series {
            label: r.config.name().to_owned(),
            points: r.timeline.iter().map(|p| (p.secs, p.dram_hit)).collect(),
            color: config_color(r.config),
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

/// The engine's migration rate per interval over time, one line per
/// configuration of `runs` whose engine ran.
pub fn migration_chart(workload: &str, share: f64, runs: &[&RunResult]) -> LineChart {
    let last = runs
        .iter()
        .flat_map(|r| r.row.rates.iter().map(|p| p.secs))
        .fold(0.0, f64::max);
    LineChart {
        title: format!(
            "workloads: migration rate, {workload} (DRAM {})",
            format_share(share)
        ),
        x_label: "seconds since phase 0 began".to_owned(),
        y_label: "MB/s moved per engine interval (promotions + demotions)".to_owned(),
        x_range: (0.0, last.ceil().max(1.0)),
        x_axis: XAxis::WholeNumbers,
        y_axis: YAxis::LinearFromZero,
        series: runs
            .iter()
            .filter(|r| !r.row.rates.is_empty())
            .map(|r| Series {
                label: r.config.name().to_owned(),
                points: r.row.rates.iter().map(|p| (p.secs, p.mbps)).collect(),
                color: config_color(r.config),
                stroke: Stroke::Solid,
            })
            .collect(),
    }
}

/// The tier map of `run`, phase starts marked; `None` when the run kept
/// none (the bounds).
pub fn tier_map_chart(run: &RunResult) -> Option<GridChart> {
    let map: &TierMap = run.tier_map.as_ref()?;
    let cell = |n: usize, what: &str| {
        if n == 1 {
            format!("one {what} per cell")
        } else {
            format!("{n} {what}s per cell")
        }
    };
    Some(GridChart {
        title: format!("workloads: tier of every frame, {}", run.label()),
        x_label: format!(
            "seconds since phase 0 began ({})",
            cell(map.samples_per_column, "placement sample")
        ),
        y_label: format!("guest frame ({})", cell(map.frames_per_row, "frame")),
        x_edges: map.edges.clone(),
        row_height: map.frames_per_row as f64,
        y_max: map.frames as f64,
        rows: map
            .rows
            .iter()
            .map(|runs| {
                runs.iter()
                    .map(|&[columns, level]| GridRun {
                        columns: columns as usize,
                        share: level_share(level),
                    })
                    .collect()
            })
            .collect(),
        high: (FAST_TIER, "fast tier (DRAM)".to_owned()),
        low: (SLOW_TIER, "slow tier".to_owned()),
        markers: run
            .phases
            .iter()
            .map(|p| Marker {
                x: p.row.start_secs,
                label: format!("phase {}", p.row.phase),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_workloads_result;

    fn file_names(paths: &[PathBuf]) -> Vec<String> {
        paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn tier_map_chart_has_a_row_per_frame_and_the_phase_starts() {
        let result = sample_workloads_result();
        let run = result
            .runs
            .iter()
            .find(|r| r.config == Config::TieringDirtyLog)
            .unwrap();
        let chart = tier_map_chart(run).unwrap();
        assert_eq!(chart.rows.len(), 32);
        assert_eq!((chart.row_height, chart.y_max), (1.0, 32.0));
        assert_eq!(chart.x_edges.len(), 21);
        // Frame 20 turns fast halfway through phase 1, frame 7 slow.
        let shares = |row: &[GridRun]| -> Vec<(usize, f64)> {
            row.iter().map(|r| (r.columns, r.share)).collect()
        };
        assert_eq!(shares(&chart.rows[20]), [(15, 0.0), (5, 1.0)]);
        assert_eq!(shares(&chart.rows[7]), [(15, 1.0), (5, 0.0)]);
        let markers: Vec<(f64, &str)> = chart
            .markers
            .iter()
            .map(|m| (m.x, m.label.as_str()))
            .collect();
        assert_eq!(markers, [(0.0, "phase 0"), (1.0, "phase 1")]);
        let bound = result.runs.iter().find(|r| r.config.is_bound()).unwrap();
        assert!(tier_map_chart(bound).is_none());
    }

    #[test]
    fn migration_chart_has_a_line_per_engine_run() {
        let result = sample_workloads_result();
        let runs: Vec<&RunResult> = result.runs.iter().collect();
        let chart = migration_chart("hotset", 0.25, &runs);
        let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["tiering-dirty-log", "tiering-fault-sample"]);
        // 4 MiB moved in the 200 ms ending at 11.4 s (1.4 s into phase 0's
        // clock).
        let last = *chart.series[0].points.last().unwrap();
        assert!((last.0 - 1.4).abs() < 1e-9, "{last:?}");
        assert!((last.1 - 4.0 * 1.048_576 / 0.2).abs() < 1e-9, "{last:?}");
    }

    #[test]
    fn writes_every_chart_as_svg() {
        let dir =
            std::env::temp_dir().join(format!("bench-workloads-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let result = sample_workloads_result();
        let written = write_svgs(&result, &dir).unwrap();
        assert_eq!(
            file_names(&written),
            [
                "workloads-hit-hotset-dram25.svg",
                "workloads-migration-hotset-dram25.svg",
                "workloads-tiers-hotset-dram25-first-touch.svg",
                "workloads-tiers-hotset-dram25-tiering-dirty-log.svg",
                "workloads-tiers-hotset-dram25-tiering-fault-sample.svg",
            ]
        );
        for path in &written {
            let svg = std::fs::read_to_string(path).unwrap();
            assert!(svg.trim_start().starts_with("<svg"), "{path:?}");
            assert!(svg.trim_end().ends_with("</svg>"), "{path:?}");
        }
        let tiers = std::fs::read_to_string(&written[3]).unwrap();
        for text in [
            "tier of every frame, hotset, tiering-dirty-log, DRAM 25%",
            "fast tier (DRAM)",
            "slow tier",
            "phase 1",
            "guest frame (one frame per cell)",
        ] {
            assert!(tiers.contains(text), "tier map lacks {text}");
        }
        let Rgb(r, g, b) = FAST_TIER;
        let fast = format!("fill=\"#{r:02X}{g:02X}{b:02X}\"");
        // One rectangle per run: frames 0..7 fast throughout, frames 7
        // and 20 each fast for one run; and the legend's swatch.
        assert_eq!(tiers.matches(&fast).count(), 7 + 2 + 1, "{fast}");
        let migration = std::fs::read_to_string(&written[1]).unwrap();
        assert!(migration.contains("MB/s moved per engine interval"));
        assert!(migration.contains("tiering-fault-sample"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

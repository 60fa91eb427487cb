//! The copy suite's pictures: per range size, bandwidth against thread
//! count for the threaded engines, with the single-thread engines, the
//! contiguous parallel copy, the memcpy loop and the best parallel copy
//! for reference.

use std::path::{Path, PathBuf};

use super::result::{CopyResult, RangeSizeResult};
use crate::plot::{LineChart, PlotError, Rgb, Series, Stroke, XAxis, YAxis};
use crate::size::{format_size, size_tag};

/// Colours: memcpy engines blue, non-temporal orange (lighter when
/// pinned or single-thread), references grey, black and red.
const MEMCPY: Rgb = Rgb(31, 119, 180);
const MEMCPY_LIGHT: Rgb = Rgb(120, 180, 230);
const NT: Rgb = Rgb(230, 120, 20);
const NT_LIGHT: Rgb = Rgb(245, 180, 110);
const CPU_MEMCPY: Rgb = Rgb(44, 160, 44);
const CPU_NT: Rgb = Rgb(20, 90, 20);
const PARALLEL_MEMCPY: Rgb = Rgb(150, 150, 150);
const PARALLEL_NT: Rgb = Rgb(100, 100, 100);
const MEMCPY_LOOP: Rgb = Rgb(0, 0, 0);
const BEST: Rgb = Rgb(214, 39, 40);

/// Writes `copy-<size>.svg` for every range size into `dir` (which must
/// exist) and returns the paths.
pub fn write_svgs(result: &CopyResult, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut written = Vec::new();
    for size in &result.range_sizes {
        let path = dir.join(format!("copy-{}.svg", size_tag(size.range_size)));
        chart(result, size).write_svg(&path)?;
        written.push(path);
    }
    Ok(written)
}

/// The chart of one range size.
pub fn chart(result: &CopyResult, size: &RangeSizeResult) -> LineChart {
    let max_threads = result.settings.max_threads.max(1) as f64;
    let x_range = (0.5, max_threads + 0.5);
    let engine_line = |mode: &str, pinned: bool| -> Vec<(f64, f64)> {
        size.engines
            .iter()
            .filter(|e| e.spec.starts_with("threads") && e.mode == mode && e.pinned == pinned)
            .map(|e| (e.threads as f64, e.bandwidth.median_gbps))
            .collect()
    };
    let cpu_point = |mode: &str| -> Vec<(f64, f64)> {
        size.engines
            .iter()
            .filter(|e| e.spec == "cpu" && e.mode == mode)
            .map(|e| (1.0, e.bandwidth.median_gbps))
            .collect()
    };
    let parallel_line = |mode: &str| -> Vec<(f64, f64)> {
        result
            .parallel
            .iter()
            .filter(|p| p.mode == mode)
            .map(|p| (p.threads as f64, p.bandwidth.median_gbps))
            .collect()
    };
    let solid = |label: &str, points, color| Series {
        label: label.to_owned(),
        points,
        color,
        stroke: Stroke::Solid,
    };
    let dashed = |label: &str, points, color| Series {
        label: label.to_owned(),
        points,
        color,
        stroke: Stroke::Dashed,
    };
    let best = &result.best_parallel;
    let series = vec![
        solid("threads:K/memcpy", engine_line("memcpy", false), MEMCPY),
        solid("threads:K/nt", engine_line("nt", false), NT),
        solid(
            "threads:N:pin/memcpy",
            engine_line("memcpy", true),
            MEMCPY_LIGHT,
        ),
        solid("threads:N:pin/nt", engine_line("nt", true), NT_LIGHT),
        solid("cpu/memcpy", cpu_point("memcpy"), CPU_MEMCPY),
        solid("cpu/nt", cpu_point("nt"), CPU_NT),
        dashed(
            "contiguous parallel memcpy",
            parallel_line("memcpy"),
            PARALLEL_MEMCPY,
        ),
        dashed("contiguous parallel nt", parallel_line("nt"), PARALLEL_NT),
        Series::horizontal(
            format!("memcpy loop {:.2} GB/s", size.memcpy_loop.median_gbps),
            size.memcpy_loop.median_gbps,
            x_range,
            MEMCPY_LOOP,
        ),
        Series::horizontal(
            format!(
                "best parallel {:.2} GB/s ({}×{})",
                best.median_gbps, best.threads, best.mode
            ),
            best.median_gbps,
            x_range,
            BEST,
        ),
    ];
    LineChart {
        title: format!(
            "copy: {} batch of shuffled {} ranges",
            format_size(result.settings.batch_bytes),
            format_size(size.range_size)
        ),
        x_label: "copying threads".to_owned(),
        y_label: "GB/s (median)".to_owned(),
        x_range,
        x_axis: XAxis::WholeNumbers,
        y_axis: YAxis::LinearFromZero,
        series: series
            .into_iter()
            .filter(|s| !s.points.is_empty())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::Stroke;
    use crate::testing::sample_copy_result;

    #[test]
    fn chart_plots_engines_against_threads_with_reference_lines() {
        let result = sample_copy_result();
        let chart = chart(&result, &result.range_sizes[0]);
        assert_eq!(chart.x_range, (0.5, 2.5));
        assert!(chart.title.contains("4 KiB ranges"));
        let series = |label: &str| {
            chart
                .series
                .iter()
                .find(|s| s.label.starts_with(label))
                .unwrap_or_else(|| panic!("no series {label}"))
        };
        assert_eq!(series("threads:K/memcpy").points, [(1.0, 4.4), (2.0, 7.5)]);
        assert_eq!(series("threads:N:pin/memcpy").points, [(2.0, 7.7)]);
        assert_eq!(series("cpu/memcpy").points, [(1.0, 4.5)]);
        assert_eq!(
            series("contiguous parallel nt").points,
            [(1.0, 7.0), (2.0, 10.0)]
        );
        let memcpy = series("memcpy loop");
        assert_eq!(memcpy.points, [(0.5, 5.0), (2.5, 5.0)]);
        assert_eq!(memcpy.stroke, Stroke::Dashed);
        let best = series("best parallel");
        assert_eq!(best.points, [(0.5, 10.0), (2.5, 10.0)]);
        assert_eq!(best.label, "best parallel 10.00 GB/s (2×nt)");
    }

    #[test]
    fn writes_one_file_per_range_size() {
        let dir = std::env::temp_dir().join(format!("bench-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let written = write_svgs(&sample_copy_result(), &dir).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["copy-4KiB.svg", "copy-64KiB.svg", "copy-2MiB.svg"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! SVG line charts (plotters, SVG backend only): the pictures every suite
//! can draw from its results, e.g. bandwidth against thread count.

use std::error::Error;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use thiserror::Error;

/// Why a chart could not be written.
#[derive(Debug, Error)]
pub enum PlotError {
    /// The chart has no point to show.
    #[error("chart {0:?} has no data")]
    Empty(String),
    /// plotters failed to lay out or write the SVG file.
    #[error("draw {}", path.display())]
    Draw {
        /// The SVG file.
        path: PathBuf,
        /// What plotters reported.
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
}

/// An RGB colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stroke {
    /// A solid line with a marker on every point: measurements.
    Solid,
    /// A dashed line without markers: references and baselines.
    Dashed,
}

/// One named line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points, drawn in this order.
    pub points: Vec<(f64, f64)>,
    /// Line colour.
    pub color: Rgb,
    /// Solid or dashed.
    pub stroke: Stroke,
}

impl Series {
    /// A horizontal reference line at `y` across `x_range`.
    pub fn horizontal(label: String, y: f64, x_range: (f64, f64), color: Rgb) -> Self {
        Self {
            label,
            points: vec![(x_range.0, y), (x_range.1, y)],
            color,
            stroke: Stroke::Dashed,
        }
    }
}

/// How the x axis is labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XAxis {
    /// Ticks and labels on whole numbers (thread counts, steps).
    #[default]
    WholeNumbers,
    /// Points are given as `log2` of the value shown: a tick on every
    /// whole `k` is labelled `2^k` (batch sizes 1, 16, 64, 512 spread
    /// evenly instead of crowding at the left).
    PowersOfTwo,
}

/// How the y axis is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum YAxis {
    /// Linear, starting at zero (bandwidths).
    #[default]
    LinearFromZero,
    /// Logarithmic over the positive values (latencies spanning
    /// microseconds to seconds); points at or below zero are left out.
    Log,
}

/// A line chart over an x axis of whole numbers (or powers of two) and a
/// linear or logarithmic y axis.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// Caption.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// Shown x interval.
    pub x_range: (f64, f64),
    /// How x is labelled.
    pub x_axis: XAxis,
    /// How y is scaled.
    pub y_axis: YAxis,
    /// The lines.
    pub series: Vec<Series>,
}

/// Picture size in pixels.
const SIZE: (u32, u32) = (1100, 600);
/// Width of the legend column right of the plot, in pixels.
const LEGEND_WIDTH: u32 = 300;

impl LineChart {
    /// Draws the chart into the SVG file `path` (created or replaced).
    pub fn write_svg(&self, path: &Path) -> Result<(), PlotError> {
        let (y_min, y_max) = self
            .y_extent()
            .ok_or_else(|| PlotError::Empty(self.title.clone()))?;
        self.draw(path, y_min, y_max)
            .map_err(|source| PlotError::Draw {
                path: path.to_owned(),
                source,
            })
    }

    /// The y interval shown: zero to a bit above the largest value, or
    /// (log) a factor of two around the positive values. `None` when there
    /// is nothing to show.
    fn y_extent(&self) -> Option<(f64, f64)> {
        let log = self.y_axis == YAxis::Log;
        let ys = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite() && (!log || *y > 0.0));
        let (min, max) = ys.fold(None, |acc: Option<(f64, f64)>, y| {
            Some(acc.map_or((y, y), |(lo, hi)| (lo.min(y), hi.max(y))))
        })?;
        Some(if log {
            (min / 2.0, max * 2.0)
        } else {
            (0.0, (max * 1.15).max(1e-9))
        })
    }

    fn draw(
        &self,
        path: &Path,
        y_min: f64,
        y_max: f64,
    ) -> Result<(), Box<dyn Error + Send + Sync>> {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(&self.title, ("sans-serif", 22))?;
        // The legend gets its own column so it never hides a point.
        let (plot_area, legend_area) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut builder = ChartBuilder::on(&plot_area);
        builder
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72);
        let x = self.x_range.0..self.x_range.1;
        match self.y_axis {
            YAxis::LinearFromZero => {
                let mut chart = builder.build_cartesian_2d(x, y_min..y_max)?;
                self.draw_lines(&mut chart, &legend_area)?;
            }
            YAxis::Log => {
                let mut chart = builder.build_cartesian_2d(x, (y_min..y_max).log_scale())?;
                self.draw_lines(&mut chart, &legend_area)?;
            }
        }
        root.present()?;
        Ok(())
    }

    /// The mesh, every series and its legend entry, on a chart whose y
    /// coordinate is `Y` (linear or logarithmic).
    fn draw_lines<Y>(
        &self,
        chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
        legend_area: &DrawingArea<SVGBackend<'_>, Shift>,
    ) -> Result<(), Box<dyn Error + Send + Sync>>
    where
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let x_format = match self.x_axis {
            XAxis::WholeNumbers => whole_numbers_only,
            XAxis::PowersOfTwo => powers_of_two_only,
        };
        chart
            .configure_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .x_labels(whole_number_ticks(self.x_range))
            .x_label_formatter(&x_format)
            .y_label_formatter(&short_number)
            .draw()?;
        let log = self.y_axis == YAxis::Log;
        for (index, series) in self.series.iter().enumerate() {
            let Rgb(r, g, b) = series.color;
            let style = RGBColor(r, g, b).stroke_width(2);
            let points: Vec<(f64, f64)> = series
                .points
                .iter()
                .copied()
                .filter(|&(_, y)| !log || y > 0.0)
                .collect();
            match series.stroke {
                Stroke::Solid => {
                    chart.draw_series(LineSeries::new(points, style).point_size(3))?;
                }
                Stroke::Dashed => {
                    chart.draw_series(DashedLineSeries::new(points, 8, 5, style))?;
                }
            }
            legend_entry(legend_area, index, series, style)?;
        }
        Ok(())
    }
}

/// Draws the legend line of `series`, the `index`-th, in the legend column:
/// a key in the series' style and its label.
fn legend_entry<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    index: usize,
    series: &Series,
    style: ShapeStyle,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let row = i32::try_from(index).unwrap_or(i32::MAX);
    let y = row.saturating_mul(22).saturating_add(40);
    let keys = match series.stroke {
        Stroke::Solid => vec![vec![(8, y), (36, y)]],
        Stroke::Dashed => vec![vec![(8, y), (16, y)], vec![(24, y), (36, y)]],
    };
    for key in keys {
        area.draw(&PathElement::new(key, style))?;
    }
    area.draw(&Text::new(
        series.label.as_str(),
        (44, y - 7),
        ("sans-serif", 14),
    ))
}

/// How many x labels to ask plotters for: one per whole number in the
/// range (at most 20), so ticks land on whole numbers.
fn whole_number_ticks(range: (f64, f64)) -> usize {
    let span = (range.1 - range.0).abs();
    if span.is_finite() {
        (span.ceil() as usize + 1).clamp(2, 20)
    } else {
        2
    }
}

/// Axis labels only on whole numbers (thread counts have no halves).
fn whole_numbers_only(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{}", x.round())
    } else {
        String::new()
    }
}

/// `2^x` on whole `x` (for [`XAxis::PowersOfTwo`]), nothing elsewhere.
fn powers_of_two_only(x: &f64) -> String {
    let k = x.round();
    if (x - k).abs() < 1e-6 && (0.0..63.0).contains(&k) {
        format!("{}", 1u64 << k as u32)
    } else {
        String::new()
    }
}

/// A y label without float noise: `0.25`, `12.5`, `1000`.
fn short_number(y: &f64) -> String {
    let text = format!("{y:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> LineChart {
        LineChart {
            title: "test chart".into(),
            x_label: "threads".into(),
            y_label: "GB/s".into(),
            x_range: (0.5, 2.5),
            x_axis: XAxis::WholeNumbers,
            y_axis: YAxis::LinearFromZero,
            series: vec![
                Series {
                    label: "measured".into(),
                    points: vec![(1.0, 5.0), (2.0, 9.0)],
                    color: Rgb(200, 0, 0),
                    stroke: Stroke::Solid,
                },
                Series::horizontal("reference".into(), 10.0, (0.5, 2.5), Rgb(0, 0, 0)),
            ],
        }
    }

    #[test]
    fn writes_an_svg_with_the_labels() {
        let dir = std::env::temp_dir().join(format!("bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        chart().write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.trim_start().starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for text in ["test chart", "measured", "reference", "threads", "GB/s"] {
            assert!(svg.contains(text), "missing {text}");
        }
    }

    #[test]
    fn empty_chart_is_an_error() {
        let mut empty = chart();
        empty.series.clear();
        let err = empty
            .write_svg(Path::new("/nonexistent/x.svg"))
            .unwrap_err();
        assert!(matches!(err, PlotError::Empty(_)));
    }

    #[test]
    fn unwritable_path_is_an_error() {
        let err = chart()
            .write_svg(Path::new("/nonexistent-dir/x.svg"))
            .unwrap_err();
        assert!(matches!(err, PlotError::Draw { .. }));
    }

    #[test]
    fn log_chart_with_powers_of_two_writes_an_svg() {
        let dir = std::env::temp_dir().join(format!("bench-plot-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.svg");
        let mut log = chart();
        log.x_axis = XAxis::PowersOfTwo;
        log.y_axis = YAxis::Log;
        log.x_range = (-0.5, 9.5);
        log.series[0].points = vec![(0.0, 0.02), (4.0, 0.0), (9.0, 300.0)];
        log.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let texts: Vec<&str> = svg
            .split("</text>")
            .filter_map(|part| part.rsplit('>').next())
            .map(str::trim)
            .collect();
        for label in ["1", "2", "16", "512"] {
            assert!(texts.contains(&label), "x label {label} missing: {texts:?}");
        }
    }

    #[test]
    fn y_extent_depends_on_the_scale() {
        let mut c = chart();
        assert_eq!(c.y_extent(), Some((0.0, 10.0 * 1.15)));
        c.y_axis = YAxis::Log;
        c.series[0].points = vec![(1.0, 0.0), (2.0, 0.5)];
        assert_eq!(c.y_extent(), Some((0.25, 20.0)));
        c.series.truncate(1);
        c.series[0].points = vec![(1.0, 0.0)];
        assert_eq!(c.y_extent(), None, "nothing positive to show");
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(powers_of_two_only(&0.0), "1");
        assert_eq!(powers_of_two_only(&9.0), "512");
        assert_eq!(powers_of_two_only(&4.5), "");
        assert_eq!(short_number(&0.25), "0.25");
        assert_eq!(short_number(&1000.0), "1000");
        assert_eq!(short_number(&12.5), "12.5");
        assert_eq!(short_number(&-0.0001), "0");
    }

    #[test]
    fn one_tick_per_whole_number() {
        assert_eq!(whole_number_ticks((0.5, 2.5)), 3);
        assert_eq!(whole_number_ticks((0.5, 16.5)), 17);
        assert_eq!(whole_number_ticks((0.5, 64.5)), 20);
        assert_eq!(whole_number_ticks((0.0, f64::INFINITY)), 2);
    }

    #[test]
    fn only_whole_numbers_are_labelled() {
        assert_eq!(whole_numbers_only(&2.0), "2");
        assert_eq!(whole_numbers_only(&1.5), "");
    }
}

//! SVG grid charts (plotters, SVG backend only): a share in `[0, 1]` per
//! cell of a time × index grid, drawn as a blend of two colours, with
//! labelled vertical markers — e.g. which tier every guest frame was on
//! over a run, phase starts marked.
//!
//! Cells are given as runs of equal value along a row, and each run is
//! one rectangle, so a placement that rarely changes stays a small file.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::plot::{PlotError, Rgb};

/// Picture size in pixels.
const SIZE: (u32, u32) = (1100, 600);
/// Width of the legend column right of the plot, in pixels.
const LEGEND_WIDTH: u32 = 260;
/// Shares shown in the legend.
const LEGEND_SHARES: [f64; 3] = [1.0, 0.5, 0.0];

/// `columns` consecutive cells of a row with the same share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridRun {
    /// Cells covered.
    pub columns: usize,
    /// The share in `[0, 1]`: 1 draws the `high` colour, 0 the `low` one.
    pub share: f64,
}

/// A filled cell rectangle: two opposite corners and the share.
type Cell = ((f64, f64), (f64, f64), f64);

/// A labelled vertical line.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Where on the x axis.
    pub x: f64,
    /// Its label, written at the top.
    pub label: String,
}

/// A time × index grid of shares.
#[derive(Debug, Clone, PartialEq)]
pub struct GridChart {
    /// Caption.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// Column edges on the x axis: column `i` spans `x_edges[i]` to
    /// `x_edges[i + 1]` (one more edge than columns).
    pub x_edges: Vec<f64>,
    /// Y units per row (row `j` spans `j × row_height` upwards).
    pub row_height: f64,
    /// Top of the y axis (the last row is cut there).
    pub y_max: f64,
    /// Per row, bottom first: runs of cells, left to right.
    pub rows: Vec<Vec<GridRun>>,
    /// Colour and legend text of share 1.
    pub high: (Rgb, String),
    /// Colour and legend text of share 0.
    pub low: (Rgb, String),
    /// Vertical lines.
    pub markers: Vec<Marker>,
}

/// The colour of `share` between `low` (0) and `high` (1).
pub fn blend(low: Rgb, high: Rgb, share: f64) -> Rgb {
    let share = if share.is_finite() {
        share.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mix = |l: u8, h: u8| (f64::from(l) + (f64::from(h) - f64::from(l)) * share).round() as u8;
    Rgb(mix(low.0, high.0), mix(low.1, high.1), mix(low.2, high.2))
}

impl GridChart {
    /// Draws the chart into the SVG file `path` (created or replaced).
    pub fn write_svg(&self, path: &Path) -> Result<(), PlotError> {
        let (Some(&first), Some(&last)) = (self.x_edges.first(), self.x_edges.last()) else {
            return Err(PlotError::Empty(self.title.clone()));
        };
        // Markers outside the cells (a phase start before the first
        // sample) widen the axis rather than vanish.
        let x0 = self.markers.iter().map(|m| m.x).fold(first, f64::min);
        let x1 = self.markers.iter().map(|m| m.x).fold(last, f64::max);
        if self.rows.is_empty() || x1 <= x0 || self.y_max <= 0.0 {
            return Err(PlotError::Empty(self.title.clone()));
        }
        self.draw(path, (x0, x1)).map_err(|source| PlotError::Draw {
            path: path.to_owned(),
            source,
        })
    }

    /// Every run as a rectangle `((x0, y0), (x1, y1))` and its share.
    fn rectangles(&self) -> Vec<Cell> {
        let mut rects = Vec::new();
        for (j, row) in self.rows.iter().enumerate() {
            let y0 = j as f64 * self.row_height;
            let y1 = (y0 + self.row_height).min(self.y_max);
            let mut column = 0;
            for run in row {
                let end = (column + run.columns).min(self.x_edges.len() - 1);
                if end > column {
                    rects.push((
                        (self.x_edges[column], y0),
                        (self.x_edges[end], y1),
                        run.share,
                    ));
                }
                column = end;
            }
        }
        rects
    }

    fn draw(&self, path: &Path, x: (f64, f64)) -> Result<(), Box<dyn Error + Send + Sync>> {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(&self.title, ("sans-serif", 22))?;
        let (plot_area, legend_area) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x.0..x.1, 0.0..self.y_max)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .y_label_formatter(&|y| {
                // Frame indices: whole numbers only.
                if (y - y.round()).abs() < 1e-6 {
                    format!("{y:.0}")
                } else {
                    String::new()
                }
            })
            .draw()?;
        let (low, high) = (self.low.0, self.high.0);
        chart.draw_series(self.rectangles().into_iter().map(|(a, b, share)| {
            let Rgb(r, g, bl) = blend(low, high, share);
            Rectangle::new([a, b], RGBColor(r, g, bl).filled())
        }))?;
        for marker in &self.markers {
            let style = BLACK.stroke_width(2);
            chart.draw_series(DashedLineSeries::new(
                [(marker.x, 0.0), (marker.x, self.y_max)],
                8,
                5,
                style,
            ))?;
            chart.draw_series(std::iter::once(Text::new(
                marker.label.clone(),
                (marker.x, self.y_max),
                ("sans-serif", 14),
            )))?;
        }
        for (i, share) in LEGEND_SHARES.into_iter().enumerate() {
            let row = i32::try_from(i).unwrap_or(i32::MAX);
            let y = row.saturating_mul(24).saturating_add(40);
            let Rgb(r, g, b) = blend(low, high, share);
            legend_area.draw(&Rectangle::new(
                [(8, y - 8), (30, y + 8)],
                RGBColor(r, g, b).filled(),
            ))?;
            let text = match share {
                s if s >= 1.0 => self.high.1.clone(),
                s if s <= 0.0 => self.low.1.clone(),
                s => format!("blend: {:.0}% / {:.0}%", s * 100.0, (1.0 - s) * 100.0),
            };
            legend_area.draw(&Text::new(text, (38, y - 7), ("sans-serif", 14)))?;
        }
        root.present()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> GridChart {
        GridChart {
            title: "grid test".into(),
            x_label: "seconds".into(),
            y_label: "frame".into(),
            x_edges: vec![0.0, 1.0, 2.0, 3.0],
            row_height: 2.0,
            y_max: 3.0,
            rows: vec![
                vec![
                    GridRun {
                        columns: 2,
                        share: 1.0,
                    },
                    GridRun {
                        columns: 1,
                        share: 0.0,
                    },
                ],
                vec![GridRun {
                    columns: 3,
                    share: 0.5,
                }],
            ],
            high: (Rgb(0, 0, 200), "fast".into()),
            low: (Rgb(250, 150, 50), "slow".into()),
            markers: vec![Marker {
                x: 1.5,
                label: "phase 1".into(),
            }],
        }
    }

    #[test]
    fn blend_runs_from_low_to_high() {
        let (low, high) = (Rgb(0, 100, 200), Rgb(200, 100, 0));
        assert_eq!(blend(low, high, 0.0), low);
        assert_eq!(blend(low, high, 1.0), high);
        assert_eq!(blend(low, high, 0.5), Rgb(100, 100, 100));
        assert_eq!(blend(low, high, 7.0), high);
        assert_eq!(blend(low, high, f64::NAN), low);
    }

    #[test]
    fn runs_become_rectangles_cut_at_the_top() {
        let rects = chart().rectangles();
        assert_eq!(
            rects,
            [
                ((0.0, 0.0), (2.0, 2.0), 1.0),
                ((2.0, 0.0), (3.0, 2.0), 0.0),
                ((0.0, 2.0), (3.0, 3.0), 0.5),
            ]
        );
    }

    #[test]
    fn writes_an_svg_with_cells_markers_and_legend() {
        let dir = std::env::temp_dir().join(format!("bench-grid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("grid.svg");
        chart().write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.trim_end().ends_with("</svg>"));
        for text in ["grid test", "phase 1", "fast", "slow", "blend: 50% / 50%"] {
            assert!(svg.contains(text), "missing {text}");
        }
        for colour in ["#0000C8", "#FA9632", "#7D4B7D"] {
            assert!(svg.contains(colour), "missing {colour}: {svg}");
        }
    }

    #[test]
    fn nothing_to_draw_is_an_error() {
        let mut empty = chart();
        empty.rows.clear();
        assert!(matches!(
            empty.write_svg(Path::new("/nonexistent/x.svg")),
            Err(PlotError::Empty(_))
        ));
    }
}

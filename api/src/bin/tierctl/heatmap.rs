//! The guest's memory as an SVG heat map (`tierctl frames --svg`): a grid
//! of cells, one per frame in guest-physical order, hue = tier, shade =
//! heat on a log scale, with a legend.
//!
//! Up to [`DETAIL_CELLS`] frames each get a `<rect>` with a tooltip. Above
//! that, cells are drawn as one `<path>` per colour, runs of equal cells in
//! a row merged; above [`MAX_CELLS`] frames, each cell stands for a
//! power-of-two group of frames, so that a 1 TiB guest (512 Ki frames of
//! 2 MiB) stays a file a browser opens.

use std::fmt::Write;

use api::types::FrameEntry;

use crate::render::units::{heat, size};

/// Most cells drawn; more frames are grouped.
pub const MAX_CELLS: usize = 65_536;
/// Most frames drawn one `<rect>` (with a tooltip) each.
pub const DETAIL_CELLS: usize = 4_096;
/// Shades per tier: 0 = no access seen, the last = the hottest frame.
pub const LEVELS: u8 = 8;
/// Hues of tiers 0, 1, ... (blue, orange, green, purple, red, teal).
const HUES: [f64; 6] = [212.0, 28.0, 135.0, 280.0, 350.0, 180.0];

const MARGIN: u64 = 16;
const LABEL_WIDTH: u64 = 96;
const GRID_TOP: u64 = 64;
const GRID_WIDTH: u64 = 1024;
const SWATCH: u64 = 14;
const LEGEND_ROW: u64 = 22;

/// What the map shows.
#[derive(Debug)]
pub struct HeatMapInput<'a> {
    /// The VM's id (title).
    pub vm: &'a str,
    /// Bytes per frame.
    pub frame_size: u64,
    /// Tier names, fastest first.
    pub tiers: &'a [String],
    /// Every frame, in index (guest-physical) order.
    pub frames: &'a [FrameEntry],
}

/// One cell: a frame or a group of frames.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    /// Index of its first frame in the input.
    pub first: usize,
    /// The tier holding most of its frames (the faster one on a tie).
    pub tier: u8,
    /// Its hottest frame's heat.
    pub heat: f32,
}

/// Frames per cell: 1, or the smallest power of two that keeps the cells
/// within [`MAX_CELLS`].
pub fn frames_per_cell(frames: usize) -> usize {
    frames.div_ceil(MAX_CELLS).max(1).next_power_of_two()
}

/// The cells of `frames`, `per_cell` frames each.
pub fn cells(frames: &[FrameEntry], per_cell: usize) -> Vec<Cell> {
    frames
        .chunks(per_cell.max(1))
        .enumerate()
        .map(|(c, group)| {
            let mut counts = [0usize; 256];
            for f in group {
                counts[usize::from(f.tier)] += 1;
            }
            // max_by_key keeps the last maximum: scan from the slowest
            // tier so that a tie goes to the faster one.
            let tier = (0..=255u8)
                .rev()
                .max_by_key(|&t| counts[usize::from(t)])
                .unwrap_or(0);
            let heat = group.iter().map(|f| f.heat).fold(0.0f32, f32::max);
            Cell {
                first: c * per_cell.max(1),
                tier,
                heat,
            }
        })
        .collect()
}

/// The shade of `heat` when the hottest frame is `max`: 0 for no evidence,
/// 1..LEVELS-1 on a log scale up to `max`.
pub fn heat_level(heat: f32, max: f32) -> u8 {
    if !(heat > 0.0 && max > 0.0) {
        return 0;
    }
    let scale = (f64::from(heat).ln_1p() / f64::from(max).ln_1p()).clamp(0.0, 1.0);
    1 + (scale * f64::from(LEVELS - 2)).round() as u8
}

/// The colour of a cell on `tier` at shade `level`, as `#rrggbb`: the
/// tier's hue, lighter for colder.
pub fn colour(tier: u8, level: u8) -> String {
    let hue = HUES[usize::from(tier) % HUES.len()];
    let t = f64::from(level.min(LEVELS - 1)) / f64::from(LEVELS - 1);
    let lightness = 0.94 - t * (0.94 - 0.30);
    let (r, g, b) = hsl_to_rgb(hue, 0.75, lightness);
    format!("#{r:02x}{g:02x}{b:02x}")
}

fn hsl_to_rgb(hue: f64, saturation: f64, lightness: f64) -> (u8, u8, u8) {
    let chroma = (1.0 - (2.0 * lightness - 1.0).abs()) * saturation;
    let h = (hue.rem_euclid(360.0)) / 60.0;
    let x = chroma * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (chroma, x, 0.0),
        1 => (x, chroma, 0.0),
        2 => (0.0, chroma, x),
        3 => (0.0, x, chroma),
        4 => (x, 0.0, chroma),
        _ => (chroma, 0.0, x),
    };
    let m = lightness - chroma / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (byte(r), byte(g), byte(b))
}

/// Text safe inside XML elements and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Grid geometry: columns (the power of two at or below √(2 × cells), so
/// the grid is about twice as wide as tall and each row spans a round
/// number of frames) and the cell's side in pixels.
fn grid(cells: usize) -> (usize, u64) {
    let wide = ((cells * 2) as f64).sqrt() as usize;
    let columns = if wide < 2 { 1 } else { 1 << wide.ilog2() };
    let side = (GRID_WIDTH / columns as u64).clamp(2, 24);
    (columns, side)
}

fn tier_name(tiers: &[String], tier: u8) -> String {
    tiers
        .get(usize::from(tier))
        .cloned()
        .unwrap_or_else(|| format!("tier {tier}"))
}

/// The heat map as an SVG document.
pub fn render_svg(input: &HeatMapInput<'_>) -> String {
    let frames = input.frames;
    let per_cell = frames_per_cell(frames.len());
    let cells = cells(frames, per_cell);
    let (columns, side) = grid(cells.len());
    let rows = cells.len().div_ceil(columns);
    let max_heat = frames.iter().map(|f| f.heat).fold(0.0f32, f32::max);
    // Frames per tier, over every tier any frame is on.
    let tier_count = frames
        .iter()
        .map(|f| usize::from(f.tier) + 1)
        .max()
        .unwrap_or(0)
        .max(input.tiers.len());
    let mut per_tier = vec![0u64; tier_count];
    for f in frames {
        per_tier[usize::from(f.tier)] += 1;
    }

    let grid_left = MARGIN + LABEL_WIDTH;
    let grid_height = rows as u64 * side;
    let legend_top = GRID_TOP + grid_height + 24;
    let width = (grid_left + columns as u64 * side + MARGIN).max(720);
    let height = legend_top + tier_count as u64 * LEGEND_ROW + 40;

    let mut svg = String::new();
    let _ = writeln!(svg, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{width}" height="{height}" fill="white"/>"#
    );
    let total = size((frames.len() as u64).saturating_mul(input.frame_size));
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN}" y="28" font-size="16" font-weight="bold">Guest memory of {}: {} frames of {} ({total})</text>"#,
        escape(input.vm),
        frames.len(),
        size(input.frame_size),
    );
    let cell_text = if per_cell == 1 {
        "one cell per frame".to_owned()
    } else {
        format!(
            "one cell per {per_cell} frames ({}): the tier most of them are on, the hottest one's heat",
            size(input.frame_size.saturating_mul(per_cell as u64))
        )
    };
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN}" y="48" font-size="12">Guest-physical order, left to right, top to bottom; {}; hue = tier, shade = heat (log scale)</text>"#,
        escape(&cell_text)
    );
    if frames.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{MARGIN}" y="{}" font-size="12">no frames</text>"#,
            GRID_TOP + 12
        );
    }

    // Row labels: the guest-physical address each row starts at.
    let label_every = (12u64.div_ceil(side)).max(1) as usize;
    for row in (0..rows).step_by(label_every) {
        let Some(first) = cells.get(row * columns) else {
            break;
        };
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" font-size="10" font-family="monospace" text-anchor="end">{:#x}</text>"#,
            grid_left - 6,
            GRID_TOP + row as u64 * side + side / 2 + 3,
            frames[first.first].gpa
        );
    }

    let level = |cell: &Cell| heat_level(cell.heat, max_heat);
    if per_cell == 1 && cells.len() <= DETAIL_CELLS {
        let gap = u64::from(side >= 6);
        for (i, cell) in cells.iter().enumerate() {
            let f = &frames[cell.first];
            let _ = writeln!(
                svg,
                r#"<rect class="cell" x="{}" y="{}" width="{}" height="{}" fill="{}"><title>frame {} at {:#x}: {}, heat {}</title></rect>"#,
                grid_left + (i % columns) as u64 * side,
                GRID_TOP + (i / columns) as u64 * side,
                side - gap,
                side - gap,
                colour(cell.tier, level(cell)),
                f.index,
                f.gpa,
                escape(&tier_name(input.tiers, f.tier)),
                heat(f64::from(f.heat)),
            );
        }
    } else {
        // One path per colour; equal neighbours in a row form one run.
        let mut paths: Vec<(u8, u8, String)> = Vec::new();
        for (row, row_cells) in cells.chunks(columns).enumerate() {
            let mut start = 0;
            while start < row_cells.len() {
                let key = (row_cells[start].tier, level(&row_cells[start]));
                let mut end = start + 1;
                while end < row_cells.len() && (row_cells[end].tier, level(&row_cells[end])) == key
                {
                    end += 1;
                }
                let index = match paths.iter().position(|(t, l, _)| (*t, *l) == key) {
                    Some(index) => index,
                    None => {
                        paths.push((key.0, key.1, String::new()));
                        paths.len() - 1
                    }
                };
                let run = (end - start) as u64 * side;
                let _ = write!(
                    paths[index].2,
                    "M{} {}h{run}v{side}h-{run}z",
                    grid_left + start as u64 * side,
                    GRID_TOP + row as u64 * side,
                );
                start = end;
            }
        }
        paths.sort_by_key(|(t, l, _)| (*t, *l));
        for (tier, level, d) in &paths {
            let _ = writeln!(svg, r#"<path fill="{}" d="{d}"/>"#, colour(*tier, *level));
        }
    }

    // Legend: each tier's shades, its name and how much of the guest it
    // holds.
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN}" y="{}" font-size="12">cold (no access seen) to hot (heat {}), log scale</text>"#,
        legend_top - 6,
        heat(f64::from(max_heat))
    );
    for (tier, count) in per_tier.iter().enumerate() {
        let tier = tier as u8;
        let y = legend_top + u64::from(tier) * LEGEND_ROW;
        let _ = writeln!(svg, r#"<g class="legend">"#);
        for level in 0..LEVELS {
            let _ = writeln!(
                svg,
                r#"<rect x="{}" y="{y}" width="{SWATCH}" height="{SWATCH}" fill="{}"/>"#,
                MARGIN + u64::from(level) * SWATCH,
                colour(tier, level)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" font-size="12">tier {tier} {}: {count} frames ({})</text>"#,
            MARGIN + u64::from(LEVELS) * SWATCH + 8,
            y + SWATCH - 3,
            escape(&tier_name(input.tiers, tier)),
            size(count.saturating_mul(input.frame_size))
        );
        let _ = writeln!(svg, "</g>");
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn frames(
        n: usize,
        tier: impl Fn(usize) -> u8,
        heat: impl Fn(usize) -> f32,
    ) -> Vec<FrameEntry> {
        (0..n)
            .map(|i| FrameEntry {
                index: i as u64,
                gpa: i as u64 * 2 * MIB,
                tier: tier(i),
                heat: heat(i),
            })
            .collect()
    }

    fn tiers() -> Vec<String> {
        vec!["dram".into(), "slow".into()]
    }

    /// Checks that tags nest and close, and that there is one root `svg`.
    fn assert_well_formed(svg: &str) {
        let mut stack: Vec<&str> = Vec::new();
        let mut roots = 0;
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            rest = &rest[open..];
            if rest.starts_with("<?") {
                rest = &rest[rest.find("?>").expect("unclosed <?") + 2..];
                continue;
            }
            let close = rest.find('>').expect("unclosed tag");
            let tag = &rest[1..close];
            assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name), "mismatched </{name}>");
            } else {
                let name = tag.split([' ', '/', '\n']).next().unwrap();
                if stack.is_empty() {
                    roots += 1;
                    assert_eq!(name, "svg");
                }
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            rest = &rest[close + 1..];
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        assert_eq!(roots, 1);
    }

    fn fill_of_cell(svg: &str, frame: u64) -> String {
        let marker = format!("<title>frame {frame} at");
        let at = svg.find(&marker).unwrap();
        let start = svg[..at].rfind("fill=\"").unwrap() + 6;
        svg[start..start + 7].to_owned()
    }

    #[test]
    fn small_maps_draw_one_rect_per_frame_with_tier_hues_and_a_legend() {
        let frames = frames(
            40,
            |i| u8::from(i >= 10),
            |i| if i % 2 == 0 { 50.0 } else { 0.0 },
        );
        let tiers = tiers();
        let svg = render_svg(&HeatMapInput {
            vm: "web-1",
            frame_size: 2 * MIB,
            tiers: &tiers,
            frames: &frames,
        });
        assert_well_formed(&svg);
        assert_eq!(svg.matches(r#"<rect class="cell""#).count(), 40);
        assert!(
            svg.contains("Guest memory of web-1: 40 frames of 2 MiB (80 MiB)"),
            "{svg}"
        );
        // Same heat, different tiers: different colours; same tier,
        // different heat: different colours.
        assert_ne!(fill_of_cell(&svg, 0), fill_of_cell(&svg, 10));
        assert_ne!(fill_of_cell(&svg, 10), fill_of_cell(&svg, 11));
        assert_eq!(fill_of_cell(&svg, 12), fill_of_cell(&svg, 14));
        assert!(svg.contains("tier 0 dram: 10 frames (20 MiB)"), "{svg}");
        assert!(svg.contains("tier 1 slow: 30 frames (60 MiB)"), "{svg}");
        assert_eq!(svg.matches(r#"<g class="legend">"#).count(), 2);
        assert!(
            svg.contains("<title>frame 12 at 0x1800000: slow, heat 50.0</title>"),
            "{svg}"
        );
    }

    #[test]
    fn large_maps_group_frames_and_stay_small() {
        // 512 Ki frames: a 1 TiB guest of 2 MiB frames, a hot band on dram.
        let n = 512 * 1024;
        let frames = frames(
            n,
            |i| u8::from(i >= n / 4),
            |i| {
                if (1000..5000).contains(&i) {
                    5000.0
                } else {
                    (i % 7) as f32
                }
            },
        );
        let tiers = tiers();
        let svg = render_svg(&HeatMapInput {
            vm: "big",
            frame_size: 2 * MIB,
            tiers: &tiers,
            frames: &frames,
        });
        assert_well_formed(&svg);
        assert_eq!(frames_per_cell(n), 8);
        assert!(
            svg.contains("one cell per 8 frames (16 MiB)"),
            "{}",
            &svg[..600]
        );
        assert!(!svg.contains(r#"class="cell""#));
        // At most one path per colour.
        let paths = svg.matches("<path ").count();
        assert!(
            paths > 2 && paths <= 2 * usize::from(LEVELS),
            "{paths} paths"
        );
        assert!(svg.len() < 2_000_000, "{} bytes", svg.len());
        assert!(svg.contains("tier 0 dram: 131072 frames (256 GiB)"));
        assert!(svg.contains("cold (no access seen) to hot (heat 5000)"));
    }

    #[test]
    fn grouped_cells_take_the_majority_tier_and_the_hottest_heat() {
        let frames = frames(
            6,
            |i| [1, 0, 1, 0, 0, 1][i],
            |i| [1.0, 9.0, 0.0, 0.0, 0.0, 3.0][i],
        );
        let cells = cells(&frames, 4);
        assert_eq!(
            cells,
            [
                // Two on each tier: the faster wins.
                Cell {
                    first: 0,
                    tier: 0,
                    heat: 9.0
                },
                Cell {
                    first: 4,
                    tier: 0,
                    heat: 3.0
                },
            ]
        );
        assert_eq!(frames_per_cell(0), 1);
        assert_eq!(frames_per_cell(MAX_CELLS), 1);
        assert_eq!(frames_per_cell(MAX_CELLS + 1), 2);
        assert_eq!(frames_per_cell(3 * MAX_CELLS), 4);
    }

    #[test]
    fn shades_darken_with_heat_on_a_log_scale() {
        assert_eq!(heat_level(0.0, 100.0), 0);
        assert_eq!(heat_level(f32::NAN, 100.0), 0);
        assert_eq!(heat_level(5.0, 0.0), 0);
        assert_eq!(heat_level(0.01, 7900.0), 1);
        assert_eq!(heat_level(7900.0, 7900.0), LEVELS - 1);
        // Log scale: 10% of the maximum heat is well past half way.
        assert!(heat_level(790.0, 7900.0) > LEVELS / 2);
        let luminance = |c: &str| {
            let v = u32::from_str_radix(&c[1..], 16).unwrap();
            (v >> 16) + ((v >> 8) & 0xff) + (v & 0xff)
        };
        for tier in 0..3 {
            for level in 1..LEVELS {
                assert!(luminance(&colour(tier, level)) < luminance(&colour(tier, level - 1)));
            }
        }
        assert_eq!(colour(0, 0).len(), 7);
        assert_ne!(colour(0, 4), colour(1, 4));
    }

    #[test]
    fn names_are_escaped_and_empty_guests_render() {
        let names = vec!["<d&r>".to_owned()];
        let svg = render_svg(&HeatMapInput {
            vm: "a\"b<c>",
            frame_size: 4096,
            tiers: &names,
            frames: &[],
        });
        assert_well_formed(&svg);
        assert!(svg.contains("a&quot;b&lt;c&gt;"));
        assert!(svg.contains("tier 0 &lt;d&amp;r&gt;: 0 frames"));
        assert!(svg.contains("no frames"));
    }
}

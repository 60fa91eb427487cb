//! The colours of the suites' charts, named once: the policy and
//! workloads suites draw the oracle, the engine and their configurations
//! from here, so the same thing has the same colour in both.

use crate::plot::Rgb;

/// Black.
pub const BLACK: Rgb = Rgb(0, 0, 0);
/// Blue.
pub const BLUE: Rgb = Rgb(31, 119, 180);
/// Orange.
pub const ORANGE: Rgb = Rgb(230, 120, 20);
/// Red.
pub const RED: Rgb = Rgb(214, 39, 40);
/// Green.
pub const GREEN: Rgb = Rgb(44, 160, 44);
/// Purple.
pub const PURPLE: Rgb = Rgb(148, 103, 189);
/// Grey.
pub const GREY: Rgb = Rgb(127, 127, 127);
/// Light grey, for reference lines.
pub const LIGHT_GREY: Rgb = Rgb(150, 150, 150);

/// The oracle's line.
pub const ORACLE: Rgb = BLACK;
/// The engine's line.
pub const ENGINE: Rgb = BLUE;
/// A ratio to the oracle.
pub const RATIO: Rgb = ORANGE;
/// A target's reference line.
pub const TARGET: Rgb = LIGHT_GREY;
/// One colour per series (engine configuration), cycled.
pub const SERIES: [Rgb; 4] = [BLUE, RED, GREEN, PURPLE];

/// The fast tier in a tier map (a darker blue).
pub const FAST_TIER: Rgb = Rgb(31, 90, 180);
/// The slow tier in a tier map (light orange).
pub const SLOW_TIER: Rgb = Rgb(253, 174, 97);

/// The colour of series `index`, cycling through `colors`.
pub fn cycled(colors: &[Rgb], index: usize) -> Rgb {
    colors[index % colors.len()]
}

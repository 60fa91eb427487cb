//! Progress bars on stderr for the long parts of a run. indicatif hides
//! them when stderr is not a terminal, so logs and CI output stay clean.
//! Bars redraw only when a step ends (no ticker thread), so drawing never
//! competes with a measurement for a core.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps labelled `what`, drawn on stderr; the current step
/// goes in its message.
pub fn bar(what: &str, len: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{prefix:>8} [{bar:32.cyan/blue}] {pos}/{len} {elapsed:>4} eta {eta:>4} {msg}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(what.to_owned());
    bar
}

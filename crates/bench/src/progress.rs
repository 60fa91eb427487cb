//! Progress bars on stderr for the long parts of a run. indicatif hides
//! them when stderr is not a terminal, so logs and CI output stay clean.
//! Bars redraw only when a step ends (no ticker thread), so drawing never
//! competes with a measurement for a core.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps labelled `what`, drawn on stderr; the current step
/// goes in its message.
pub fn bar(what: &str, len: u64) -> ProgressBar {
    styled(
        what,
        len,
        "{prefix:>8} [{bar:32.cyan/blue}] {pos}/{len} {elapsed:>4} eta {eta:>4} {msg}",
    )
}

/// A bar of `len` events labelled `what` that also shows how many events
/// happen per second (e.g. migrations/s in a soak run).
pub fn rate_bar(what: &str, len: u64) -> ProgressBar {
    styled(
        what,
        len,
        "{prefix:>8} [{bar:32.cyan/blue}] {human_pos}/{human_len} {per_sec:>12} {elapsed:>4} eta {eta:>4} {msg}",
    )
}

fn styled(what: &str, len: u64, template: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(what.to_owned());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_count_their_steps() {
        for bar in [bar("copy", 10), rate_bar("soak", 10)] {
            bar.inc(3);
            assert_eq!(bar.position(), 3);
            assert_eq!(bar.length(), Some(10));
            bar.finish_and_clear();
        }
    }
}

//! `tierctl stats --watch`: a table refreshed until interrupted, redrawn
//! in place on a terminal, appended otherwise.

use std::io::Write;
use std::time::Duration;

use crate::error::TierctlError;

/// Clear the screen (first frame only), then home the cursor, write each
/// line clearing the rest of it, and clear whatever an older, longer
/// frame left below: the table is replaced without flicker.
pub fn redraw(text: &str, first: bool) -> String {
    let mut out = String::new();
    if first {
        out.push_str("\x1b[2J");
    }
    out.push_str("\x1b[H");
    for line in text.lines() {
        out.push_str(line);
        out.push_str("\x1b[K\n");
    }
    out.push_str("\x1b[J");
    out
}

/// The line above each refresh.
pub fn header(interval_secs: f64, refresh: u64) -> String {
    format!("refresh {refresh}, every {interval_secs} s (Ctrl-C to stop)\n\n")
}

/// Calls `fetch` with the refresh number (from 1) every `interval` and
/// writes what it returns to `out`: redrawn in place when `terminal`, one
/// after the other (separated by a blank line) otherwise. Returns only
/// with the first error: the process normally ends with Ctrl-C.
pub fn watch(
    interval: Duration,
    terminal: bool,
    out: &mut dyn Write,
    mut fetch: impl FnMut(u64) -> Result<String, TierctlError>,
) -> Result<(), TierctlError> {
    let write_error = |source| TierctlError::Write {
        what: "stdout".into(),
        source,
    };
    for refresh in 1u64.. {
        let text = fetch(refresh)?;
        let frame = if terminal {
            redraw(&text, refresh == 1)
        } else if refresh == 1 {
            text
        } else {
            format!("\n{text}")
        };
        out.write_all(frame.as_bytes()).map_err(write_error)?;
        out.flush().map_err(write_error)?;
        std::thread::sleep(interval);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn until_third(refresh: u64) -> Result<String, TierctlError> {
        if refresh < 3 {
            Ok(format!("table {refresh}\nline two\n"))
        } else {
            Err(TierctlError::Refused {
                status: 409,
                body: Vec::new(),
            })
        }
    }

    #[test]
    fn a_pipe_gets_one_table_per_refresh() {
        let mut out = Vec::new();
        let e = watch(Duration::from_millis(1), false, &mut out, until_third).unwrap_err();
        assert!(matches!(e, TierctlError::Refused { status: 409, .. }));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "table 1\nline two\n\ntable 2\nline two\n"
        );
    }

    #[test]
    fn a_terminal_is_redrawn_in_place() {
        let mut out = Vec::new();
        watch(Duration::from_millis(1), true, &mut out, until_third).unwrap_err();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("\x1b[2J").count(), 1, "{text:?}");
        assert_eq!(text.matches("\x1b[H").count(), 2, "{text:?}");
        assert!(
            text.ends_with("table 2\x1b[K\nline two\x1b[K\n\x1b[J"),
            "{text:?}"
        );
        assert_eq!(redraw("a\nb", false), "\x1b[Ha\x1b[K\nb\x1b[K\n\x1b[J");
    }

    #[test]
    fn the_header_says_how_to_stop() {
        assert_eq!(
            header(0.5, 7),
            "refresh 7, every 0.5 s (Ctrl-C to stop)\n\n"
        );
    }
}

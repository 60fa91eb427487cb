//! How a run was started and under what conditions: the command line, the
//! date, the mode and the load average before and after.

use serde::{Deserialize, Serialize};

use crate::date::utc_today;
use crate::machine::LoadAverage;

/// How a run was started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    /// The command line as a user would type it: `tierbench` followed by
    /// the arguments, shell-quoted where needed.
    pub command_line: String,
    /// The exact `argv`, program path included.
    pub args: Vec<String>,
    /// UTC date the run started, `YYYY-MM-DD`.
    pub date: String,
    /// Whether `--quick` (CI smoke mode) was given.
    pub quick: bool,
    /// Load average when the run started.
    pub load_start: Option<LoadAverage>,
    /// Load average when the last suite finished.
    pub load_end: Option<LoadAverage>,
}

impl Invocation {
    /// Captures the current process's arguments, today's date and the
    /// load average.
    pub fn capture(quick: bool) -> Self {
        let args: Vec<String> = std::env::args().collect();
        Self {
            command_line: command_line("tierbench", args.get(1..).unwrap_or_default()),
            args,
            date: utc_today(),
            quick,
            load_start: LoadAverage::read(),
            load_end: None,
        }
    }

    /// Records the load average at the end of the run.
    pub fn finish(&mut self) {
        self.load_end = LoadAverage::read();
    }

    /// `0.52 at start, 1.20 at end (1-minute load average)`, or what of it
    /// is known.
    pub fn describe_load(&self) -> String {
        let show =
            |load: Option<LoadAverage>| load.map_or("?".to_owned(), |l| format!("{:.2}", l.one));
        format!(
            "{} at start, {} at end (1-minute load average)",
            show(self.load_start),
            show(self.load_end)
        )
    }
}

/// `program` and `args` joined with spaces, each argument quoted for a
/// POSIX shell when it holds anything but safe characters.
pub fn command_line(program: &str, args: &[String]) -> String {
    std::iter::once(program.to_owned())
        .chain(args.iter().map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `arg` as a POSIX shell word.
fn shell_quote(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        let args: Vec<String> = ["copy", "--json", "/tmp/a b.json", "it's", ""]
            .map(String::from)
            .to_vec();
        assert_eq!(
            command_line("tierbench", &args),
            r"tierbench copy --json '/tmp/a b.json' 'it'\''s' ''"
        );
    }

    #[test]
    fn capture_records_date_and_mode() {
        let mut invocation = Invocation::capture(true);
        assert!(invocation.quick);
        assert!(invocation.command_line.starts_with("tierbench"));
        assert_eq!(invocation.date.len(), 10);
        invocation.finish();
        assert!(invocation.describe_load().contains("at end"));
    }
}

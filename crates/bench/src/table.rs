//! `Table`: rows of text cells rendered as an aligned plain-text table
//! (stdout) or a GitHub markdown table (docs/benchmarks.md).

use std::fmt::Write as _;

use thiserror::Error;

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A row did not have one cell per column.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("table {table:?}: row has {got} cells, expected {expected}")]
pub struct RowWidthError {
    /// Title of the table.
    pub table: String,
    /// Number of columns.
    pub expected: usize,
    /// Number of cells in the row.
    pub got: usize,
}

/// A titled table of text cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    title: String,
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with the given title and `(header, alignment)`
    /// columns.
    pub fn new(title: impl Into<String>, columns: &[(&str, Align)]) -> Self {
        Self {
            title: title.into(),
            headers: columns.iter().map(|(h, _)| (*h).to_owned()).collect(),
            aligns: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// The title.
    pub fn title(&self) -> &str {
        &self.title
    }

    /// The column headers.
    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// The rows added so far.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// Appends a row; it must have one cell per column.
    pub fn push_row(&mut self, cells: Vec<String>) -> Result<(), RowWidthError> {
        if cells.len() != self.headers.len() {
            return Err(RowWidthError {
                table: self.title.clone(),
                expected: self.headers.len(),
                got: cells.len(),
            });
        }
        self.rows.push(cells);
        Ok(())
    }

    /// The title, then the header, a rule and the rows, every column padded
    /// to its widest cell and separated by two spaces.
    pub fn render_text(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|col| {
                std::iter::once(&self.headers[col])
                    .chain(self.rows.iter().map(|row| &row[col]))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .zip(&self.aligns)
                .map(|((cell, &width), align)| match align {
                    Align::Left => format!("{cell:<width$}"),
                    Align::Right => format!("{cell:>width$}"),
                })
                .collect();
            padded.join("  ").trim_end().to_owned()
        };
        let mut out = format!("{}\n", self.title);
        out.push_str(&line(&self.headers));
        out.push('\n');
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        out.push_str(&rule.join("  "));
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }

    /// A markdown table (no title: the caller makes it a heading), with
    /// `|` in cells escaped and right-aligned columns marked `---:`.
    pub fn render_markdown(&self) -> String {
        let line = |cells: &[String]| {
            let escaped: Vec<String> = cells.iter().map(|c| c.replace('|', r"\|")).collect();
            format!("| {} |\n", escaped.join(" | "))
        };
        let mut out = line(&self.headers);
        out.push('|');
        for align in &self.aligns {
            let _ = write!(
                out,
                "{}|",
                match align {
                    Align::Left => "---",
                    Align::Right => "---:",
                }
            );
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut table = Table::new("speeds", &[("engine", Align::Left), ("GB/s", Align::Right)]);
        table.push_row(vec!["cpu".into(), "5.20".into()]).unwrap();
        table
            .push_row(vec!["threads:16:pin".into(), "12.75".into()])
            .unwrap();
        table
    }

    #[test]
    fn text_columns_are_aligned() {
        let text = sample().render_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            vec![
                "speeds",
                "engine           GB/s",
                "--------------  -----",
                "cpu              5.20",
                "threads:16:pin  12.75",
            ]
        );
    }

    #[test]
    fn markdown_has_header_alignment_and_rows() {
        let md = sample().render_markdown();
        assert_eq!(
            md,
            "| engine | GB/s |\n|---|---:|\n| cpu | 5.20 |\n| threads:16:pin | 12.75 |\n"
        );
    }

    #[test]
    fn markdown_escapes_pipes() {
        let mut table = Table::new("t", &[("a", Align::Left)]);
        table.push_row(vec!["x|y".into()]).unwrap();
        assert!(table.render_markdown().contains(r"| x\|y |"));
    }

    #[test]
    fn rows_must_match_the_columns() {
        let mut table = sample();
        let err = table.push_row(vec!["only one".into()]).unwrap_err();
        assert_eq!((err.expected, err.got), (2, 1));
        assert_eq!(table.rows().len(), 2);
    }
}

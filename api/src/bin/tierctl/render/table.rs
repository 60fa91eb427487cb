//! Aligned text: column tables and `key  value` blocks.

/// A table with a header row; columns are padded to their widest cell and
/// separated by two spaces.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headings.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            right: vec![false; header.len()],
            rows: Vec::new(),
        }
    }

    /// Right-aligns these columns (numbers).
    pub fn right_align(mut self, columns: &[usize]) -> Self {
        for &c in columns {
            if let Some(r) = self.right.get_mut(c) {
                *r = true;
            }
        }
        self
    }

    /// Adds a row; missing cells are blank, extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        let cell =
            |row: &[String], c: usize| row.get(c).map(String::as_str).unwrap_or("").to_owned();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (c, width) in widths.iter_mut().enumerate() {
                *width = (*width).max(cell(row, c).chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (c, (&width, &right)) in widths.iter().zip(&self.right).enumerate() {
                let text = cell(row, c);
                let pad = " ".repeat(width - text.chars().count());
                if c > 0 {
                    line.push_str("  ");
                }
                if right {
                    line.push_str(&pad);
                    line.push_str(&text);
                } else {
                    line.push_str(&text);
                    line.push_str(&pad);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `key  value` lines with the values aligned.
pub fn key_values(pairs: &[(&str, String)]) -> String {
    let width = pairs
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (key, value) in pairs {
        let line = format!("{key:width$}  {value}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_and_numbers_right_aligned() {
        let mut t = Table::new(&["NAME", "FRAMES"]).right_align(&[1]);
        t.row(vec!["dram".into(), "7".into()]);
        t.row(vec!["cxl-slow".into(), "1024".into()]);
        t.row(vec!["x".into()]);
        assert_eq!(
            t.render(),
            "NAME      FRAMES\n\
             dram           7\n\
             cxl-slow    1024\n\
             x\n"
        );
    }

    #[test]
    fn key_values_align_on_the_longest_key() {
        assert_eq!(
            key_values(&[
                ("vm", "vm0".into()),
                ("threshold", "12.5".into()),
                ("empty", "".into())
            ]),
            "vm         vm0\nthreshold  12.5\nempty\n"
        );
    }
}

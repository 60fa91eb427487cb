//! Writing a finished report to the files the command line named: JSON,
//! markdown and SVG charts.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::plot::PlotError;
use crate::report::BenchReport;
use crate::table::RowWidthError;

/// Why an output file could not be written.
#[derive(Debug, Error)]
pub enum OutputError {
    /// Writing or creating a file or directory failed.
    #[error("write {}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The report could not be encoded as JSON.
    #[error("encode results as JSON")]
    Json(#[from] serde_json::Error),
    /// A table was malformed.
    #[error("render table")]
    Table(#[from] RowWidthError),
    /// A chart could not be drawn.
    #[error("draw chart")]
    Plot(#[from] PlotError),
}

/// Writes the report as JSON to `path`.
pub fn write_json(report: &BenchReport, path: &Path) -> Result<(), OutputError> {
    write(path, report.to_json()?)
}

/// Writes the report as a markdown section to `path`.
pub fn write_markdown(report: &BenchReport, path: &Path) -> Result<(), OutputError> {
    write(path, report.render_markdown()?)
}

/// Creates `dir` if needed and writes every suite's charts into it;
/// returns the files written.
pub fn write_svgs(report: &BenchReport, dir: &Path) -> Result<Vec<PathBuf>, OutputError> {
    fs::create_dir_all(dir).map_err(|source| OutputError::Write {
        path: dir.to_owned(),
        source,
    })?;
    let mut written = Vec::new();
    for result in &report.results {
        written.extend(result.write_svgs(dir)?);
    }
    Ok(written)
}

fn write(path: &Path, text: String) -> Result<(), OutputError> {
    fs::write(path, text).map_err(|source| OutputError::Write {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_report;

    #[test]
    fn writes_every_format() {
        let dir = std::env::temp_dir().join(format!("bench-output-{}", std::process::id()));
        let report = sample_report();
        let svgs = write_svgs(&report, &dir.join("svg")).unwrap();
        assert_eq!(svgs.len(), 3);
        for svg in &svgs {
            assert!(fs::read_to_string(svg).unwrap().starts_with("<svg"));
        }
        write_json(&report, &dir.join("r.json")).unwrap();
        write_markdown(&report, &dir.join("r.md")).unwrap();
        let json = fs::read_to_string(dir.join("r.json")).unwrap();
        assert_eq!(BenchReport::from_json(&json).unwrap(), report);
        assert!(
            fs::read_to_string(dir.join("r.md"))
                .unwrap()
                .contains("## tierbench copy")
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unwritable_path_names_the_file() {
        let err = write_json(&sample_report(), Path::new("/nonexistent-dir/r.json")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-dir/r.json"));
    }
}

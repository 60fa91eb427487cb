//! What the result rows and tables of the policy and workloads suites
//! share: the fields of a run and of a phase both keep ([`RunRow`],
//! [`PhaseRow`], flattened into each suite's rows so the JSON keeps its
//! keys), how their cells are printed, and the table skeleton (one row per
//! run or per phase of a run, the run, phase and engine tables).

use serde::{Deserialize, Serialize};

use super::RatePoint;
use crate::table::{Align, RowWidthError, Table};

/// What every run row keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    /// The workload's name.
    pub workload: String,
    /// The payload's workload string.
    pub args: String,
    /// Mean guest throughput over the phases, Mops/s.
    pub mops: Option<f64>,
    /// The longest convergence time over the phases after a shift;
    /// `None` when one never reached the target ratio (and for the
    /// workloads suite's bounds).
    #[serde(default)]
    pub convergence_secs: Option<f64>,
    /// Migration rate per engine interval from phase 0 on (engine runs
    /// only).
    #[serde(default)]
    pub rates: Vec<RatePoint>,
}

/// What every phase row keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRow {
    /// The phase (0 follows boot and warm-up; later ones are shifts).
    pub phase: u64,
    /// When it began, seconds after phase 0 began.
    #[serde(default)]
    pub start_secs: f64,
    /// Placement samples taken in it.
    pub samples: usize,
    /// Guest throughput, Mops/s (every vCPU's phase report).
    pub mops: Option<f64>,
    /// The oracle's DRAM-hit ratio for the run's room on the fast tier.
    pub oracle_hit: f64,
    /// Seconds from its start until the DRAM-hit ratio first reached the
    /// after-shift target share of the oracle's; `None` when it never
    /// did.
    #[serde(default)]
    pub convergence_secs: Option<f64>,
}

/// `12.34` Mops/s, or `—`.
pub fn format_mops(mops: Option<f64>) -> String {
    mops.map_or_else(|| "—".to_owned(), |m| format!("{m:.2}"))
}

/// `1.5 s`, or `never`.
pub fn format_secs(secs: Option<f64>) -> String {
    secs.map_or_else(|| "never".to_owned(), |s| format!("{s:.1} s"))
}

/// `1.50×`, or `—`.
pub fn format_times(r: Option<f64>) -> String {
    r.map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"))
}

/// Columns named `left` (left-aligned), then `right` (right-aligned).
pub fn columns<'a>(left: &[&'a str], right: &[&'a str]) -> Vec<(&'a str, Align)> {
    let side = |names: &[&'a str], align: Align| {
        names.iter().map(move |&n| (n, align)).collect::<Vec<_>>()
    };
    let mut all = side(left, Align::Left);
    all.extend(side(right, Align::Right));
    all
}

/// A table titled `title` with `columns`, a row of `cells` per item of
/// `items`.
pub fn table_of<T>(
    title: impl Into<String>,
    columns: &[(&str, Align)],
    items: impl IntoIterator<Item = T>,
    cells: impl Fn(T) -> Vec<String>,
) -> Result<Table, RowWidthError> {
    let mut table = Table::new(title, columns);
    for item in items {
        table.push_row(cells(item))?;
    }
    Ok(table)
}

/// Every phase of every run of `runs`, with its run, in order.
pub fn per_phase<'a, R, P: 'a>(
    runs: &'a [R],
    phases: impl Fn(&'a R) -> &'a [P] + 'a,
) -> impl Iterator<Item = (&'a R, &'a P)> + 'a {
    runs.iter()
        .flat_map(move |r| phases(r).iter().map(move |p| (r, p)))
}

/// A suite's run row as its phase and engine tables name it.
pub trait KeyedRun {
    /// One phase of the run.
    type Phase;
    /// The columns that name a run.
    const KEY: &'static [(&'static str, Align)];
    /// The cells under [`KeyedRun::KEY`].
    fn key(&self) -> Vec<String>;
    /// The run's phases.
    fn phases(&self) -> &[Self::Phase];
}

fn keyed_columns<'a, R: KeyedRun>(right: &[&'a str]) -> Vec<(&'a str, Align)> {
    let mut all = R::KEY.to_vec();
    all.extend(columns(&[], right));
    all
}

/// One row per phase of every run of `runs`: the run's key, then
/// `cells` under the `right` columns (right-aligned).
pub fn phase_table<R: KeyedRun>(
    title: impl Into<String>,
    right: &[&str],
    runs: &[R],
    cells: impl Fn(&R, &R::Phase) -> Vec<String>,
) -> Result<Table, RowWidthError> {
    let keyed = |(r, p): (&R, &R::Phase)| {
        let mut row = r.key();
        row.extend(cells(r, p));
        row
    };
    table_of(
        title,
        &keyed_columns::<R>(right),
        per_phase(runs, R::phases),
        keyed,
    )
}

/// One row per run of `runs` that `cells` has cells for: the run's key,
/// then those cells under the `right` columns (right-aligned).
pub fn keyed_table<R: KeyedRun>(
    title: impl Into<String>,
    right: &[&str],
    runs: &[R],
    cells: impl Fn(&R) -> Option<Vec<String>>,
) -> Result<Table, RowWidthError> {
    let rows = runs.iter().filter_map(|r| {
        let mut row = r.key();
        row.extend(cells(r)?);
        Some(row)
    });
    table_of(title, &keyed_columns::<R>(right), rows, |row| row)
}

/// The three tables of a suite's result: per run, per phase, and the
/// engine's counters.
pub trait SuiteTables {
    /// One row per run.
    fn run_table(&self) -> Result<Table, RowWidthError>;
    /// One row per phase of every run.
    fn phase_table(&self) -> Result<Table, RowWidthError>;
    /// One row per run whose engine ran.
    fn engine_table(&self) -> Result<Table, RowWidthError>;

    /// The run, per-phase and engine tables.
    fn tables(&self) -> Result<Vec<Table>, RowWidthError> {
        Ok(vec![
            self.run_table()?,
            self.phase_table()?,
            self.engine_table()?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_phase_rows() {
        assert_eq!(format_mops(Some(1.234)), "1.23");
        assert_eq!(format_secs(None), "never");
        assert_eq!(format_times(Some(1.5)), "1.50×");
        let runs = [("a", vec![0, 1]), ("b", vec![0])];
        let rows: Vec<(&str, i32)> = per_phase(&runs, |r| r.1.as_slice())
            .map(|(r, p)| (r.0, *p))
            .collect();
        assert_eq!(rows, [("a", 0), ("a", 1), ("b", 0)]);
        let t = table_of("t", &columns(&["x"], &["n"]), rows, |(x, n)| {
            vec![x.to_owned(), n.to_string()]
        })
        .unwrap();
        assert_eq!(t.rows().len(), 3);
        assert_eq!(t.headers(), ["x", "n"]);
    }
}

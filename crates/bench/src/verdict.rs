//! One target of an issue judged against the values a run measured: met
//! by every value or not, how many kept to it, and the worst and where
//! it was measured. Suites judge and report targets; they never assert
//! them.

use serde::{Deserialize, Serialize};

/// One target: met by every judged value or not, with the worst.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The bound.
    pub bound: f64,
    /// Whether every value kept to it (false when nothing was measured).
    pub met: bool,
    /// Values that kept to it.
    pub runs_met: usize,
    /// Values judged (a run's, or a batch size's).
    pub runs: usize,
    /// The worst value (`None`: a value was missing, which misses).
    pub worst: Option<f64>,
    /// Where the worst value was measured.
    pub worst_run: Option<String>,
}

impl Verdict {
    /// Judges `values` (where it was measured, value; `None` misses)
    /// against `bound`, from below (`at_least`) or above.
    pub fn judge(values: &[(String, Option<f64>)], bound: f64, at_least: bool) -> Self {
        let keeps =
            |v: Option<f64>| v.is_some_and(|v| if at_least { v >= bound } else { v <= bound });
        // Worse: missing, then further from the bound.
        let badness = |v: Option<f64>| match v {
            None => f64::INFINITY,
            Some(v) if at_least => -v,
            Some(v) => v,
        };
        let worst = values
            .iter()
            .max_by(|a, b| badness(a.1).total_cmp(&badness(b.1)));
        let runs_met = values.iter().filter(|(_, v)| keeps(*v)).count();
        Self {
            bound,
            met: !values.is_empty() && runs_met == values.len(),
            runs_met,
            runs: values.len(),
            worst: worst.and_then(|w| w.1),
            worst_run: worst.map(|w| w.0.clone()),
        }
    }

    /// `target: {what} — met (4 of 4 {counted}); worst {value} ({where})`.
    pub fn describe(
        &self,
        what: &str,
        counted: &str,
        value: impl Fn(Option<f64>) -> String,
    ) -> String {
        let verdict = if self.met { "met" } else { "NOT MET" };
        let worst = self.worst_run.as_ref().map_or_else(String::new, |run| {
            format!("; worst {} ({run})", value(self.worst))
        });
        format!(
            "target: {what} — {verdict} ({} of {} {counted}){worst}",
            self.runs_met, self.runs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(v: &[(&str, Option<f64>)]) -> Vec<(String, Option<f64>)> {
        v.iter().map(|(w, v)| ((*w).to_owned(), *v)).collect()
    }

    #[test]
    fn the_worst_value_decides_and_is_named() {
        let v = values(&[("a", Some(0.95)), ("b", Some(0.85)), ("c", Some(0.91))]);
        let at_least = Verdict::judge(&v, 0.9, true);
        assert!(!at_least.met);
        assert_eq!((at_least.runs_met, at_least.runs), (2, 3));
        assert_eq!(at_least.worst, Some(0.85));
        assert_eq!(at_least.worst_run.as_deref(), Some("b"));
        let at_most = Verdict::judge(&v, 0.96, false);
        assert!(at_most.met);
        assert_eq!(at_most.worst_run.as_deref(), Some("a"));
        assert_eq!(
            at_most.describe("x ≤ 0.96", "batch sizes", |v| format!("{v:?}")),
            "target: x ≤ 0.96 — met (3 of 3 batch sizes); worst Some(0.95) (a)"
        );
    }

    #[test]
    fn a_missing_value_or_nothing_judged_misses() {
        let missing = Verdict::judge(&values(&[("a", Some(1.0)), ("b", None)]), 0.5, true);
        assert!(!missing.met);
        assert_eq!(missing.worst, None);
        assert_eq!(missing.worst_run.as_deref(), Some("b"));
        assert!(!Verdict::judge(&[], 0.5, true).met);
    }
}

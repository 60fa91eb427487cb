//! Summary statistics of repeated measurements: mean, median, percentiles and
//! ratios.

/// The arithmetic mean, or `None` without values.
pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// The median of `samples`: the middle value, or the mean of the two
/// middle values for an even count. `None` when there are no samples or
/// one of them is NaN.
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// The `q`-quantile of `samples` (`q` in `[0, 1]`) by the nearest-rank
/// method: the smallest sample with at least `q` of all samples at or
/// below it (so p99 of 100 samples is the 99th smallest, and `q = 1` the
/// maximum). A sample always, never an interpolation: a reported p99 stall
/// is one some write really suffered. `None` when there are no samples,
/// one is NaN, or `q` is outside `[0, 1]`.
pub fn percentile(samples: &[f64], q: f64) -> Option<f64> {
    if samples.is_empty() || samples.iter().any(|s| s.is_nan()) || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// `value / baseline`; `None` when the baseline is not a positive finite
/// number or `value` is not finite (no ratio is better than a wrong one).
pub fn ratio(value: f64, baseline: f64) -> Option<f64> {
    (baseline.is_finite() && baseline > 0.0 && value.is_finite()).then(|| value / baseline)
}

/// Relative spread of samples around their median: `(max - min) / median`.
/// `None` for no samples or a non-positive median.
pub fn relative_spread(samples: &[f64]) -> Option<f64> {
    let median = median(samples)?;
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    ratio(max - min, median)
}

/// Two-sided 95 % quantiles of Student's t distribution for 1 to 30
/// degrees of freedom; beyond, the normal 1.96 is within 4 %.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Half-width of the 95 % confidence interval of the mean of `samples`
/// (Student's t, samples taken as independent). `None` for fewer than two
/// samples or a non-finite one.
pub fn mean_margin_95(samples: &[f64]) -> Option<f64> {
    let n = samples.len();
    if n < 2 || samples.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let mean = mean(samples.iter().copied())?;
    let variance = samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T_975.get(n - 2).copied().unwrap_or(1.96);
    Some(t * (variance / n as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_count_is_the_middle_value() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[2.5]), Some(2.5));
    }

    #[test]
    fn median_of_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn median_ignores_outliers() {
        assert_eq!(median(&[1.0, 1000.0, 2.0, 3.0, -50.0]), Some(2.0));
    }

    #[test]
    fn median_of_nothing_or_nan_is_none() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN, 2.0]), None);
    }

    #[test]
    fn percentile_is_the_nearest_rank_sample() {
        let samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&samples, 0.5), Some(50.0));
        assert_eq!(percentile(&samples, 0.99), Some(99.0));
        assert_eq!(percentile(&samples, 1.0), Some(100.0));
        assert_eq!(percentile(&samples, 0.0), Some(1.0));
        assert_eq!(percentile(&samples, 0.001), Some(1.0));
        assert_eq!(percentile(&samples, 0.991), Some(100.0));
    }

    #[test]
    fn percentile_of_few_samples_never_interpolates() {
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[3.0, 1.0], 0.5), Some(1.0));
        assert_eq!(percentile(&[3.0, 1.0], 0.51), Some(3.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 1000.0], 0.99), Some(1000.0));
    }

    #[test]
    fn percentile_refuses_nothing_nan_and_bad_quantiles() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[1.0, f64::NAN], 0.5), None);
        assert_eq!(percentile(&[1.0], 1.5), None);
        assert_eq!(percentile(&[1.0], -0.1), None);
        assert_eq!(percentile(&[1.0], f64::NAN), None);
    }

    #[test]
    fn ratio_divides_by_a_positive_baseline() {
        assert_eq!(ratio(6.0, 3.0), Some(2.0));
        assert_eq!(ratio(1.5, 3.0), Some(0.5));
        assert_eq!(ratio(0.0, 3.0), Some(0.0));
    }

    #[test]
    fn ratio_refuses_bad_baselines_and_values() {
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(1.0, -2.0), None);
        assert_eq!(ratio(1.0, f64::NAN), None);
        assert_eq!(ratio(1.0, f64::INFINITY), None);
        assert_eq!(ratio(f64::INFINITY, 1.0), None);
    }

    #[test]
    fn margin_is_t_times_the_standard_error() {
        // Mean 2, sample standard deviation 1, n = 3: 4.303 / sqrt(3).
        let m = mean_margin_95(&[1.0, 2.0, 3.0]).unwrap();
        assert!((m - 4.303 / 3f64.sqrt()).abs() < 1e-12, "{m}");
        assert_eq!(mean_margin_95(&[5.0, 5.0]), Some(0.0));
        assert_eq!(mean_margin_95(&[1.0]), None);
        assert_eq!(mean_margin_95(&[1.0, f64::NAN]), None);
        let many = vec![1.0; 40];
        assert_eq!(mean_margin_95(&many), Some(0.0));
    }

    #[test]
    fn spread_is_range_over_median() {
        assert_eq!(relative_spread(&[9.0, 10.0, 11.0]), Some(0.2));
        assert_eq!(relative_spread(&[4.0, 4.0]), Some(0.0));
        assert_eq!(relative_spread(&[]), None);
    }
}

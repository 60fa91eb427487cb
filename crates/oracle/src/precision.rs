//! How well a tracker's ranking matches the oracle's.

use std::collections::HashSet;

/// Precision at k: the share of the oracle's top k (k = the distinct frames
/// of `oracle_top`) found among the first k frames of `tracker_top`
/// (repeats count once). 1 when k is 0: there was nothing to find.
pub fn precision_at_k(oracle_top: &[usize], tracker_top: &[usize]) -> f64 {
    let truth: HashSet<usize> = oracle_top.iter().copied().collect();
    let k = truth.len();
    if k == 0 {
        return 1.0;
    }
    let found: HashSet<usize> = tracker_top
        .iter()
        .take(k)
        .copied()
        .filter(|frame| truth.contains(frame))
        .collect();
    found.len() as f64 / k as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_of_the_true_top_found() {
        assert_eq!(precision_at_k(&[1, 2, 3, 4], &[2, 4, 9, 10]), 0.5);
        assert_eq!(precision_at_k(&[1, 2, 3, 4], &[4, 3, 2, 1]), 1.0);
        assert_eq!(precision_at_k(&[1, 2, 3, 4], &[7, 8]), 0.0);
    }

    #[test]
    fn only_the_first_k_of_the_tracker_count() {
        assert_eq!(precision_at_k(&[1, 2], &[1, 5, 2]), 0.5);
        // Fewer than k tracked frames: the missing ones are misses.
        assert_eq!(precision_at_k(&[1, 2, 3, 4], &[3]), 0.25);
    }

    #[test]
    fn repeats_count_once() {
        assert_eq!(precision_at_k(&[1, 2], &[1, 1]), 0.5);
        assert_eq!(precision_at_k(&[1, 1, 2], &[2, 1]), 1.0);
    }

    #[test]
    fn nothing_to_find_is_perfect() {
        assert_eq!(precision_at_k(&[], &[1, 2]), 1.0);
    }
}

//! The arithmetic of the policy and workloads suites, on per-frame access
//! probabilities
//! (the oracle's, for one phase) and a placement (tier per frame, 0 the
//! fast tier): the DRAM-hit ratio of a placement, the oracle's best for a
//! quota, and the fewest moves that turn a placement into a best one.

/// Relative difference under which two probabilities count as equal (the
/// oracle's uniform ranges give equal frames equal values up to rounding).
const TIE: f64 = 1e-9;

/// Share of accesses a placement serves from the fast tier: the access
/// probability of the frames on tier 0. Frames beyond either slice count
/// as not accessed.
pub fn dram_hit(access: &[f64], tiers: &[u8]) -> f64 {
    access
        .iter()
        .zip(tiers)
        .filter(|(_, t)| **t == 0)
        // fold from +0.0: an empty f64 `sum` is -0.0, printed "-0.0%".
        .fold(0.0, |sum, (p, _)| sum + p)
}

/// The best DRAM-hit ratio with room for `quota` frames: the sum of the
/// `quota` largest probabilities.
pub fn oracle_hit(access: &[f64], quota: usize) -> f64 {
    sorted_descending(access)
        .iter()
        .take(quota)
        .fold(0.0, |sum, p| sum + p)
}

/// The fewest moves that give a placement the oracle's DRAM-hit ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinMoves {
    /// Frames to promote.
    pub promotions: usize,
    /// Frames to demote to make room (only when the quota is full).
    pub demotions: usize,
}

impl MinMoves {
    /// Both ways, frames.
    pub fn frames(&self) -> usize {
        self.promotions + self.demotions
    }
}

/// The fewest moves from `tiers` to a placement of at most `quota` fast
/// frames earning [`oracle_hit`]. Frames hotter than the oracle's
/// `quota`-th frame must be fast; of the frames as hot as it, only as many
/// as are left over (those already fast count); frames no access reaches
/// are never worth a move. Each promotion past the free fast slots needs a
/// demotion.
pub fn min_moves(access: &[f64], tiers: &[u8], quota: usize) -> MinMoves {
    let frames = access.len().min(tiers.len());
    let (access, tiers) = (&access[..frames], &tiers[..frames]);
    let fast_used = tiers.iter().filter(|&&t| t == 0).count();
    let k = quota.min(frames);
    let promotions = if k == 0 {
        0
    } else {
        let edge = sorted_descending(access)[k - 1];
        if edge <= 0.0 {
            // Fewer accessed frames than room: every accessed frame.
            (0..frames)
                .filter(|&f| access[f] > 0.0 && tiers[f] != 0)
                .count()
        } else {
            let tie = |p: f64| (p - edge).abs() <= edge * TIE;
            let above = |p: f64| p > edge && !tie(p);
            let must = (0..frames).filter(|&f| above(access[f])).count();
            let must_missing = (0..frames)
                .filter(|&f| above(access[f]) && tiers[f] != 0)
                .count();
            let ties_fast = (0..frames)
                .filter(|&f| tie(access[f]) && tiers[f] == 0)
                .count();
            must_missing + (k - must).saturating_sub(ties_fast)
        }
    };
    MinMoves {
        promotions,
        demotions: (fast_used + promotions).saturating_sub(quota),
    }
}

fn sorted_descending(access: &[f64]) -> Vec<f64> {
    let mut sorted = access.to_vec();
    sorted.sort_unstable_by(|a, b| b.total_cmp(a));
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dram_hit_sums_the_fast_frames() {
        let access = [0.5, 0.3, 0.15, 0.05];
        assert!((dram_hit(&access, &[0, 1, 0, 1]) - 0.65).abs() < 1e-12);
        assert_eq!(dram_hit(&access, &[1, 1, 1, 1]), 0.0);
        assert!((oracle_hit(&access, 2) - 0.8).abs() < 1e-12);
        assert!((oracle_hit(&access, 9) - 1.0).abs() < 1e-12);
        assert_eq!(oracle_hit(&access, 0), 0.0);
        assert!(oracle_hit(&access, 0).is_sign_positive());
        assert!(dram_hit(&access, &[1, 1, 1, 1]).is_sign_positive());
        // The oracle is never beaten by a placement within the quota.
        for tiers in [[0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 0, 0], [1, 0, 0, 1]] {
            assert!(dram_hit(&access, &tiers) <= oracle_hit(&access, 2) + 1e-12);
        }
    }

    #[test]
    fn min_moves_counts_missing_hot_frames_and_the_demotions_for_them() {
        let access = [0.5, 0.3, 0.15, 0.05];
        // Quota 2, full, holding the two coldest: swap both.
        let m = min_moves(&access, &[1, 1, 0, 0], 2);
        assert_eq!(
            m,
            MinMoves {
                promotions: 2,
                demotions: 2
            }
        );
        assert_eq!(m.frames(), 4);
        // Already best: nothing.
        assert_eq!(min_moves(&access, &[0, 0, 1, 1], 2).frames(), 0);
        // One free slot: the first promotion needs no demotion.
        assert_eq!(
            min_moves(&access, &[1, 1, 0, 1], 2),
            MinMoves {
                promotions: 2,
                demotions: 1
            }
        );
    }

    #[test]
    fn equally_hot_frames_are_interchangeable() {
        // One hot frame and four equal cold ones, room for three: any two
        // cold frames do; the fast cold ones already count.
        let access = [0.6, 0.1, 0.1, 0.1, 0.1];
        assert_eq!(min_moves(&access, &[1, 0, 1, 0, 1], 3).promotions, 1);
        assert_eq!(min_moves(&access, &[1, 0, 1, 1, 1], 3).promotions, 2);
        assert_eq!(min_moves(&access, &[0, 1, 1, 1, 0], 3).promotions, 1);
        // Rounding does not split a tie.
        let access = [0.6, 0.1, 0.1 + 1e-17, 0.1 - 1e-17];
        assert_eq!(min_moves(&access, &[0, 0, 1, 1], 2).promotions, 0);
    }

    #[test]
    fn frames_nobody_touches_are_never_worth_a_move() {
        // Two accessed frames, room for three.
        let access = [0.0, 0.7, 0.0, 0.3, 0.0];
        assert_eq!(
            min_moves(&access, &[0, 1, 0, 1, 0], 3),
            MinMoves {
                promotions: 2,
                demotions: 2
            }
        );
        assert_eq!(min_moves(&access, &[1, 0, 1, 0, 1], 3).frames(), 0);
        assert_eq!(min_moves(&[0.0; 4], &[1, 1, 1, 1], 2).frames(), 0);
        assert_eq!(min_moves(&access, &[1; 5], 0).frames(), 0);
    }
}

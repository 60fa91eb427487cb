//! The planner: from heat and placement, which frames to promote and
//! demote this interval. Pure (no threads, no memory), so every rule is
//! unit-tested on its own.
//!
//! Order of business each interval:
//! 1. **Quota**: frames above the quota's maximum are demoted, coldest
//!    first (pinned frames never; frames still cooling down only when no
//!    other frame is left), up to the forced budget.
//! 2. **Promote** the hottest recurring slow frames at or above the
//!    threshold (seen touched at two looks in a row or twice within a
//!    half-life: one burst is no reason to copy), hottest first, up to the promotion budget: freely
//!    up to the quota less the headroom; beyond that only a candidate
//!    whose lead over the coldest fast frame is significant
//!    ([`significant_lead`], counting the frames that could take part:
//!    [`rivals`]), into the headroom or — quota full, exchange on — in
//!    exchange for that frame.
//! 3. **Headroom**: if less than the headroom is free, demote the coldest
//!    fast frames that are below the threshold.
//! 4. **Minimum**: below the quota's minimum, promote the hottest slow
//!    frames whatever their heat.

use guest_memory::FrameId;

use crate::policy::Threshold;

/// Heat below which a frame has no evidence worth a promotion: about one
/// 4 KiB page read once, decayed (heat units: `HeatSettings`).
pub const HEAT_FLOOR: f64 = 1.0;

/// One interval's view for the planner. Tier 0 is the fast tier; every
/// other tier is slow.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// Heat per frame.
    pub heat: &'a [f64],
    /// Sampling variance of each frame's heat.
    pub variance: &'a [f64],
    /// Tier per frame.
    pub tier: &'a [usize],
    /// Frames that never move.
    pub pinned: &'a [bool],
    /// Frames moved too recently to move again (quota enforcement aside).
    pub cooling: &'a [bool],
    /// Frames seen touched twice, at two looks in a row or within a
    /// half-life (`HeatModel::recurring`); only these are promotion
    /// candidates.
    pub recurring: &'a [bool],
    /// Most frames on the fast tier.
    pub quota_max: usize,
    /// Fewest frames on the fast tier.
    pub quota_min: usize,
    /// Frames kept free under `quota_max`.
    pub headroom: usize,
    /// Most frames promoted (exchanges included).
    pub promote_budget: usize,
    /// Most frames demoted for headroom and exchanges.
    pub demote_budget: usize,
    /// Most frames demoted to bring the fast tier down to `quota_max`.
    pub forced_budget: usize,
    /// The threshold setting.
    pub threshold: Threshold,
    /// Standard deviations by which a candidate's lead over the fast frame
    /// it displaces must exceed what chance gives ([`significant_lead`]).
    pub significance: f64,
    /// Whether exchanges are allowed.
    pub exchange: bool,
}

/// What to move this interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Frames to the fast tier, hottest first.
    pub promote: Vec<FrameId>,
    /// Frames off the fast tier.
    pub demote: Vec<FrameId>,
    /// `(promoted, demoted)` pairs among the above that swap places.
    pub exchanges: Vec<(FrameId, FrameId)>,
    /// The threshold used.
    pub threshold: f64,
    /// Slow frames above the threshold before the budget cut them.
    pub candidates: usize,
    /// Frames demoted because the fast tier was over quota.
    pub forced: usize,
}

/// The threshold and the promotion candidates above it (hottest first, at
/// most `promote_budget`), and how many passed before the cut. A candidate
/// must also have been seen accessed beyond chance: heat above
/// `significance` standard deviations, so a frame with a stray hit or two
/// is not copied into free quota, and must recur, so a frame written once
/// (a guest initialising its memory) is not either.
fn candidates(input: &PlanInput<'_>) -> (f64, Vec<usize>, usize) {
    let movable_slow = |f: usize| {
        input.tier[f] != 0
            && !input.pinned[f]
            && !input.cooling[f]
            && input.recurring[f]
            && input.heat[f] > input.significance * input.variance[f].sqrt()
    };
    let base = match input.threshold {
        Threshold::Manual { heat } => heat,
        Threshold::Auto => {
            // The coldest frame the quota (less the headroom) would hold
            // if it held the hottest frames.
            let target = input
                .quota_max
                .saturating_sub(input.headroom)
                .saturating_sub(pinned_fast(input));
            let mut heats: Vec<f64> = (0..input.heat.len())
                .filter(|&f| !input.pinned[f])
                .map(|f| input.heat[f])
                .collect();
            let boundary = if target == 0 {
                f64::INFINITY
            } else if target >= heats.len() {
                0.0
            } else {
                let (_, nth, _) = heats.select_nth_unstable_by(target - 1, |a, b| b.total_cmp(a));
                *nth
            };
            boundary.max(HEAT_FLOOR)
        }
    };
    let mut above: Vec<usize> = (0..input.heat.len())
        .filter(|&f| movable_slow(f) && input.heat[f] >= base)
        .collect();
    above.sort_unstable_by(|&a, &b| input.heat[b].total_cmp(&input.heat[a]));
    let passed = above.len();
    let mut threshold = base;
    if passed > input.promote_budget {
        // Auto: raised until the candidates fit the rate limit.
        if input.threshold == Threshold::Auto {
            threshold = input.heat[above[input.promote_budget]];
        }
        above.truncate(input.promote_budget);
    }
    (threshold, above, passed)
}

/// Standard deviations of lead that chance alone gives the hottest of
/// `slow` and the coldest of `fast` equally hot frames (the planner counts
/// the frames that could take part: [`rivals`]): the largest of n
/// normal deviates is about √(2 ln n), and the lead of the extreme pair,
/// in deviations of the difference, is at most √(2 ln slow + 2 ln fast)
/// (Cauchy–Schwarz), the same bound as for the largest of the `slow ×
/// fast` pairs. A displacement must clear this before `significance`
/// counts, or a hot set larger than the quota churns on noise. Counting
/// one side only (√(2 ln n)) let a stable guest's equally cold frames
/// swap now and then: the extreme pair's lead reached 5.3 deviations in a
/// hundred intervals, where that bound and `significance` 2 gave 5.33.
pub fn chance_lead(slow: usize, fast: usize) -> f64 {
    (2.0 * ((slow.max(1) as f64).ln() + (fast.max(1) as f64).ln())).sqrt()
}

/// Whether `candidate`'s heat leads `victim`'s by more than `z` standard
/// deviations of the difference (variances add: the two estimates are
/// independent samples).
pub fn significant_lead(input: &PlanInput<'_>, candidate: usize, victim: usize, z: f64) -> bool {
    let lead = input.heat[candidate] - input.heat[victim];
    let sd = (input.variance[candidate] + input.variance[victim]).sqrt();
    lead > 0.0 && lead > z * sd
}

/// The frames that could take part in a displacement, `(slow, fast)`:
/// movable recurring slow frames hotter than the coldest movable fast
/// frame, and movable fast frames colder than the hottest of those slow
/// ones (frames still cooling move in neither direction). Chance's lead
/// grows with the pairs that could be confused; a slow frame far colder
/// than every fast one is not such a pair. In a flat hot set nearly every
/// frame counts; where hot and cold are far apart only the frames at the
/// boundary do.
fn rivals(input: &PlanInput<'_>, fast: &[usize]) -> (usize, usize) {
    let free = |f: &&usize| !input.cooling[**f];
    let coldest_fast = fast
        .iter()
        .filter(free)
        .map(|&f| input.heat[f])
        .fold(f64::INFINITY, f64::min);
    let slow: Vec<f64> = (0..input.heat.len())
        .filter(|&f| {
            input.tier[f] != 0 && !input.pinned[f] && !input.cooling[f] && input.recurring[f]
        })
        .map(|f| input.heat[f])
        .collect();
    let hottest_slow = slow.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (
        slow.iter().filter(|&&h| h > coldest_fast).count(),
        fast.iter()
            .filter(free)
            .filter(|&&f| input.heat[f] < hottest_slow)
            .count(),
    )
}

fn pinned_fast(input: &PlanInput<'_>) -> usize {
    (0..input.tier.len())
        .filter(|&f| input.tier[f] == 0 && input.pinned[f])
        .count()
}

/// Plans one interval.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let frames = input.heat.len();
    let mut plan = Plan::default();
    let mut fast: Vec<usize> = (0..frames)
        .filter(|&f| input.tier[f] == 0 && !input.pinned[f])
        .collect();
    // Coldest first, frames still cooling after all others.
    fast.sort_unstable_by(|&a, &b| {
        (input.cooling[a], input.heat[a])
            .partial_cmp(&(input.cooling[b], input.heat[b]))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let rivals = rivals(input, &fast);
    let mut victims = fast.into_iter().peekable();
    let mut used = (0..frames).filter(|&f| input.tier[f] == 0).count();

    // 1. Quota.
    while used > input.quota_max && plan.forced < input.forced_budget {
        let Some(v) = victims.next() else { break };
        plan.demote.push(FrameId(v));
        plan.forced += 1;
        used -= 1;
    }

    // 2. Promotions.
    let (threshold, hot, passed) = candidates(input);
    plan.threshold = threshold;
    plan.candidates = passed;
    let mut demote_left = input.demote_budget;
    let fill_to = input.quota_max.saturating_sub(input.headroom);
    let z = input.significance + chance_lead(rivals.0, rivals.1);
    for c in hot {
        if used < fill_to {
            plan.promote.push(FrameId(c));
            used += 1;
            continue;
        }
        // Past the fill line a promotion displaces a fast frame, now (an
        // exchange) or soon (headroom restored): only on a significant lead.
        let beats = |v: usize| !input.cooling[v] && significant_lead(input, c, v, z);
        let Some(&v) = victims.peek() else { break };
        if !beats(v) {
            break;
        }
        if used < input.quota_max {
            plan.promote.push(FrameId(c));
            used += 1;
            continue;
        }
        if !input.exchange || demote_left == 0 {
            break;
        }
        victims.next();
        plan.promote.push(FrameId(c));
        plan.demote.push(FrameId(v));
        plan.exchanges.push((FrameId(c), FrameId(v)));
        demote_left -= 1;
    }

    // 3. Headroom.
    let free = input.quota_max.saturating_sub(used);
    let mut short = input.headroom.saturating_sub(free).min(demote_left);
    while short > 0 {
        let Some(&v) = victims.peek() else { break };
        if input.cooling[v] || input.heat[v] >= threshold {
            break;
        }
        victims.next();
        plan.demote.push(FrameId(v));
        used -= 1;
        short -= 1;
    }

    // 4. Minimum.
    if used < input.quota_min {
        let promoted: std::collections::HashSet<usize> =
            plan.promote.iter().map(|f| f.index()).collect();
        let mut slow: Vec<usize> = (0..frames)
            .filter(|&f| {
                input.tier[f] != 0
                    && !input.pinned[f]
                    && !input.cooling[f]
                    && !promoted.contains(&f)
            })
            .collect();
        slow.sort_unstable_by(|&a, &b| input.heat[b].total_cmp(&input.heat[a]));
        let room =
            (input.quota_min - used).min(input.promote_budget.saturating_sub(plan.promote.len()));
        plan.promote
            .extend(slow.into_iter().take(room).map(FrameId));
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(ids: &[usize]) -> Vec<FrameId> {
        ids.iter().copied().map(FrameId).collect()
    }

    struct Case {
        heat: Vec<f64>,
        variance: Vec<f64>,
        tier: Vec<usize>,
        pinned: Vec<bool>,
        cooling: Vec<bool>,
        recurring: Vec<bool>,
    }

    impl Case {
        fn new(heat: &[f64], tier: &[usize]) -> Self {
            Case {
                heat: heat.to_vec(),
                variance: vec![0.0; heat.len()],
                tier: tier.to_vec(),
                pinned: vec![false; heat.len()],
                cooling: vec![false; heat.len()],
                recurring: vec![true; heat.len()],
            }
        }

        fn input(&self, quota_max: usize) -> PlanInput<'_> {
            PlanInput {
                heat: &self.heat,
                variance: &self.variance,
                tier: &self.tier,
                pinned: &self.pinned,
                cooling: &self.cooling,
                recurring: &self.recurring,
                quota_max,
                quota_min: 0,
                headroom: 0,
                promote_budget: 100,
                demote_budget: 100,
                forced_budget: 100,
                threshold: Threshold::Auto,
                significance: 2.0,
                exchange: true,
            }
        }
    }

    #[test]
    fn hot_slow_frames_fill_free_quota_hottest_first() {
        let c = Case::new(&[0.0, 50.0, 100.0, 20.0], &[1, 1, 1, 1]);
        let p = plan(&c.input(2));
        assert_eq!(p.promote, frames(&[2, 1]));
        assert!(p.demote.is_empty());
    }

    #[test]
    fn a_frame_touched_once_is_not_promoted_into_free_quota() {
        let mut c = Case::new(&[0.0, 50.0, 100.0, 20.0], &[1, 1, 1, 1]);
        c.recurring[2] = false;
        let p = plan(&c.input(4));
        assert_eq!(p.promote, frames(&[1, 3]));
        assert_eq!(p.candidates, 2);
    }

    #[test]
    fn full_quota_exchanges_only_on_a_significant_lead() {
        // Fast: frames 0 (heat 10) and 1 (heat 40); slow: 2 (100), 3 (50).
        let mut c = Case::new(&[10.0, 40.0, 100.0, 50.0], &[0, 0, 1, 1]);
        c.variance = vec![4.0, 100.0, 100.0, 100.0];
        let mut input = c.input(2);
        input.threshold = Threshold::Manual { heat: 5.0 };
        let p = plan(&input);
        // z = 2 + √(2 ln 2 + 2 ln 2) = 3.67: 100 leads 10 by 90 > 3.67 ×
        // √104 = 37 and swaps; 50 leads 40 by 10 < 3.67 × √200 = 52 and
        // does not.
        assert_eq!(p.exchanges, vec![(FrameId(2), FrameId(0))]);
        assert_eq!((p.promote, p.demote), (frames(&[2]), frames(&[0])));
        input.exchange = false;
        assert_eq!(
            plan(&input),
            Plan {
                threshold: 5.0,
                candidates: 2,
                ..Plan::default()
            }
        );
    }

    #[test]
    fn a_cold_tail_does_not_raise_the_bar_at_the_boundary() {
        // Fast: three hot frames and one at the boundary (500); slow: one
        // just past the boundary (600) and 400 cold frames. Only the two
        // boundary frames could be confused: z = 2 + √(2 ln 1 + 2 ln 1) =
        // 2, and 600 leads 500 by 4 deviations. Counting every movable
        // frame (z = 2 + √(2 ln 401 + 2 ln 4) = 5.84) held it out.
        let mut heat = vec![1000.0, 1000.0, 1000.0, 500.0, 600.0];
        heat.extend(std::iter::repeat_n(1.0, 400));
        let mut tier = vec![0, 0, 0, 0, 1];
        tier.extend(std::iter::repeat_n(1, 400));
        let mut c = Case::new(&heat, &tier);
        c.variance = vec![312.5; heat.len()];
        let mut input = c.input(4);
        input.threshold = Threshold::Manual { heat: 2.0 };
        assert_eq!(plan(&input).exchanges, vec![(FrameId(4), FrameId(3))]);
        // Warm slow frames (550) are rivals and raise the bar past the
        // lead; the same frames seen only once are not.
        c.heat[5..].fill(550.0);
        let mut input = c.input(4);
        input.threshold = Threshold::Manual { heat: 2.0 };
        assert!(plan(&input).exchanges.is_empty());
        c.recurring[5..].fill(false);
        let mut input = c.input(4);
        input.threshold = Threshold::Manual { heat: 2.0 };
        assert_eq!(plan(&input).exchanges, vec![(FrameId(4), FrameId(3))]);
    }

    #[test]
    fn a_flat_hot_set_larger_than_the_quota_holds_still() {
        // 1000 frames whose true heat is the same, estimated with Poisson
        // noise (variance = heat); half fit the quota. Whatever the noise
        // put on the fast tier, no exchange is significant.
        let n = 1000;
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut normal = || {
            // Irwin–Hall: the sum of 12 uniforms less 6 is close to N(0, 1).
            (0..12)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    (rng >> 11) as f64 / (1u64 << 53) as f64
                })
                .sum::<f64>()
                - 6.0
        };
        let mean: f64 = 400.0;
        let heat: Vec<f64> = (0..n).map(|_| mean + mean.sqrt() * normal()).collect();
        let tier: Vec<usize> = (0..n).map(|f| f % 2).collect();
        let mut c = Case::new(&heat, &tier);
        c.variance = heat.clone();
        let mut input = c.input(n / 2);
        input.threshold = Threshold::Manual { heat: 1.0 };
        let p = plan(&input);
        assert!(p.exchanges.is_empty(), "{} exchanges", p.exchanges.len());
        // A frame that is really hotter still gets in.
        c.heat[1] = 4.0 * mean;
        c.variance[1] = 4.0 * mean;
        let mut input = c.input(n / 2);
        input.threshold = Threshold::Manual { heat: 1.0 };
        assert_eq!(plan(&input).promote, frames(&[1]));
    }

    #[test]
    fn equally_cold_frames_never_swap_over_many_intervals() {
        // A settled guest's cold frames: 192 slow and 64 fast of the same
        // true heat, a fresh noise draw per interval, 20 000 intervals.
        // The extreme pair's lead is what chance gives both ends; counting
        // one end only (√(2 ln 256) + 2 = 5.33) swaps a pair in about one
        // draw in 2000 (10 here), both ends (√(2 ln 12288) + 2 = 6.34) in
        // none.
        let n = 256;
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut uniform = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            ((rng >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        // Box–Muller.
        let mut normal =
            || (-2.0 * uniform().ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos();
        let tier: Vec<usize> = (0..n).map(|f| usize::from(f >= 64)).collect();
        let variance = vec![280.0 * 280.0; n];
        let mut c = Case::new(&vec![0.0; n], &tier);
        c.variance = variance;
        let mut swapped = 0;
        for _ in 0..20_000 {
            for h in c.heat.iter_mut() {
                *h = 3000.0 + 280.0 * normal();
            }
            let mut input = c.input(64);
            input.threshold = Threshold::Manual { heat: 1.0 };
            swapped += plan(&input).exchanges.len();
        }
        assert_eq!(swapped, 0);
    }

    #[test]
    fn a_settled_placement_stays_put() {
        // The two hottest frames are fast; the rest is colder than them by
        // less than nothing: no candidate passes the auto threshold.
        let c = Case::new(&[90.0, 80.0, 70.0, 75.0, 10.0], &[0, 0, 1, 1, 1]);
        let p = plan(&c.input(2));
        assert!(p.promote.is_empty() && p.demote.is_empty(), "{p:?}");
        assert_eq!(p.threshold, 80.0);
    }

    #[test]
    fn over_quota_demotes_coldest_and_spares_pinned_and_cooling() {
        let mut c = Case::new(&[1.0, 2.0, 3.0, 4.0], &[0, 0, 0, 0]);
        c.pinned[0] = true;
        c.cooling[1] = true;
        let p = plan(&c.input(2));
        // Two over: the coldest frames not cooling; frame 0 is pinned.
        assert_eq!(p.demote, frames(&[2, 3]));
        assert_eq!(p.forced, 2);
        // Three over: the cooling frame 1 too, as nothing else is left.
        assert_eq!(plan(&c.input(1)).demote, frames(&[2, 3, 1]));
        let mut limited = c.input(1);
        limited.forced_budget = 1;
        assert_eq!(plan(&limited).demote, frames(&[2]));
    }

    #[test]
    fn the_rate_budget_raises_the_auto_threshold() {
        let c = Case::new(&[10.0, 20.0, 30.0, 40.0, 50.0], &[1, 1, 1, 1, 1]);
        let mut input = c.input(5);
        input.promote_budget = 2;
        let p = plan(&input);
        assert_eq!(p.promote, frames(&[4, 3]));
        assert_eq!(p.candidates, 5);
        assert_eq!(p.threshold, 30.0);
    }

    #[test]
    fn headroom_demotes_frames_below_the_threshold() {
        let c = Case::new(&[5.0, 200.0, 300.0, 0.0], &[0, 0, 0, 1]);
        let mut input = c.input(3);
        input.headroom = 1;
        input.threshold = Threshold::Manual { heat: 100.0 };
        assert_eq!(plan(&input).demote, frames(&[0]));
        input.threshold = Threshold::Manual { heat: 1.0 };
        assert!(plan(&input).demote.is_empty());
    }

    #[test]
    fn the_minimum_promotes_whatever_is_hottest() {
        let c = Case::new(&[0.0, 0.5, 0.2], &[1, 1, 1]);
        let mut input = c.input(3);
        input.quota_min = 2;
        assert_eq!(plan(&input).promote, frames(&[1, 2]));
    }

    #[test]
    fn pinned_slow_frames_are_never_promoted() {
        let mut c = Case::new(&[100.0, 90.0], &[1, 1]);
        c.pinned[0] = true;
        assert_eq!(plan(&c.input(2)).promote, frames(&[1]));
    }
}

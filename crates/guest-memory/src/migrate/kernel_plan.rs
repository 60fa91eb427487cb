//! Planning a kernel-migrator batch against the (fixed) ledger: which moves
//! are skipped (no-op, frame named twice), which get their destination
//! reserved within the tier's quota, which go over a full tier's quota
//! because another move of the batch leaves that tier (an exchange: the
//! move then depends on the other one), and which are refused, with why.

use std::collections::HashSet;

use super::Move;
use super::faults::{FaultInjection, Step};
use crate::ledger::{Ledger, LedgerError};
use crate::placement::Location;

/// A move whose destination slot is reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlannedMove {
    /// Frame.
    pub frame: usize,
    /// Where it is.
    pub from: Location,
    /// Where it goes (same slot, other tier).
    pub to: Location,
    /// Index (in [`BatchPlan::moves`]) of the move that frees the room this
    /// one took over its tier's quota: this move stands or falls with it.
    pub depends_on: Option<usize>,
}

/// The outcome of planning.
#[derive(Debug, Default)]
pub(crate) struct BatchPlan {
    /// Moves with destinations reserved.
    pub moves: Vec<PlannedMove>,
    /// Moves skipped (already on the tier, or the frame named before).
    pub skipped: usize,
    /// Refused moves, one line each.
    pub refused: Vec<String>,
}

/// A move that found its destination tier full.
#[derive(Clone, Copy, Debug)]
struct Blocked {
    frame: usize,
    from: Location,
    to_tier: usize,
}

/// Plans `batch`, reserving destinations in `ledger`. `name` gives a tier's
/// name for messages.
pub(crate) fn plan(
    ledger: &mut Ledger,
    batch: &[Move],
    faults: &FaultInjection,
    name: &dyn Fn(usize) -> String,
) -> BatchPlan {
    let mut plan = BatchPlan::default();
    let mut seen = HashSet::new();
    let mut blocked = Vec::new();
    let tier_count = ledger.map().tier_count();
    for m in batch {
        if !seen.insert(m.frame) {
            plan.skipped += 1;
            continue;
        }
        let Some(from) = ledger.map().location(m.frame) else {
            plan.refused.push(format!(
                "frame {}: no such frame (memory has {})",
                m.frame,
                ledger.map().frame_count()
            ));
            continue;
        };
        if m.to_tier >= tier_count {
            plan.refused
                .push(format!("frame {}: no tier {}", m.frame, m.to_tier));
            continue;
        }
        if from.tier == m.to_tier {
            plan.skipped += 1;
            continue;
        }
        let target = || format!("frame {} -> tier '{}'", m.frame, name(m.to_tier));
        if faults.should_fail(Step::Reserve) {
            plan.refused
                .push(format!("{}: reservation failed (injected)", target()));
            continue;
        }
        match ledger.reserve_frame(m.frame, m.to_tier, false) {
            Ok((from, to)) => plan.moves.push(PlannedMove {
                frame: m.frame,
                from,
                to,
                depends_on: None,
            }),
            Err(LedgerError::TierFull { .. }) => blocked.push(Blocked {
                frame: m.frame,
                from,
                to_tier: m.to_tier,
            }),
            Err(err) => plan.refused.push(format!("{}: {err}", target())),
        }
    }
    place_blocked(ledger, &mut plan, &blocked, name);
    plan
}

/// Gives each blocked move the room of a move leaving its destination
/// tier: one already planned, or a blocked move going the other way (both
/// then depend on each other). The rest are refused.
fn place_blocked(
    ledger: &mut Ledger,
    plan: &mut BatchPlan,
    blocked: &[Blocked],
    name: &dyn Fn(usize) -> String,
) {
    let mut creditor = vec![false; plan.moves.len()];
    let mut done = vec![false; blocked.len()];
    for i in 0..blocked.len() {
        if done[i] {
            continue;
        }
        done[i] = true;
        let b = blocked[i];
        let leaving =
            (0..plan.moves.len()).find(|&c| !creditor[c] && plan.moves[c].from.tier == b.to_tier);
        if let Some(c) = leaving {
            if let Some(index) = reserve_over(ledger, plan, b, Some(c), name) {
                creditor[c] = true;
                creditor.push(false);
                debug_assert_eq!(creditor.len(), index + 1);
            }
            continue;
        }
        let partner = (i + 1..blocked.len()).find(|&j| {
            !done[j] && blocked[j].from.tier == b.to_tier && blocked[j].to_tier == b.from.tier
        });
        let Some(j) = partner else {
            let tier = b.to_tier;
            plan.refused.push(format!(
                "frame {} -> tier '{}': tier full (quota {} frames, {} in use or reserved)",
                b.frame,
                name(tier),
                ledger.quota(tier),
                ledger.allocated(tier)
            ));
            continue;
        };
        done[j] = true;
        let Some(a) = reserve_over(ledger, plan, b, None, name) else {
            plan.refused.push(format!(
                "frame {}: exchange partner of frame {} not moved",
                blocked[j].frame, b.frame
            ));
            continue;
        };
        match reserve_over(ledger, plan, blocked[j], Some(a), name) {
            Some(p) => {
                plan.moves[a].depends_on = Some(p);
                creditor.extend([true, true]);
            }
            None => {
                // Undo the first half: an exchange is both moves or none.
                let undone = plan.moves.remove(a);
                let _ = ledger.release(undone.to);
                plan.refused.push(format!(
                    "frame {}: exchange partner of frame {} not moved",
                    b.frame, blocked[j].frame
                ));
            }
        }
    }
}

/// Reserves `b`'s destination over quota; returns its index in the plan.
fn reserve_over(
    ledger: &mut Ledger,
    plan: &mut BatchPlan,
    b: Blocked,
    depends_on: Option<usize>,
    name: &dyn Fn(usize) -> String,
) -> Option<usize> {
    match ledger.reserve_frame(b.frame, b.to_tier, true) {
        Ok((from, to)) => {
            plan.moves.push(PlannedMove {
                frame: b.frame,
                from,
                to,
                depends_on,
            });
            Some(plan.moves.len() - 1)
        }
        Err(err) => {
            plan.refused.push(format!(
                "frame {} -> tier '{}': {err}",
                b.frame,
                name(b.to_tier)
            ));
            None
        }
    }
}

/// Applies dependencies to per-move outcomes: a move whose creditor did not
/// move is marked failed too (until nothing changes; exchanges are cycles).
pub(crate) fn settle(moves: &[PlannedMove], ok: &mut [bool]) {
    loop {
        let mut changed = false;
        for (i, m) in moves.iter().enumerate() {
            if let Some(c) = m.depends_on {
                if ok[i] && !ok[c] {
                    ok[i] = false;
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

/// Moves that moved as part of an exchange: those that depend on another
/// one that moved, and their creditors.
pub(crate) fn exchanged(moves: &[PlannedMove], ok: &[bool]) -> usize {
    let mut swapped = vec![false; moves.len()];
    for (i, m) in moves.iter().enumerate() {
        if let Some(c) = m.depends_on {
            if ok[i] && ok[c] {
                swapped[i] = true;
                swapped[c] = true;
            }
        }
    }
    swapped.iter().filter(|s| **s).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(frame: usize, to_tier: usize) -> Move {
        Move { frame, to_tier }
    }

    fn name(tier: usize) -> String {
        ["fast", "slow"][tier].to_owned()
    }

    fn run(ledger: &mut Ledger, batch: &[Move]) -> BatchPlan {
        plan(ledger, batch, &FaultInjection::default(), &name)
    }

    #[test]
    fn skips_no_ops_and_repeats_and_refuses_bad_indices() {
        // Frames 0,1 fast; 2,3 slow; quotas 3 and 3.
        let mut ledger = Ledger::fixed(&[3, 3], &[0, 0, 1, 1]).unwrap();
        let p = run(
            &mut ledger,
            &[mv(0, 0), mv(2, 0), mv(2, 1), mv(9, 0), mv(1, 7)],
        );
        assert_eq!(p.skipped, 2);
        assert_eq!(p.moves.len(), 1);
        assert_eq!(p.moves[0].to, Location { tier: 0, slot: 2 });
        assert_eq!(
            p.refused,
            vec![
                "frame 9: no such frame (memory has 4)".to_owned(),
                "frame 1: no tier 7".to_owned()
            ]
        );
        assert_eq!(ledger.reserved(0), 1);
    }

    #[test]
    fn a_full_tier_refuses_with_the_numbers() {
        let mut ledger = Ledger::fixed(&[2, 3], &[0, 0, 1, 1]).unwrap();
        let p = run(&mut ledger, &[mv(2, 0)]);
        assert!(p.moves.is_empty());
        assert_eq!(
            p.refused,
            vec!["frame 2 -> tier 'fast': tier full (quota 2 frames, 2 in use or reserved)"]
        );
        assert_eq!(ledger.reserved(0), 0);
    }

    #[test]
    fn a_move_into_a_full_tier_rides_on_one_leaving_it() {
        // fast full (2/2), slow has room: promote 2 and demote 0.
        let mut ledger = Ledger::fixed(&[2, 3], &[0, 0, 1, 1]).unwrap();
        let p = run(&mut ledger, &[mv(2, 0), mv(0, 1)]);
        assert!(p.refused.is_empty(), "{:?}", p.refused);
        assert_eq!(p.moves.len(), 2);
        assert_eq!(p.moves[0].frame, 0);
        assert_eq!(p.moves[1].frame, 2);
        assert_eq!(p.moves[1].depends_on, Some(0));
        // If the demotion fails, the promotion must not stand.
        let mut ok = vec![false, true];
        settle(&p.moves, &mut ok);
        assert_eq!(ok, vec![false, false]);
        assert_eq!(exchanged(&p.moves, &[true, true]), 2);
    }

    #[test]
    fn two_full_tiers_exchange_both_ways() {
        let mut ledger = Ledger::fixed(&[2, 2], &[0, 0, 1, 1]).unwrap();
        let p = run(&mut ledger, &[mv(2, 0), mv(1, 1), mv(3, 0)]);
        assert_eq!(p.moves.len(), 2);
        assert_eq!(p.moves[0].depends_on, Some(1));
        assert_eq!(p.moves[1].depends_on, Some(0));
        assert_eq!(p.refused.len(), 1, "{:?}", p.refused);
        assert!(p.refused[0].starts_with("frame 3 -> tier 'fast': tier full"));
        let mut ok = vec![true, false];
        settle(&p.moves, &mut ok);
        assert_eq!(ok, vec![false, false]);
        let mut ok = vec![true, true];
        settle(&p.moves, &mut ok);
        assert_eq!(exchanged(&p.moves, &ok), 2);
    }

    #[test]
    fn injected_reservation_failures_refuse_the_move() {
        let mut ledger = Ledger::fixed(&[4, 4], &[0, 0, 1, 1]).unwrap();
        let faults = FaultInjection::default();
        faults.fail_next(Step::Reserve, 1);
        let p = plan(&mut ledger, &[mv(0, 1), mv(1, 1)], &faults, &name);
        assert_eq!(
            p.refused,
            vec!["frame 0 -> tier 'slow': reservation failed (injected)"]
        );
        assert_eq!(p.moves.len(), 1);
    }
}

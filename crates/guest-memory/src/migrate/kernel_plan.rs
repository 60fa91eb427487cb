//! Planning a kernel-migrator batch against the (fixed) ledger: which moves
//! are skipped (no-op, frame named twice), which get their destination
//! reserved within the tier's quota, which go over a full tier's quota
//! because another move of the batch leaves that tier (the move then
//! depends on the other one), which exchanges reserve both destinations
//! over quota (each half depends on the other), and which are refused,
//! with why.

use std::collections::HashSet;

use super::batch::{Batch, Exchange, Move};
use super::faults::{FaultInjection, Step};
use super::outcome::{MoveError, MoveStep, StepError};
use crate::ids::{FrameId, TierId};
use crate::ledger::{Ledger, LedgerError};
use crate::placement::Location;

/// A move whose destination slot is reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlannedMove {
    /// Frame.
    pub frame: FrameId,
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
    /// Refused moves, with why.
    pub refused: Vec<MoveError>,
}

/// Plans `batch`, reserving destinations in `ledger`. `name` gives a tier's
/// name for messages.
pub(crate) fn plan(
    ledger: &mut Ledger,
    batch: &Batch,
    faults: &FaultInjection,
    name: &dyn Fn(TierId) -> String,
) -> BatchPlan {
    let mut plan = BatchPlan::default();
    let mut seen = HashSet::new();
    let mut blocked = Vec::new();
    for &m in batch.moves() {
        let Some(from) = check(ledger, &mut plan, &mut seen, m) else {
            continue;
        };
        if faults.should_fail(Step::Reserve) {
            refuse(&mut plan, m, MoveStep::Reserve, StepError::Injected);
            continue;
        }
        match ledger.reserve_frame(m.frame, m.to_tier, false) {
            Ok((from, to)) => plan.moves.push(PlannedMove {
                frame: m.frame,
                from,
                to,
                depends_on: None,
            }),
            Err(LedgerError::TierFull { .. }) => blocked.push((m, from)),
            Err(err) => refuse(&mut plan, m, MoveStep::Reserve, ledger_error(err)),
        }
    }
    place_blocked(ledger, &mut plan, &blocked, name);
    for &x in batch.exchanges() {
        plan_exchange(ledger, &mut plan, &mut seen, x, faults, name);
    }
    plan
}

/// Checks `m` against the memory; returns where its frame is when it is
/// a move to make (not refused, not skipped).
fn check(
    ledger: &Ledger,
    plan: &mut BatchPlan,
    seen: &mut HashSet<FrameId>,
    m: Move,
) -> Option<Location> {
    if !seen.insert(m.frame) {
        plan.skipped += 1;
        return None;
    }
    let Some(from) = ledger.map().location(m.frame) else {
        let frames = ledger.map().frame_count();
        refuse(plan, m, MoveStep::Check, StepError::NoSuchFrame { frames });
        return None;
    };
    if m.to_tier.index() >= ledger.map().tier_count() {
        refuse(plan, m, MoveStep::Check, StepError::NoSuchTier(m.to_tier));
        return None;
    }
    if from.tier == m.to_tier {
        plan.skipped += 1;
        return None;
    }
    Some(from)
}

fn refuse(plan: &mut BatchPlan, m: Move, step: MoveStep, source: StepError) {
    plan.refused
        .push(MoveError::frame(m.frame, m.to_tier, step, source));
}

fn ledger_error(err: LedgerError) -> StepError {
    StepError::memory(crate::error::Error::from(err))
}

/// Gives each blocked move the room of a planned move leaving its
/// destination tier; the rest are refused.
fn place_blocked(
    ledger: &mut Ledger,
    plan: &mut BatchPlan,
    blocked: &[(Move, Location)],
    name: &dyn Fn(TierId) -> String,
) {
    let mut creditor = vec![false; plan.moves.len()];
    for &(m, _) in blocked {
        let leaving =
            (0..plan.moves.len()).find(|&c| !creditor[c] && plan.moves[c].from.tier == m.to_tier);
        let Some(c) = leaving else {
            let tier = m.to_tier;
            let full = StepError::TierFull {
                tier: name(tier),
                quota: ledger.quota(tier),
            };
            refuse(plan, m, MoveStep::Reserve, full);
            continue;
        };
        if reserve_over(ledger, plan, m, Some(c)).is_some() {
            creditor[c] = true;
            creditor.push(false);
        }
    }
}

/// Plans both halves of an exchange over quota, each depending on the
/// other: both or neither.
fn plan_exchange(
    ledger: &mut Ledger,
    plan: &mut BatchPlan,
    seen: &mut HashSet<FrameId>,
    x: Exchange,
    faults: &FaultInjection,
    name: &dyn Fn(TierId) -> String,
) {
    let map = ledger.map();
    let (Some(a_at), Some(b_at)) = (map.location(x.a), map.location(x.b)) else {
        let frames = map.frame_count();
        let bad = if map.location(x.a).is_none() {
            x.a
        } else {
            x.b
        };
        let to_tier = map
            .location(x.a)
            .or(map.location(x.b))
            .map_or(TierId::FAST, |l| l.tier);
        plan.refused.push(MoveError::frame(
            bad,
            to_tier,
            MoveStep::Check,
            StepError::NoSuchFrame { frames },
        ));
        return;
    };
    let a = Move {
        frame: x.a,
        to_tier: b_at.tier,
    };
    let b = Move {
        frame: x.b,
        to_tier: a_at.tier,
    };
    if a_at.tier == b_at.tier {
        let same = StepError::SameTier {
            a: x.a,
            b: x.b,
            tier: name(a_at.tier),
        };
        refuse(plan, a, MoveStep::Check, same.clone());
        refuse(plan, b, MoveStep::Check, same);
        return;
    }
    if !seen.insert(x.a) || !seen.insert(x.b) {
        plan.skipped += 2;
        return;
    }
    if faults.should_fail(Step::Reserve) {
        refuse(plan, a, MoveStep::Reserve, StepError::Injected);
        refuse(plan, b, MoveStep::Reserve, StepError::PartnerFailed(x.a));
        return;
    }
    let Some(first) = reserve_over(ledger, plan, a, None) else {
        refuse(plan, b, MoveStep::Reserve, StepError::PartnerFailed(x.a));
        return;
    };
    match reserve_over(ledger, plan, b, Some(first)) {
        Some(second) => plan.moves[first].depends_on = Some(second),
        None => {
            // Undo the first half: an exchange is both moves or none.
            let undone = plan.moves.remove(first);
            let _ = ledger.release(undone.to);
            refuse(plan, a, MoveStep::Reserve, StepError::PartnerFailed(x.b));
        }
    }
}

/// Reserves `m`'s destination over quota; returns its index in the plan.
fn reserve_over(
    ledger: &mut Ledger,
    plan: &mut BatchPlan,
    m: Move,
    depends_on: Option<usize>,
) -> Option<usize> {
    match ledger.reserve_frame(m.frame, m.to_tier, true) {
        Ok((from, to)) => {
            plan.moves.push(PlannedMove {
                frame: m.frame,
                from,
                to,
                depends_on,
            });
            Some(plan.moves.len() - 1)
        }
        Err(err) => {
            refuse(plan, m, MoveStep::Reserve, ledger_error(err));
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

/// Per move, whether it moved as part of an exchange: it depends on
/// another one that moved, or one that moved depends on it.
pub(crate) fn exchanged(moves: &[PlannedMove], ok: &[bool]) -> Vec<bool> {
    let mut swapped = vec![false; moves.len()];
    for (i, m) in moves.iter().enumerate() {
        if let Some(c) = m.depends_on {
            if ok[i] && ok[c] {
                swapped[i] = true;
                swapped[c] = true;
            }
        }
    }
    swapped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(frame: usize, to_tier: usize) -> Move {
        Move {
            frame: FrameId(frame),
            to_tier: TierId(to_tier),
        }
    }

    fn name(tier: TierId) -> String {
        ["fast", "slow"][tier.index()].to_owned()
    }

    fn run(ledger: &mut Ledger, batch: &[Move]) -> BatchPlan {
        plan(
            ledger,
            &Batch::from(batch),
            &FaultInjection::default(),
            &name,
        )
    }

    fn text(e: &MoveError) -> String {
        format!("{e}: {}", e.source)
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
        assert_eq!(
            p.moves[0].to,
            Location {
                tier: TierId(0),
                slot: 2
            }
        );
        let refused: Vec<String> = p.refused.iter().map(text).collect();
        assert_eq!(
            refused,
            vec![
                "frame 9 -> tier 0: check failed: no such frame (memory has 4)".to_owned(),
                "frame 1 -> tier 7: check failed: no tier 7".to_owned()
            ]
        );
        assert_eq!(ledger.reserved(TierId(0)), 1);
    }

    #[test]
    fn a_full_tier_refuses_with_the_numbers() {
        let mut ledger = Ledger::fixed(&[2, 3], &[0, 0, 1, 1]).unwrap();
        let p = run(&mut ledger, &[mv(2, 0)]);
        assert!(p.moves.is_empty());
        assert_eq!(p.refused.len(), 1);
        assert!(
            matches!(&p.refused[0].source, StepError::TierFull { tier, quota: 2 } if tier == "fast"),
            "{:?}",
            p.refused
        );
        assert_eq!(ledger.reserved(TierId(0)), 0);
    }

    #[test]
    fn a_move_into_a_full_tier_rides_on_one_leaving_it() {
        // fast full (2/2), slow has room: promote 2 and demote 0.
        let mut ledger = Ledger::fixed(&[2, 3], &[0, 0, 1, 1]).unwrap();
        let p = run(&mut ledger, &[mv(2, 0), mv(0, 1)]);
        assert!(p.refused.is_empty(), "{:?}", p.refused);
        assert_eq!(p.moves.len(), 2);
        assert_eq!(p.moves[0].frame, FrameId(0));
        assert_eq!(p.moves[1].frame, FrameId(2));
        assert_eq!(p.moves[1].depends_on, Some(0));
        // If the demotion fails, the promotion must not stand.
        let mut ok = vec![false, true];
        settle(&p.moves, &mut ok);
        assert_eq!(ok, vec![false, false]);
        assert_eq!(exchanged(&p.moves, &[true, true]), vec![true, true]);
    }

    #[test]
    fn two_full_tiers_exchange_both_ways() {
        let mut ledger = Ledger::fixed(&[2, 2], &[0, 0, 1, 1]).unwrap();
        let mut batch = Batch::new();
        batch.push_move(FrameId(3), TierId(0));
        batch.push_exchange(FrameId(2), FrameId(1));
        let p = plan(&mut ledger, &batch, &FaultInjection::default(), &name);
        assert_eq!(p.moves.len(), 2);
        assert_eq!(p.moves[0].depends_on, Some(1));
        assert_eq!(p.moves[1].depends_on, Some(0));
        assert_eq!(p.refused.len(), 1, "{:?}", p.refused);
        assert_eq!(p.refused[0].frames, 3..4);
        assert!(matches!(p.refused[0].source, StepError::TierFull { .. }));
        let mut ok = vec![true, false];
        settle(&p.moves, &mut ok);
        assert_eq!(ok, vec![false, false]);
        let mut ok = vec![true, true];
        settle(&p.moves, &mut ok);
        assert_eq!(exchanged(&p.moves, &ok), vec![true, true]);
    }

    #[test]
    fn injected_reservation_failures_refuse_the_move() {
        let mut ledger = Ledger::fixed(&[4, 4], &[0, 0, 1, 1]).unwrap();
        let faults = FaultInjection::default();
        faults.fail_next(Step::Reserve, 1);
        let p = plan(
            &mut ledger,
            &Batch::from(&[mv(0, 1), mv(1, 1)][..]),
            &faults,
            &name,
        );
        assert_eq!(p.refused.len(), 1);
        assert_eq!(p.refused[0].frames, 0..1);
        assert_eq!(p.refused[0].step, MoveStep::Reserve);
        assert!(matches!(p.refused[0].source, StepError::Injected));
        assert_eq!(p.moves.len(), 1);
    }
}

//! A migration batch as the caller means it: plain moves (a frame to a
//! tier) and exchanges (two frames on different tiers swap tiers), kept
//! apart so no migrator has to guess which moves belong together.
//!
//! Callers that know their exchanges (the engine's planner) build the
//! batch from them; callers that only know where frames should go (tests,
//! benchmarks, the API's frame moves) let [`Batch::pairing`] decide, once,
//! which moves must become exchanges because their destination is full.

use std::collections::HashSet;

use crate::ids::{FrameId, TierId};
use crate::tiered::TieredMemory;

/// Move one frame to a tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Move {
    /// The frame.
    pub frame: FrameId,
    /// Its destination tier.
    pub to_tier: TierId,
}

/// Two frames on different tiers that swap tiers (and slots): the way a
/// frame enters a full tier when another one leaves it in return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Exchange {
    /// One frame.
    pub a: FrameId,
    /// The other frame.
    pub b: FrameId,
}

/// What one [`super::Migrator::migrate`] call is asked to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    moves: Vec<Move>,
    exchanges: Vec<Exchange>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a plain move.
    pub fn push_move(&mut self, frame: FrameId, to_tier: TierId) {
        self.moves.push(Move { frame, to_tier });
    }

    /// Adds an exchange of `a` and `b`.
    pub fn push_exchange(&mut self, a: FrameId, b: FrameId) {
        self.exchanges.push(Exchange { a, b });
    }

    /// The plain moves, in the order given.
    pub fn moves(&self) -> &[Move] {
        &self.moves
    }

    /// The exchanges, in the order given.
    pub fn exchanges(&self) -> &[Exchange] {
        &self.exchanges
    }

    /// Frames the batch names: one per move, two per exchange.
    pub fn frames(&self) -> usize {
        self.moves.len() + 2 * self.exchanges.len()
    }

    /// Whether the batch names no frame.
    pub fn is_empty(&self) -> bool {
        self.frames() == 0
    }

    /// A batch for `moves`, where the moves that cannot find room become
    /// exchanges. A plain move into a full tier may take the room a plain
    /// move of the same batch frees by leaving that tier (the remap
    /// migrator retries it once that move has committed; the kernel
    /// migrator makes it depend on that move); so a move into a full tier
    /// stays plain when a move out of that tier to a tier with room goes
    /// with it, and becomes an exchange with a move the other way when both
    /// tiers are full. What pairs with nothing stays a plain
    /// move, which the migrator then refuses with the reason. Moves the
    /// migrator skips or refuses anyway (a frame named twice, already on
    /// its tier, no such frame or tier) stay plain moves too, so the
    /// outcome says so.
    pub fn pairing(moves: &[Move], memory: &TieredMemory) -> Self {
        let tiers = memory.tiers().len();
        let mut free: Vec<usize> = (0..tiers).map(|t| memory.free_slots(TierId(t))).collect();
        let mut freed = vec![0usize; tiers];
        let mut seen = HashSet::new();
        let mut batch = Batch::new();
        let mut blocked: Vec<(Move, TierId)> = Vec::new();
        for &m in moves {
            let from = memory.location(m.frame).map(|l| l.tier);
            match from {
                Some(from)
                    if seen.insert(m.frame) && m.to_tier.index() < tiers && from != m.to_tier =>
                {
                    if free[m.to_tier.index()] > 0 {
                        free[m.to_tier.index()] -= 1;
                        freed[from.index()] += 1;
                        batch.moves.push(m);
                    } else {
                        blocked.push((m, from));
                    }
                }
                _ => batch.moves.push(m),
            }
        }
        // Retried moves take the slots the first ones left; their own
        // slots are free only after the retry, too late for the others.
        let mut full = Vec::new();
        for (m, from) in blocked {
            if freed[m.to_tier.index()] > 0 {
                freed[m.to_tier.index()] -= 1;
                batch.moves.push(m);
            } else {
                full.push((m, from));
            }
        }
        let mut used = vec![false; full.len()];
        for i in 0..full.len() {
            if used[i] {
                continue;
            }
            used[i] = true;
            let (a, a_from) = full[i];
            let partner = (i + 1..full.len())
                .find(|&j| !used[j] && full[j].1 == a.to_tier && full[j].0.to_tier == a_from);
            match partner {
                Some(j) => {
                    used[j] = true;
                    batch.push_exchange(a.frame, full[j].0.frame);
                }
                None => batch.moves.push(a),
            }
        }
        batch
    }
}

impl From<Vec<Move>> for Batch {
    /// A batch of plain moves.
    fn from(moves: Vec<Move>) -> Self {
        Batch {
            moves,
            exchanges: Vec::new(),
        }
    }
}

impl From<&[Move]> for Batch {
    /// A batch of plain moves.
    fn from(moves: &[Move]) -> Self {
        Batch::from(moves.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TierSpec;
    use crate::config::MemoryConfig;
    use crate::size::MIB;

    /// 4 frames of 2 MiB, fast first: frames 0 and 1 fast, 2 and 3 slow;
    /// the fast tier holds 2 frames, the slow one `slow_frames`.
    fn memory(slow_frames: u64) -> TieredMemory {
        let tier = |name: &str, frames: u64| -> TierSpec {
            format!("name={name},backend=memfd,size={}M", frames * 2)
                .parse()
                .unwrap()
        };
        let cfg = MemoryConfig::new(8 * MIB, vec![tier("fast", 2), tier("slow", slow_frames)]);
        TieredMemory::new(&cfg).unwrap()
    }

    fn mv(frame: usize, to_tier: usize) -> Move {
        Move {
            frame: FrameId(frame),
            to_tier: TierId(to_tier),
        }
    }

    #[test]
    fn a_move_into_a_full_tier_stays_plain_when_another_leaves_it_for_room() {
        let memory = memory(3);
        let batch = Batch::pairing(&[mv(2, 0), mv(0, 1)], &memory);
        assert_eq!(batch.moves(), &[mv(0, 1), mv(2, 0)]);
        assert!(batch.exchanges().is_empty());
        assert_eq!(batch.frames(), 2);
    }

    #[test]
    fn moves_between_two_full_tiers_pair_into_exchanges() {
        let memory = memory(2);
        let batch = Batch::pairing(&[mv(2, 0), mv(0, 1), mv(3, 0)], &memory);
        assert_eq!(
            batch.exchanges(),
            &[Exchange {
                a: FrameId(2),
                b: FrameId(0)
            }]
        );
        // Nothing leaves the fast tier for frame 3: the migrator refuses it.
        assert_eq!(batch.moves(), &[mv(3, 0)]);
        assert_eq!(batch.frames(), 3);
    }

    #[test]
    fn what_a_migrator_skips_or_refuses_stays_a_plain_move() {
        let memory = memory(2);
        let moves = [mv(0, 0), mv(2, 0), mv(2, 1), mv(9, 1), mv(1, 5)];
        let batch = Batch::pairing(&moves, &memory);
        assert!(batch.exchanges().is_empty());
        assert_eq!(batch.frames(), moves.len());
        assert!(moves.iter().all(|m| batch.moves().contains(m)));
    }
}

//! The tiering engine's counters as a table (`tierctl stats`), tier
//! occupancy bars, and rebalance progress.

use guest_memory::{TierSpeed, TierUsage};

use crate::render::table::{Table, key_values};
use crate::render::units::{bar, count, duration_ms, fraction, micros, percent, size};
use tiering::{EngineStats, RebalanceProgress, RebalanceState};

/// Width of occupancy and progress bars.
const BAR_WIDTH: usize = 20;

/// Per-tier occupancy: used and capacity (bytes when `frame_size` is
/// known, frames always), a bar, and the tier's read speed (`-` when
/// unknown: `vm.info` says why).
pub fn tier_table(tiers: &[TierUsage], frame_size: Option<u64>) -> String {
    let mut table = Table::new(&["TIER", "USED", "CAPACITY", "FRAMES", "OCCUPANCY", "READ"])
        .right_align(&[1, 2, 3]);
    for (index, tier) in tiers.iter().enumerate() {
        let (used, capacity) = (tier.used_frames as u64, tier.capacity_frames as u64);
        let bytes =
            |frames: u64| frame_size.map_or("-".to_owned(), |f| size(frames.saturating_mul(f)));
        let share = fraction(used, capacity);
        table.row(vec![
            format!("{index} {}", tier.name),
            bytes(used),
            bytes(capacity),
            format!("{used}/{capacity}"),
            format!("{} {}", bar(share, BAR_WIDTH), percent(share)),
            match &tier.speed {
                TierSpeed::Unknown { .. } => "-".to_owned(),
                known => known.describe(),
            },
        ]);
    }
    table.render()
}

/// How far a rebalance has come, from the start toward the target, in
/// [0, 1]; 1 when there was nothing to move.
pub fn rebalance_fraction(r: &RebalanceProgress) -> f64 {
    let total = r.start_bytes as f64 - r.target_bytes as f64;
    if total == 0.0 {
        return 1.0;
    }
    ((r.start_bytes as f64 - r.fast_bytes as f64) / total).clamp(0.0, 1.0)
}

/// One line: state, fast-tier bytes against the target, frames moved,
/// time against the deadline, and a bar.
pub fn rebalance_line(r: &RebalanceProgress) -> String {
    let state = match &r.state {
        RebalanceState::Running => "running".to_owned(),
        RebalanceState::Done => "done".to_owned(),
        RebalanceState::Failed { reason } => format!("failed ({reason})"),
    };
    let share = rebalance_fraction(r);
    format!(
        "{state}: fast tier {} -> {} (from {}), {} moved, {} of {} {} {}",
        size(r.fast_bytes),
        size(r.target_bytes),
        size(r.start_bytes),
        count(r.moved_frames, "frame"),
        duration_ms(r.elapsed_ms),
        duration_ms(r.deadline_ms),
        bar(share, BAR_WIDTH),
        percent(share).trim_start(),
    )
}

/// `tierctl rebalance --status`.
pub fn render_rebalance(progress: Option<&RebalanceProgress>) -> String {
    match progress {
        None => "no rebalance has run\n".to_owned(),
        Some(r) => format!("rebalance  {}\n", rebalance_line(r)),
    }
}

/// `tierctl stats`: the engine of VM `vm`, whose frames are `frame_size`
/// bytes.
/// The sampler's budget and what it armed.
fn sampling_line(c: &tiering::EngineCost) -> String {
    match c.budget_pages_per_sec {
        None => "-".to_owned(),
        Some(budget) => format!(
            "{budget} pages/s budget, {} pages armed, {} touched, window {} us, {} regions{}",
            c.armed_pages,
            c.armed_hits,
            c.window_us,
            c.regions,
            c.cpu_ns_per_armed_page
                .map_or_else(String::new, |ns| format!(", {ns:.0} ns CPU per page"))
        ),
    }
}

pub fn render_stats(stats: &EngineStats, vm: &str, frame_size: u64) -> String {
    let moves = |m: &tiering::MoveCount| format!("{}, {}", count(m.frames, "frame"), size(m.bytes));
    let quota = match stats.fast_quota {
        Some(q) if q.min_bytes > 0 => format!("{} (min {})", size(q.max_bytes), size(q.min_bytes)),
        Some(q) => size(q.max_bytes),
        None => "-".to_owned(),
    };
    let last = match stats.recent.last() {
        Some(i) => format!(
            "#{}: {} candidates, {} promoted, {} demoted, {} aborted, {} moved",
            i.index,
            i.candidates,
            i.promoted,
            i.demoted,
            i.aborted,
            size(i.bytes)
        ),
        None => "-".to_owned(),
    };
    let mut out = format!(
        "tiering engine of {vm}: {}, tracker {}, frames of {}\n\n",
        count(stats.intervals, "interval"),
        stats.tracker,
        size(frame_size)
    );
    out.push_str(&key_values(&[
        ("threshold", stats.describe_threshold(frame_size)),
        ("fast quota", quota),
        (
            "hot set",
            format!(
                "{}, {} (hot 4 KiB pages: {})",
                count(stats.hot_frames as u64, "frame"),
                size(stats.hot_set_bytes),
                size(stats.hot_page_bytes)
            ),
        ),
        ("promotions", moves(&stats.promotions)),
        ("demotions", moves(&stats.demotions)),
        ("exchanges", count(stats.exchanges, "frame")),
        ("aborted", stats.aborted.to_string()),
        ("sampling", sampling_line(&stats.cost)),
        ("cost", stats.cost.describe()),
        (
            "warnings",
            if stats.warnings.is_empty() {
                "-".to_owned()
            } else {
                stats
                    .warnings
                    .iter()
                    .map(|w| w.describe())
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        ),
        ("tracker errors", stats.tracker_errors.to_string()),
        (
            "last error",
            stats.last_error.clone().unwrap_or_else(|| "-".to_owned()),
        ),
        ("last interval", last),
        (
            "rebalance",
            stats
                .rebalance
                .as_ref()
                .map_or("-".to_owned(), rebalance_line),
        ),
    ]));
    out.push('\n');
    if !stats.tiers.is_empty() {
        out.push_str(&tier_table(&stats.tiers, Some(frame_size)));
        out.push('\n');
    }
    let s = stats.stage_micros;
    let mut stages = Table::new(&["STAGE", "TOTAL", "PER INTERVAL"]).right_align(&[1, 2]);
    for (name, us) in [
        ("collect", s.collect),
        ("heat", s.heat),
        ("plan", s.plan),
        ("migrate", s.migrate),
    ] {
        let per = us
            .checked_div(stats.intervals)
            .map_or("-".to_owned(), micros);
        stages.row(vec![name.to_owned(), micros(us), per]);
    }
    out.push_str(&stages.render());
    out
}

#[cfg(test)]
mod tests {
    use tiering::FastQuota;

    use super::*;
    use guest_memory::TierProfile;
    use tiering::{IntervalRecord, MoveCount, StageMicros};

    const MIB: u64 = 1 << 20;

    fn tiers() -> Vec<TierUsage> {
        vec![
            TierUsage {
                name: "dram".into(),
                capacity_frames: 128,
                used_frames: 64,
                speed: TierSpeed::Declared {
                    profile: TierProfile {
                        read_latency_ns: 100,
                        read_bandwidth: 10 << 30,
                    },
                },
            },
            TierUsage {
                name: "slow".into(),
                capacity_frames: 384,
                used_frames: 384,
                speed: TierSpeed::Declared {
                    profile: TierProfile {
                        read_latency_ns: 300,
                        read_bandwidth: 4 << 30,
                    },
                },
            },
        ]
    }

    fn rebalance(start: u64, fast: u64, target: u64, state: RebalanceState) -> RebalanceProgress {
        RebalanceProgress {
            target_bytes: target * MIB,
            start_bytes: start * MIB,
            fast_bytes: fast * MIB,
            moved_frames: 32,
            elapsed_ms: 1500,
            deadline_ms: 5000,
            state,
        }
    }

    #[test]
    fn tier_table_shows_bytes_frames_and_a_bar() {
        let text = tier_table(&tiers(), Some(2 * MIB));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[1],
            "0 dram  128 MiB   256 MiB   64/128  [##########..........]  50.0%  100 ns, 10 GiB/s (declared)"
        );
        assert!(
            lines[2].ends_with("[####################] 100.0%  300 ns, 4 GiB/s (declared)"),
            "{}",
            lines[2]
        );
        let frames_only = tier_table(&tiers(), None);
        assert!(
            frames_only.lines().nth(1).unwrap().contains("  -  "),
            "{frames_only}"
        );
    }

    #[test]
    fn rebalance_progress_counts_toward_the_target_either_way() {
        let shrinking = rebalance(256, 192, 128, RebalanceState::Running);
        assert_eq!(rebalance_fraction(&shrinking), 0.5);
        let growing = rebalance(128, 224, 256, RebalanceState::Running);
        assert_eq!(rebalance_fraction(&growing), 0.75);
        let overshoot = rebalance(256, 100, 128, RebalanceState::Done);
        assert_eq!(rebalance_fraction(&overshoot), 1.0);
        assert_eq!(
            rebalance_fraction(&rebalance(64, 64, 64, RebalanceState::Done)),
            1.0
        );
        assert_eq!(
            rebalance_line(&shrinking),
            "running: fast tier 192 MiB -> 128 MiB (from 256 MiB), 32 frames moved, \
             1.5 s of 5.0 s [##########..........] 50.0%"
        );
        let failed = rebalance(
            256,
            200,
            128,
            RebalanceState::Failed {
                reason: "deadline passed".into(),
            },
        );
        assert!(rebalance_line(&failed).starts_with("failed (deadline passed): "));
        assert_eq!(render_rebalance(None), "no rebalance has run\n");
    }

    #[test]
    fn stats_table_has_every_counter() {
        let stats = EngineStats {
            intervals: 10,
            tracker: "dirty-log".into(),
            fast_quota: Some(FastQuota {
                min_bytes: 0,
                max_bytes: 256 * MIB,
            }),
            threshold: Some(1234.56),
            threshold_pages: Some(159.8),
            hot_frames: 48,
            hot_set_bytes: 96 * MIB,
            hot_page_bytes: 80 * MIB,
            promotions: MoveCount {
                frames: 120,
                bytes: 240 * MIB,
            },
            demotions: MoveCount {
                frames: 100,
                bytes: 200 * MIB,
            },
            exchanges: 6,
            aborted: 2,
            tiers: tiers(),
            stage_micros: StageMicros {
                collect: 250_000,
                heat: 5_000,
                plan: 900,
                migrate: 1_500_000,
            },
            tracker_errors: 1,
            cost: tiering::EngineCost {
                budget_pages_per_sec: Some(16_384),
                armed_pages: 5000,
                armed_hits: 1200,
                window_us: 2500,
                regions: 300,
                cpu_ns_per_armed_page: Some(850.0),
                sampler_cpu_us: 4_250,
                engine_cpu_us: 120_000,
                write_stall_us: 3_000,
                bytes_moved: 440 * MIB,
                fast_heat_share: Some(0.925),
                ..tiering::EngineCost::default()
            },
            last_error: Some("migrator: tier 'dram' is full".into()),
            rebalance: Some(rebalance(256, 192, 128, RebalanceState::Running)),
            recent: vec![IntervalRecord {
                index: 10,
                candidates: 3,
                promoted: 2,
                demoted: 1,
                bytes: 6 * MIB,
                ..IntervalRecord::default()
            }],
            warnings: vec![tiering::EngineWarning::HotSetExceedsQuota {
                hot_set_bytes: 300 * MIB,
                quota_bytes: 256 * MIB,
            }],
        };
        let text = render_stats(&stats, "vm0", 2 * MIB);
        for expected in [
            "tiering engine of vm0: 10 intervals, tracker dirty-log, frames of 2 MiB",
            "threshold       1235 (about 160 of a frame's 512 pages touched per interval)\n",
            "fast quota      256 MiB\n",
            "hot set         48 frames, 96 MiB (hot 4 KiB pages: 80 MiB)",
            "promotions      120 frames, 240 MiB",
            "demotions       100 frames, 200 MiB",
            "exchanges       6 frames",
            "aborted         2\n",
            "tracker errors  1\n",
            "sampling        16384 pages/s budget, 5000 pages armed, 1200 touched, window 2500 us, 300 regions, 850 ns CPU per page\n",
            "cost            CPU 0.00 s sampler + 0.12 s engine, write stalls 0.003 s, 440 MiB moved; heat on the fast tier 92.5 %\n",
            "warnings        the hot set (~300 MiB) is larger than the fast-tier quota (256 MiB)",
            "last error      migrator: tier 'dram' is full",
            "last interval   #10: 3 candidates, 2 promoted, 1 demoted, 0 aborted, 6 MiB moved",
            "rebalance       running: fast tier 192 MiB",
            "0 dram  128 MiB",
            "collect  250.0 ms       25.0 ms",
            "migrate     1.5 s      150.0 ms",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn a_fresh_engine_renders_without_dividing_by_zero() {
        let text = render_stats(&EngineStats::default(), "vm0", 2 * MIB);
        assert!(text.contains("fast quota      -\n"), "{text}");
        assert!(text.contains("warnings        -\n"), "{text}");
        assert!(text.contains("collect   0 µs             -"), "{text}");
        assert!(!text.contains("TIER"), "{text}");
    }
}

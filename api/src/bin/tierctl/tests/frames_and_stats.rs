//! `frames` (one page, or every page into a heat map) and `stats` (once,
//! and `--watch`).

use std::sync::atomic::{AtomicU64, Ordering};

use api::types::{FrameEntry, FramesPage, MAX_FRAMES_PAGE};
use tiering::EngineStats;
use tiering::stats::MoveCount;

use super::fixture::{Reply, Request, Server, error, json};
use super::samples::{self, MIB};
use crate::error::TierctlError;

/// A guest of `total` frames: the first quarter on tier 0, heat rising
/// with the index.
fn frames_page(request: &Request, total: u64) -> Reply {
    let offset = request.query("offset").unwrap_or(0);
    let limit = request.query("limit").unwrap_or(4096).min(MAX_FRAMES_PAGE);
    let end = (offset + limit).min(total);
    let frames = (offset.min(end)..end)
        .map(|index| FrameEntry {
            index,
            gpa: index * 2 * MIB,
            tier: u8::from(index >= total / 4),
            heat: (index % 100) as f32,
        })
        .collect();
    json(
        200,
        &FramesPage {
            frame_size: 2 * MIB,
            total_frames: total,
            offset,
            tiers: vec!["dram".into(), "slow".into()],
            frames,
        },
    )
}

fn guest(total: u64) -> impl Fn(&Request) -> Reply {
    move |r: &Request| match r.path.split('?').next().unwrap() {
        "/api/v1/vm.tiering.frames" => frames_page(r, total),
        "/api/v1/vm.info" => json(200, &samples::info()),
        _ => error(404, "no such endpoint", serde_json::Value::Null),
    }
}

#[test]
fn frames_lists_the_page_asked_for() {
    let server = Server::unix(guest(256));
    let out = server
        .tierctl(&["frames", "--offset", "62", "--limit", "3"])
        .unwrap();
    assert_eq!(
        out,
        "frames 62..=64 of 256 (2 MiB each)\n\n\
         FRAME        GPA  TIER    HEAT\n   \
            62  0x7c00000  0 dram  62.0\n   \
            63  0x7e00000  0 dram  63.0\n   \
            64  0x8000000  1 slow  64.0\n"
    );
    assert_eq!(
        server.requests()[0].path,
        "/api/v1/vm.tiering.frames?offset=62&limit=3"
    );
    server.tierctl(&["frames"]).unwrap();
    assert_eq!(server.requests()[1].path, "/api/v1/vm.tiering.frames");
}

#[test]
fn frames_svg_fetches_every_page_and_draws_them() {
    let total = MAX_FRAMES_PAGE + 1000;
    let server = Server::unix(guest(total));
    let svg_path = server.path("heat.svg");
    let out = server
        .tierctl(&["frames", "--svg", svg_path.to_str().unwrap()])
        .unwrap();
    assert_eq!(
        out,
        format!(
            "heat map of {total} frames of 2 MiB written to {}\n",
            svg_path.display()
        )
    );
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            format!("/api/v1/vm.tiering.frames?offset=0&limit={MAX_FRAMES_PAGE}"),
            format!("/api/v1/vm.tiering.frames?offset={MAX_FRAMES_PAGE}&limit={MAX_FRAMES_PAGE}"),
            "/api/v1/vm.info".to_owned(),
        ]
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<?xml"));
    assert!(svg.ends_with("</svg>\n"));
    assert!(svg.contains(&format!("Guest memory of vm-test: {total} frames of 2 MiB")));
    assert!(svg.contains(&format!("tier 0 dram: {} frames", total / 4)));
    assert!(svg.contains(&format!("tier 1 slow: {} frames", total - total / 4)));
    assert!(svg.contains("one cell per 2 frames"));
}

fn stats() -> EngineStats {
    EngineStats {
        intervals: 20,
        tracker: "dirty-log".into(),
        threshold: Some(900.0),
        promotions: MoveCount {
            frames: 10,
            bytes: 20 * MIB,
        },
        tiers: samples::tiers(),
        ..EngineStats::default()
    }
}

#[test]
fn stats_shows_the_engine_with_the_vm_name_and_frame_size() {
    let server = Server::unix(|r: &Request| match r.path.as_str() {
        "/api/v1/vm.tiering.stats" => json(200, &stats()),
        "/api/v1/vm.info" => json(200, &samples::info()),
        _ => error(404, "no such endpoint", serde_json::Value::Null),
    });
    let out = server.tierctl(&["stats"]).unwrap();
    assert!(
        out.starts_with(
            "tiering engine of vm-test: 20 intervals, tracker dirty-log, frames of 2 MiB\n"
        ),
        "{out}"
    );
    assert!(out.contains("promotions      10 frames, 20 MiB\n"), "{out}");
    assert!(
        out.contains("0 dram  128 MiB   128 MiB    64/64  [####################] 100.0%"),
        "{out}"
    );
    // --json: the engine's snapshot as the server sent it, nothing else.
    let raw = server.tierctl(&["--json", "stats"]).unwrap();
    assert_eq!(
        raw,
        format!("{}\n", serde_json::to_string(&stats()).unwrap())
    );
}

#[test]
fn stats_watch_prints_one_table_per_refresh_until_an_error() {
    let calls = AtomicU64::new(0);
    let server = Server::unix(move |r: &Request| match r.path.as_str() {
        "/api/v1/vm.tiering.stats" => {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                json(200, &stats())
            } else {
                error(409, "tiering is off for this VM", serde_json::Value::Null)
            }
        }
        "/api/v1/vm.info" => json(200, &samples::info()),
        _ => error(404, "no such endpoint", serde_json::Value::Null),
    });
    // The fixture runs tierctl with a stdout that is not a terminal.
    let (out, result) = server.tierctl_output(&["stats", "--watch", "--interval", "0.05"]);
    let e = result.unwrap_err();
    assert!(
        matches!(e, TierctlError::Refused { status: 409, .. }),
        "{e:?}"
    );
    // Two tables, one after the other, no terminal escapes.
    assert!(
        out.starts_with("refresh 1, every 0.05 s (Ctrl-C to stop)\n\ntiering engine of vm-test"),
        "{out}"
    );
    assert!(
        out.contains("\n\nrefresh 2, every 0.05 s (Ctrl-C to stop)\n\ntiering engine of vm-test"),
        "{out}"
    );
    assert!(!out.contains("refresh 3") && !out.contains('\x1b'), "{out}");
    let stats_calls = server
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/vm.tiering.stats")
        .count();
    assert_eq!(stats_calls, 3);
}

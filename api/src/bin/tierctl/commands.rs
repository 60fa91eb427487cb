//! What each subcommand asks the API and prints.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;

use api::types::{
    FrameEntry, FramesPage, MAX_FRAMES_PAGE, RebalanceRequest, VmConfigBody, VmCounters, VmInfo,
    VmmPingResponse,
};
use tiering::TieringPolicy;

use crate::cli::{Cli, Command, FramesArgs, RebalanceArgs, StatsArgs};
use crate::endpoint::{Endpoint, api_path, frames_path, parse_body};
use crate::error::TierctlError;
use crate::heatmap::{HeatMapInput, render_svg};
use crate::render::frames::render_frames;
use crate::render::policy::render_policy;
use crate::render::stats::{render_rebalance, render_stats};
use crate::render::units::size;
use crate::render::vm::{render_counters, render_info, render_ping};
use crate::watch::{header, watch};
use tiering::{EngineStats, RebalanceProgress};

/// Where output goes and how.
pub struct Output<'a> {
    /// stdout.
    pub out: &'a mut dyn Write,
    /// Print the server's JSON as it is.
    pub json: bool,
    /// stdout is a terminal (`stats --watch` redraws in place).
    pub terminal: bool,
}

impl std::fmt::Debug for Output<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("json", &self.json)
            .field("terminal", &self.terminal)
            .finish_non_exhaustive()
    }
}

impl Output<'_> {
    fn write(&mut self, text: &[u8]) -> Result<(), TierctlError> {
        self.out
            .write_all(text)
            .and_then(|()| self.out.flush())
            .map_err(|source| TierctlError::Write {
                what: "stdout".into(),
                source,
            })
    }

    /// A raw body, newline-terminated.
    fn raw(&mut self, body: &[u8]) -> Result<(), TierctlError> {
        if body.is_empty() {
            return Ok(());
        }
        self.write(body)?;
        if body.last() != Some(&b'\n') {
            self.write(b"\n")?;
        }
        Ok(())
    }
}

/// Runs `cli`'s command against `endpoint`.
pub fn run(cli: &Cli, endpoint: &Endpoint, output: &mut Output<'_>) -> Result<(), TierctlError> {
    match &cli.command {
        Command::Ping => show(endpoint, output, "vmm.ping", |p: &VmmPingResponse| {
            render_ping(p, endpoint.target())
        }),
        Command::ShutdownVmm => action(endpoint, output, "vmm.shutdown", None, "VMM shutting down"),
        Command::Create { file } => {
            let body = read_json::<VmConfigBody>(file, "VM configuration")?;
            action(endpoint, output, "vm.create", Some(&body), "VM created")
        }
        Command::Boot => action(endpoint, output, "vm.boot", None, "VM booted"),
        Command::Pause => action(endpoint, output, "vm.pause", None, "VM paused"),
        Command::Resume => action(endpoint, output, "vm.resume", None, "VM resumed"),
        Command::Shutdown => action(endpoint, output, "vm.shutdown", None, "VM shut down"),
        Command::Delete => action(endpoint, output, "vm.delete", None, "VM deleted"),
        Command::Info => show(endpoint, output, "vm.info", render_info),
        Command::Counters => show(endpoint, output, "vm.counters", |c: &VmCounters| {
            render_counters(c)
        }),
        Command::MeasureTiers => action(
            endpoint,
            output,
            "vm.tiers.measure",
            None,
            "measuring the tiers' speeds: tierctl info shows them once it is done",
        ),
        Command::Policy => show(endpoint, output, "vm.tiering", render_policy),
        Command::SetPolicy { file } => {
            let body = read_json::<TieringPolicy>(file, "tiering policy")?;
            action(
                endpoint,
                output,
                "vm.tiering",
                Some(&body),
                "policy accepted: it applies at the engine's next interval",
            )
        }
        Command::Stats(args) => stats(endpoint, output, args),
        Command::Frames(args) => frames(endpoint, output, args),
        Command::Rebalance(args) => rebalance(endpoint, output, args),
        Command::Metrics => {
            let body = endpoint.call("GET", "/metrics", None)?;
            output.raw(&body)
        }
    }
}

/// `GET vm.NAME`: the raw JSON with `--json`, else `render` of it.
fn show<T: DeserializeOwned>(
    endpoint: &Endpoint,
    output: &mut Output<'_>,
    name: &str,
    render: impl Fn(&T) -> String,
) -> Result<(), TierctlError> {
    let (raw, value) = endpoint.get::<T>(&api_path(name))?;
    if output.json {
        // An empty 2xx body (204) is `null` to a script.
        output.raw(if raw.trim_ascii().is_empty() {
            b"null"
        } else {
            &raw
        })
    } else {
        output.write(render(&value).as_bytes())
    }
}

/// `PUT NAME` with an optional body; `done` on success (a response body,
/// if any, with `--json`).
fn action(
    endpoint: &Endpoint,
    output: &mut Output<'_>,
    name: &str,
    body: Option<&[u8]>,
    done: &str,
) -> Result<(), TierctlError> {
    let response = endpoint.call("PUT", &api_path(name), body)?;
    if output.json {
        output.raw(&response)
    } else {
        output.write(format!("{done}\n").as_bytes())
    }
}

/// The bytes of `path` (`-`: stdin), checked to be a `T` so that a typo
/// is reported with the file's line and column before anything is sent.
/// The server receives the file as written.
fn read_json<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<Vec<u8>, TierctlError> {
    let read_error = |source| TierctlError::ReadInput {
        path: path.to_owned(),
        source,
    };
    let bytes = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        bytes
    } else {
        std::fs::read(path).map_err(read_error)?
    };
    serde_json::from_slice::<T>(&bytes).map_err(|source| TierctlError::BadInput {
        path: path.to_owned(),
        what,
        source,
    })?;
    Ok(bytes)
}

fn stats(
    endpoint: &Endpoint,
    output: &mut Output<'_>,
    args: &StatsArgs,
) -> Result<(), TierctlError> {
    let json = output.json;
    let fetch = |refresh: Option<(f64, u64)>| -> Result<String, TierctlError> {
        let path = api_path("vm.tiering.stats");
        let raw = endpoint.call("GET", &path, None)?;
        if json {
            let mut text = String::from_utf8_lossy(&raw).trim_end().to_owned();
            text.push('\n');
            return Ok(text);
        }
        let stats: EngineStats = parse_body(&path, &raw)?;
        let (_, info) = endpoint.get::<VmInfo>(&api_path("vm.info"))?;
        let table = render_stats(&stats, &info.config.id, info.frame_size);
        Ok(match refresh {
            Some((interval, n)) => format!("{}{table}", header(interval, n)),
            None => table,
        })
    };
    if !args.watch {
        let text = fetch(None)?;
        return output.write(text.as_bytes());
    }
    let terminal = output.terminal && !json;
    watch(
        Duration::from_secs_f64(args.interval),
        terminal,
        output.out,
        |n| fetch(Some((args.interval, n))),
    )
}

/// Every frame, page by page, in index order, with the frame size and
/// tier names.
fn all_frames(endpoint: &Endpoint) -> Result<(Vec<FrameEntry>, u64, Vec<String>), TierctlError> {
    let mut frames: Vec<FrameEntry> = Vec::new();
    loop {
        let path = frames_path(Some(frames.len() as u64), Some(MAX_FRAMES_PAGE));
        let (_, page) = endpoint.get::<FramesPage>(&path)?;
        let last = page.frames.is_empty()
            || frames.len() as u64 + page.frames.len() as u64 >= page.total_frames;
        frames.extend(page.frames);
        if last {
            frames.sort_by_key(|f| f.index);
            return Ok((frames, page.frame_size, page.tiers));
        }
    }
}

fn frames(
    endpoint: &Endpoint,
    output: &mut Output<'_>,
    args: &FramesArgs,
) -> Result<(), TierctlError> {
    let Some(svg_path) = &args.svg else {
        let path = frames_path(args.offset, args.limit);
        let (raw, page) = endpoint.get::<FramesPage>(&path)?;
        return if output.json {
            output.raw(&raw)
        } else {
            output.write(render_frames(&page).as_bytes())
        };
    };
    let (frames, frame_size, tiers) = all_frames(endpoint)?;
    let (_, info) = endpoint.get::<VmInfo>(&api_path("vm.info"))?;
    let svg = render_svg(&HeatMapInput {
        vm: &info.config.id,
        frame_size,
        tiers: &tiers,
        frames: &frames,
    });
    std::fs::write(svg_path, svg).map_err(|source| TierctlError::Write {
        what: svg_path.display().to_string(),
        source,
    })?;
    if output.json {
        return Ok(());
    }
    output.write(
        format!(
            "heat map of {} frames of {} written to {}\n",
            frames.len(),
            size(frame_size),
            svg_path.display()
        )
        .as_bytes(),
    )
}

fn rebalance(
    endpoint: &Endpoint,
    output: &mut Output<'_>,
    args: &RebalanceArgs,
) -> Result<(), TierctlError> {
    let (Some(fast_bytes), Some(deadline_ms)) = (args.fast_bytes, args.deadline_ms) else {
        return show(
            endpoint,
            output,
            "vm.rebalance",
            |p: &Option<RebalanceProgress>| render_rebalance(p.as_ref()),
        );
    };
    let body = serde_json::to_vec(&RebalanceRequest {
        fast_bytes,
        deadline_ms,
    })
    .map_err(TierctlError::Encode)?;
    action(
        endpoint,
        output,
        "vm.rebalance",
        Some(&body),
        &format!(
            "rebalance to a fast tier of {} within {deadline_ms} ms started \
             (tierctl rebalance --status shows its progress)",
            size(fast_bytes)
        ),
    )
}

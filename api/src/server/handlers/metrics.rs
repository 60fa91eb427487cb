//! `GET /metrics`: the VMM, its VM, the VM's tiers and tiering engine in
//! the Prometheus text format. Names follow Prometheus conventions: base
//! units in the name (`_bytes`, `_seconds`), counters end in `_total`,
//! every series of a VM carries `vm`, per-tier series `tier`.

use tiering::{EngineCost, EngineStats, EngineWarning, RebalanceState};

use crate::control::{ControlError, VmmControl};
use crate::server::api_error::ApiError;
use crate::server::prometheus::{Exposition, Kind, Value};
use crate::server::response::{PROMETHEUS_TEXT, Response};
use crate::server::router::Request;
use crate::types::{VmCounters, VmEndKind, VmInfo, VmState};

/// Metrics in the Prometheus text format.
///
/// Text exposition format 0.0.4. Series of the VM appear once one is
/// created; those of the tiering engine once it runs.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "metrics",
    responses(
        (status = 200, description = "Prometheus text format, version 0.0.4",
            body = String, content_type = "text/plain"),
    ),
)]
pub(crate) fn metrics(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    let mut page = Exposition::new();
    let version = control.ping().version;
    page.single(
        "tiervisor_build_info",
        Kind::Gauge,
        "tiervisor's version, as a label (always 1).",
        &[("version", &version)],
        Value::Int(1),
    );
    if let Some(info) = optional(control.vm_info())? {
        vm_metrics(&mut page, &info);
        if let Some(counters) = optional(control.vm_counters())? {
            counter_metrics(&mut page, &info.config.id, &counters);
        }
        if info.tiering
            && let Some(stats) = optional(control.tiering_stats())?
        {
            engine_metrics(&mut page, &info.config.id, &stats);
        }
    }
    Ok(Response::with_body(
        200,
        PROMETHEUS_TEXT,
        page.finish().into_bytes(),
    ))
}

/// Metrics leave out what the VMM cannot report now (no VM, tiering off)
/// and fail only on internal faults.
fn optional<T>(result: Result<T, ControlError>) -> Result<Option<T>, ApiError> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e @ ControlError::Internal(_)) => Err(e.into()),
        Err(_) => Ok(None),
    }
}

fn vm_metrics(page: &mut Exposition, info: &VmInfo) {
    let vm = info.config.id.as_str();
    let states = [
        VmState::Created,
        VmState::Running,
        VmState::Paused,
        VmState::Shutdown,
    ]
    .map(|s| (s.to_string(), s == info.state));
    let state_labels: Vec<([(&str, &str); 2], bool)> = states
        .iter()
        .map(|(name, on)| ([("vm", vm), ("state", name.as_str())], *on))
        .collect();
    page.family(
        "tiervisor_vm_state",
        Kind::Gauge,
        "1 for the state the VM is in, 0 for the others.",
        state_labels
            .iter()
            .map(|(l, on)| (&l[..], Value::from(*on))),
    );
    // Once the VM ended: how, so an alert can tell a guest that finished
    // from one that crashed.
    if let Some(end) = &info.end {
        let end_labels: Vec<([(&str, &str); 2], bool)> = VmEndKind::ALL
            .iter()
            .map(|k| ([("vm", vm), ("kind", k.name())], *k == end.kind))
            .collect();
        page.family(
            "tiervisor_vm_end",
            Kind::Gauge,
            "Once the VM ended: 1 for how it ended (success, power-off, guest-reset, stopped, \
             guest-exit: the guest reported an error, failed: it crashed, timed-out, vmm-error), \
             0 for the others.",
            end_labels.iter().map(|(l, on)| (&l[..], Value::from(*on))),
        );
    }
    let vm_label: &[(&str, &str)] = &[("vm", vm)];
    page.single(
        "tiervisor_vm_memory_bytes",
        Kind::Gauge,
        "Guest RAM.",
        vm_label,
        info.memory_bytes.into(),
    );
    page.single(
        "tiervisor_vm_frame_size_bytes",
        Kind::Gauge,
        "Bytes per frame, the unit frames move between tiers in.",
        vm_label,
        info.frame_size.into(),
    );
    page.single(
        "tiervisor_vm_vcpus",
        Kind::Gauge,
        "vCPUs of the VM.",
        vm_label,
        u64::from(info.config.vcpus).into(),
    );
    page.single(
        "tiervisor_vm_uptime_seconds",
        Kind::Gauge,
        "Time since the VM booted (0 before).",
        vm_label,
        (info.uptime_ms as f64 / 1000.0).into(),
    );
    page.single(
        "tiervisor_vm_tiering_enabled",
        Kind::Gauge,
        "1 if a tiering engine runs for the VM.",
        vm_label,
        info.tiering.into(),
    );
    let tier_labels: Vec<[(&str, &str); 2]> = info
        .tiers
        .iter()
        .map(|t| [("vm", vm), ("tier", t.name.as_str())])
        .collect();
    let frame_size = info.frame_size;
    page.family(
        "tiervisor_tier_capacity_bytes",
        Kind::Gauge,
        "What a tier can hold of the VM's frames.",
        tier_labels.iter().zip(&info.tiers).map(|(l, t)| {
            let bytes = (t.capacity_frames as u64).saturating_mul(frame_size);
            (&l[..], Value::from(bytes))
        }),
    );
    page.family(
        "tiervisor_tier_used_bytes",
        Kind::Gauge,
        "The VM's frames on a tier.",
        tier_labels.iter().zip(&info.tiers).map(|(l, t)| {
            let bytes = (t.used_frames as u64).saturating_mul(frame_size);
            (&l[..], Value::from(bytes))
        }),
    );
    // Tiers of unknown speed (device-DAX or file, nothing declared) have
    // no sample: vm.info says why.
    let profiles = || {
        tier_labels
            .iter()
            .zip(&info.tiers)
            .filter_map(|(l, t)| Some((&l[..], t.speed.profile()?)))
    };
    page.family(
        "tiervisor_tier_read_latency_seconds",
        Kind::Gauge,
        "A tier's read latency (one dependent cache-line read), measured or declared.",
        profiles().map(|(l, p)| (l, Value::from(p.read_latency_ns as f64 / 1e9))),
    );
    page.family(
        "tiervisor_tier_read_bandwidth_bytes_per_second",
        Kind::Gauge,
        "One thread's sequential read bandwidth on a tier, measured or declared.",
        profiles().map(|(l, p)| (l, Value::from(p.read_bandwidth))),
    );
}

fn counter_metrics(page: &mut Exposition, vm: &str, counters: &VmCounters) {
    let indices: Vec<String> = counters.vcpus.iter().map(|c| c.index.to_string()).collect();
    let labels: Vec<[(&str, &str); 2]> = indices
        .iter()
        .map(|i| [("vm", vm), ("vcpu", i.as_str())])
        .collect();
    let per_vcpu = |field: fn(&crate::types::VcpuCounters) -> u64| {
        labels
            .iter()
            .zip(&counters.vcpus)
            .map(move |(l, c)| (&l[..], Value::from(field(c))))
    };
    page.family(
        "tiervisor_vcpu_hypercalls_total",
        Kind::Counter,
        "Hypercalls a vCPU made.",
        per_vcpu(|c| c.hypercalls),
    );
    page.family(
        "tiervisor_vcpu_phase",
        Kind::Gauge,
        "The workload phase a vCPU is in.",
        per_vcpu(|c| c.phase),
    );
    page.family(
        "tiervisor_vcpu_phase_ops",
        Kind::Gauge,
        "Operations a vCPU's guest reported in its current phase.",
        per_vcpu(|c| c.ops),
    );
    let vm_label: &[(&str, &str)] = &[("vm", vm)];
    page.single(
        "tiervisor_guest_log_lines_total",
        Kind::Counter,
        "Guest log lines printed.",
        vm_label,
        counters.log_lines.into(),
    );
    page.single(
        "tiervisor_guest_log_lines_suppressed_total",
        Kind::Counter,
        "Guest log lines dropped by the rate limit.",
        vm_label,
        counters.log_lines_suppressed.into(),
    );
}

/// What the engine costs and the benefit it estimates (`EngineCost`).
fn cost_metrics(page: &mut Exposition, l: &[(&str, &str)], cost: &EngineCost) {
    let counters: [(&str, &str, Value); 7] = [
        (
            "tiervisor_sampler_armed_pages_total",
            "Pages the access sampler armed.",
            cost.armed_pages.into(),
        ),
        (
            "tiervisor_sampler_hits_total",
            "Armed pages the guest touched in their window (one guest fault each).",
            cost.armed_hits.into(),
        ),
        (
            "tiervisor_sampler_windows_total",
            "Sampling windows run.",
            cost.windows.into(),
        ),
        (
            "tiervisor_sampler_cpu_seconds_total",
            "CPU time of the access sampler's thread.",
            (cost.sampler_cpu_us as f64 / 1e6).into(),
        ),
        (
            "tiervisor_engine_cpu_seconds_total",
            "CPU time of the tiering engine's thread.",
            (cost.engine_cpu_us as f64 / 1e6).into(),
        ),
        (
            "tiervisor_migration_write_stall_seconds_total",
            "Time guest writers waited on migrations, summed.",
            (cost.write_stall_us as f64 / 1e6).into(),
        ),
        (
            "tiervisor_migrated_bytes_total",
            "Bytes migrated, both ways.",
            cost.bytes_moved.into(),
        ),
    ];
    page.singles(Kind::Counter, l, counters);
    let mut gauges: Vec<(&str, &str, Value)> = vec![
        (
            "tiervisor_sampler_window_seconds",
            "The access sampler's window length now.",
            (cost.window_us as f64 / 1e6).into(),
        ),
        (
            "tiervisor_sampler_regions",
            "The access sampler's regions now.",
            cost.regions.into(),
        ),
    ];
    if let Some(budget) = cost.budget_pages_per_sec {
        gauges.push((
            "tiervisor_sampler_budget_pages_per_second",
            "The access sampler's budget: pages armed per second.",
            u64::from(budget).into(),
        ));
    }
    if let Some(ns) = cost.cpu_ns_per_armed_page {
        gauges.push((
            "tiervisor_sampler_cpu_seconds_per_armed_page",
            "Sampler CPU time per armed page.",
            (ns / 1e9).into(),
        ));
    }
    if let Some(share) = cost.fast_heat_share {
        gauges.push((
            "tiervisor_fast_heat_share",
            "Share of the estimated accesses (heat) on frames on the fast tier.",
            share.into(),
        ));
    }
    if let Some(ns) = cost.estimated_read_latency_ns {
        gauges.push((
            "tiervisor_estimated_read_latency_seconds",
            "Read latency of the estimated accesses as placed: each tier's latency weighted by its \
             share of the heat.",
            (ns / 1e9).into(),
        ));
    }
    page.singles(Kind::Gauge, l, gauges);
}

fn engine_metrics(page: &mut Exposition, vm: &str, stats: &EngineStats) {
    let l: &[(&str, &str)] = &[("vm", vm)];
    let counters: [(&str, &str, u64); 8] = [
        (
            "tiervisor_engine_intervals_total",
            "Tiering engine intervals completed.",
            stats.intervals,
        ),
        (
            "tiervisor_promotions_frames_total",
            "Frames moved to a faster tier.",
            stats.promotions.frames,
        ),
        (
            "tiervisor_promotions_bytes_total",
            "Bytes moved to a faster tier.",
            stats.promotions.bytes,
        ),
        (
            "tiervisor_demotions_frames_total",
            "Frames moved to a slower tier.",
            stats.demotions.frames,
        ),
        (
            "tiervisor_demotions_bytes_total",
            "Bytes moved to a slower tier.",
            stats.demotions.bytes,
        ),
        (
            "tiervisor_exchanges_total",
            "Frames that swapped places with another (each exchange moves two).",
            stats.exchanges,
        ),
        (
            "tiervisor_migration_aborts_total",
            "Moves the migrator aborted and rolled back.",
            stats.aborted,
        ),
        (
            "tiervisor_tracker_errors_total",
            "Access tracker failures.",
            stats.tracker_errors,
        ),
    ];
    page.singles(
        Kind::Counter,
        l,
        counters.map(|(name, help, value)| (name, help, value.into())),
    );
    let micros = stats.stage_micros;
    let stages = [
        ("collect", micros.collect),
        ("heat", micros.heat),
        ("plan", micros.plan),
        ("migrate", micros.migrate),
    ];
    let stage_labels: Vec<[(&str, &str); 2]> = stages
        .iter()
        .map(|(s, _)| [("vm", vm), ("stage", *s)])
        .collect();
    page.family(
        "tiervisor_engine_stage_seconds_total",
        Kind::Counter,
        "Time the tiering engine spent per stage.",
        stage_labels
            .iter()
            .zip(stages)
            .map(|(l, (_, us))| (&l[..], Value::from(us as f64 / 1e6))),
    );
    cost_metrics(page, l, &stats.cost);
    let warning_labels: Vec<[(&str, &str); 2]> = EngineWarning::KINDS
        .iter()
        .map(|&kind| [("vm", vm), ("kind", kind)])
        .collect();
    page.family(
        "tiervisor_engine_warning",
        Kind::Gauge,
        "1 while the engine warns of this (hot-set-exceeds-quota: the estimated hot set is \
         larger than the fast-tier quota), 0 otherwise.",
        warning_labels.iter().map(|l| {
            let on = stats.warnings.iter().any(|w| w.kind() == l[1].1);
            (&l[..], Value::from(on))
        }),
    );
    let gauges: [(&str, &str, Value); 5] = [
        (
            "tiervisor_hot_frames",
            "Frames at or above the hot threshold (the engine's hot set).",
            stats.hot_frames.into(),
        ),
        (
            "tiervisor_hot_set_bytes",
            "The hot set in bytes (whole frames).",
            stats.hot_set_bytes.into(),
        ),
        (
            "tiervisor_hot_page_bytes",
            "The hot set at 4 KiB page granularity, as the heat model estimates it.",
            stats.hot_page_bytes.into(),
        ),
        (
            "tiervisor_engine_threshold_heat",
            "The hot threshold of the last interval (heat: decayed weighted page touches).",
            stats.threshold.unwrap_or(f64::INFINITY).into(),
        ),
        (
            "tiervisor_engine_threshold_pages",
            "The hot threshold as the 4 KiB pages of a frame seen touched per interval \
             (writes weighted) that hold a frame at it.",
            stats.threshold_pages.unwrap_or(f64::INFINITY).into(),
        ),
    ];
    page.singles(Kind::Gauge, l, gauges);
    if let Some(quota) = stats.fast_quota {
        page.single(
            "tiervisor_fast_quota_min_bytes",
            Kind::Gauge,
            "Fast-tier bytes reserved for the VM.",
            l,
            quota.min_bytes.into(),
        );
        page.single(
            "tiervisor_fast_quota_max_bytes",
            Kind::Gauge,
            "Fast-tier bytes the VM may use at most.",
            l,
            quota.max_bytes.into(),
        );
    }
    if let Some(r) = &stats.rebalance {
        let state = match r.state {
            RebalanceState::Running => "running",
            RebalanceState::Done => "done",
            RebalanceState::Failed { .. } => "failed",
        };
        let state_labels =
            ["running", "done", "failed"].map(|s| ([("vm", vm), ("state", s)], s == state));
        page.family(
            "tiervisor_rebalance_state",
            Kind::Gauge,
            "1 for the state the last rebalance is in, 0 for the others.",
            state_labels
                .iter()
                .map(|(l, on)| (&l[..], Value::from(*on))),
        );
        let gauges: [(&str, &str, Value); 4] = [
            (
                "tiervisor_rebalance_target_bytes",
                "The fast-tier quota the last rebalance aims at.",
                r.target_bytes.into(),
            ),
            (
                "tiervisor_rebalance_moved_frames",
                "Frames the last rebalance has moved.",
                r.moved_frames.into(),
            ),
            (
                "tiervisor_rebalance_elapsed_seconds",
                "Time since the last rebalance started.",
                (r.elapsed_ms as f64 / 1000.0).into(),
            ),
            (
                "tiervisor_rebalance_deadline_seconds",
                "The last rebalance's deadline, from its start.",
                (r.deadline_ms as f64 / 1000.0).into(),
            ),
        ];
        page.singles(Kind::Gauge, l, gauges);
    }
}

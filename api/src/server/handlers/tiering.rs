//! `vm.tiering*` and `vm.rebalance`: the tiering engine's policy, what it
//! publishes, and live rebalancing.

use tiering::{EngineStats, RebalanceProgress, TieringPolicy};

use crate::control::VmmControl;
use crate::server::api_error::ApiError;
use crate::server::json::decode_body;
use crate::server::query::frames_query;
use crate::server::response::Response;
use crate::server::router::Request;
use crate::types::{ErrorBody, FrameEntry, FramesPage, FramesQuery, RebalanceRequest};

/// The tiering policy in force.
#[utoipa::path(
    get,
    path = "/api/v1/vm.tiering",
    tag = "tiering",
    responses(
        (status = 200, description = "The policy in force", body = TieringPolicy),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "Tiering is off for this VM", body = ErrorBody),
    ),
)]
pub(crate) fn vm_tiering_get(
    control: &dyn VmmControl,
    _: &Request<'_>,
) -> Result<Response, ApiError> {
    Response::json(&control.tiering_policy()?)
}

/// Replaces the tiering policy.
///
/// The policy is validated as a whole against the VM and applied
/// atomically at the engine's next interval, or not at all.
#[utoipa::path(
    put,
    path = "/api/v1/vm.tiering",
    tag = "tiering",
    request_body(content = TieringPolicy, description = "The new policy, in full"),
    responses(
        (status = 204, description = "The policy is accepted"),
        (status = 400, description = "The policy is malformed or a value is wrong; \
            `detail.field` names it", body = ErrorBody),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "Tiering is off for this VM", body = ErrorBody),
    ),
)]
pub(crate) fn vm_tiering_put(
    control: &dyn VmmControl,
    req: &Request<'_>,
) -> Result<Response, ApiError> {
    control.set_tiering_policy(decode_body(req.body)?)?;
    Ok(Response::empty(204))
}

/// The engine's last published counters.
#[utoipa::path(
    get,
    path = "/api/v1/vm.tiering.stats",
    tag = "tiering",
    responses(
        (status = 200, description = "The engine's counters", body = EngineStats),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "Tiering is off for this VM", body = ErrorBody),
    ),
)]
pub(crate) fn vm_tiering_stats(
    control: &dyn VmmControl,
    _: &Request<'_>,
) -> Result<Response, ApiError> {
    Response::json(&*control.tiering_stats()?)
}

/// A page of frames with their tier and heat.
///
/// A page past the last frame is empty.
#[utoipa::path(
    get,
    path = "/api/v1/vm.tiering.frames",
    tag = "tiering",
    params(FramesQuery),
    responses(
        (status = 200, description = "A page of frames", body = FramesPage),
        (status = 400, description = "A query parameter is unknown, repeated or out of range",
            body = ErrorBody),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "Tiering is off for this VM", body = ErrorBody),
    ),
)]
pub(crate) fn vm_tiering_frames(
    control: &dyn VmmControl,
    req: &Request<'_>,
) -> Result<Response, ApiError> {
    let query = frames_query(req.query)?;
    let snapshot = control.tiering_frames()?;
    let view = &snapshot.view;
    let total = view.tier.len() as u64;
    let start = query.offset.min(total);
    let end = start.saturating_add(query.limit).min(total);
    let frames = (start..end)
        .map(|index| {
            let i = index as usize;
            FrameEntry {
                index,
                gpa: view.gpa.get(i).copied().unwrap_or(0),
                tier: view.tier[i],
                heat: view.heat.get(i).copied().unwrap_or(0.0),
            }
        })
        .collect();
    Response::json(&FramesPage {
        frame_size: snapshot.frame_size,
        total_frames: total,
        offset: start,
        tiers: snapshot.tier_names.clone(),
        frames,
    })
}

/// Starts a live rebalance.
///
/// Moves frames to reach a new fast-tier quota by a deadline; follow it
/// with `GET vm.rebalance`.
#[utoipa::path(
    put,
    path = "/api/v1/vm.rebalance",
    tag = "tiering",
    request_body(content = RebalanceRequest, description = "The new quota and deadline"),
    responses(
        (status = 202, description = "The rebalance has started"),
        (status = 400, description = "The request is malformed or a value is wrong; \
            `detail.field` names it", body = ErrorBody),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "Tiering is off for this VM, or the VM is neither \
            running nor paused (a paused VM's engine goes on, and so does its rebalance)",
            body = ErrorBody),
    ),
)]
pub(crate) fn vm_rebalance_put(
    control: &dyn VmmControl,
    req: &Request<'_>,
) -> Result<Response, ApiError> {
    control.rebalance(decode_body(req.body)?)?;
    Ok(Response::empty(202))
}

/// Progress of the last rebalance.
#[utoipa::path(
    get,
    path = "/api/v1/vm.rebalance",
    tag = "tiering",
    responses(
        (status = 200, description = "The last rebalance", body = RebalanceProgress),
        (status = 204, description = "No rebalance has been asked for"),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "Tiering is off for this VM", body = ErrorBody),
    ),
)]
pub(crate) fn vm_rebalance_get(
    control: &dyn VmmControl,
    _: &Request<'_>,
) -> Result<Response, ApiError> {
    match control.rebalance_progress()? {
        Some(progress) => Response::json(&progress),
        None => Ok(Response::empty(204)),
    }
}

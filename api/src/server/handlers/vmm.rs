//! `vmm.*`: the VMM process itself.

use crate::control::VmmControl;
use crate::server::api_error::ApiError;
use crate::server::response::{AfterResponse, Response};
use crate::server::router::Request;
use crate::types::{ErrorBody, VmmPingResponse};

/// Whether the VMM answers, and its version.
#[utoipa::path(
    get,
    path = "/api/v1/vmm.ping",
    tag = "vmm",
    responses(
        (status = 200, description = "The VMM is up", body = VmmPingResponse),
    ),
)]
pub(crate) fn vmm_ping(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    Response::json(&control.ping())
}

/// Stops the VM and the VMM.
///
/// Stops the VM if one runs; the VMM process exits once the response is
/// sent.
#[utoipa::path(
    put,
    path = "/api/v1/vmm.shutdown",
    tag = "vmm",
    responses(
        (status = 204, description = "The VM is stopped; the VMM exits after this response"),
        (status = 409, description = "The VMM cannot shut down now", body = ErrorBody),
    ),
)]
pub(crate) fn vmm_shutdown(
    control: &dyn VmmControl,
    _: &Request<'_>,
) -> Result<Response, ApiError> {
    control.shutdown_vmm()?;
    Ok(Response::empty(204).then(AfterResponse::ShutdownVmm))
}

//! `vm.*`: the VM's lifecycle and what it reports.

use crate::control::VmmControl;
use crate::server::api_error::ApiError;
use crate::server::json::decode_body;
use crate::server::response::Response;
use crate::server::router::Request;
use crate::types::{ErrorBody, VmConfigBody, VmCounters, VmInfo};

/// Creates the VM.
///
/// Builds the VM from a full configuration, validated as a whole (memory,
/// payload, tiering policy). It does not run until `vm.boot`.
#[utoipa::path(
    put,
    path = "/api/v1/vm.create",
    tag = "vm",
    request_body(content = VmConfigBody, description = "The VM's configuration"),
    responses(
        (status = 204, description = "The VM is created"),
        (status = 400, description = "The configuration is malformed or a value is wrong; \
            `detail.field` names it", body = ErrorBody),
        (status = 409, description = "A VM exists already", body = ErrorBody),
    ),
)]
pub(crate) fn vm_create(control: &dyn VmmControl, req: &Request<'_>) -> Result<Response, ApiError> {
    control.create_vm(decode_body(req.body)?)?;
    Ok(Response::empty(204))
}

/// Boots the VM.
///
/// Starts the vCPUs of the created VM.
#[utoipa::path(
    put,
    path = "/api/v1/vm.boot",
    tag = "vm",
    responses(
        (status = 204, description = "The VM runs"),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "The VM is not in state `created`", body = ErrorBody),
    ),
)]
pub(crate) fn vm_boot(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    control.boot_vm()?;
    Ok(Response::empty(204))
}

/// Pauses the VM.
///
/// Parks every vCPU; answers once all are parked.
#[utoipa::path(
    put,
    path = "/api/v1/vm.pause",
    tag = "vm",
    responses(
        (status = 204, description = "Every vCPU is parked"),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "The VM is not running", body = ErrorBody),
    ),
)]
pub(crate) fn vm_pause(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    control.pause_vm()?;
    Ok(Response::empty(204))
}

/// Resumes the VM.
///
/// Lets paused vCPUs run again.
#[utoipa::path(
    put,
    path = "/api/v1/vm.resume",
    tag = "vm",
    responses(
        (status = 204, description = "The VM runs again"),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "The VM is not paused", body = ErrorBody),
    ),
)]
pub(crate) fn vm_resume(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    control.resume_vm()?;
    Ok(Response::empty(204))
}

/// Shuts the VM down.
///
/// Stops the guest; the VM stays, in state `shutdown`, until deleted.
#[utoipa::path(
    put,
    path = "/api/v1/vm.shutdown",
    tag = "vm",
    responses(
        (status = 204, description = "The guest is stopped"),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "The VM has not been booted or is shut down already",
            body = ErrorBody),
    ),
)]
pub(crate) fn vm_shutdown(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    control.shutdown_vm()?;
    Ok(Response::empty(204))
}

/// Deletes the VM.
///
/// Shuts the VM down if it runs and frees it.
#[utoipa::path(
    put,
    path = "/api/v1/vm.delete",
    tag = "vm",
    responses(
        (status = 204, description = "The VM is gone"),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "The VM cannot be deleted in its state", body = ErrorBody),
    ),
)]
pub(crate) fn vm_delete(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    control.delete_vm()?;
    Ok(Response::empty(204))
}

/// The VM's configuration, state, memory and tier occupancy.
#[utoipa::path(
    get,
    path = "/api/v1/vm.info",
    tag = "vm",
    responses(
        (status = 200, description = "The VM", body = VmInfo),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "The VM cannot report in its state", body = ErrorBody),
    ),
)]
pub(crate) fn vm_info(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    Response::json(&control.vm_info()?)
}

/// The VM's counters.
///
/// Per-vCPU counters, guest log counts and tier occupancy.
#[utoipa::path(
    get,
    path = "/api/v1/vm.counters",
    tag = "vm",
    responses(
        (status = 200, description = "The VM's counters", body = VmCounters),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "The VM cannot report in its state", body = ErrorBody),
    ),
)]
pub(crate) fn vm_counters(control: &dyn VmmControl, _: &Request<'_>) -> Result<Response, ApiError> {
    Response::json(&control.vm_counters()?)
}

/// Measures the tiers' speeds again.
///
/// Every tier that declares no speed is probed afresh in the background
/// (a tenth of a second or more per NUMA node); `vm.info` shows the new
/// figures once `measuring_tiers` is false.
#[utoipa::path(
    put,
    path = "/api/v1/vm.tiers.measure",
    tag = "vm",
    responses(
        (status = 202, description = "The measurement has started"),
        (status = 404, description = "No VM has been created", body = ErrorBody),
        (status = 409, description = "A measurement is already under way, or the VM has shut \
            down", body = ErrorBody),
    ),
)]
pub(crate) fn vm_tiers_measure(
    control: &dyn VmmControl,
    _: &Request<'_>,
) -> Result<Response, ApiError> {
    control.measure_tiers()?;
    Ok(Response::empty(202))
}

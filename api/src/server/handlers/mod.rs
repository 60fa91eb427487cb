//! The route handlers. Each one's `#[utoipa::path]` is its documentation
//! in the OpenAPI document and, through the route table, what the router
//! serves: method, path, body, query. Statuses every route can return
//! (malformed requests, auth, limits, internal faults) are added to the
//! document in one place (`openapi::CommonResponses`); each handler
//! documents its success and its own errors.

mod metrics;
mod tiering;
mod vm;
mod vmm;

pub(crate) use metrics::*;
pub(crate) use tiering::*;
pub(crate) use vm::*;
pub(crate) use vmm::*;

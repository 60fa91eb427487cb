//! The REST server: HTTP/1.1 over a unix socket and,
//! optionally, TCP with a bearer token, written over std sockets with
//! `httparse` for request heads (thread-based, like the rest of the VMM).
//!
//! A request goes: `listener` accepts → `connection` reads it with
//! `request` (limits, timeouts), checks `auth`, asks `router` for the
//! route (built from the one table in `routes`) → a handler in `handlers`
//! calls [`VmmControl`](crate::VmmControl) → `response` writes the answer;
//! `api_error` is the one place errors become statuses; `prometheus`
//! writes the metrics format. `server_error` says why the server could not
//! start.
//!
//! Limits (each in [`ServerConfig`]): bodies 1 MiB, request line and
//! headers 16 KiB and 64 fields, 32 connections, 10 s from a request's
//! first byte to its last, 60 s idle between kept-alive requests, 10 s to
//! write a response.
//!
//! Choices a client sees:
//! * A body on a route that documents none, or a query string on a route
//!   that takes no parameters, is refused (400) rather than ignored, so a
//!   misdirected request does nothing instead of something else.
//! * Bodies must come with Content-Length: Transfer-Encoding (chunked)
//!   gets 411. A Content-Length above the limit gets 413 before any of the
//!   body is read, and the connection is closed.
//! * Any Content-Type is accepted for JSON bodies (curl's default
//!   included); the body itself must be UTF-8 JSON.
//! * `Expect: 100-continue` is answered before the body is read.

mod api_error;
mod api_server;
mod auth;
mod config;
mod connection;
mod connections;
pub(crate) mod handlers;
mod json;
mod listener;
mod prometheus;
mod query;
mod request;
mod response;
mod router;
pub(crate) mod routes;
mod server_error;
mod shutdown;
mod stream;

pub use api_server::ApiServer;
pub use config::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_MAX_HEADERS, DEFAULT_REQUEST_TIMEOUT, DEFAULT_WRITE_TIMEOUT, ServerConfig,
};
pub use server_error::ServerError;

/// Every `(method, path)` the server serves, in route-table order.
pub fn served_routes() -> Vec<(&'static str, String)> {
    router::Router::new()
        .routes()
        .iter()
        .map(|r| (r.method, r.path.clone()))
        .collect()
}

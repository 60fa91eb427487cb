//! tiervisor's operator API.
//!
//! The API talks to a running VMM through [`VmmControl`], a small trait
//! the VMM implements, so the server can be tested without a VM. This
//! crate owns the request and response bodies ([`types`]), the trait and
//! its errors ([`control`]), the REST server ([`server`]), its OpenAPI
//! document ([`openapi`]) and a blocking client ([`client`]) that the
//! `tierctl` binary drives the API with.

pub mod client;
pub mod control;
pub mod openapi;
pub mod server;
pub mod types;

pub use client::{ApiClient, ApiResponse, ClientError};
pub use control::{ControlError, VmmControl};
pub use server::{ApiServer, ServerConfig, ServerError};

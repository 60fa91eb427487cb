//! tiervisor's operator API (ARCHITECTURE §7).
//!
//! The API talks to a running VMM through [`VmmControl`], a small trait
//! the VMM implements, so the server can be tested without a VM. This
//! crate owns the request and response bodies ([`types`]), the trait and
//! its errors ([`control`]), and a blocking client ([`client`]) that the
//! `tierctl` binary drives the API with.

pub mod client;
pub mod control;
pub mod types;

pub use control::{ControlError, VmmControl};

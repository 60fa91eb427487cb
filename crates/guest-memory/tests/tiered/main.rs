//! Integration tests of `TieredMemory` on real memfds, files and mappings.

mod common;
mod config_errors;
mod file_backend;
mod guest_access;
mod host_features;
mod lifecycle;
mod migration_steps;
mod placement_policies;
mod verify_backing;

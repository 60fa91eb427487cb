//! Integration tests of `TieredMemory` on real memfds, files and mappings.

mod common;
mod config_errors;
mod file_backend;
mod guest_access;
mod host_features;
mod kernel_migrator;
mod lifecycle;
mod live_migration;
mod migration_steps;
mod minor_faults;
mod placement_policies;
mod shared_numa;
mod verify_backing;

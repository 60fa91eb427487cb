//! The tiered-host test machine: a QEMU host (software emulation, nested
//! SVM with NPT) whose memory is two NUMA nodes, the second CPU-less and
//! slower by its ACPI HMAT, plus an emulated NVDIMM exposed as
//! device-DAX. It boots the Debian cloud kernel (or, for the scenarios
//! that need dmaengine, Debian's generic kernel of the same release) with
//! an initramfs built by `tests/nested/build.sh`, runs one scenario script and powers off; the
//! scenario's results come back over the serial console as `@@nested`
//! lines ([`console`]). See `docs/testing.md`.
//!
//! The crate also holds the Linux guest's `/init` (`src/bin/guest-init`),
//! the data-verifying workload the Linux scenario boots.

pub mod console;
pub mod qemu;

pub use console::{Console, Report};
pub use qemu::{HostError, HostKernel, Scenario, TCG_ENV, Tcg, TieredHost};

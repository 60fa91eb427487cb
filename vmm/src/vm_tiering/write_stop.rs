//! The remap migrator's VM-wide write stop
//! ([`guest_memory::migrate::WriteStop`]) for frames on tiers userfaultfd
//! cannot write-protect (device DAX): every vCPU parks at the pause gate,
//! then the VMM's own guest-memory writers are held at the host write log.
//! vCPUs go first: one may be inside a write section (a hypercall reply)
//! and must finish it before it can park.

use std::sync::Arc;
use std::time::Duration;

use guest_memory::migrate::{HostWriteLog, StopError, WriteStop};

use crate::pause::PauseGate;
use crate::vcpu_control::VcpuThreads;

/// How long a stop waits for every vCPU to park before it gives up (the
/// migration then aborts and the VM runs on).
const PARK_LIMIT: Duration = Duration::from_secs(1);

/// Stops a VM's vCPUs and host writers.
#[derive(Debug)]
pub struct VcpuWriteStop {
    gate: Arc<PauseGate>,
    threads: Arc<VcpuThreads>,
    writes: Arc<HostWriteLog>,
}

impl VcpuWriteStop {
    pub(crate) fn new(
        gate: Arc<PauseGate>,
        threads: Arc<VcpuThreads>,
        writes: Arc<HostWriteLog>,
    ) -> Self {
        VcpuWriteStop {
            gate,
            threads,
            writes,
        }
    }
}

impl WriteStop for VcpuWriteStop {
    fn stop(&self) -> Result<(), StopError> {
        self.gate
            .hold(&|| self.threads.kick(), PARK_LIMIT)
            .map_err(|e| StopError(Box::new(e)))?;
        self.writes.block();
        Ok(())
    }

    fn resume(&self) {
        self.writes.unblock();
        self.gate.release();
    }
}

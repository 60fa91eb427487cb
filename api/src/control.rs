//! What the API asks of a VMM: [`VmmControl`], and the errors it answers
//! with. Each error maps to one HTTP status (the server's error module is
//! the one place that says which).

use std::sync::Arc;

use thiserror::Error;

use tiering::{EngineStats, RebalanceProgress, TieringPolicy};

use crate::types::{
    FrameSnapshot, RebalanceRequest, VmConfigBody, VmCounters, VmInfo, VmState, VmmPingResponse,
};

/// Why a VMM refused a request. Nothing has changed when it does.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ControlError {
    /// No VM has been created (or it was deleted).
    #[error("no VM has been created")]
    NoVm,
    /// The VM is in a state where the request makes no sense (boot before
    /// create, create twice, pause a VM that is not running, ...).
    #[error("VM is {state}: cannot {action}")]
    WrongState {
        /// The VM's state.
        state: VmState,
        /// What was asked.
        action: &'static str,
    },
    /// The VM runs without a tiering engine.
    #[error("tiering is off for this VM")]
    NoTiering,
    /// The same work is already under way (e.g. a tier measurement).
    #[error("{0} is already under way")]
    Busy(&'static str),
    /// The request is well-formed JSON but a value is wrong.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field, as a JSON path (`memory.tiers[1].size`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Something failed inside the VMM that is not the caller's fault.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ControlError {
    /// An [`Invalid`](Self::Invalid) error.
    pub fn invalid(field: impl Into<String>, reason: impl ToString) -> Self {
        ControlError::Invalid {
            field: field.into(),
            reason: reason.to_string(),
        }
    }
}

/// A VMM as the API sees it: one VM at most (one VMM process per VM).
///
/// Implementations answer from published state and never wait on the
/// vCPUs or the tiering engine: the API thread must not block either.
pub trait VmmControl: Send + Sync {
    /// `vmm.ping`.
    fn ping(&self) -> VmmPingResponse;
    /// `vmm.shutdown`: stops the VM if one runs, then asks the VMM process
    /// to exit once the response is sent.
    fn shutdown_vmm(&self) -> Result<(), ControlError>;

    /// `vm.create`: validates the whole configuration and builds the VM
    /// (memory, KVM VM, payload); it does not run yet.
    fn create_vm(&self, config: VmConfigBody) -> Result<(), ControlError>;
    /// `vm.boot`: starts the vCPUs of the created VM.
    fn boot_vm(&self) -> Result<(), ControlError>;
    /// `vm.pause`: parks every vCPU; returns once all are parked.
    fn pause_vm(&self) -> Result<(), ControlError>;
    /// `vm.resume`: lets paused vCPUs run again.
    fn resume_vm(&self) -> Result<(), ControlError>;
    /// `vm.shutdown`: stops the guest; the VM stays (state `shutdown`)
    /// until deleted.
    fn shutdown_vm(&self) -> Result<(), ControlError>;
    /// `vm.delete`: shuts the VM down if it runs and frees it.
    fn delete_vm(&self) -> Result<(), ControlError>;
    /// `vm.info`.
    fn vm_info(&self) -> Result<VmInfo, ControlError>;
    /// `vm.counters`.
    fn vm_counters(&self) -> Result<VmCounters, ControlError>;
    /// `vm.tiers.measure`: starts measuring the speed of every tier that
    /// declares none again, in the background; `vm.info` shows the new
    /// figures once `measuring_tiers` is false.
    fn measure_tiers(&self) -> Result<(), ControlError>;

    /// `GET vm.tiering`: the policy in force.
    fn tiering_policy(&self) -> Result<TieringPolicy, ControlError>;
    /// `PUT vm.tiering`: validated as a whole, then applied atomically at
    /// the engine's next interval.
    fn set_tiering_policy(&self, policy: TieringPolicy) -> Result<(), ControlError>;
    /// `vm.tiering.stats`: the engine's last published snapshot.
    fn tiering_stats(&self) -> Result<Arc<EngineStats>, ControlError>;
    /// `vm.tiering.frames`: every frame's tier and heat (the server pages
    /// it).
    fn tiering_frames(&self) -> Result<FrameSnapshot, ControlError>;
    /// `PUT vm.rebalance`: a new fast-tier quota reached by a deadline.
    fn rebalance(&self, request: RebalanceRequest) -> Result<(), ControlError>;
    /// `GET vm.rebalance`: progress of the last rebalance, if any.
    fn rebalance_progress(&self) -> Result<Option<RebalanceProgress>, ControlError>;
}

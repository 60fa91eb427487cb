//! A VM's tiering engine across its lifecycle: none, pending (the policy
//! checked at creation, the engine started when the VM boots, so a VM
//! that is created but not booted moves nothing), or running.

use std::sync::Arc;

use guest_memory::Migrator;
use tiering::{Engine, EngineError, EngineParts, TieringPolicy};

use super::trackers::VmTrackers;

/// When a VM's tiering engine starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineStart {
    /// When the VM is created, so [`Vm::engine`](crate::vm::Vm::engine)
    /// is there before it runs.
    #[default]
    AtCreate,
    /// When the VM first runs: until then the policy is only checked and
    /// kept, and no frame moves.
    AtBoot,
}

/// What a pending engine will work with, kept so that a failed start can
/// be retried.
#[derive(Clone, Debug)]
pub(crate) struct PendingParts {
    /// The VM's migrator.
    pub migrator: Arc<dyn Migrator>,
    /// The VM's trackers (and its memory).
    pub trackers: VmTrackers,
}

impl PendingParts {
    fn engine_parts(&self) -> EngineParts {
        EngineParts {
            memory: self.trackers.memory.clone(),
            migrator: self.migrator.clone(),
            trackers: Box::new(self.trackers.clone()),
        }
    }
}

/// The engine of one VM.
#[derive(Debug, Default)]
pub(crate) enum VmEngine {
    /// No tiering policy.
    #[default]
    None,
    /// Checked, not started.
    Pending {
        /// What the engine will work with.
        parts: PendingParts,
        /// The policy it will start with (boxed: the other states are
        /// small).
        policy: Box<TieringPolicy>,
    },
    /// Started (and maybe stopped since: its snapshots stay readable).
    Running(Arc<Engine>),
}

impl VmEngine {
    /// An engine for `parts` and `policy`, started now or checked and kept
    /// for [`start`](Self::start).
    pub fn new(
        parts: PendingParts,
        policy: TieringPolicy,
        when: EngineStart,
    ) -> Result<Self, EngineError> {
        match when {
            EngineStart::AtCreate => Ok(VmEngine::Running(Arc::new(Engine::start(
                parts.engine_parts(),
                policy,
            )?))),
            EngineStart::AtBoot => {
                check(&parts, &policy)?;
                Ok(VmEngine::Pending {
                    parts,
                    policy: Box::new(policy),
                })
            }
        }
    }

    /// Starts a pending engine; nothing to do otherwise. On failure the
    /// engine stays pending.
    pub fn start(&mut self) -> Result<(), EngineError> {
        let VmEngine::Pending { parts, policy } = self else {
            return Ok(());
        };
        let engine = Engine::start(parts.engine_parts(), (**policy).clone())?;
        *self = VmEngine::Running(Arc::new(engine));
        Ok(())
    }

    /// The running engine.
    pub fn engine(&self) -> Option<&Arc<Engine>> {
        match self {
            VmEngine::Running(e) => Some(e),
            _ => None,
        }
    }

    /// The policy in force or waiting for the engine to start.
    pub fn policy(&self) -> Option<TieringPolicy> {
        match self {
            VmEngine::None => None,
            VmEngine::Pending { policy, .. } => Some((**policy).clone()),
            VmEngine::Running(e) => Some(e.policy()),
        }
    }

    /// Replaces the policy: the pending one after the same checks as at
    /// creation, or the running engine's. An invalid one changes nothing.
    /// `None` when there is no engine.
    pub fn set_policy(&mut self, new: TieringPolicy) -> Option<Result<(), EngineError>> {
        match self {
            VmEngine::None => None,
            VmEngine::Pending { parts, policy } => {
                Some(check(parts, &new).map(|()| **policy = new))
            }
            VmEngine::Running(e) => Some(e.set_policy(new)),
        }
    }
}

fn check(parts: &PendingParts, policy: &TieringPolicy) -> Result<(), EngineError> {
    Engine::check(&parts.trackers.memory, &parts.trackers, policy)
}

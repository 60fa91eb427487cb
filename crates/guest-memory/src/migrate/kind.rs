//! The migrators a VM can choose, by name (command line, API).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The migrators a VM can use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum MigratorKind {
    /// No migration (frames stay where initial placement put them).
    #[default]
    None,
    /// userfaultfd write-protect → copy → remap.
    Remap,
    /// Remap with pre-copy over the KVM dirty log.
    RemapPrecopy,
    /// `move_pages(2)` between NUMA nodes (shared-numa backing).
    Kernel,
}

impl MigratorKind {
    /// Whether memslots need dirty logging.
    pub fn needs_dirty_log(self) -> bool {
        self == MigratorKind::RemapPrecopy
    }
}

impl FromStr for MigratorKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "none" => MigratorKind::None,
            "remap" => MigratorKind::Remap,
            "remap-precopy" => MigratorKind::RemapPrecopy,
            "kernel" => MigratorKind::Kernel,
            _ => {
                return Err(format!(
                    "unknown migrator '{s}' (none, remap, remap-precopy, kernel)"
                ));
            }
        })
    }
}

//! What one measurement of the migrate suite combines: a migration
//! protocol and what the guest does meanwhile.

use serde::{Deserialize, Serialize};

use vmm::migration::MigratorKind;

/// How frames move (the VMM's remap migrators).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Write-protect → copy → remap → wake.
    Remap,
    /// Copy while the guest runs, re-copy pages the KVM dirty log reports,
    /// then write-protect for the last delta.
    RemapPrecopy,
}

impl Protocol {
    /// Both protocols, plain first.
    pub const ALL: [Protocol; 2] = [Protocol::Remap, Protocol::RemapPrecopy];

    /// The migrator's name (`remap`, `remap-precopy`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Remap => "remap",
            Protocol::RemapPrecopy => "remap-precopy",
        }
    }

    /// The VMM's migrator for this protocol.
    pub fn migrator(self) -> MigratorKind {
        match self {
            Protocol::Remap => MigratorKind::Remap,
            Protocol::RemapPrecopy => MigratorKind::RemapPrecopy,
        }
    }
}

/// What the guest does while its frames move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuestLoad {
    /// The `idle` workload: the vCPUs park in the VMM (as an idle kernel
    /// halts), so the moves meet no guest access and have the host CPUs.
    Idle,
    /// `memcheck` over exactly the frames being moved: every word written
    /// and checked, round after round.
    WriteBusy,
}

impl GuestLoad {
    /// Both loads, idle first.
    pub const ALL: [GuestLoad; 2] = [GuestLoad::Idle, GuestLoad::WriteBusy];

    /// `idle` or `write-busy`.
    pub fn name(self) -> &'static str {
        match self {
            GuestLoad::Idle => "idle",
            GuestLoad::WriteBusy => "write-busy",
        }
    }
}

/// One protocol under one guest load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// The protocol.
    pub protocol: Protocol,
    /// The guest load.
    pub guest: GuestLoad,
}

impl Scenario {
    /// `remap, write-busy guest`.
    pub fn label(self) -> String {
        format!("{}, {} guest", self.protocol.name(), self.guest.name())
    }
}

/// Every scenario, grouped by protocol.
pub fn scenarios() -> Vec<Scenario> {
    Protocol::ALL
        .iter()
        .flat_map(|&protocol| {
            GuestLoad::ALL
                .iter()
                .map(move |&guest| Scenario { protocol, guest })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_meets_every_load_once() {
        let all = scenarios();
        assert_eq!(all.len(), 4);
        assert_eq!(all[0].label(), "remap, idle guest");
        assert_eq!(all[3].label(), "remap-precopy, write-busy guest");
        for (i, s) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(s));
        }
    }

    #[test]
    fn names_match_the_vmm_and_json() {
        for p in Protocol::ALL {
            assert_eq!(p.name().parse::<MigratorKind>(), Ok(p.migrator()));
            assert_eq!(
                serde_json::to_string(&p).unwrap(),
                format!("\"{}\"", p.name())
            );
        }
        assert_eq!(
            serde_json::to_string(&GuestLoad::WriteBusy).unwrap(),
            "\"write-busy\""
        );
    }
}

//! What a scenario printed on the tiered host's serial console. The host
//! side speaks in lines starting with `@@nested ` (`tests/nested/host/lib.sh`):
//!
//! * `boot kernel=K scenario=S` once the host's init runs;
//! * `fact KEY VALUE...`: something about the host (nodes, tiers, DAX);
//! * `begin NAME` ... `end NAME`: a file's contents (a JSON report, the
//!   guest's console, numa_maps), verbatim in between;
//! * `rc N`: tiervisor's exit status;
//! * `alive UPTIME`: the host's heartbeat, every 30 s from its `/init` on
//!   (never inside a block);
//! * `error TEXT`: the scenario could not run;
//! * `done`: the scenario finished (the host powers off next).
//!
//! The Linux guest's init speaks `@@guest ` lines inside its console block.

use std::collections::BTreeMap;

use serde_json::Value;

/// Prefix of the host's lines.
const HOST: &str = "@@nested ";
/// Prefix of the Linux guest's lines.
const GUEST: &str = "@@guest ";

/// A parsed console log.
#[derive(Debug, Default, Clone)]
pub struct Console {
    /// The whole log, for failure messages.
    pub text: String,
    /// The `boot` line's words, once the host's init ran.
    pub boot: Option<String>,
    /// `fact` lines: key and the rest.
    pub facts: Vec<(String, String)>,
    /// `begin`/`end` blocks by name.
    pub blocks: BTreeMap<String, String>,
    /// tiervisor's exit status.
    pub rc: Option<i32>,
    /// `error` lines.
    pub errors: Vec<String>,
    /// Whether the scenario finished.
    pub done: bool,
    /// The host's uptime in its last heartbeat, in seconds.
    pub alive: Option<f64>,
}

impl Console {
    /// Parses `text` (QEMU's serial output: CRLF line ends, firmware
    /// noise before the kernel, kernel messages between lines).
    pub fn parse(text: &str) -> Self {
        let mut console = Console {
            text: text.to_owned(),
            ..Console::default()
        };
        let mut block: Option<(String, Vec<&str>)> = None;
        for raw in text.lines() {
            let line = raw.trim_end_matches('\r');
            if let Some((name, lines)) = &mut block {
                if line.strip_prefix(HOST) == Some(&format!("end {name}")) {
                    let (name, lines) = block.take().unwrap_or_default();
                    console.blocks.insert(name, lines.join("\n"));
                } else {
                    lines.push(line);
                }
                continue;
            }
            // Kernel messages may share a line with ours; ours start it
            // or follow the noise, so look for the prefix anywhere.
            let Some(at) = line.find(HOST) else {
                continue;
            };
            let rest = &line[at + HOST.len()..];
            let (word, args) = rest.split_once(' ').unwrap_or((rest, ""));
            match word {
                "boot" => console.boot = Some(args.to_owned()),
                "fact" => {
                    let (key, value) = args.split_once(' ').unwrap_or((args, ""));
                    console.facts.push((key.to_owned(), value.to_owned()));
                }
                "begin" => block = Some((args.to_owned(), Vec::new())),
                "rc" => console.rc = args.trim().parse().ok(),
                "error" => console.errors.push(args.to_owned()),
                "done" => console.done = true,
                "alive" => console.alive = args.trim().parse().ok(),
                _ => {}
            }
        }
        console
    }

    /// The values of every fact named `key`.
    pub fn facts(&self, key: &str) -> Vec<&str> {
        self.facts
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// tiervisor's JSON report, when the scenario printed one that parses.
    pub fn report(&self) -> Option<Report> {
        self.report_in("report")
    }

    /// A JSON report the scenario printed in block `name`, when it parses.
    pub fn report_in(&self, name: &str) -> Option<Report> {
        let text = self.blocks.get(name)?;
        serde_json::from_str(text.trim()).ok().map(Report)
    }

    /// The `@@guest` lines of the Linux guest's console block, without
    /// the prefix.
    pub fn guest_lines(&self) -> Vec<&str> {
        self.blocks
            .get("guest-console")
            .map(|text| {
                text.lines()
                    .filter_map(|l| l.find(GUEST).map(|at| l[at + GUEST.len()..].trim_end()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The last `lines` lines of the log, for failure messages, without
    /// the heartbeats but the last (a run that hangs would fill its tail
    /// with them).
    pub fn tail(&self, lines: usize) -> String {
        let beat = format!("{HOST}alive ");
        let all: Vec<&str> = self.text.lines().collect();
        let last_beat = all.iter().rposition(|l| l.contains(&beat));
        let kept: Vec<&str> = all
            .iter()
            .enumerate()
            .filter(|&(i, l)| Some(i) == last_beat || !l.contains(&beat))
            .map(|(_, l)| *l)
            .collect();
        kept[kept.len().saturating_sub(lines)..].join("\n")
    }
}

/// tiervisor's `--report-json`, with accessors for what the scenarios
/// check.
#[derive(Debug, Clone)]
pub struct Report(pub Value);

impl Report {
    /// How the VM ended: `end.kind`.
    pub fn end_kind(&self) -> Option<&str> {
        self.0.pointer("/end/kind")?.as_str()
    }

    /// The tiering engine's promoted and demoted bytes.
    pub fn moved_bytes(&self) -> (u64, u64) {
        let get = |p: &str| self.0.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        (
            get("/tiering/promotions/bytes"),
            get("/tiering/demotions/bytes"),
        )
    }

    /// Moves the engine gave up on.
    pub fn aborted(&self) -> u64 {
        self.0
            .pointer("/tiering/aborted")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// The end-of-run placement check (`vmm::placement_check`).
    pub fn placement_check(&self) -> Option<&Value> {
        self.0.get("placement_check").filter(|v| !v.is_null())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "SeaBIOS noise\r\n\
        [    1.0] kernel line\r\n\
        @@nested boot kernel=6.1.0 scenario=numa\r\n\
        @@nested fact nodes-with-memory 0-1\r\n\
        [    2.0] kvm: Nested Virtualization enabled@@nested fact node node1 read-latency=250\r\n\
        @@nested begin report\r\n\
        {\"end\": {\"kind\": \"success\"}, \"tiering\": {\"promotions\": {\"bytes\": 4}, \
         \"demotions\": {\"bytes\": 2}, \"aborted\": 0}, \"placement_check\": null}\r\n\
        @@nested end report\r\n\
        @@nested begin guest-console\r\n\
        @@guest start mib=96\r\n\
        @@nested fact not-a-fact inside a block\r\n\
        @@guest result=pass rounds=3\r\n\
        @@nested end guest-console\r\n\
        @@nested rc 0\r\n\
        @@nested done\r\n";

    #[test]
    fn host_lines_blocks_and_guest_lines_are_taken_apart() {
        let c = Console::parse(LOG);
        assert_eq!(c.boot.as_deref(), Some("kernel=6.1.0 scenario=numa"));
        assert_eq!(c.facts("nodes-with-memory"), ["0-1"]);
        assert_eq!(c.facts("node"), ["node1 read-latency=250"]);
        assert!(c.facts("not-a-fact").is_empty());
        assert_eq!(c.rc, Some(0));
        assert!(c.done);
        let r = c.report().unwrap();
        assert_eq!(r.end_kind(), Some("success"));
        assert_eq!(r.moved_bytes(), (4, 2));
        assert_eq!(r.aborted(), 0);
        assert!(r.placement_check().is_none());
        assert_eq!(c.guest_lines(), ["start mib=96", "result=pass rounds=3"]);
        assert!(c.tail(2).ends_with("@@nested done"));
    }

    #[test]
    fn heartbeats_are_parsed_and_only_the_last_stays_in_the_tail() {
        let log = "@@nested boot kernel=6.12 scenario=linux\r\n\
            @@nested alive 30.12\r\n\
            [   31.0] kvm: a kernel line\r\n\
            @@nested alive 60.50\r\n\
            @@nested alive 90.81\r\n";
        let c = Console::parse(log);
        assert_eq!(c.alive, Some(90.81));
        assert_eq!(
            c.tail(3),
            "@@nested boot kernel=6.12 scenario=linux\n\
             [   31.0] kvm: a kernel line\n\
             @@nested alive 90.81"
        );
        assert_eq!(Console::parse(LOG).alive, None);
    }

    #[test]
    fn a_log_cut_short_has_no_result() {
        let cut = &LOG[..LOG.find("@@nested end report").unwrap()];
        let c = Console::parse(cut);
        assert!(c.report().is_none());
        assert_eq!(c.rc, None);
        assert!(!c.done);
    }
}

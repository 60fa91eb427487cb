//! What machine a run happened on: CPU count and model, kernel, and the
//! load average (the machines this is run on are often shared, and a busy
//! neighbour changes every number).

use std::ffi::CStr;
use std::fs;
use std::mem;
use std::num::NonZeroUsize;
use std::thread;

use serde::{Deserialize, Serialize};

/// The machine a run happened on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// CPUs this process may use (`available_parallelism`).
    pub cores: usize,
    /// `model name` of the first CPU in `/proc/cpuinfo`, or `unknown`.
    pub model_name: String,
    /// `uname`: system, release and machine, e.g. `Linux 6.18.0 x86_64`.
    pub kernel: String,
}

impl MachineInfo {
    /// Reads the facts of the machine this process runs on. Facts that
    /// cannot be read are reported as `unknown` rather than failing a run.
    pub fn detect() -> Self {
        Self {
            cores: thread::available_parallelism().map_or(1, NonZeroUsize::get),
            model_name: fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|text| model_name(&text))
                .unwrap_or_else(|| "unknown".to_owned()),
            kernel: kernel().unwrap_or_else(|| "unknown".to_owned()),
        }
    }

    /// One line for reports: `AMD EPYC, 2 cores, Linux 6.18.0 x86_64`.
    pub fn describe(&self) -> String {
        format!(
            "{}, {} core{}, {}",
            self.model_name,
            self.cores,
            if self.cores == 1 { "" } else { "s" },
            self.kernel
        )
    }
}

/// The first `model name` value of a `/proc/cpuinfo` text.
pub fn model_name(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name")
            .then(|| value.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|v| !v.is_empty())
    })
}

/// `uname(2)`: `sysname release machine`.
fn kernel() -> Option<String> {
    // SAFETY: utsname is plain C char arrays; all-zero is a valid value.
    let mut uts: libc::utsname = unsafe { mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return None;
    }
    let field = |chars: &[libc::c_char]| {
        // The kernel NUL-terminates every field; reinterpret c_char as u8.
        let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
        CStr::from_bytes_until_nul(&bytes)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    };
    Some(format!(
        "{} {} {}",
        field(&uts.sysname)?,
        field(&uts.release)?,
        field(&uts.machine)?
    ))
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadAverage {
    /// Over the last minute.
    pub one: f64,
    /// Over the last 5 minutes.
    pub five: f64,
    /// Over the last 15 minutes.
    pub fifteen: f64,
}

impl LoadAverage {
    /// Reads `/proc/loadavg`; `None` where it cannot be read.
    pub fn read() -> Option<Self> {
        Self::parse(&fs::read_to_string("/proc/loadavg").ok()?)
    }

    /// Parses the first three fields of a `/proc/loadavg` text.
    pub fn parse(text: &str) -> Option<Self> {
        let mut fields = text.split_whitespace().map(str::parse::<f64>);
        Some(Self {
            one: fields.next()?.ok()?,
            five: fields.next()?.ok()?,
            fifteen: fields.next()?.ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_name_is_the_first_cpus() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\n\
                       model name\t: AMD  EPYC 7B13 64-Core Processor\n\n\
                       processor\t: 1\nmodel name\t: Something else\n";
        assert_eq!(
            model_name(cpuinfo).as_deref(),
            Some("AMD EPYC 7B13 64-Core Processor")
        );
        assert_eq!(model_name("processor : 0\n"), None);
        assert_eq!(model_name("model name :   \n"), None);
    }

    #[test]
    fn detects_this_machine() {
        let machine = MachineInfo::detect();
        assert!(machine.cores >= 1);
        assert!(machine.kernel.starts_with("Linux "), "{}", machine.kernel);
        assert!(machine.describe().contains(&machine.kernel));
    }

    #[test]
    fn parses_loadavg() {
        let load = LoadAverage::parse("0.30 1.18 1.37 1/84 14305\n").unwrap();
        assert_eq!((load.one, load.five, load.fifteen), (0.30, 1.18, 1.37));
        assert_eq!(LoadAverage::parse("0.3 x 1"), None);
        assert_eq!(LoadAverage::parse(""), None);
        assert!(LoadAverage::read().is_some());
    }
}

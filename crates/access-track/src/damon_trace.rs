//! DAMON's per-aggregation results, read from its `damon:damon_aggregated`
//! tracepoint in a private tracefs instance (so no other tracing user sees
//! or disturbs it). The instance runs on the `mono` clock, so that each
//! report's time compares with [`std::time::Instant`]s (CLOCK_MONOTONIC),
//! and its pipe is read without blocking.
//!
//! Cheaper than the sysfs alternative (a `stat` scheme's
//! `tried_regions`, which the kernel fills in 100–200 ms per request on
//! 6.12): the tracepoint costs DAMON one ring-buffer record per region per
//! aggregation, and reading it is one `read` per 64 KiB of text.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Where tracefs is normally mounted.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Why the tracepoint could not be read.
#[derive(Debug, Error)]
pub enum DamonTraceError {
    /// No tracefs, or no DAMON events in it.
    #[error(
        "host kernel offers no damon:damon_aggregated tracepoint ({0} not found; is tracefs \
         mounted?)"
    )]
    NoTracepoint(String),
    /// A tracefs file could not be used.
    #[error("tracefs: {op} {path}")]
    Io {
        /// What was done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// One region's report at the end of an aggregation interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aggregated {
    /// When it was recorded (CLOCK_MONOTONIC, seconds).
    pub at: f64,
    /// The region (physical bytes for `paddr`).
    pub start: u64,
    /// End of the region, exclusive.
    pub end: u64,
    /// Samples that found the region accessed.
    pub nr_accesses: u32,
}

/// Parses one line of `trace_pipe` text, `None` when it is not a
/// `damon_aggregated` record:
/// `kdamond.0-123 [001] ..... 4521.002345: damon_aggregated: target_id=0 nr_regions=3 4096-8192: 5 2`
pub fn parse_aggregated(line: &str) -> Option<Aggregated> {
    let (head, fields) = line.split_once(" damon_aggregated: ")?;
    let at = head.trim_end().strip_suffix(':')?.rsplit(' ').next()?;
    let at: f64 = at.parse().ok()?;
    let mut words = fields.split_whitespace();
    words.next()?.strip_prefix("target_id=")?;
    words.next()?.strip_prefix("nr_regions=")?;
    let (start, end) = words.next()?.strip_suffix(':')?.split_once('-')?;
    let nr_accesses = words.next()?.parse().ok()?;
    let (start, end) = (start.parse().ok()?, end.parse().ok()?);
    (start < end).then_some(Aggregated {
        at,
        start,
        end,
        nr_accesses,
    })
}

/// A private tracefs instance with `damon_aggregated` enabled; removed
/// when dropped.
#[derive(Debug)]
pub struct DamonTrace {
    instance: PathBuf,
    /// `None` only while dropping (the pipe must close before the
    /// instance can be removed).
    pipe: Option<File>,
    /// A line cut by the end of the last read.
    partial: String,
    buf: Vec<u8>,
}

impl DamonTrace {
    /// Creates the instance under `tracefs`/instances.
    pub fn open(tracefs: &Path) -> Result<Self, DamonTraceError> {
        let event = tracefs.join("events/damon/damon_aggregated");
        if !event.exists() {
            return Err(DamonTraceError::NoTracepoint(event.display().to_string()));
        }
        let instance = tracefs.join(format!("instances/tiervisor-damon-{}", std::process::id()));
        // A leftover of a process that died with this pid: start afresh.
        let _ = fs::remove_dir(&instance);
        fs::create_dir(&instance).map_err(|source| DamonTraceError::Io {
            op: "mkdir",
            path: instance.clone(),
            source,
        })?;
        let pipe = Self::setup(&instance).inspect_err(|_| {
            let _ = fs::remove_dir(&instance);
        })?;
        Ok(DamonTrace {
            instance,
            pipe: Some(pipe),
            partial: String::new(),
            buf: vec![0; 64 << 10],
        })
    }

    fn setup(instance: &Path) -> Result<File, DamonTraceError> {
        let put = |file: &str, value: &str| {
            let path = instance.join(file);
            fs::write(&path, value).map_err(|source| DamonTraceError::Io {
                op: "write",
                path,
                source,
            })
        };
        put("trace_clock", "mono")?;
        // Room for several aggregations of thousands of regions per CPU.
        put("buffer_size_kb", "4096")?;
        put("events/damon/damon_aggregated/enable", "1")?;
        let path = instance.join("trace_pipe");
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|source| DamonTraceError::Io {
                op: "open",
                path,
                source,
            })
    }

    /// Hands every record that arrived since the last call to `f`, without
    /// waiting for more.
    pub fn drain(&mut self, mut f: impl FnMut(Aggregated)) -> Result<(), DamonTraceError> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(());
        };
        loop {
            let n = match pipe.read(&mut self.buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(DamonTraceError::Io {
                        op: "read",
                        path: self.instance.join("trace_pipe"),
                        source,
                    });
                }
            };
            self.partial
                .push_str(&String::from_utf8_lossy(&self.buf[..n]));
            let complete = self.partial.rfind('\n').map_or(0, |i| i + 1);
            for line in self.partial[..complete].lines() {
                if let Some(a) = parse_aggregated(line) {
                    f(a);
                }
            }
            self.partial.drain(..complete);
        }
    }
}

impl Drop for DamonTrace {
    fn drop(&mut self) {
        let _ = fs::write(
            self.instance.join("events/damon/damon_aggregated/enable"),
            "0",
        );
        drop(self.pipe.take());
        let _ = fs::remove_dir(&self.instance);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_6_12_parse_and_others_do_not() {
        let line = "       kdamond.0-812     [001] .....  4521.002345: damon_aggregated: \
                    target_id=0 nr_regions=3 1052672-1056768: 17 4";
        assert_eq!(
            parse_aggregated(line),
            Some(Aggregated {
                at: 4521.002345,
                start: 1_052_672,
                end: 1_056_768,
                nr_accesses: 17,
            })
        );
        // Without the age (kernels before 5.16 print none).
        let old =
            "kdamond.0-1 [000] ...1 10.5: damon_aggregated: target_id=0 nr_regions=3 0-4096: 2";
        assert_eq!(parse_aggregated(old).map(|a| a.nr_accesses), Some(2));
        for bad in [
            "",
            "kdamond.0-1 [000] .... 10.5: damos_before_apply: ctx_idx=0",
            "kdamond.0-1 [000] .... 10.5: damon_aggregated: target_id=0 nr_regions=3 8192-4096: 1 0",
            "kdamond.0-1 [000] .... x: damon_aggregated: target_id=0 nr_regions=3 0-4096: 1 0",
            "kdamond.0-1 [000] .... 10.5: damon_aggregated: target_id=0 nr_regions=3 0-4096 1 0",
        ] {
            assert_eq!(parse_aggregated(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_host_without_the_tracepoint_is_refused_with_the_reason() {
        let err = DamonTrace::open(Path::new("/nonexistent/tracing"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no damon:damon_aggregated tracepoint"),
            "{err}"
        );
    }
}

//! One kdamond of DAMON's sysfs interface, owned: created only when no
//! other kdamond exists (one another program runs must never be stopped
//! or changed), set up for physical-address monitoring of the regions it
//! is given, and removed again when dropped.
//!
//! DAMON's sysfs pitfalls this works around (6.12): `commit` with unsorted
//! or overlapping regions, or fewer than three, "succeeds" and then stops
//! the kdamond, so regions are checked here and the state is read back
//! after every commit; `off` is asynchronous, so it is polled.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use thiserror::Error;

/// Where DAMON's sysfs interface lives.
pub const DAMON_ADMIN: &str = "/sys/kernel/mm/damon/admin";
/// DAMON refuses to commit fewer regions than this.
pub const MIN_DAMON_REGIONS: usize = 3;
/// How long a kdamond may take to stop.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Why DAMON could not be used.
#[derive(Debug, Error)]
pub enum DamonError {
    /// The host kernel has no DAMON sysfs interface.
    #[error("host kernel lacks DAMON's sysfs interface ({0} not found; needs CONFIG_DAMON_SYSFS)")]
    Absent(String),
    /// The kernel's DAMON has no physical-address operations.
    #[error("host kernel's DAMON lacks physical-address monitoring (paddr; offers: {0})")]
    NoPaddr(String),
    /// Another program's kdamond exists: it must not be touched.
    #[error(
        "DAMON is busy: {0} kdamond(s) exist that tiervisor did not create (it never stops or \
         changes another program's kdamond)"
    )]
    Busy(u32),
    /// Regions DAMON would silently stop on.
    #[error("DAMON regions must be at least {MIN_DAMON_REGIONS}, sorted and not overlapping")]
    Regions,
    /// The kdamond stopped after a commit.
    #[error("the kdamond stopped after a commit (state '{0}')")]
    Stopped(String),
    /// A sysfs file could not be read or written.
    #[error("DAMON sysfs: {op} {path}")]
    Sysfs {
        /// "read" or "write …".
        op: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// DAMON's timing: how often each region is checked, and how often the
/// counts are reported and reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamonIntervals {
    /// Between two checks of a region.
    pub sample: Duration,
    /// Between two reports (`damon_aggregated`).
    pub aggregation: Duration,
}

/// The one kdamond this process created.
#[derive(Debug)]
pub struct OwnedKdamond {
    admin: PathBuf,
    /// `kdamonds/0`.
    dir: PathBuf,
    running: bool,
    /// The ranges last written to the region directories.
    written: Vec<(u64, u64)>,
}

impl OwnedKdamond {
    /// Creates the kdamond under `admin` ([`DAMON_ADMIN`] on a real host)
    /// for physical-address monitoring at `intervals`, with no regions
    /// yet; refuses when DAMON is absent or another kdamond exists.
    pub fn create(admin: &Path, intervals: DamonIntervals) -> Result<Self, DamonError> {
        let nr = admin.join("kdamonds/nr_kdamonds");
        if !nr.exists() {
            return Err(DamonError::Absent(nr.display().to_string()));
        }
        let existing: u32 = read(&nr)?.trim().parse().unwrap_or(u32::MAX);
        if existing != 0 {
            return Err(DamonError::Busy(existing));
        }
        write(&nr, "1")?;
        // From here on, dropping `kdamond` removes what was made.
        let kdamond = OwnedKdamond {
            admin: admin.to_owned(),
            dir: admin.join("kdamonds/0"),
            running: false,
            written: Vec::new(),
        };
        let ctx = kdamond.dir.join("contexts");
        write(&ctx.join("nr_contexts"), "1")?;
        let ctx = ctx.join("0");
        let ops = read(&ctx.join("avail_operations")).unwrap_or_default();
        if !ops.split_whitespace().any(|o| o == "paddr") {
            return Err(DamonError::NoPaddr(ops.trim().to_owned()));
        }
        write(&ctx.join("operations"), "paddr")?;
        let attrs = ctx.join("monitoring_attrs");
        let us = |d: Duration| d.as_micros().max(1).to_string();
        // aggr_us first: sample_us may not exceed it.
        write(&attrs.join("intervals/aggr_us"), &us(intervals.aggregation))?;
        write(&attrs.join("intervals/sample_us"), &us(intervals.sample))?;
        write(&ctx.join("targets/nr_targets"), "1")?;
        Ok(kdamond)
    }

    /// Sets the monitored regions (physical byte ranges, sorted, not
    /// overlapping, at least [`MIN_DAMON_REGIONS`]) and pins DAMON's
    /// region count to theirs, so that it neither splits nor merges them:
    /// each stays one page's (or one run's) own count. Takes effect at
    /// [`start`](Self::start) or [`commit`](Self::commit).
    pub fn set_regions(&mut self, regions: &[(u64, u64)]) -> Result<(), DamonError> {
        let sorted = regions
            .windows(2)
            .all(|w| w[0].1 <= w[1].0 && w[0].0 < w[0].1);
        if regions.len() < MIN_DAMON_REGIONS || !sorted || regions.iter().any(|r| r.0 >= r.1) {
            return Err(DamonError::Regions);
        }
        let ctx = self.dir.join("contexts/0");
        let n = regions.len().to_string();
        let dir = ctx.join("targets/0/regions");
        if regions.len() != self.written.len() {
            let nr = ctx.join("monitoring_attrs/nr_regions");
            // Raise max before min (min may not exceed max), lower min first.
            if regions.len() > self.written.len() {
                write(&nr.join("max"), &n)?;
                write(&nr.join("min"), &n)?;
            } else {
                write(&nr.join("min"), &n)?;
                write(&nr.join("max"), &n)?;
            }
            // Writing nr_regions makes that many fresh (0-0) directories.
            write(&dir.join("nr_regions"), &n)?;
            self.written = vec![(0, 0); regions.len()];
        }
        // Only the directories whose range changed: a commit after a few
        // frames moved rewrites a few, not thousands (each write is a
        // syscall, and slow in an emulated host).
        for (i, (&(start, end), old)) in regions.iter().zip(self.written.iter_mut()).enumerate() {
            if (start, end) == *old {
                continue;
            }
            let r = dir.join(i.to_string());
            write(&r.join("start"), &start.to_string())?;
            write(&r.join("end"), &end.to_string())?;
            *old = (start, end);
        }
        Ok(())
    }

    /// Starts monitoring.
    pub fn start(&mut self) -> Result<(), DamonError> {
        write(&self.dir.join("state"), "on")?;
        self.running = true;
        self.check_running()
    }

    /// Applies the regions set since the last start or commit to the
    /// running kdamond.
    pub fn commit(&self) -> Result<(), DamonError> {
        write(&self.dir.join("state"), "commit")?;
        self.check_running()
    }

    /// The kdamond's thread id, for CPU accounting.
    pub fn pid(&self) -> Option<i32> {
        read(&self.dir.join("pid")).ok()?.trim().parse().ok()
    }

    fn check_running(&self) -> Result<(), DamonError> {
        let state = read(&self.dir.join("state"))?;
        match state.trim() {
            "on" => Ok(()),
            other => Err(DamonError::Stopped(other.to_owned())),
        }
    }

    fn stop(&mut self) {
        if self.running {
            let state = self.dir.join("state");
            let _ = write(&state, "off");
            let started = Instant::now();
            while read(&state).is_ok_and(|s| s.trim() != "off") && started.elapsed() < STOP_WAIT {
                thread::sleep(Duration::from_millis(5));
            }
            self.running = false;
        }
    }
}

impl Drop for OwnedKdamond {
    fn drop(&mut self) {
        self.stop();
        let _ = write(&self.admin.join("kdamonds/nr_kdamonds"), "0");
    }
}

fn read(path: &Path) -> Result<String, DamonError> {
    fs::read_to_string(path).map_err(|source| DamonError::Sysfs {
        op: "read".into(),
        path: path.to_owned(),
        source,
    })
}

fn write(path: &Path, value: &str) -> Result<(), DamonError> {
    fs::write(path, value).map_err(|source| DamonError::Sysfs {
        op: format!("write '{value}' to"),
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVALS: DamonIntervals = DamonIntervals {
        sample: Duration::from_millis(5),
        aggregation: Duration::from_millis(100),
    };

    #[test]
    fn a_host_without_damon_is_refused_with_the_reason() {
        let err = OwnedKdamond::create(Path::new("/nonexistent/damon/admin"), INTERVALS)
            .unwrap_err()
            .to_string();
        assert!(err.contains("lacks DAMON's sysfs interface"), "{err}");
    }

    /// On a host where another program runs a kdamond (the development
    /// machines: a platform kdamond owns DAMON), creating one is refused
    /// and the other one is left exactly as it was.
    #[test]
    fn a_kdamond_of_another_program_is_never_touched() {
        let admin = Path::new(DAMON_ADMIN);
        let nr = admin.join("kdamonds/nr_kdamonds");
        let Ok(before) = fs::read_to_string(&nr) else {
            eprintln!("skipped: no DAMON sysfs on this host");
            return;
        };
        let others: u32 = before.trim().parse().unwrap();
        if others == 0 {
            eprintln!("skipped: no other kdamond on this host");
            return;
        }
        let state = admin.join("kdamonds/0/state");
        let state_before = fs::read_to_string(&state).unwrap();
        match OwnedKdamond::create(admin, INTERVALS) {
            Err(DamonError::Busy(n)) => assert_eq!(n, others),
            other => panic!("expected Busy, got {other:?}"),
        }
        assert_eq!(fs::read_to_string(&nr).unwrap(), before);
        assert_eq!(fs::read_to_string(&state).unwrap(), state_before);
    }
}

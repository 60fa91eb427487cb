//! CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`): what a
//! sampler thread or a tracker's `collect()` costs the host, apart from
//! time spent waiting.

use std::io;
use std::time::Duration;

/// CPU time the calling thread has used so far.
pub fn thread_cpu_time() -> io::Result<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call;
    // clock_gettime writes only into it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(ts.tv_nsec).unwrap_or(0);
    Ok(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn counts_work_and_not_sleep() {
        let start = thread_cpu_time().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu_time().unwrap() - start;
        assert!(slept < Duration::from_millis(25), "{slept:?}");
        // Spinning advances it: this loop ends (however busy the host),
        // where a clock that ignored work would spin until the deadline.
        let busy = Instant::now();
        let mut x = 0u64;
        while thread_cpu_time().unwrap() - start < Duration::from_millis(30)
            && busy.elapsed() < Duration::from_secs(60)
        {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let worked = thread_cpu_time().unwrap() - start;
        assert!(worked >= Duration::from_millis(30), "{worked:?}");
    }
}

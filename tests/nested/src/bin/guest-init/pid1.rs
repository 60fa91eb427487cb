//! What only PID 1 does: mount the pseudo file systems, own the console, power off.

use std::ffi::{CStr, CString};
use std::io::Write;
use std::time::Duration;
use std::{fs, io, ptr, thread};

/// A PID 1 duty that failed.
#[derive(Debug, thiserror::Error)]
pub enum Pid1Error {
    #[error("cannot mount {target}")]
    Mount {
        target: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("cannot open /dev/console")]
    Console(#[source] io::Error),
}

/// Mounts `fstype` on `target`, creating the directory; an existing mount (EBUSY) is fine.
fn mount(fstype: &'static CStr, target: &'static str) -> Result<(), Pid1Error> {
    let _ = fs::create_dir_all(target);
    let mount_err = |source| Pid1Error::Mount { target, source };
    let path = CString::new(target).map_err(|e| mount_err(e.into()))?;
    let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
    // SAFETY: all strings are NUL-terminated and outlive the call; there is no data argument.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            path.as_ptr(),
            fstype.as_ptr(),
            flags,
            ptr::null(),
        )
    };
    let error = io::Error::last_os_error();
    if rc == 0 || error.raw_os_error() == Some(libc::EBUSY) {
        Ok(())
    } else {
        Err(mount_err(error))
    }
}

/// Points fds 0-2 at `/dev/console` unless stdout is already open.
fn ensure_console() -> Result<(), Pid1Error> {
    // SAFETY: F_GETFD only queries the descriptor table.
    if unsafe { libc::fcntl(1, libc::F_GETFD) } != -1 {
        return Ok(());
    }
    // SAFETY: the path is NUL-terminated; the returned fd is owned here.
    let fd = unsafe { libc::open(c"/dev/console".as_ptr(), libc::O_RDWR | libc::O_NOCTTY) };
    if fd < 0 {
        return Err(Pid1Error::Console(io::Error::last_os_error()));
    }
    for target in 0..3 {
        // SAFETY: `fd` is open; replacing the standard descriptors is the intent.
        unsafe { libc::dup2(fd, target) };
    }
    if fd > 2 {
        // SAFETY: `fd` is ours and now duplicated onto 0-2.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Mounts /proc and /dev and makes sure stdout/stderr reach the console. The console is set
/// up first too, from the initramfs's /dev/console node, so mount errors can be reported.
pub fn set_up() -> Result<(), Pid1Error> {
    ensure_console()?;
    mount(c"proc", "/proc")?;
    mount(c"devtmpfs", "/dev")?;
    ensure_console()
}

/// Lets the console send what was written, then syncs and powers off; never returns, because
/// PID 1 exiting panics the kernel.
pub fn power_off() -> ! {
    let _ = io::stdout().flush();
    // A write to the serial console returns once the bytes are in the UART driver's transmit
    // buffer. The kernel's own "reboot: Power down" goes to the UART directly and landed inside
    // our last line ("result=pass rounds=2[ 32.37] reboot: Power down"), so the host missed the
    // result. Wait until the console has sent everything; a console that is no tty has nothing
    // to wait for.
    // SAFETY: tcdrain takes a file descriptor only; stdout is the console (`set_up`).
    unsafe { libc::tcdrain(libc::STDOUT_FILENO) };
    // SAFETY: sync and reboot take no pointers; powering off is what PID 1 finishing means.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    loop {
        thread::sleep(Duration::from_secs(3600));
    }
}

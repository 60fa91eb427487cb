//! The guest's side of a graceful stop: loads the ACPI `button` and `evdev` modules shipped
//! in the initramfs, finds the "Power Button" input device tiervisor's DSDT describes
//! (`PNP0C0C`, notified by the Generic Event Device) and watches it on a thread of its own.
//! A `KEY_POWER` press raises the flag the workload stops at; the guest then checks its data
//! and powers off, as any init does on its power button.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// The modules, in load order, under `/lib/modules` of the guest's initramfs.
const MODULES: [&str; 2] = ["button.ko", "evdev.ko"];
/// How long the button's event node may take to appear after the modules load.
const NODE_WAIT: Duration = Duration::from_secs(30);
/// `EV_KEY` and `KEY_POWER` from `linux/input-event-codes.h`.
const EV_KEY: u16 = 1;
const KEY_POWER: u16 = 116;
/// `struct input_event` on x86-64: a 16-byte timeval, type, code, value.
const EVENT_LEN: usize = 24;

/// Why the button cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum PowerButtonError {
    #[error("cannot load {module}")]
    Load {
        module: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("no \"Power Button\" input device with an event node within {0:?}")]
    NoDevice(Duration),
    #[error("cannot watch {path}")]
    Open {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// Loads `/lib/modules/NAME` with `finit_module(2)`; one already loaded is fine.
fn load(module: &'static str) -> Result<(), PowerButtonError> {
    let fail = |source| PowerButtonError::Load { module, source };
    let file = File::open(format!("/lib/modules/{module}")).map_err(fail)?;
    let params = CString::default();
    // SAFETY: finit_module reads the open module file and the NUL-terminated (empty)
    // parameter string, both alive for the call.
    let rc = unsafe { libc::syscall(libc::SYS_finit_module, file.as_raw_fd(), params.as_ptr(), 0) };
    let error = io::Error::last_os_error();
    if rc == 0 || error.raw_os_error() == Some(libc::EEXIST) {
        Ok(())
    } else {
        Err(fail(error))
    }
}

/// The event handlers (`eventN`) of every input device named "Power Button", from the
/// text of `/proc/bus/input/devices`.
pub fn power_button_events(devices: &str) -> Vec<String> {
    devices
        .split("\n\n")
        .filter(|block| block.lines().any(|l| l == "N: Name=\"Power Button\""))
        .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("H: Handlers=")))
        .flat_map(|handlers| handlers.split_whitespace())
        .filter(|h| h.starts_with("event"))
        .map(str::to_owned)
        .collect()
}

/// Whether a `struct input_event` is a press of the power key.
pub fn is_power_press(event: &[u8; EVENT_LEN]) -> bool {
    let kind = u16::from_ne_bytes([event[16], event[17]]);
    let code = u16::from_ne_bytes([event[18], event[19]]);
    let value = i32::from_ne_bytes([event[20], event[21], event[22], event[23]]);
    kind == EV_KEY && code == KEY_POWER && value == 1
}

/// Loads the modules, opens every power button's event node and starts a thread per node
/// that sets `stop` (and says so) at the first press.
pub fn watch(stop: &'static AtomicBool) -> Result<(), PowerButtonError> {
    for module in MODULES {
        load(module)?;
    }
    let started = Instant::now();
    let nodes = loop {
        let devices = std::fs::read_to_string("/proc/bus/input/devices").unwrap_or_default();
        let nodes: Vec<String> = power_button_events(&devices)
            .into_iter()
            .map(|e| format!("/dev/input/{e}"))
            .collect();
        if !nodes.is_empty() && nodes.iter().all(|n| std::path::Path::new(n).exists()) {
            break nodes;
        }
        if started.elapsed() > NODE_WAIT {
            return Err(PowerButtonError::NoDevice(NODE_WAIT));
        }
        thread::sleep(Duration::from_millis(50));
    };
    for path in nodes {
        let mut file = File::open(&path).map_err(|source| PowerButtonError::Open {
            path: path.clone(),
            source,
        })?;
        thread::spawn(move || {
            let mut event = [0u8; EVENT_LEN];
            while file.read_exact(&mut event).is_ok() {
                if is_power_press(&event) {
                    say!("power-button pressed");
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
            }
        });
    }
    say!("power-button watched");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_power_buttons_event_nodes() {
        let devices = "I: Bus=0019 Vendor=0000 Product=0001 Version=0000\n\
            N: Name=\"Power Button\"\n\
            P: Phys=PNP0C0C/button/input0\n\
            H: Handlers=kbd event0 \n\
            B: EV=3\n\
            \n\
            I: Bus=0011 Vendor=0001 Product=0001 Version=ab41\n\
            N: Name=\"AT Translated Set 2 keyboard\"\n\
            H: Handlers=sysrq kbd event1 leds \n";
        assert_eq!(power_button_events(devices), ["event0"]);
        assert!(power_button_events("").is_empty());
    }

    #[test]
    fn only_a_power_key_press_counts() {
        let event = |kind: u16, code: u16, value: i32| {
            let mut e = [0u8; EVENT_LEN];
            e[16..18].copy_from_slice(&kind.to_ne_bytes());
            e[18..20].copy_from_slice(&code.to_ne_bytes());
            e[20..24].copy_from_slice(&value.to_ne_bytes());
            e
        };
        assert!(is_power_press(&event(EV_KEY, KEY_POWER, 1)));
        assert!(!is_power_press(&event(EV_KEY, KEY_POWER, 0)), "release");
        assert!(!is_power_press(&event(0, 0, 0)), "sync");
        assert!(!is_power_press(&event(EV_KEY, 30, 1)), "another key");
    }
}

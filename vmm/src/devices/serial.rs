//! The Linux guest's serial console: a 16550 UART (vm-superio's `Serial`)
//! at COM1 whose interrupt is an eventfd the VM registers as an irqfd for
//! IRQ 4, whose output goes to a [`ConsoleWriter`], and whose input comes
//! from a host file descriptor (stdin) through a pump thread that never
//! holds up the VMM's shutdown.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use vm_superio::serial::NoEvents;
use vm_superio::{Serial, Trigger};
use vmm_sys_util::eventfd::EventFd;

use super::console::ConsoleWriter;

/// How often the input pump looks at its stop flag.
const PUMP_POLL: Duration = Duration::from_millis(100);

/// Raises the UART's interrupt: a write to the irqfd's eventfd.
#[derive(Debug)]
pub struct IrqTrigger(pub EventFd);

impl Trigger for IrqTrigger {
    type E = std::io::Error;

    fn trigger(&self) -> std::io::Result<()> {
        self.0.write(1)
    }
}

type Uart = Serial<IrqTrigger, NoEvents, ConsoleWriter>;

/// The UART, shared by the vCPU threads and the input pump.
#[derive(Clone)]
pub struct SerialConsole {
    uart: Arc<Mutex<Uart>>,
}

impl std::fmt::Debug for SerialConsole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SerialConsole").finish_non_exhaustive()
    }
}

impl SerialConsole {
    /// A UART raising `irq` and writing to `out`.
    pub fn new(irq: EventFd, out: ConsoleWriter) -> Self {
        SerialConsole {
            uart: Arc::new(Mutex::new(Serial::new(IrqTrigger(irq), out))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Uart> {
        // The UART's state stays consistent across a panicking holder
        // (every method leaves it whole).
        self.uart.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The guest reads register `offset` (0..=7).
    pub fn read(&self, offset: u8) -> u8 {
        self.lock().read(offset)
    }

    /// The guest writes `value` to register `offset` (0..=7). A console
    /// that cannot take the byte (a closed stdout) loses it; the guest
    /// goes on.
    pub fn write(&self, offset: u8, value: u8) {
        let _ = self.lock().write(offset, value);
    }

    /// Queues host input for the guest; returns how many bytes fit in the
    /// UART's FIFO.
    pub fn enqueue(&self, bytes: &[u8]) -> usize {
        self.lock().enqueue_raw_bytes(bytes).unwrap_or(0)
    }
}

/// A thread that feeds a host file descriptor to the guest's UART until it
/// reaches end of file, fails, or is stopped. Dropping it stops it.
#[derive(Debug)]
pub struct InputPump {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl InputPump {
    /// Starts pumping `fd` (not closed by the pump; it must stay open
    /// while the pump runs, as stdin does) into `serial`.
    pub fn start(serial: SerialConsole, fd: RawFd) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("serial-input".into())
            .spawn(move || pump(&serial, fd, &flag))?;
        Ok(InputPump {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the pump; it notices within 100 ms.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // The pump never blocks longer than PUMP_POLL; a panic in it
            // only loses console input.
            let _ = t.join();
        }
    }
}

impl Drop for InputPump {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Waits up to [`PUMP_POLL`] for `fd` to be readable.
fn readable(fd: RawFd) -> std::io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid pollfd for the duration of the call and
    // the count is 1.
    let n = unsafe { libc::poll(&mut pfd, 1, PUMP_POLL.as_millis() as libc::c_int) };
    match n {
        n if n > 0 => Ok(true),
        0 => Ok(false),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn pump(serial: &SerialConsole, fd: RawFd, stop: &AtomicBool) {
    let mut buf = [0u8; 256];
    while !stop.load(Ordering::Acquire) {
        match readable(fd) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        // SAFETY: `buf` is writable for its whole length; `fd` is open for
        // as long as the pump runs (the caller's promise).
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        let n = match n {
            0 => return, // end of file
            n if n > 0 => n as usize,
            _ => match std::io::Error::last_os_error().kind() {
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => continue,
                _ => return,
            },
        };
        let mut rest = &buf[..n];
        while !rest.is_empty() && !stop.load(Ordering::Acquire) {
            let taken = serial.enqueue(rest);
            rest = &rest[taken..];
            if taken == 0 {
                // FIFO full: the guest has not read it yet.
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::console::{ConsoleBuffer, ConsoleOutput};

    const DATA: u8 = 0;
    const IER: u8 = 1;
    const IIR: u8 = 2;
    const LSR: u8 = 5;
    const LSR_DATA_READY: u8 = 1;

    fn console() -> (SerialConsole, ConsoleBuffer, EventFd) {
        let buffer = ConsoleBuffer::new();
        let irq = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let out = ConsoleOutput::Buffer(buffer.clone()).open().unwrap();
        let serial = SerialConsole::new(irq.try_clone().unwrap(), out);
        (serial, buffer, irq)
    }

    #[test]
    fn guest_output_reaches_the_console_and_raises_the_irq() {
        let (serial, buffer, irq) = console();
        serial.write(IER, 0x2); // transmitter-empty interrupt on
        assert_eq!(irq.read().unwrap(), 1, "enabling it raises it at once");
        // The driver acknowledges it by reading IIR, then transmits.
        assert_eq!(serial.read(IIR) & 0x0f, 0x2, "THR empty pending");
        for b in b"Linux version" {
            serial.write(DATA, *b);
        }
        assert_eq!(buffer.text(), "Linux version");
        assert!(irq.read().unwrap() >= 1, "THR-empty interrupt raised again");
    }

    #[test]
    fn host_input_is_pumped_into_the_uart_and_stops_at_eof() {
        let (serial, _buffer, irq) = console();
        serial.write(IER, 0x1); // received-data interrupt on
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe() returns.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let pump = InputPump::start(serial.clone(), fds[0]).unwrap();
        // SAFETY: writing 3 bytes from a valid buffer to the pipe's write end.
        let written = unsafe { libc::write(fds[1], b"ls\n".as_ptr().cast(), 3) };
        assert_eq!(written, 3);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while serial.read(LSR) & LSR_DATA_READY == 0 {
            assert!(std::time::Instant::now() < deadline, "input never arrived");
            std::thread::sleep(Duration::from_millis(5));
        }
        let got: Vec<u8> = (0..3).map(|_| serial.read(DATA)).collect();
        assert_eq!(got, b"ls\n");
        assert!(irq.read().unwrap() >= 1, "received-data interrupt raised");
        // SAFETY: closing the write end we own; the pump then sees EOF.
        unsafe { libc::close(fds[1]) };
        let started = std::time::Instant::now();
        pump.stop();
        // Without the stop it would wait for input forever: the bound only
        // catches that hang, however busy the host.
        assert!(started.elapsed() < Duration::from_secs(20));
        // SAFETY: the pump has stopped; the read end is ours to close.
        unsafe { libc::close(fds[0]) };
    }

    #[test]
    fn stopping_a_pump_on_a_silent_input_is_prompt() {
        let (serial, _buffer, _irq) = console();
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe() returns.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let pump = InputPump::start(serial, fds[0]).unwrap();
        let started = std::time::Instant::now();
        drop(pump);
        // Without the stop it would wait for input forever: the bound only
        // catches that hang, however busy the host.
        assert!(started.elapsed() < Duration::from_secs(20));
        // SAFETY: both ends are ours; the pump has stopped.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}

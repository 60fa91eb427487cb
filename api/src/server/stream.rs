//! One accepted connection, unix or TCP, behind one type.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// How long a connection the server closes keeps draining what the client
/// still sends.
const LINGER: Duration = Duration::from_secs(2);
/// The most bytes a closing connection drains.
const LINGER_BYTES: usize = 1 << 20;

/// How a client reached the server; TCP clients must present the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// The unix socket (guarded by its file mode).
    Unix,
    /// TCP (guarded by the bearer token).
    Tcp,
}

/// An accepted connection.
#[derive(Debug)]
pub(crate) enum Stream {
    /// From the unix socket.
    Unix(UnixStream),
    /// From the TCP listener.
    Tcp(TcpStream),
}

impl Stream {
    /// Which listener it came from.
    pub fn transport(&self) -> Transport {
        match self {
            Stream::Unix(_) => Transport::Unix,
            Stream::Tcp(_) => Transport::Tcp,
        }
    }

    /// A second handle on the same connection (to shut it down from
    /// another thread).
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    /// Sets how long one read may block (`None`: forever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(timeout),
            Stream::Tcp(s) => s.set_read_timeout(timeout),
        }
    }

    /// Sets how long one write may block.
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(timeout),
            Stream::Tcp(s) => s.set_write_timeout(timeout),
        }
    }

    /// Closes a connection the server chose to end, after its last
    /// response: the write side is shut, so the client sees the end at
    /// once, and what the client still sends (an unread body) is drained
    /// for a while. Closing with unread bytes would reset a TCP connection,
    /// which can destroy the response before the client reads it, and
    /// would fail a client still writing its request with a broken pipe.
    pub fn close_lingering(mut self) {
        let half_close = match &self {
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
        };
        if half_close.is_err() {
            return;
        }
        let deadline = Instant::now() + LINGER;
        let mut drained = 0;
        let mut buf = [0u8; 8192];
        while drained < LINGER_BYTES {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match self.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => drained += n,
            }
        }
    }

    /// Shuts both directions down: a read blocked in another thread
    /// returns end-of-file.
    pub fn shutdown(&self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

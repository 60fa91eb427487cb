//! Where a Linux guest's serial console output goes: tiervisor's stdout,
//! a file, an in-memory buffer (tests, the library) or nowhere.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// Most bytes an in-memory console keeps; later output is counted and
/// dropped, so a chatty guest cannot grow the VMM without bound.
pub const BUFFER_LIMIT: usize = 16 << 20;

/// Where the serial console's output goes.
#[derive(Clone, Debug, Default)]
pub enum ConsoleOutput {
    /// tiervisor's standard output.
    #[default]
    Stdout,
    /// A file, created or truncated when the VM is built.
    File(PathBuf),
    /// An in-memory buffer the caller reads.
    Buffer(ConsoleBuffer),
    /// Dropped.
    Discard,
}

/// How a Linux guest's serial console is connected.
#[derive(Clone, Debug, Default)]
pub struct ConsoleConfig {
    /// Where its output goes.
    pub output: ConsoleOutput,
    /// Whether the host's stdin feeds its input while the VM runs.
    pub stdin: bool,
}

#[derive(Debug, Default)]
struct BufferState {
    bytes: Vec<u8>,
    dropped: u64,
}

/// Console output kept in memory, shared with whoever reads it.
#[derive(Clone, Debug, Default)]
pub struct ConsoleBuffer {
    state: Arc<Mutex<BufferState>>,
}

impl ConsoleBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything the guest wrote so far (up to [`BUFFER_LIMIT`] bytes).
    pub fn contents(&self) -> Vec<u8> {
        self.lock().bytes.clone()
    }

    /// The contents as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.lock().bytes).into_owned()
    }

    /// Bytes dropped after the limit.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BufferState> {
        // A writer that panicked mid-append leaves valid bytes behind.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn append(&self, bytes: &[u8]) {
        let mut s = self.lock();
        let room = BUFFER_LIMIT.saturating_sub(s.bytes.len());
        let take = room.min(bytes.len());
        s.bytes.extend_from_slice(&bytes[..take]);
        s.dropped += (bytes.len() - take) as u64;
    }
}

/// The writer behind the serial device, for one [`ConsoleOutput`].
#[derive(Debug)]
pub enum ConsoleWriter {
    /// Standard output.
    Stdout(std::io::Stdout),
    /// A file.
    File(std::fs::File),
    /// A buffer.
    Buffer(ConsoleBuffer),
    /// Nowhere.
    Discard,
}

impl ConsoleOutput {
    /// Opens the output (creates or truncates a file).
    pub fn open(&self) -> std::io::Result<ConsoleWriter> {
        Ok(match self {
            ConsoleOutput::Stdout => ConsoleWriter::Stdout(std::io::stdout()),
            ConsoleOutput::File(path) => ConsoleWriter::File(std::fs::File::create(path)?),
            ConsoleOutput::Buffer(b) => ConsoleWriter::Buffer(b.clone()),
            ConsoleOutput::Discard => ConsoleWriter::Discard,
        })
    }
}

impl Write for ConsoleWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            ConsoleWriter::Stdout(s) => s.write(buf),
            ConsoleWriter::File(f) => f.write(buf),
            ConsoleWriter::Buffer(b) => {
                b.append(buf);
                Ok(buf.len())
            }
            ConsoleWriter::Discard => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            ConsoleWriter::Stdout(s) => s.flush(),
            ConsoleWriter::File(f) => f.flush(),
            ConsoleWriter::Buffer(_) | ConsoleWriter::Discard => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_keeps_output_up_to_its_limit() {
        let buffer = ConsoleBuffer::new();
        let mut w = ConsoleOutput::Buffer(buffer.clone()).open().unwrap();
        w.write_all(b"Linux version 6.1\n").unwrap();
        assert_eq!(buffer.text(), "Linux version 6.1\n");
        w.write_all(&vec![b'x'; BUFFER_LIMIT]).unwrap();
        assert_eq!(buffer.contents().len(), BUFFER_LIMIT);
        assert_eq!(buffer.dropped(), 18);
    }

    #[test]
    fn a_file_console_is_created_and_written() {
        let path = std::env::temp_dir().join(format!("tiervisor-console-{}", std::process::id()));
        let mut w = ConsoleOutput::File(path.clone()).open().unwrap();
        w.write_all(b"abc").unwrap();
        w.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
        std::fs::remove_file(&path).unwrap();
        assert!(
            ConsoleOutput::File("/nonexistent/dir/console".into())
                .open()
                .is_err()
        );
    }
}

//! The listening sockets and the accept loop. The unix socket is created
//! with mode 0600 from the start (bound in a private directory, then
//! renamed into place), replaces a stale socket file nobody answers on,
//! and refuses one another VMM answers on. One thread accepts on every
//! listener and hands each connection to a thread of its own, up to the
//! connection cap.

use std::fs::{self, DirBuilder};
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::EventFd;

use crate::server::api_error::ApiError;
use crate::server::connection::{Context, serve};
use crate::server::connections::{Connections, Refused};
use crate::server::response::{Connection, Response};
use crate::server::server_error::ServerError;
use crate::server::stream::Stream;

/// A socket the server listens on.
#[derive(Debug)]
pub(crate) enum Listener {
    /// The unix socket.
    Unix(UnixListener),
    /// TCP.
    Tcp(TcpListener),
}

impl Listener {
    fn fd(&self) -> RawFd {
        match self {
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        }
    }

    fn accept(&self) -> io::Result<Stream> {
        let stream = match self {
            Listener::Unix(l) => Stream::Unix(l.accept()?.0),
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                // Requests and responses are small: send them at once.
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
        };
        match &stream {
            Stream::Unix(s) => s.set_nonblocking(false)?,
            Stream::Tcp(s) => s.set_nonblocking(false)?,
        }
        Ok(stream)
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Listener::Unix(l) => l.set_nonblocking(true),
            Listener::Tcp(l) => l.set_nonblocking(true),
        }
    }
}

/// The socket file the server created; removed when dropped, unless
/// another file has taken its place since.
#[derive(Debug)]
pub(crate) struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SocketFile {
    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino);
        if ours {
            // Nothing to do if it cannot be removed: the next start
            // replaces a stale socket anyway.
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Binds the unix socket at `path` with mode 0600.
pub(crate) fn bind_unix(path: &Path) -> Result<(UnixListener, SocketFile), ServerError> {
    let bind_error = |source| ServerError::BindUnix {
        path: path.to_owned(),
        source,
    };
    match fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(ServerError::NotASocket(path.to_owned()));
        }
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => return Err(ServerError::SocketInUse(path.to_owned())),
            // Nobody listens: a stale socket of a VMM that died. Renaming
            // over it below replaces it.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(bind_error(e)),
        },
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(bind_error(e)),
    }
    let (listener, staging) = bind_staged(path).map_err(bind_error)?;
    fs::rename(&staging, path).map_err(bind_error)?;
    // The private directory is empty now.
    if let Some(dir) = staging.parent() {
        let _ = fs::remove_dir(dir);
    }
    let meta = fs::symlink_metadata(path).map_err(bind_error)?;
    Ok((
        listener,
        SocketFile {
            path: path.to_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
        },
    ))
}

/// Binds a socket in a fresh mode-0700 directory beside `path` and makes
/// it 0600, so no one else can connect between bind and chmod.
fn bind_staged(path: &Path) -> io::Result<(UnixListener, PathBuf)> {
    static STAGING: AtomicU64 = AtomicU64::new(0);
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let n = STAGING.fetch_add(1, Ordering::Relaxed);
    let dir = parent.join(format!(".tv{}.{n}", std::process::id()));
    DirBuilder::new().mode(0o700).create(&dir)?;
    let staged = dir.join("s");
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        fs::set_permissions(&staged, fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    });
    match bound {
        Ok(listener) => Ok((listener, staged)),
        Err(e) => {
            let _ = fs::remove_file(&staged);
            let _ = fs::remove_dir(&dir);
            Err(e)
        }
    }
}

/// Binds TCP at `addr`.
pub(crate) fn bind_tcp(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr).map_err(|source| ServerError::BindTcp { addr, source })
}

/// The accept loop's epoll token of the stop event.
const STOP_TOKEN: u64 = u64::MAX;
/// Pause after an accept failure such as running out of descriptors, so
/// the loop does not spin on a listener that stays readable.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long a refusal (503) may take to write.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// Accepts on `listeners` until `stop` is signalled.
pub(crate) struct AcceptLoop {
    epoll: Epoll,
    listeners: Vec<Listener>,
    ctx: Arc<Context>,
    connections: Arc<Connections>,
}

impl std::fmt::Debug for AcceptLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcceptLoop")
            .field("listeners", &self.listeners)
            .finish_non_exhaustive()
    }
}

impl AcceptLoop {
    /// Sets the loop up (listeners non-blocking, registered with epoll
    /// with `stop`, which must outlive the loop).
    pub fn new(
        listeners: Vec<Listener>,
        stop: &EventFd,
        ctx: Arc<Context>,
        connections: Arc<Connections>,
    ) -> io::Result<Self> {
        let epoll = Epoll::new()?;
        for (token, listener) in listeners.iter().enumerate() {
            listener.set_nonblocking()?;
            epoll.ctl(
                ControlOperation::Add,
                listener.fd(),
                EpollEvent::new(EventSet::IN, token as u64),
            )?;
        }
        epoll.ctl(
            ControlOperation::Add,
            stop.as_raw_fd(),
            EpollEvent::new(EventSet::IN, STOP_TOKEN),
        )?;
        Ok(AcceptLoop {
            epoll,
            listeners,
            ctx,
            connections,
        })
    }

    /// Runs until stopped.
    pub fn run(self) {
        let mut events = vec![EpollEvent::default(); self.listeners.len() + 1];
        loop {
            let ready = match self.epoll.wait(-1, &mut events) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // epoll_wait fails only on a bad setup: stop serving.
                Err(_) => return,
            };
            for event in &events[..ready] {
                if event.data() == STOP_TOKEN {
                    return;
                }
                if let Some(listener) = self.listeners.get(event.data() as usize) {
                    self.accept_all(listener);
                }
            }
        }
    }

    /// Accepts every pending connection of `listener`.
    fn accept_all(&self, listener: &Listener) {
        loop {
            match listener.accept() {
                Ok(stream) => self.start_connection(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => {}
                Err(_) => {
                    thread::sleep(ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    fn start_connection(&self, stream: Stream) {
        let Ok(handle) = stream.try_clone() else {
            return;
        };
        let id = match self.connections.admit(handle) {
            Ok(id) => id,
            Err(Refused::Full) => return refuse(stream, self.connections.open()),
            Err(Refused::Closing) => return,
        };
        let ctx = Arc::clone(&self.ctx);
        let connections = Arc::clone(&self.connections);
        let spawned = thread::Builder::new()
            .name("api-conn".into())
            .spawn(move || {
                let _leave = Leave(&connections, id);
                serve(stream, &ctx);
            });
        if spawned.is_err() {
            self.connections.leave(id);
        }
    }
}

/// Takes a connection off the registry when its thread ends, even by a
/// panic.
struct Leave<'a>(&'a Connections, u64);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.leave(self.1);
    }
}

/// Tells a client over the cap to come back later.
fn refuse(mut stream: Stream, open: usize) {
    if stream
        .set_write_timeout(Some(REFUSAL_WRITE_TIMEOUT))
        .is_ok()
    {
        // The client may be gone: nothing to do then.
        let _ =
            Response::from(ApiError::Unavailable(open)).write_to(&mut stream, Connection::Close);
    }
    let _ = stream.shutdown();
}

//! [`ApiServer`]: starts the listeners and the accept thread, says when
//! `vmm.shutdown` has been answered, and stops.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use vmm_sys_util::eventfd::{EFD_CLOEXEC, EventFd};

use crate::control::VmmControl;
use crate::server::config::ServerConfig;
use crate::server::connection::Context;
use crate::server::connections::Connections;
use crate::server::listener::{AcceptLoop, Listener, SocketFile, bind_tcp, bind_unix};
use crate::server::request::Limits;
use crate::server::router::Router;
use crate::server::server_error::ServerError;
use crate::server::shutdown::ShutdownSignal;

/// How long [`ApiServer::stop`] waits for connection threads to end.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The API server of one VMM: listens on a unix socket and/or TCP, one
/// thread accepting and one per connection (up to
/// [`ServerConfig::max_connections`]). Dropping it stops it.
#[derive(Debug)]
pub struct ApiServer {
    accept_thread: Option<JoinHandle<()>>,
    stop_event: EventFd,
    ctx: Arc<Context>,
    connections: Arc<Connections>,
    socket_file: Option<SocketFile>,
    tcp_addr: Option<SocketAddr>,
}

impl ApiServer {
    /// Checks `config`, binds its sockets and starts serving `control`;
    /// returns once the sockets accept connections.
    pub fn start(config: ServerConfig, control: Arc<dyn VmmControl>) -> Result<Self, ServerError> {
        config.validate()?;
        let mut listeners = Vec::new();
        let tcp_addr = match config.tcp {
            Some(addr) => {
                let listener = bind_tcp(addr)?;
                let local = listener
                    .local_addr()
                    .map_err(|source| ServerError::BindTcp { addr, source })?;
                listeners.push(Listener::Tcp(listener));
                Some(local)
            }
            None => None,
        };
        // Bound last: an error above leaves no socket file behind, and one
        // below removes it (SocketFile's drop).
        let socket_file = match &config.unix_socket {
            Some(path) => {
                let (listener, file) = bind_unix(path)?;
                listeners.push(Listener::Unix(listener));
                Some(file)
            }
            None => None,
        };
        let ctx = Arc::new(Context {
            control,
            router: Router::new(),
            limits: Limits {
                max_head_bytes: config.max_head_bytes,
                max_headers: config.max_headers,
                max_body_bytes: config.max_body_bytes,
                request_timeout: config.request_timeout,
                idle_timeout: config.idle_timeout,
            },
            write_timeout: config.write_timeout,
            token: config.token,
            shutdown: ShutdownSignal::default(),
        });
        let connections = Arc::new(Connections::new(config.max_connections));
        let stop_event = EventFd::new(EFD_CLOEXEC).map_err(ServerError::Setup)?;
        let accept = AcceptLoop::new(
            listeners,
            &stop_event,
            Arc::clone(&ctx),
            Arc::clone(&connections),
        )
        .map_err(ServerError::Setup)?;
        let accept_thread = thread::Builder::new()
            .name("api-accept".into())
            .spawn(move || accept.run())
            .map_err(ServerError::Setup)?;
        Ok(ApiServer {
            accept_thread: Some(accept_thread),
            stop_event,
            ctx,
            connections,
            socket_file,
            tcp_addr,
        })
    }

    /// The unix socket's path, if it serves one.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.socket_file.as_ref().map(SocketFile::path)
    }

    /// The TCP address it listens on (the port chosen, if 0 was asked).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// Returns once a `vmm.shutdown` request has been answered.
    pub fn wait_for_shutdown(&self) {
        self.ctx.shutdown.wait(None);
    }

    /// Like [`wait_for_shutdown`](Self::wait_for_shutdown), for at most
    /// `timeout`; whether `vmm.shutdown` was answered.
    pub fn wait_for_shutdown_timeout(&self, timeout: Duration) -> bool {
        self.ctx.shutdown.wait(Some(timeout))
    }

    /// Whether a `vmm.shutdown` request has been answered.
    pub fn shutdown_requested(&self) -> bool {
        self.ctx.shutdown.is_set()
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.connections.open()
    }

    /// Stops listening, closes open connections (waiting a few seconds for
    /// handlers inside the VMM to return) and removes the socket file.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        if let Some(thread) = self.accept_thread.take() {
            // If the write fails the loop is gone already; joining is safe.
            let _ = self.stop_event.write(1);
            let _ = thread.join();
        }
        self.connections.close_all(STOP_GRACE);
        self.socket_file = None;
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.halt();
    }
}

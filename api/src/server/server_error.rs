//! [`ServerError`]: why the API server could not start (its
//! configuration, its token file, its sockets, its accept loop).

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use thiserror::Error;

/// Why the server could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// Neither a unix socket nor a TCP address.
    #[error("nothing to listen on: give a unix socket or a TCP address")]
    NoListener,
    /// TCP without a bearer token.
    #[error("the TCP API needs a bearer token (--api-token-file)")]
    TcpWithoutToken,
    /// An empty token or one with spaces or control characters.
    #[error("the bearer token must be printable ASCII without spaces, and not empty")]
    BadToken,
    /// The token file cannot be read.
    #[error("cannot read the token file {}", .path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A limit or timeout of zero.
    #[error("{0} must not be zero")]
    ZeroLimit(&'static str),
    /// Another process answers on the socket.
    #[error("{} is in use: another VMM answers on it", .0.display())]
    SocketInUse(PathBuf),
    /// The socket path names something that is not a socket.
    #[error("{} exists and is not a socket: not replacing it", .0.display())]
    NotASocket(PathBuf),
    /// The unix socket cannot be created.
    #[error("cannot create the API socket {}", .path.display())]
    BindUnix {
        /// The socket's path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The TCP address cannot be bound.
    #[error("cannot listen on {addr}")]
    BindTcp {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The accept loop cannot be set up (epoll, eventfd, thread).
    #[error("cannot start the API's accept loop")]
    Setup(#[source] io::Error),
}

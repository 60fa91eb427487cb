//! What the server listens on and the limits it holds clients to.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::server::server_error::ServerError;

/// Default [`ServerConfig::max_body_bytes`]: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;
/// Default [`ServerConfig::max_head_bytes`]: 16 KiB.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 16 << 10;
/// Default [`ServerConfig::max_headers`].
pub const DEFAULT_MAX_HEADERS: usize = 64;
/// Default [`ServerConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 32;
/// Default [`ServerConfig::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`ServerConfig::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`ServerConfig::write_timeout`].
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the API listens and how much it takes from a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The unix socket (`--api-socket`), created with mode 0600.
    pub unix_socket: Option<PathBuf>,
    /// The TCP address (`--api-tcp`); needs [`token`](Self::token).
    pub tcp: Option<SocketAddr>,
    /// Bearer token TCP clients must send (`--api-token-file`). The unix
    /// socket is guarded by its file mode instead.
    pub token: Option<String>,
    /// Largest request body; a larger Content-Length gets 413 before the
    /// body is read.
    pub max_body_bytes: usize,
    /// Largest request line plus headers (431 beyond).
    pub max_head_bytes: usize,
    /// Most header fields in a request (431 beyond).
    pub max_headers: usize,
    /// Connections served at once; one more gets 503 and is closed.
    pub max_connections: usize,
    /// Time a request has from its first byte to its last.
    pub request_timeout: Duration,
    /// Time a kept-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// Time a response may take to be written.
    pub write_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            unix_socket: None,
            tcp: None,
            token: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            max_headers: DEFAULT_MAX_HEADERS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
        }
    }
}

impl ServerConfig {
    /// A configuration serving the unix socket at `path`, default limits.
    pub fn unix(path: impl Into<PathBuf>) -> Self {
        ServerConfig {
            unix_socket: Some(path.into()),
            ..ServerConfig::default()
        }
    }

    /// Reads a bearer token from `path` (`--api-token-file`): the file's
    /// content less surrounding whitespace, which must be printable ASCII
    /// without spaces and not empty.
    pub fn read_token_file(path: &Path) -> Result<String, ServerError> {
        let text = std::fs::read_to_string(path).map_err(|source| ServerError::TokenFile {
            path: path.to_owned(),
            source,
        })?;
        let token = text.trim().to_owned();
        check_token(&token)?;
        Ok(token)
    }

    /// Checks the configuration as a whole (done by `ApiServer::start`).
    pub fn validate(&self) -> Result<(), ServerError> {
        if self.unix_socket.is_none() && self.tcp.is_none() {
            return Err(ServerError::NoListener);
        }
        if self.tcp.is_some() {
            let token = self.token.as_deref().ok_or(ServerError::TcpWithoutToken)?;
            check_token(token)?;
        }
        let limits = [
            ("max_body_bytes", self.max_body_bytes),
            ("max_head_bytes", self.max_head_bytes),
            ("max_headers", self.max_headers),
            ("max_connections", self.max_connections),
        ];
        for (name, value) in limits {
            if value == 0 {
                return Err(ServerError::ZeroLimit(name));
            }
        }
        let timeouts = [
            ("request_timeout", self.request_timeout),
            ("idle_timeout", self.idle_timeout),
            ("write_timeout", self.write_timeout),
        ];
        for (name, value) in timeouts {
            if value.is_zero() {
                return Err(ServerError::ZeroLimit(name));
            }
        }
        Ok(())
    }
}

/// A token is sent in a header: visible ASCII, no spaces, not empty.
fn check_token(token: &str) -> Result<(), ServerError> {
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ServerError::BadToken);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_needs_a_token() {
        let mut config = ServerConfig {
            tcp: Some("127.0.0.1:0".parse().unwrap()),
            ..ServerConfig::default()
        };
        assert!(matches!(
            config.validate(),
            Err(ServerError::TcpWithoutToken)
        ));
        config.token = Some("with space".into());
        assert!(matches!(config.validate(), Err(ServerError::BadToken)));
        config.token = Some("s3cret".into());
        config.validate().unwrap();
    }

    #[test]
    fn something_to_listen_on_and_no_zero_limits() {
        assert!(matches!(
            ServerConfig::default().validate(),
            Err(ServerError::NoListener)
        ));
        let mut config = ServerConfig::unix("/tmp/x.sock");
        config.validate().unwrap();
        config.max_body_bytes = 0;
        assert!(matches!(
            config.validate(),
            Err(ServerError::ZeroLimit("max_body_bytes"))
        ));
    }
}

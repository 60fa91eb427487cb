//! A small blocking HTTP/1.1 client of the API over the unix socket or
//! TCP (with the bearer token): one connection per request, closed after
//! it. `tierctl` is built on it.

use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::types::ErrorBody;

/// Prefix of every route but `/metrics`.
pub const API_PREFIX: &str = "/api/v1";
/// Default time a request may take to connect, send, or receive.
pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest response head accepted.
const MAX_RESPONSE_HEAD: usize = 64 << 10;
/// Largest response body accepted (a full page of frames is ~5 MiB).
const MAX_RESPONSE_BODY: u64 = 256 << 20;
/// Most response headers.
const MAX_RESPONSE_HEADERS: usize = 64;

/// Why a request failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The server cannot be reached.
    #[error("cannot connect to the API at {endpoint}")]
    Connect {
        /// The socket path or address.
        endpoint: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Sending or receiving failed.
    #[error("i/o with the API at {endpoint}")]
    Io {
        /// The socket path or address.
        endpoint: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The response is not HTTP/1.x as this client reads it.
    #[error("malformed response from {endpoint}: {reason}")]
    Malformed {
        /// The socket path or address.
        endpoint: String,
        /// What is wrong.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{status}: {}", .body.error)]
    Api {
        /// The HTTP status.
        status: u16,
        /// The server's error body (for a body that is not an `ErrorBody`,
        /// its text as `error`).
        body: ErrorBody,
    },
    /// The request body cannot be encoded.
    #[error("cannot encode the request body")]
    Encode(#[source] serde_json::Error),
    /// The response body is not what was expected.
    #[error("unexpected response body from {path}")]
    Decode {
        /// The request path.
        path: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

impl ClientError {
    /// The HTTP status of an [`Api`](Self::Api) error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A response, whatever its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiResponse {
    /// The HTTP status.
    pub status: u16,
    /// Headers in the order received.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl ApiResponse {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as the server's [`ErrorBody`], or its text as `error`.
    pub fn error_body(&self) -> ErrorBody {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| ErrorBody {
            error: String::from_utf8_lossy(&self.body).trim().to_owned(),
            detail: serde_json::Value::Null,
        })
    }

    /// `Ok(self)` for a 2xx, the [`ClientError::Api`] otherwise.
    pub fn success(self) -> Result<ApiResponse, ClientError> {
        if self.is_success() {
            Ok(self)
        } else {
            Err(ClientError::Api {
                status: self.status,
                body: self.error_body(),
            })
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
            Endpoint::Tcp(addr) => write!(f, "{addr}"),
        }
    }
}

/// A client of one VMM's API.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiClient {
    endpoint: Endpoint,
    token: Option<String>,
    timeout: Duration,
}

impl fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiClient")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ApiClient {
    /// A client of the API socket at `path`.
    pub fn unix(path: impl Into<PathBuf>) -> Self {
        ApiClient {
            endpoint: Endpoint::Unix(path.into()),
            token: None,
            timeout: DEFAULT_CLIENT_TIMEOUT,
        }
    }

    /// A client of the API at `addr` over TCP, sending `token` as a bearer
    /// token.
    pub fn tcp(addr: SocketAddr, token: Option<String>) -> Self {
        ApiClient {
            endpoint: Endpoint::Tcp(addr),
            token,
            timeout: DEFAULT_CLIENT_TIMEOUT,
        }
    }

    /// The same client with another timeout for connecting, sending and
    /// each wait for the response.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The socket path, for a unix client.
    pub fn unix_path(&self) -> Option<&Path> {
        match &self.endpoint {
            Endpoint::Unix(path) => Some(path),
            Endpoint::Tcp(_) => None,
        }
    }

    /// Sends `method path` with `body` (as JSON) and returns the response,
    /// whatever its status.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<ApiResponse, ClientError> {
        let mut stream = self.connect()?;
        let wire = self.encode_request(method, path, body);
        stream
            .write_all(&wire)
            .and_then(|()| stream.flush())
            .map_err(|source| self.io(source))?;
        let head_only = method.eq_ignore_ascii_case("HEAD");
        read_response(&mut stream, head_only).map_err(|e| match e {
            ReadError::Io(source) => self.io(source),
            ReadError::Malformed(reason) => ClientError::Malformed {
                endpoint: self.endpoint.to_string(),
                reason,
            },
        })
    }

    /// `GET path` decoded from JSON; a 204 decodes as JSON `null` (so
    /// `Option<T>` reads it as `None`).
    pub fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let response = self.request("GET", path, None)?.success()?;
        let body: &[u8] = if response.status == 204 || response.body.is_empty() {
            b"null"
        } else {
            &response.body
        };
        serde_json::from_slice(body).map_err(|source| ClientError::Decode {
            path: path.to_owned(),
            source,
        })
    }

    /// `GET path` as text (`/metrics`).
    pub fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let response = self.request("GET", path, None)?.success()?;
        Ok(String::from_utf8_lossy(&response.body).into_owned())
    }

    /// `PUT path` with `body` as JSON; the 2xx response.
    pub fn put_json<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<ApiResponse, ClientError> {
        let body = serde_json::to_vec(body).map_err(ClientError::Encode)?;
        self.request("PUT", path, Some(&body))?.success()
    }

    /// `PUT path` without a body (`vm.boot`, `vm.pause`, ...); the 2xx
    /// response.
    pub fn put(&self, path: &str) -> Result<ApiResponse, ClientError> {
        self.request("PUT", path, None)?.success()
    }

    fn connect(&self) -> Result<Box<dyn ReadWrite>, ClientError> {
        let connect_error = |source| ClientError::Connect {
            endpoint: self.endpoint.to_string(),
            source,
        };
        let stream: Box<dyn ReadWrite> = match &self.endpoint {
            Endpoint::Unix(path) => {
                let s = UnixStream::connect(path).map_err(connect_error)?;
                s.set_read_timeout(Some(self.timeout))
                    .and_then(|()| s.set_write_timeout(Some(self.timeout)))
                    .map_err(|e| self.io(e))?;
                Box::new(s)
            }
            Endpoint::Tcp(addr) => {
                let s = TcpStream::connect_timeout(addr, self.timeout).map_err(connect_error)?;
                s.set_read_timeout(Some(self.timeout))
                    .and_then(|()| s.set_write_timeout(Some(self.timeout)))
                    .and_then(|()| s.set_nodelay(true))
                    .map_err(|e| self.io(e))?;
                Box::new(s)
            }
        };
        Ok(stream)
    }

    fn encode_request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Vec<u8> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: tiervisor-api-client/{}\r\n\
             Accept: application/json, text/plain\r\nConnection: close\r\n",
            env!("CARGO_PKG_VERSION")
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        match body {
            Some(body) => head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            )),
            None if method.eq_ignore_ascii_case("PUT") => head.push_str("Content-Length: 0\r\n"),
            None => {}
        }
        head.push_str("\r\n");
        let mut wire = head.into_bytes();
        wire.extend_from_slice(body.unwrap_or_default());
        wire
    }

    fn io(&self, source: io::Error) -> ClientError {
        ClientError::Io {
            endpoint: self.endpoint.to_string(),
            source,
        }
    }
}

/// A stream either kind of socket gives.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

enum ReadError {
    Io(io::Error),
    Malformed(String),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Reads one response (skipping interim 1xx ones).
fn read_response(stream: &mut dyn ReadWrite, head_only: bool) -> Result<ApiResponse, ReadError> {
    let mut buf = Vec::new();
    loop {
        let (status, headers, head_len) = read_head(stream, &mut buf)?;
        buf.drain(..head_len);
        if (100..200).contains(&status) {
            continue;
        }
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim())
        };
        if header("transfer-encoding").is_some() {
            return Err(ReadError::Malformed(
                "transfer-encoded responses are not supported".into(),
            ));
        }
        let no_body = head_only || status == 204 || status == 304;
        let body = match header("content-length") {
            _ if no_body => Vec::new(),
            Some(length) => {
                let length: u64 = length
                    .parse()
                    .map_err(|_| ReadError::Malformed(format!("bad content-length '{length}'")))?;
                if length > MAX_RESPONSE_BODY {
                    return Err(ReadError::Malformed(format!(
                        "body of {length} bytes is above the client's limit"
                    )));
                }
                read_exactly(stream, buf, length as usize)?
            }
            None => {
                stream
                    .take(MAX_RESPONSE_BODY)
                    .read_to_end(&mut buf)
                    .map_err(ReadError::Io)?;
                buf
            }
        };
        return Ok(ApiResponse {
            status,
            headers,
            body,
        });
    }
}

type Head = (u16, Vec<(String, String)>, usize);

fn read_head(stream: &mut dyn ReadWrite, buf: &mut Vec<u8>) -> Result<Head, ReadError> {
    let mut chunk = [0u8; 8192];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let status = response.code.unwrap_or_default();
                let headers = response
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_owned(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                return Ok((status, headers, len));
            }
            Ok(httparse::Status::Partial) if buf.len() > MAX_RESPONSE_HEAD => {
                return Err(ReadError::Malformed("response head too large".into()));
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(ReadError::Malformed(e.to_string())),
        }
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::Io(e)),
        };
        if n == 0 {
            return Err(ReadError::Malformed(if buf.is_empty() {
                "connection closed without a response".into()
            } else {
                "connection closed inside the response head".into()
            }));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn read_exactly(
    stream: &mut dyn ReadWrite,
    mut buf: Vec<u8>,
    length: usize,
) -> Result<Vec<u8>, ReadError> {
    if buf.len() < length {
        let missing = length - buf.len();
        let start = buf.len();
        buf.resize(length, 0);
        stream.read_exact(&mut buf[start..]).map_err(|e| {
            if e.kind() == ErrorKind::UnexpectedEof {
                ReadError::Malformed(format!("body ended {missing} bytes short or less"))
            } else {
                ReadError::Io(e)
            }
        })?;
    }
    buf.truncate(length);
    Ok(buf)
}

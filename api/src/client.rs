//! A blocking HTTP/1.1 client for the API, over the unix socket or TCP:
//! one connection per request (`Connection: close`).
//!
//! Stand-in with the agreed interface until the server's own client
//! replaces it; `tierctl` uses only [`ApiClient::unix`],
//! [`ApiClient::tcp`], [`ApiClient::request`] and [`ApiResponse`].

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::types::ErrorBody;

/// How long a request may take to send or to answer.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest response accepted (a full page of frames is a few MiB).
const MAX_RESPONSE: u64 = 256 << 20;

/// Why a request failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The server could not be reached.
    #[error("cannot connect to {target}")]
    Connect {
        /// The socket path or address.
        target: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Sending the request or reading the response failed.
    #[error("i/o error talking to {target}")]
    Io {
        /// The socket path or address.
        target: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The response is not HTTP/1.1 as expected.
    #[error("malformed response: {0}")]
    BadResponse(String),
    /// The server answered with an error status.
    #[error("HTTP {status}: {}", .body.error)]
    Api {
        /// The status.
        status: u16,
        /// The server's error body.
        body: ErrorBody,
    },
    /// A body did not (de)serialize.
    #[error("bad JSON body")]
    Json(#[source] serde_json::Error),
}

/// A response: status, headers (names lowercased) and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiResponse {
    /// HTTP status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

#[derive(Clone, Debug)]
enum Target {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Target::Unix(path) => path.display().to_string(),
            Target::Tcp(addr) => addr.to_string(),
        }
    }
}

/// A client of one tiervisor API server.
#[derive(Clone, Debug)]
pub struct ApiClient {
    target: Target,
    token: Option<String>,
}

impl ApiClient {
    /// A client of the server on the unix socket `path`.
    pub fn unix(path: impl Into<PathBuf>) -> ApiClient {
        ApiClient {
            target: Target::Unix(path.into()),
            token: None,
        }
    }

    /// A client of the server at `addr`, sending `token` as a bearer token.
    pub fn tcp(addr: SocketAddr, token: Option<String>) -> ApiClient {
        ApiClient {
            target: Target::Tcp(addr),
            token,
        }
    }

    /// Sends one request; any HTTP status is an `Ok` response.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<ApiResponse, ClientError> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAccept: application/json\r\n"
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        let body = body.unwrap_or_default();
        if !body.is_empty() || method != "GET" {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let raw = self.exchange(head.as_bytes(), body)?;
        parse_response(&raw)
    }

    /// `GET path`, the 2xx body parsed as `T`.
    pub fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let response = checked(self.request("GET", path, None)?)?;
        serde_json::from_slice(&response.body).map_err(ClientError::Json)
    }

    /// `PUT path` with `body` as JSON; a non-2xx status is an error.
    pub fn put_json<B: Serialize>(&self, path: &str, body: &B) -> Result<ApiResponse, ClientError> {
        let bytes = serde_json::to_vec(body).map_err(ClientError::Json)?;
        checked(self.request("PUT", path, Some(&bytes))?)
    }

    fn exchange(&self, head: &[u8], body: &[u8]) -> Result<Vec<u8>, ClientError> {
        let target = self.target.describe();
        let connect_error = |source| ClientError::Connect {
            target: target.clone(),
            source,
        };
        let io_error = |source| ClientError::Io {
            target: target.clone(),
            source,
        };
        match &self.target {
            Target::Unix(path) => {
                let stream = UnixStream::connect(path).map_err(connect_error)?;
                stream
                    .set_read_timeout(Some(IO_TIMEOUT))
                    .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)))
                    .and_then(|()| talk(stream, head, body))
                    .map_err(io_error)
            }
            Target::Tcp(addr) => {
                let stream = TcpStream::connect_timeout(addr, IO_TIMEOUT).map_err(connect_error)?;
                stream
                    .set_read_timeout(Some(IO_TIMEOUT))
                    .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)))
                    .and_then(|()| talk(stream, head, body))
                    .map_err(io_error)
            }
        }
    }
}

fn talk<S: Read + Write>(mut stream: S, head: &[u8], body: &[u8]) -> io::Result<Vec<u8>> {
    stream.write_all(head)?;
    stream.write_all(body)?;
    stream.flush()?;
    let mut raw = Vec::new();
    stream.take(MAX_RESPONSE).read_to_end(&mut raw)?;
    Ok(raw)
}

fn checked(response: ApiResponse) -> Result<ApiResponse, ClientError> {
    if (200..300).contains(&response.status) {
        return Ok(response);
    }
    let body = serde_json::from_slice(&response.body).unwrap_or_else(|_| ErrorBody {
        error: String::from_utf8_lossy(&response.body).into_owned(),
        detail: serde_json::Value::Null,
    });
    Err(ClientError::Api {
        status: response.status,
        body,
    })
}

fn parse_response(raw: &[u8]) -> Result<ApiResponse, ClientError> {
    let bad = |what: &str| ClientError::BadResponse(what.to_owned());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("headers are not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad("no status code"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok());
    if let Some(length) = length {
        if body.len() < length {
            return Err(bad("body shorter than Content-Length"));
        }
        body.truncate(length);
    }
    Ok(ApiResponse {
        status,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_headers_and_body() {
        let r = parse_response(
            b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}xx",
        )
        .unwrap();
        assert_eq!(r.status, 409);
        assert_eq!(
            r.headers[0],
            ("content-type".into(), "application/json".into())
        );
        assert_eq!(r.body, b"{}");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn missing_socket_is_an_error_naming_it() {
        let e = ApiClient::unix("/nonexistent/tiervisor.sock")
            .request("GET", "/api/v1/vmm.ping", None)
            .unwrap_err();
        assert!(
            format!("{e}").contains("/nonexistent/tiervisor.sock"),
            "{e}"
        );
    }
}

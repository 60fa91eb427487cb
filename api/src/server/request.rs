//! Reading requests off a connection: the head (request line and
//! headers, parsed by `httparse`) within the byte, header-count and time
//! limits, then a Content-Length body. Bytes of a pipelined next request
//! stay buffered for the next call.

use std::io::{ErrorKind, Read};
use std::time::{Duration, Instant};

use crate::server::api_error::ApiError;
use crate::server::stream::Stream;

/// What one request may take.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Request line plus headers, in bytes.
    pub max_head_bytes: usize,
    /// Header fields.
    pub max_headers: usize,
    /// Body bytes.
    pub max_body_bytes: usize,
    /// From a request's first byte to its last.
    pub request_timeout: Duration,
    /// Between requests on a kept-alive connection.
    pub idle_timeout: Duration,
}

/// Why no request could be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Tell the client this, then close.
    Respond(ApiError),
    /// The client is gone or the connection failed: just close.
    Gone,
}

/// A request line and its headers.
#[derive(Debug)]
pub(crate) struct RequestHead {
    /// The method, as sent (methods are case-sensitive).
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// What follows `?`, if anything does.
    pub query: Option<String>,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub minor_version: u8,
    /// The whole request (body too) must be in by then.
    pub deadline: Instant,
    /// Names lowercased.
    headers: Vec<(String, Vec<u8>)>,
}

impl RequestHead {
    /// The first value of header `name` (lowercase).
    pub fn header<'a>(&'a self, name: &'a str) -> Option<&'a [u8]> {
        self.headers(name).next()
    }

    /// Every value of header `name` (lowercase).
    pub fn headers<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// Whether the client wants the connection kept open afterwards.
    pub fn keep_alive(&self) -> bool {
        let tokens = |token: &str| {
            self.headers("connection").any(|v| {
                v.split(|b| *b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
            })
        };
        if tokens("close") {
            return false;
        }
        self.minor_version >= 1 || tokens("keep-alive")
    }

    /// Whether the client waits for `100 Continue` before the body.
    pub fn expects_continue(&self) -> bool {
        self.header("expect")
            .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"100-continue"))
    }

    /// The body's length from Content-Length (0 without one). A body
    /// framed by Transfer-Encoding (chunked) is refused with 411: every
    /// body this API takes is small and known in advance.
    pub fn body_length(&self) -> Result<u64, ApiError> {
        if self.header("transfer-encoding").is_some() {
            return Err(ApiError::LengthRequired);
        }
        let mut length = None;
        for value in self.headers("content-length") {
            for item in value.split(|b| *b == b',') {
                let n = parse_length(item.trim_ascii()).ok_or_else(|| {
                    ApiError::bad_field(
                        Some("content-length"),
                        "not a decimal number in 0..=18446744073709551615",
                    )
                })?;
                if length.is_some_and(|l| l != n) {
                    return Err(ApiError::bad_field(
                        Some("content-length"),
                        "conflicting values",
                    ));
                }
                length = Some(n);
            }
        }
        Ok(length.unwrap_or(0))
    }
}

fn parse_length(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Reads requests off one connection.
#[derive(Debug)]
pub(crate) struct RequestReader {
    stream: Stream,
    buf: Vec<u8>,
    limits: Limits,
}

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 8192;

impl RequestReader {
    /// Reads from `stream`.
    pub fn new(stream: Stream, limits: Limits) -> Self {
        RequestReader {
            stream,
            buf: Vec::new(),
            limits,
        }
    }

    /// The connection, to write responses on.
    pub fn stream(&mut self) -> &mut Stream {
        &mut self.stream
    }

    /// The connection, once no more requests are read from it.
    pub fn into_stream(self) -> Stream {
        self.stream
    }

    /// The next request's head; `None` when the client closed the
    /// connection or left it idle past the idle timeout between requests.
    pub fn next_head(&mut self) -> Result<Option<RequestHead>, ReadError> {
        let mut deadline = None;
        loop {
            if !self.buf.is_empty() {
                let d =
                    *deadline.get_or_insert_with(|| Instant::now() + self.limits.request_timeout);
                if let Some(head) = self.parse_head(d)? {
                    return Ok(Some(head));
                }
            }
            let timeout = match deadline {
                None => self.limits.idle_timeout,
                Some(d) => self.time_left(d)?,
            };
            match self.fill(timeout) {
                Ok(true) => {}
                Ok(false) if self.buf.is_empty() => return Ok(None),
                Ok(false) => return Err(ReadError::Gone),
                Err(ReadError::Respond(_)) if deadline.is_none() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads a body of `length` bytes (checked against the limit by the
    /// caller) by `deadline`.
    pub fn read_body(&mut self, length: usize, deadline: Instant) -> Result<Vec<u8>, ReadError> {
        while self.buf.len() < length {
            let timeout = self.time_left(deadline)?;
            if !self.fill(timeout)? {
                return Err(ReadError::Gone);
            }
        }
        Ok(self.buf.drain(..length).collect())
    }

    /// Parses the buffered head if it is complete.
    fn parse_head(&mut self, deadline: Instant) -> Result<Option<RequestHead>, ReadError> {
        let too_large = || {
            ReadError::Respond(ApiError::HeaderTooLarge {
                limit: self.limits.max_head_bytes,
                max_headers: self.limits.max_headers,
            })
        };
        let mut headers = vec![httparse::EMPTY_HEADER; self.limits.max_headers];
        let mut request = httparse::Request::new(&mut headers);
        let length = match request.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if self.buf.len() >= self.limits.max_head_bytes => {
                return Err(too_large());
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(too_large()),
            Err(e) => {
                return Err(ReadError::Respond(ApiError::bad_request(format!(
                    "malformed request head: {e}"
                ))));
            }
        };
        if length > self.limits.max_head_bytes {
            return Err(too_large());
        }
        // Complete heads always have these.
        let (Some(method), Some(target), Some(minor_version)) =
            (request.method, request.path, request.version)
        else {
            return Err(ReadError::Respond(ApiError::bad_request(
                "malformed request line",
            )));
        };
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
            None => (target.to_owned(), None),
        };
        let head = RequestHead {
            method: method.to_owned(),
            path,
            query,
            minor_version,
            deadline,
            headers: request
                .headers
                .iter()
                .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
                .collect(),
        };
        self.buf.drain(..length);
        Ok(Some(head))
    }

    fn time_left(&self, deadline: Instant) -> Result<Duration, ReadError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.timed_out());
        }
        Ok(left)
    }

    fn timed_out(&self) -> ReadError {
        ReadError::Respond(ApiError::RequestTimeout(
            self.limits.request_timeout.as_millis(),
        ))
    }

    /// Reads what arrives within `timeout`; `false` at end-of-file.
    fn fill(&mut self, timeout: Duration) -> Result<bool, ReadError> {
        self.stream
            .set_read_timeout(Some(timeout))
            .map_err(|_| ReadError::Gone)?;
        let mut chunk = [0u8; READ_CHUNK];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(self.timed_out());
                }
                Err(_) => return Err(ReadError::Gone),
            }
        }
    }
}

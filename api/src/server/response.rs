//! A response as handlers build it, and its HTTP/1.1 wire form.

use std::io::{self, Write};

use serde::Serialize;

use crate::server::api_error::ApiError;
use crate::types::ErrorBody;

/// Content type of JSON bodies.
pub(crate) const JSON: &str = "application/json";
/// Content type of `/metrics` (Prometheus text exposition format 0.0.4).
pub(crate) const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Something the connection does once the response has been sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterResponse {
    /// Tell [`ApiServer::wait_for_shutdown`](super::ApiServer::wait_for_shutdown)
    /// that `vmm.shutdown` has been answered, and close the connection.
    ShutdownVmm,
}

/// The Connection header a response carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Connection {
    /// `Connection: close`: the server closes after the response.
    Close,
    /// `Connection: keep-alive`, for HTTP/1.0 clients that asked for it.
    KeepAlive,
    /// None: HTTP/1.1 keeps the connection by default.
    Default,
}

/// A response: status, headers, body.
#[derive(Debug)]
pub(crate) struct Response {
    status: u16,
    content_type: Option<&'static str>,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    send_body: bool,
    after: Option<AfterResponse>,
}

impl Response {
    /// 200 with `value` as JSON.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Response, ApiError> {
        Self::json_with_status(200, value)
    }

    /// `status` with `value` as JSON.
    pub fn json_with_status<T: Serialize + ?Sized>(
        status: u16,
        value: &T,
    ) -> Result<Response, ApiError> {
        let body = serde_json::to_vec(value)
            .map_err(|e| ApiError::Internal(format!("cannot encode the response: {e}")))?;
        Ok(Response::with_body(status, JSON, body))
    }

    /// An error response (serialising an [`ErrorBody`] cannot fail).
    pub fn error_body(status: u16, body: &ErrorBody) -> Response {
        let body = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
        Response::with_body(status, JSON, body)
    }

    /// `status` with a body of `content_type`.
    pub fn with_body(status: u16, content_type: &'static str, body: Vec<u8>) -> Response {
        Response {
            status,
            content_type: Some(content_type),
            headers: Vec::new(),
            body,
            send_body: true,
            after: None,
        }
    }

    /// A bodiless response (204, 202).
    pub fn empty(status: u16) -> Response {
        Response {
            status,
            content_type: None,
            headers: Vec::new(),
            body: Vec::new(),
            send_body: true,
            after: None,
        }
    }

    /// Adds a header.
    pub fn header(&mut self, name: &'static str, value: String) {
        self.headers.push((name, value));
    }

    /// Sets what happens once the response is sent.
    pub fn then(mut self, after: AfterResponse) -> Response {
        self.after = Some(after);
        self
    }

    /// The response to a HEAD request: headers as for GET, no body
    /// (RFC 9110 §9.3.2).
    pub fn without_body(mut self) -> Response {
        self.send_body = false;
        self
    }

    /// What happens once the response is sent.
    pub fn after(&self) -> Option<AfterResponse> {
        self.after
    }

    /// Writes the response with the `connection` header.
    pub fn write_to(&self, out: &mut impl Write, connection: Connection) -> io::Result<()> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        if let Some(ct) = self.content_type {
            head.push_str(&format!("Content-Type: {ct}\r\n"));
        }
        // 204 and 1xx carry no body and no length (RFC 9110 §8.6).
        if self.status != 204 {
            head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        match connection {
            Connection::Close => head.push_str("Connection: close\r\n"),
            Connection::KeepAlive => head.push_str("Connection: keep-alive\r\n"),
            Connection::Default => {}
        }
        head.push_str("\r\n");
        let mut wire = head.into_bytes();
        if self.send_body {
            wire.extend_from_slice(&self.body);
        }
        out.write_all(&wire)?;
        out.flush()
    }
}

impl From<ApiError> for Response {
    /// The error's status and JSON body, with the headers the status
    /// needs.
    fn from(error: ApiError) -> Self {
        let mut response = Response::error_body(error.status(), &error.body());
        match &error {
            ApiError::Unauthorized(_) => {
                response.header("WWW-Authenticate", "Bearer realm=\"tiervisor\"".into());
            }
            ApiError::MethodNotAllowed { allow, .. } => {
                response.header("Allow", allow.clone());
            }
            ApiError::Unavailable(_) => {
                response.header("Retry-After", "1".into());
            }
            _ => {}
        }
        response
    }
}

/// The reason phrase of the statuses the server sends.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_content_has_no_length_or_body() {
        let mut wire = Vec::new();
        Response::empty(204)
            .write_to(&mut wire, Connection::Default)
            .unwrap();
        assert_eq!(wire, b"HTTP/1.1 204 No Content\r\n\r\n");
    }

    #[test]
    fn head_responses_keep_the_length_and_drop_the_body() {
        let mut wire = Vec::new();
        Response::json(&[1, 2])
            .unwrap()
            .without_body()
            .write_to(&mut wire, Connection::Default)
            .unwrap();
        assert!(wire.ends_with(b"Content-Length: 5\r\n\r\n"));
    }

    #[test]
    fn json_has_type_length_and_close() {
        let mut wire = Vec::new();
        Response::json(&[1, 2])
            .unwrap()
            .write_to(&mut wire, Connection::Close)
            .unwrap();
        assert_eq!(
            String::from_utf8(wire).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\
             Connection: close\r\n\r\n[1,2]"
        );
    }
}

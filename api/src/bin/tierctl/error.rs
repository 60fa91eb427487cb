//! What can go wrong in tierctl, and the exit status each failure gives.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

use api::client::ClientError;

use crate::render::api_error::render_api_error;

/// Exit status when the server refused a request or an input was bad.
pub const EXIT_FAILED: u8 = 1;
/// Exit status when the server cannot be reached.
pub const EXIT_UNREACHABLE: u8 = 2;

/// A failed tierctl command.
#[derive(Debug, Error)]
pub enum TierctlError {
    /// No answer from the server: nothing listens on the socket, the
    /// connection broke, or what came back is not HTTP.
    #[error("cannot reach tiervisor at {target}")]
    Unreachable {
        /// `unix socket PATH` or `tcp ADDR`.
        target: String,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// The server answered with an error status.
    #[error("HTTP {status}")]
    Refused {
        /// The status.
        status: u16,
        /// The response body (an `ErrorBody` as JSON, normally).
        body: Vec<u8>,
    },
    /// A 2xx response whose body is not what the endpoint returns.
    #[error("unexpected response from {path}")]
    BadResponse {
        /// The endpoint.
        path: String,
        /// Why it did not parse.
        #[source]
        source: serde_json::Error,
    },
    /// A request body could not be encoded.
    #[error("cannot encode the request")]
    Encode(#[source] serde_json::Error),
    /// An input file could not be read.
    #[error("cannot read {}", .path.display())]
    ReadInput {
        /// The file (`-` for stdin).
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// An input file is not the JSON the endpoint takes.
    #[error("{}: not a valid {what}", .path.display())]
    BadInput {
        /// The file (`-` for stdin).
        path: PathBuf,
        /// What it should hold.
        what: &'static str,
        /// The parse error (line, column, field).
        #[source]
        source: serde_json::Error,
    },
    /// The token file is empty.
    #[error("token file {} is empty", .0.display())]
    EmptyToken(PathBuf),
    /// Output could not be written.
    #[error("cannot write {what}")]
    Write {
        /// stdout or the file.
        what: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

impl TierctlError {
    /// The process exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            TierctlError::Unreachable { .. } => EXIT_UNREACHABLE,
            _ => EXIT_FAILED,
        }
    }
}

/// What tierctl prints on stderr for `e`: the server's error and detail
/// for a refused request (its raw body with `--json`), else the error and
/// its causes; nothing when stdout was closed early (`tierctl metrics |
/// head`).
pub fn report_text(e: &TierctlError, json: bool) -> Option<String> {
    Some(match e {
        TierctlError::Refused { body, .. } if json && !body.is_empty() => {
            format!("{}\n", String::from_utf8_lossy(body).trim_end())
        }
        TierctlError::Refused { status, body } => render_api_error(*status, body),
        TierctlError::Write { source, .. } if source.kind() == io::ErrorKind::BrokenPipe => {
            return None;
        }
        TierctlError::Unreachable { .. } => format!(
            "tierctl: {}\n(is tiervisor running with --api-socket, or --api-tcp for TCP?)\n",
            with_causes(e)
        ),
        other => format!("tierctl: {}\n", with_causes(other)),
    })
}

/// `error` followed by its causes, `: `-separated.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use api::client::ApiClient;

    use super::*;

    /// What the client returns for a socket that does not exist.
    fn unreachable() -> TierctlError {
        let source = ApiClient::unix("/nonexistent/x.sock")
            .request("GET", "/api/v1/vmm.ping", None)
            .unwrap_err();
        TierctlError::Unreachable {
            target: "unix socket /nonexistent/x.sock".into(),
            source,
        }
    }

    #[test]
    fn only_an_unreachable_server_exits_2() {
        let unreachable = unreachable();
        assert_eq!(unreachable.exit_code(), 2);
        let text = with_causes(&unreachable);
        assert!(
            text.starts_with("cannot reach tiervisor at unix socket /nonexistent/x.sock: "),
            "{text}"
        );
        // The client's own cause (the OS error) is in the chain.
        assert!(text.ends_with("(os error 2)"), "{text}");
        let refused = TierctlError::Refused {
            status: 409,
            body: Vec::new(),
        };
        assert_eq!(refused.exit_code(), 1);
        assert_eq!(TierctlError::EmptyToken("t".into()).exit_code(), 1);
    }

    #[test]
    fn stderr_shows_the_server_error_or_the_cause_chain() {
        let refused = TierctlError::Refused {
            status: 404,
            body: br#"{"error": "no VM has been created", "detail": null}"#.to_vec(),
        };
        assert_eq!(
            report_text(&refused, false).unwrap(),
            "error: no VM has been created (HTTP 404)\n"
        );
        assert_eq!(
            report_text(&refused, true).unwrap(),
            "{\"error\": \"no VM has been created\", \"detail\": null}\n"
        );
        let text = report_text(&unreachable(), true).unwrap();
        assert!(
            text.starts_with(
                "tierctl: cannot reach tiervisor at unix socket /nonexistent/x.sock: "
            ),
            "{text}"
        );
        let closed = TierctlError::Write {
            what: "stdout".into(),
            source: io::Error::from(io::ErrorKind::BrokenPipe),
        };
        assert_eq!(report_text(&closed, false), None);
    }
}

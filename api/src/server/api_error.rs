//! Every error response the server sends, and the one place that says
//! which HTTP status each gets — including the mapping from the VMM's
//! [`ControlError`].

use serde_json::{Value, json};
use thiserror::Error;

use crate::control::ControlError;
use crate::types::ErrorBody;

/// Why a request failed, as the client will be told.
#[derive(Debug, Error)]
pub(crate) enum ApiError {
    /// The request is malformed or a value in it is wrong (400).
    #[error("{message}")]
    BadRequest {
        /// One line.
        message: String,
        /// The field and the reason, or null.
        detail: Value,
    },
    /// TCP without the right bearer token (401).
    #[error("{0}")]
    Unauthorized(&'static str),
    /// No route has this path (404).
    #[error("no route {0}")]
    NotFound(String),
    /// The path exists but not with this method (405).
    #[error("{method} is not allowed on {path} (allowed: {allow})")]
    MethodNotAllowed {
        /// The method asked for.
        method: String,
        /// The path.
        path: String,
        /// The methods the path takes, comma-separated.
        allow: String,
    },
    /// The request did not arrive in time (408).
    #[error("request not received within {0} ms")]
    RequestTimeout(u128),
    /// A body framed other than by Content-Length (411).
    #[error("transfer-encoding is not supported: send the body with a content-length")]
    LengthRequired,
    /// The body is larger than the limit (413).
    #[error("request body of {length} bytes exceeds the limit of {limit} bytes")]
    PayloadTooLarge {
        /// Content-Length of the request.
        length: u64,
        /// The server's limit.
        limit: usize,
    },
    /// The request line and headers exceed the limits (431).
    #[error("request head exceeds {limit} bytes or {max_headers} header fields")]
    HeaderTooLarge {
        /// Byte limit of the head.
        limit: usize,
        /// Most header fields.
        max_headers: usize,
    },
    /// The connection cap is reached (503).
    #[error("too many connections ({0}); retry later")]
    Unavailable(usize),
    /// The VMM refused the request.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A fault in the server itself (500).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A 400 with a field and the reason it is wrong.
    pub fn bad_field(field: Option<&str>, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        let message = match field {
            Some(f) => format!("{f}: {reason}"),
            None => reason.clone(),
        };
        ApiError::BadRequest {
            message,
            detail: json!({ "field": field, "reason": reason }),
        }
    }

    /// A 400 about the request as a whole.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            message: message.into(),
            detail: Value::Null,
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::BadRequest { .. } => 400,
            ApiError::Unauthorized(_) => 401,
            ApiError::NotFound(_) => 404,
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::RequestTimeout(_) => 408,
            ApiError::LengthRequired => 411,
            ApiError::PayloadTooLarge { .. } => 413,
            ApiError::HeaderTooLarge { .. } => 431,
            ApiError::Unavailable(_) => 503,
            ApiError::Internal(_) => 500,
            ApiError::Control(e) => match e {
                ControlError::NoVm => 404,
                ControlError::WrongState { .. }
                | ControlError::NoTiering
                | ControlError::Busy(_) => 409,
                ControlError::Invalid { .. } => 400,
                ControlError::Internal(_) => 500,
            },
        }
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody {
        let detail = match self {
            ApiError::BadRequest { detail, .. } => detail.clone(),
            ApiError::MethodNotAllowed { allow, .. } => json!({ "allow": allow }),
            ApiError::PayloadTooLarge { length, limit } => {
                json!({ "length": length, "limit": limit })
            }
            ApiError::Control(ControlError::WrongState { state, action }) => {
                json!({ "state": state, "action": action })
            }
            ApiError::Control(ControlError::Invalid { field, reason }) => {
                json!({ "field": field, "reason": reason })
            }
            _ => Value::Null,
        };
        ErrorBody {
            error: self.to_string(),
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::VmState;

    #[test]
    fn control_errors_map_to_one_status_each() {
        let cases = [
            (ControlError::NoVm, 404),
            (
                ControlError::WrongState {
                    state: VmState::Created,
                    action: "pause",
                },
                409,
            ),
            (ControlError::NoTiering, 409),
            (ControlError::Busy("a tier measurement"), 409),
            (ControlError::invalid("memory.size", "zero"), 400),
            (ControlError::Internal("boom".into()), 500),
        ];
        for (e, status) in cases {
            assert_eq!(ApiError::from(e).status(), status);
        }
    }

    #[test]
    fn invalid_names_field_and_reason() {
        let body = ApiError::from(ControlError::invalid("memory.tiers[1].size", "too big")).body();
        assert_eq!(body.error, "memory.tiers[1].size: too big");
        assert_eq!(
            body.detail,
            json!({ "field": "memory.tiers[1].size", "reason": "too big" })
        );
    }
}

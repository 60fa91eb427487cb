//! Bearer-token check for TCP clients.

use crate::server::api_error::ApiError;
use crate::server::request::RequestHead;

/// Checks `Authorization: Bearer <token>` against `token`.
pub(crate) fn check_bearer(head: &RequestHead, token: &str) -> Result<(), ApiError> {
    let value = head
        .header("authorization")
        .ok_or(ApiError::Unauthorized("missing bearer token"))?;
    let presented = bearer_token(value).ok_or(ApiError::Unauthorized(
        "authorization is not 'Bearer <token>'",
    ))?;
    if constant_time_eq(presented, token.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized("wrong bearer token"))
    }
}

/// The token of a `Bearer` credential (scheme matched without case,
/// RFC 9110 §11.1).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
        return None;
    }
    let token = rest.trim_ascii_start();
    (!token.is_empty()).then_some(token)
}

/// Compares without an early exit, so the time taken does not tell how
/// many leading bytes matched. The length is not secret.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_bearer_scheme() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer   abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearerabc"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bear"), None);
    }

    #[test]
    fn compares_whole_tokens() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}

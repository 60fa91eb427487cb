//! An error response as an operator reads it: the server's `error` and
//! its `detail`.

use api::types::ErrorBody;

/// The lines tierctl prints on stderr for a response with `status` and
/// `body`: `error: ...` then the detail, indented. A body that is not an
/// `ErrorBody` is shown as text.
pub fn render_api_error(status: u16, body: &[u8]) -> String {
    let Ok(parsed) = serde_json::from_slice::<ErrorBody>(body) else {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        return if text.is_empty() {
            format!("error: HTTP {status}\n")
        } else {
            format!("error: HTTP {status}: {text}\n")
        };
    };
    let mut out = format!("error: {} (HTTP {status})\n", parsed.error);
    match &parsed.detail {
        serde_json::Value::Null => {}
        serde_json::Value::Object(fields) => {
            // Only what the error line does not say already (the server
            // puts a bad field and its reason in both).
            let said = |v: &serde_json::Value| v.is_null() || parsed.error.contains(&plain(v));
            let field = fields.get("field").filter(|v| v.is_string());
            let reason = fields.get("reason").filter(|v| v.is_string());
            let mut shown_pair = false;
            if let (Some(field), Some(reason)) = (field, reason) {
                shown_pair = true;
                if !(said(field) && said(reason)) {
                    out.push_str(&format!("  {}: {}\n", plain(field), plain(reason)));
                }
            }
            for (key, value) in fields {
                let in_pair = shown_pair && (key == "field" || key == "reason");
                if !in_pair && !said(value) {
                    out.push_str(&format!("  {key}: {}\n", plain(value)));
                }
            }
        }
        other => out.push_str(&format!("  {}\n", plain(other))),
    }
    out
}

/// Strings without quotes, everything else as compact JSON.
fn plain(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_and_detail_are_shown() {
        let body = br#"{"error": "invalid tiering policy", "detail": {"field": "fast_quota", "reason": "max_bytes 1 GiB above capacity", "limit": 5}}"#;
        assert_eq!(
            render_api_error(400, body),
            "error: invalid tiering policy (HTTP 400)\n  \
             fast_quota: max_bytes 1 GiB above capacity\n  limit: 5\n"
        );
        assert_eq!(
            render_api_error(
                401,
                br#"{"error": "unauthorized", "detail": {"hint": "send a token"}}"#
            ),
            "error: unauthorized (HTTP 401)\n  hint: send a token\n"
        );
        assert_eq!(
            render_api_error(
                409,
                br#"{"error": "VM is running: cannot boot", "detail": null}"#
            ),
            "error: VM is running: cannot boot (HTTP 409)\n"
        );
        assert_eq!(
            render_api_error(
                500,
                br#"{"error": "internal error", "detail": "tracker died"}"#
            ),
            "error: internal error (HTTP 500)\n  tracker died\n"
        );
    }

    #[test]
    fn bodies_that_are_not_error_json_are_shown_as_text() {
        assert_eq!(
            render_api_error(404, b"no such route\n"),
            "error: HTTP 404: no such route\n"
        );
        assert_eq!(render_api_error(502, b""), "error: HTTP 502\n");
    }
}

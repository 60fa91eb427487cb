//! Request bodies from JSON, with errors that name the field (as a path,
//! `memory.tiers[0].size`) and say why.

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::server::api_error::ApiError;

/// Decodes a required JSON body.
///
/// The text is parsed first (syntax errors carry a line and column), then
/// numbers written as whole floats (`5.0`, `1e3`) become integers — JSON
/// Schema counts them as integers, serde does not — and then the value is
/// decoded into `T` with the path of the field that fails.
pub(crate) fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_field(None, "a JSON request body is required"));
    }
    let text = std::str::from_utf8(body).map_err(|e| {
        let reason = format!("not UTF-8 (invalid byte at offset {})", e.valid_up_to());
        ApiError::BadRequest {
            message: format!("request body is {reason}"),
            detail: json!({ "field": null, "reason": reason, "offset": e.valid_up_to() }),
        }
    })?;
    let mut value: Value = serde_json::from_str(text).map_err(|e| json_error(None, &e))?;
    whole_floats_to_integers(&mut value);
    serde_path_to_error::deserialize(value).map_err(path_error)
}

/// Largest integer every f64 up to it stands for exactly (2^53).
const EXACT_F64_INTEGER: f64 = 9_007_199_254_740_992.0;

fn whole_floats_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                && f.fract() == 0.0
                && f.abs() <= EXACT_F64_INTEGER
            {
                *value = if f >= 0.0 {
                    Value::from(f as u64)
                } else {
                    Value::from(f as i64)
                };
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_floats_to_integers),
        Value::Object(map) => map.values_mut().for_each(whole_floats_to_integers),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// The field an error is about, completed where serde names it only in
/// the message (missing fields, unknown fields of tagged enums).
fn path_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let inner = e.inner();
    if !inner.is_data() {
        return json_error(None, inner);
    }
    let path = e.path().to_string();
    let mut field = match path.as_str() {
        "." | "?" => None,
        p => Some(p.to_owned()),
    };
    let message = inner.to_string();
    for prefix in ["missing field `", "unknown field `"] {
        let Some(name) = message
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('`').next())
        else {
            continue;
        };
        let named = field
            .as_deref()
            .is_some_and(|f| f == name || f.ends_with(&format!(".{name}")));
        if !named {
            field = Some(match field {
                Some(f) => format!("{f}.{name}"),
                None => name.to_owned(),
            });
        }
    }
    json_error(field.as_deref(), inner)
}

/// A 400 from a serde_json error: the reason without serde's location
/// suffix, which goes into `line` and `column` instead (syntax errors
/// only: a decoded value has no position).
fn json_error(field: Option<&str>, e: &serde_json::Error) -> ApiError {
    let full = e.to_string();
    let location = format!(" at line {} column {}", e.line(), e.column());
    let mut reason = full.strip_suffix(&location).unwrap_or(&full).to_owned();
    if let Some(range) = unsigned_range(&reason) {
        reason.push_str(&format!(" (a whole number in {range})"));
    }
    if e.is_syntax() || e.is_eof() {
        reason = format!("malformed JSON: {reason}");
    }
    let message = match field {
        Some(f) => format!("{f}: {reason}"),
        None => reason.clone(),
    };
    let mut detail = json!({ "field": field, "reason": reason });
    if e.line() > 0 {
        detail["line"] = json!(e.line());
        detail["column"] = json!(e.column());
    }
    ApiError::BadRequest { message, detail }
}

/// The range of the unsigned type a type error expected: serde says
/// "expected u64" for a negative number, a fraction and 2^64 alike.
fn unsigned_range(reason: &str) -> Option<&'static str> {
    let ty = reason.rsplit("expected ").next()?;
    Some(match ty {
        "u8" => "0..=255",
        "u16" => "0..=65535",
        "u32" => "0..=4294967295",
        "u64" => "0..=18446744073709551615",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        inner: Vec<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        size: u64,
    }

    fn detail(body: &str) -> serde_json::Value {
        decode_body::<Outer>(body.as_bytes())
            .unwrap_err()
            .body()
            .detail
    }

    #[test]
    fn names_the_field_and_why() {
        let d = detail(r#"{"inner": [{"size": 1}, {"size": "x"}]}"#);
        assert_eq!(d["field"], "inner[1].size");
        assert_eq!(
            d["reason"],
            "invalid type: string \"x\", expected u64 (a whole number in 0..=18446744073709551615)"
        );
        assert_eq!(detail(r#"{"inner": [{}]}"#)["field"], "inner[0].size");
        assert_eq!(detail(r#"{}"#)["field"], "inner");
        assert_eq!(detail(r#"{"inner": [], "x": 1}"#)["field"], "x");
        assert_eq!(
            detail(r#"{"inner": [{"size": 18446744073709551616}]}"#)["field"],
            "inner[0].size"
        );
    }

    #[test]
    fn whole_floats_are_integers() {
        let ok: Outer = decode_body(br#"{"inner": [{"size": 3.0}, {"size": 1e3}]}"#).unwrap();
        assert_eq!(ok.inner[1].size, 1000);
        let d = detail(r#"{"inner": [{"size": 3.5}]}"#);
        assert_eq!(d["field"], "inner[0].size");
        assert!(
            d["reason"]
                .as_str()
                .unwrap()
                .contains("floating point `3.5`")
        );
        // Beyond 2^53 a float no longer names one integer.
        let d = detail(r#"{"inner": [{"size": 1e17}]}"#);
        assert_eq!(d["field"], "inner[0].size");
        let d = detail(r#"{"inner": [{"size": -1.0}]}"#);
        assert!(
            d["reason"].as_str().unwrap().contains("integer `-1`"),
            "{d}"
        );
    }

    #[test]
    fn syntax_errors_have_a_position_and_no_field() {
        let d = detail("{\"inner\": [}");
        assert_eq!(d["field"], serde_json::Value::Null);
        assert_eq!(d["line"], 1);
        assert!(d["reason"].as_str().unwrap().starts_with("malformed JSON"));
        let trailing = detail(r#"{"inner": []} x"#);
        assert!(trailing["reason"].as_str().unwrap().contains("trailing"));
    }
}

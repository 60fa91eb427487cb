//! Query strings: `name=value` pairs, percent-decoded, each name at most
//! once; and the one query the API takes, `vm.tiering.frames`'s page.

use crate::server::api_error::ApiError;
use crate::types::{FramesQuery, MAX_FRAMES_PAGE};

/// The page asked of `vm.tiering.frames` (`?offset=&limit=`).
pub(crate) fn frames_query(query: Option<&str>) -> Result<FramesQuery, ApiError> {
    let mut page: FramesQuery = serde_json::from_str("{}")
        .map_err(|e| ApiError::Internal(format!("frames query defaults: {e}")))?;
    let (mut offset, mut limit) = (false, false);
    for (name, value) in pairs(query.unwrap_or(""))? {
        let (slot, seen) = match name.as_str() {
            "offset" => (&mut page.offset, &mut offset),
            "limit" => (&mut page.limit, &mut limit),
            _ => {
                return Err(ApiError::bad_field(
                    Some(&name),
                    "unknown query parameter (expected offset, limit)",
                ));
            }
        };
        if std::mem::replace(seen, true) {
            return Err(ApiError::bad_field(Some(&name), "given twice"));
        }
        *slot = value.parse().map_err(|_| {
            ApiError::bad_field(
                Some(&name),
                format!("'{value}' is not a whole number in 0..=18446744073709551615"),
            )
        })?;
    }
    // The document says int64, as OpenAPI spells integers; no guest has
    // that many frames anyway.
    if page.offset > i64::MAX as u64 {
        return Err(ApiError::bad_field(
            Some("offset"),
            format!("{} is above 9223372036854775807", page.offset),
        ));
    }
    if page.limit > MAX_FRAMES_PAGE {
        return Err(ApiError::bad_field(
            Some("limit"),
            format!(
                "{} is above the largest page, {MAX_FRAMES_PAGE}",
                page.limit
            ),
        ));
    }
    Ok(page)
}

/// The decoded pairs of a query string (empty items skipped).
fn pairs(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    query
        .split('&')
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (name, value) = item.split_once('=').unwrap_or((item, ""));
            Ok((decode(name)?, decode(value)?))
        })
        .collect()
}

/// Percent-decodes (and `+` to space, as forms encode it).
fn decode(text: &str) -> Result<String, ApiError> {
    let bad = |why: &str| ApiError::bad_field(Some("query"), format!("'{text}': {why}"));
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hex = rest
                    .get(..2)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| bad("bad percent-escape"))?;
                bytes.push(hex);
                rest = &rest[2..];
            }
            _ => bytes.push(b),
        }
    }
    String::from_utf8(bytes).map_err(|_| bad("not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(query: &str) -> String {
        frames_query(Some(query)).unwrap_err().to_string()
    }

    #[test]
    fn defaults_and_values() {
        let page = frames_query(None).unwrap();
        assert_eq!((page.offset, page.limit), (0, 4096));
        let page = frames_query(Some("offset=%310&limit=5&")).unwrap();
        assert_eq!((page.offset, page.limit), (10, 5));
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        assert_eq!(
            reason("offset=-1"),
            "offset: '-1' is not a whole number in 0..=18446744073709551615"
        );
        assert!(reason("offset=18446744073709551616").starts_with("offset:"));
        assert_eq!(
            reason("offset=9223372036854775808"),
            "offset: 9223372036854775808 is above 9223372036854775807"
        );
        frames_query(Some("offset=9223372036854775807")).unwrap();
        assert_eq!(
            reason("page=2"),
            "page: unknown query parameter (expected offset, limit)"
        );
        assert_eq!(reason("limit=1&limit=2"), "limit: given twice");
        assert_eq!(
            reason("limit=65537"),
            "limit: 65537 is above the largest page, 65536"
        );
        assert!(reason("offset=%zz").contains("bad percent-escape"));
        assert!(reason("offset=%ff").contains("not UTF-8"));
    }
}

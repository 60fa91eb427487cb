//! The `#define`s of a host-kernel uapi header, for the Rust tests that
//! check their hard-coded ABI constants against the C side (included with
//! `#[path]` by `access-track` and `page-copy`: one parser for both).

use std::collections::HashMap;

/// Name → value text (comments dropped) of every `#define` in `path`.
pub fn defines(path: &str) -> HashMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .filter_map(|l| {
            let (name, value) = l.split_once(char::is_whitespace)?;
            let value = value.split("/*").next().unwrap_or_default();
            Some((name.to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// The integer `name` is defined as: `N`, `0xN` or `(A << B)`, with
/// `U`/`L` suffixes.
pub fn number(defines: &HashMap<String, String>, name: &str) -> u64 {
    let v = defines
        .get(name)
        .unwrap_or_else(|| panic!("{name} not in the header: {defines:?}"));
    let v = v.trim_start_matches('(').trim_end_matches(')');
    let int = |s: &str| -> u64 {
        let s = s.trim().trim_end_matches(['U', 'L', 'u', 'l']);
        match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
            None => s.parse().unwrap(),
        }
    };
    match v.split_once("<<") {
        Some((a, b)) => int(a) << int(b),
        None => int(v),
    }
}

//! Errors from parsing a workload string and fitting it into guest memory.
//! They own copies of the offending text, so the VMM can keep them after the
//! input is gone and print them before the guest boots.

use core::fmt;

use crate::NAMES;
use crate::number::ByteSize;

/// Longest piece of user text kept in an error.
const SNIPPET_CAP: usize = 40;

/// A copy of (at most the first 40 bytes of) some user text.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Snippet {
    bytes: [u8; SNIPPET_CAP],
    len: u8,
    truncated: bool,
}

impl Snippet {
    /// Copies `text`, cut at a character boundary if it is too long.
    pub fn new(text: &str) -> Self {
        let mut s = Snippet {
            bytes: [0; SNIPPET_CAP],
            len: 0,
            truncated: false,
        };
        fmt::Write::write_str(&mut s, text).ok();
        s
    }

    /// The kept text.
    pub fn as_str(&self) -> &str {
        // Only whole characters are ever copied in.
        core::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl fmt::Write for Snippet {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for ch in text.chars() {
            let mut tmp = [0u8; 4];
            let enc = ch.encode_utf8(&mut tmp).as_bytes();
            let at = usize::from(self.len);
            if at + enc.len() > SNIPPET_CAP {
                self.truncated = true;
                break;
            }
            self.bytes[at..at + enc.len()].copy_from_slice(enc);
            self.len += enc.len() as u8;
        }
        Ok(())
    }
}

impl fmt::Display for Snippet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.truncated {
            f.write_str("...")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Snippet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Why a workload string was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The string is empty.
    Empty,
    /// The name before `:` is not one of [`NAMES`].
    UnknownWorkload {
        /// The name given.
        name: Snippet,
    },
    /// Two commas in a row, or a trailing comma.
    EmptyParam {
        /// The workload.
        workload: &'static str,
    },
    /// A parameter without `=value`.
    MissingValue {
        /// The workload.
        workload: &'static str,
        /// The parameter given.
        key: Snippet,
    },
    /// A key this workload does not have.
    UnknownKey {
        /// The workload.
        workload: &'static str,
        /// The key given.
        key: Snippet,
        /// The keys this workload accepts.
        valid: &'static [&'static str],
    },
    /// The same key twice.
    DuplicateKey {
        /// The workload.
        workload: &'static str,
        /// The key.
        key: &'static str,
    },
    /// A value that is not a number of the expected form.
    BadNumber {
        /// The workload.
        workload: &'static str,
        /// The key.
        key: &'static str,
        /// The value given.
        value: Snippet,
    },
    /// A well-formed value outside what the key allows.
    OutOfRange {
        /// The workload.
        workload: &'static str,
        /// The key.
        key: &'static str,
        /// The value given (or derived, for defaults).
        value: Snippet,
        /// What the key allows.
        reason: &'static str,
    },
    /// The buffer plus the ground-truth area do not fit in free memory.
    DoesNotFit {
        /// The workload.
        workload: &'static str,
        /// Bytes needed (0 when even the smallest buffer does not fit).
        needed: u64,
        /// Bytes of the first free range.
        free: u64,
    },
}

/// Writes `a, b, c`.
fn write_list(f: &mut fmt::Formatter<'_>, items: &[&str]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        f.write_str(item)?;
    }
    Ok(())
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Empty => {
                f.write_str("empty workload string (valid workloads: ")?;
                write_list(f, NAMES)?;
                f.write_str(")")
            }
            ParseError::UnknownWorkload { name } => {
                write!(f, "unknown workload \"{name}\" (valid workloads: ")?;
                write_list(f, NAMES)?;
                f.write_str(")")
            }
            ParseError::EmptyParam { workload } => {
                write!(f, "{workload}: empty parameter (stray comma?)")
            }
            ParseError::MissingValue { workload, key } => {
                write!(
                    f,
                    "{workload}: parameter \"{key}\" has no value (expected key=value)"
                )
            }
            ParseError::UnknownKey {
                workload,
                key,
                valid,
            } => {
                write!(f, "{workload}: unknown key \"{key}\" (valid keys: ")?;
                write_list(f, valid)?;
                f.write_str(")")
            }
            ParseError::DuplicateKey { workload, key } => {
                write!(f, "{workload}: duplicate key {key}")
            }
            ParseError::BadNumber {
                workload,
                key,
                value,
            } => write!(f, "{workload}: bad number \"{value}\" for {key}"),
            ParseError::OutOfRange {
                workload,
                key,
                value,
                reason,
            } => write!(f, "{workload}: {key}={value} out of range: {reason}"),
            ParseError::DoesNotFit {
                workload,
                needed: 0,
                free,
            } => write!(
                f,
                "{workload}: the first free range ({}) is too small for any buffer",
                ByteSize(*free)
            ),
            ParseError::DoesNotFit {
                workload,
                needed,
                free,
            } => write!(
                f,
                "{workload}: needs {} of guest memory (buffer plus ground-truth area) \
                 but the first free range has {}",
                ByteSize(*needed),
                ByteSize(*free)
            ),
        }
    }
}

impl core::error::Error for ParseError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_truncates_at_char_boundary() {
        let long = "é".repeat(30);
        let s = Snippet::new(&long);
        assert_eq!(s.as_str(), "é".repeat(20));
        assert_eq!(s.to_string(), format!("{}...", "é".repeat(20)));
        assert_eq!(Snippet::new("abc").to_string(), "abc");
        assert_eq!(format!("{:?}", Snippet::new("a\"b")), "\"a\\\"b\"");
    }
}

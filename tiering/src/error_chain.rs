//! Error reports on one line: an error and its chain of causes, as the
//! engine's `last_error` and the command-line tools print them.

/// An error and its causes on one line, for command-line reports.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        // Errors that print their source in their own message
        // (`"linux: {0}"` with `#[from]`) would repeat it.
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("outer: {0}")]
        Embeds(#[from] Inner),
        #[error("outer")]
        Names(#[source] Inner),
    }

    #[test]
    fn error_chain_names_each_cause_once() {
        assert_eq!(error_chain(&Outer::Embeds(Inner)), "outer: inner");
        assert_eq!(error_chain(&Outer::Names(Inner)), "outer: inner");
    }
}

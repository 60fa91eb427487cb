//! The Prometheus text exposition format (0.0.4): metric families with
//! their HELP and TYPE lines, samples with escaped label values.

use std::fmt::Write;

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Only goes up (names end in `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// A sample value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    /// An integer, written exactly.
    Int(u64),
    /// A float.
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(v)
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Int(v as u64)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(u64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

/// Labels of one sample.
pub(crate) type Labels<'a> = &'a [(&'a str, &'a str)];

/// A metrics page being written.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    out: String,
}

impl Exposition {
    /// An empty page.
    pub fn new() -> Self {
        Exposition::default()
    }

    /// One family: HELP, TYPE, then its samples (none: nothing written).
    pub fn family<'a>(
        &mut self,
        name: &str,
        kind: Kind,
        help: &str,
        samples: impl IntoIterator<Item = (Labels<'a>, Value)>,
    ) {
        let mut samples = samples.into_iter().peekable();
        if samples.peek().is_none() {
            return;
        }
        debug_assert!(valid_name(name), "{name}");
        debug_assert_eq!(kind == Kind::Counter, name.ends_with("_total"), "{name}");
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        // Writing to a String cannot fail.
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            self.out.push_str(name);
            if !labels.is_empty() {
                self.out.push('{');
                for (i, (label, v)) in labels.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    let _ = write!(self.out, "{label}=\"{}\"", escape_label(v));
                }
                self.out.push('}');
            }
            let _ = match value {
                Value::Int(v) => writeln!(self.out, " {v}"),
                Value::Float(v) => writeln!(self.out, " {}", float(v)),
            };
        }
    }

    /// One single-sample family per `(name, help, value)`, all of `kind`
    /// and with the same `labels`.
    pub fn singles<'a>(
        &mut self,
        kind: Kind,
        labels: Labels<'_>,
        families: impl IntoIterator<Item = (&'a str, &'a str, Value)>,
    ) {
        for (name, help, value) in families {
            self.single(name, kind, help, labels, value);
        }
    }

    /// A family with one sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, labels: Labels<'_>, v: Value) {
        self.family(name, kind, help, [(labels, v)]);
    }

    /// The page.
    pub fn finish(self) -> String {
        self.out
    }
}

fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_' || b == b':')
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b':')
}

fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// Label values escape `\`, `"` and newline.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// HELP text escapes `\` and newline.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_help_type_and_escaped_samples() {
        let mut page = Exposition::new();
        page.family(
            "tiervisor_x_bytes",
            Kind::Gauge,
            "Bytes\nof x",
            [
                (&[("vm", "a\"b\\c\nd")][..], Value::Int(3)),
                (&[][..], Value::Float(0.5)),
            ],
        );
        page.family("tiervisor_none_total", Kind::Counter, "none", []);
        assert_eq!(
            page.finish(),
            "# HELP tiervisor_x_bytes Bytes\\nof x\n# TYPE tiervisor_x_bytes gauge\n\
             tiervisor_x_bytes{vm=\"a\\\"b\\\\c\\nd\"} 3\ntiervisor_x_bytes 0.5\n"
        );
    }

    #[test]
    fn floats_in_prometheus_spelling() {
        assert_eq!(float(f64::NAN), "NaN");
        assert_eq!(float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(float(1e21), "1000000000000000000000");
        assert!(valid_name("tiervisor_a:b_1"));
        assert!(!valid_name("1abc") && !valid_name("Abc") && !valid_name(""));
    }
}

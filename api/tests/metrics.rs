//! `/metrics` parsed back as a Prometheus scraper would: HELP and TYPE
//! before every sample, valid names and labels, escaped label values, and
//! the values the VMM reported.

mod common;

use std::collections::{BTreeMap, HashMap};

use serde_json::json;

use common::{Fixture, MIB, vm_config};

/// One sample: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':')
}

/// Parses the text format, asserting its rules as it goes.
fn parse(text: &str) -> Vec<Sample> {
    assert!(text.ends_with('\n'));
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helped = HashMap::new();
    let mut samples = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            assert!(valid_name(name), "{line}");
            assert!(!help.is_empty(), "{line}");
            assert!(
                helped.insert(name.to_owned(), ()).is_none(),
                "two HELP for {name}"
            );
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge"].contains(&kind), "{line}");
            assert!(helped.contains_key(name), "TYPE before HELP: {line}");
            assert!(
                types.insert(name.to_owned(), kind.to_owned()).is_none(),
                "two TYPE for {name}"
            );
            if kind == "counter" {
                assert!(name.ends_with("_total"), "counter without _total: {name}");
            }
            current = name.to_owned();
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "{line:?}");
        let (name, labels, value) = parse_sample(line);
        assert!(valid_name(&name), "{line}");
        assert_eq!(
            name, current,
            "sample outside its family (no TYPE right before): {line}"
        );
        samples.push((name, labels, value));
    }
    samples
}

fn parse_sample(line: &str) -> Sample {
    let name_end = line.find(['{', ' ']).unwrap();
    let name = line[..name_end].to_owned();
    let mut labels = BTreeMap::new();
    let mut chars = line[name_end..].chars().peekable();
    if chars.peek() == Some(&'{') {
        chars.next();
        loop {
            let mut label = String::new();
            for c in chars.by_ref() {
                if c == '=' {
                    break;
                }
                label.push(c);
            }
            assert!(valid_label(&label), "label {label:?} in {line}");
            assert_eq!(chars.next(), Some('"'), "{line}");
            let mut value = String::new();
            loop {
                match chars.next().unwrap() {
                    '"' => break,
                    '\\' => match chars.next().unwrap() {
                        'n' => value.push('\n'),
                        c @ ('\\' | '"') => value.push(c),
                        c => panic!("bad escape \\{c} in {line}"),
                    },
                    '\n' => panic!("raw newline in {line}"),
                    c => value.push(c),
                }
            }
            assert!(labels.insert(label, value).is_none(), "{line}");
            match chars.next().unwrap() {
                ',' => {}
                '}' => break,
                c => panic!("unexpected {c} in {line}"),
            }
        }
    }
    let rest: String = chars.collect();
    let value = match rest.strip_prefix(' ').unwrap() {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
    };
    (name, labels, value)
}

fn valid_label(label: &str) -> bool {
    let mut chars = label.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn find(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .unwrap_or_else(|| panic!("no {name} {labels:?}"))
        .2
}

#[test]
fn metrics_parse_back_with_the_vms_values() {
    let f = Fixture::new();
    let c = f.client();
    let empty = parse(&c.get_text("/metrics").unwrap());
    assert_eq!(empty.len(), 1);
    assert_eq!(empty[0].0, "tiervisor_build_info");

    f.create_vm();
    c.put("/api/v1/vm.boot").unwrap();
    c.put_json(
        "/api/v1/vm.rebalance",
        &json!({ "fast_bytes": 8 * MIB, "deadline_ms": 1500 }),
    )
    .unwrap();
    let samples = parse(&c.get_text("/metrics").unwrap());
    let vm = ("vm", "vm0");
    assert_eq!(
        find(&samples, "tiervisor_vm_state", &[vm, ("state", "running")]),
        1.0
    );
    assert!(
        !samples.iter().any(|s| s.0 == "tiervisor_vm_end"),
        "no end before the VM ended"
    );
    assert_eq!(
        find(&samples, "tiervisor_vm_state", &[vm, ("state", "paused")]),
        0.0
    );
    assert_eq!(
        find(&samples, "tiervisor_vm_memory_bytes", &[vm]),
        (64 * MIB) as f64
    );
    assert_eq!(
        find(
            &samples,
            "tiervisor_tier_used_bytes",
            &[vm, ("tier", "dram")]
        ),
        (32 * MIB) as f64
    );
    assert_eq!(
        find(
            &samples,
            "tiervisor_tier_capacity_bytes",
            &[vm, ("tier", "pmem")]
        ),
        (64 * MIB) as f64
    );
    assert_eq!(
        find(
            &samples,
            "tiervisor_vcpu_hypercalls_total",
            &[vm, ("vcpu", "1")]
        ),
        11.0
    );
    assert_eq!(
        find(&samples, "tiervisor_promotions_bytes_total", &[vm]),
        (8 * MIB) as f64
    );
    assert_eq!(
        find(
            &samples,
            "tiervisor_engine_stage_seconds_total",
            &[vm, ("stage", "plan")]
        ),
        1.0
    );
    assert_eq!(
        find(
            &samples,
            "tiervisor_engine_stage_seconds_total",
            &[vm, ("stage", "collect")]
        ),
        0.0015
    );
    assert_eq!(
        find(&samples, "tiervisor_fast_quota_max_bytes", &[vm]),
        (16 * MIB) as f64
    );
    assert_eq!(
        find(
            &samples,
            "tiervisor_rebalance_state",
            &[vm, ("state", "running")]
        ),
        1.0
    );
    assert_eq!(
        find(&samples, "tiervisor_rebalance_deadline_seconds", &[vm]),
        1.5
    );
    // The stand-in's 6 MiB hot set fits its 16 MiB quota.
    assert_eq!(
        find(
            &samples,
            "tiervisor_engine_warning",
            &[vm, ("kind", "hot-set-exceeds-quota")]
        ),
        0.0
    );
    // Every series of the VM names it.
    for (name, labels, _) in &samples {
        if name != "tiervisor_build_info" {
            assert_eq!(labels.get("vm").map(String::as_str), Some("vm0"), "{name}");
        }
    }

    // Once it ended, how: one kind 1, the others 0.
    c.put("/api/v1/vm.shutdown").unwrap();
    let ended = parse(&c.get_text("/metrics").unwrap());
    assert_eq!(
        find(&ended, "tiervisor_vm_end", &[vm, ("kind", "stopped")]),
        1.0
    );
    for kind in ["success", "failed", "guest-exit", "timed-out", "vmm-error"] {
        assert_eq!(find(&ended, "tiervisor_vm_end", &[vm, ("kind", kind)]), 0.0);
    }
}

#[test]
fn label_values_are_escaped() {
    let f = Fixture::new();
    let mut config = vm_config();
    // The in-memory VMM accepts names the real one would not; the
    // exposition must stay parseable whatever it is handed.
    config["memory"]["tiers"][0]["name"] = json!("dr\"am\\x\ny");
    config.as_object_mut().unwrap().remove("tiering");
    f.client().put_json("/api/v1/vm.create", &config).unwrap();
    let text = f.client().get_text("/metrics").unwrap();
    assert!(text.contains("tier=\"dr\\\"am\\\\x\\ny\""), "{text}");
    let samples = parse(&text);
    assert_eq!(
        find(
            &samples,
            "tiervisor_tier_used_bytes",
            &[("tier", "dr\"am\\x\ny")]
        ),
        (32 * MIB) as f64
    );
    // Without tiering, no engine series.
    assert!(
        samples
            .iter()
            .all(|(n, _, _)| !n.starts_with("tiervisor_promotions"))
    );
}

//! The tiering policy in force (`tierctl policy`).

use tiering::{Threshold, TieringPolicy};

use crate::render::table::key_values;
use crate::render::units::{duration_ms, heat, size};

/// Every knob of `policy`, one per line (docs/policy.md names them).
pub fn render_policy(policy: &TieringPolicy) -> String {
    let quota = if policy.fast_quota.min_bytes > 0 {
        format!(
            "max {}, min {}",
            size(policy.fast_quota.max_bytes),
            size(policy.fast_quota.min_bytes)
        )
    } else {
        format!("max {}", size(policy.fast_quota.max_bytes))
    };
    let threshold = match policy.threshold {
        Threshold::Auto => "auto".to_owned(),
        Threshold::Manual { heat: h } => format!("manual, heat {}", heat(h)),
    };
    let pinned = if policy.pinned.is_empty() {
        "none".to_owned()
    } else {
        policy
            .pinned
            .iter()
            .map(|p| format!("{:#x} +{}", p.gpa, size(p.len)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let h = &policy.heat;
    let sm = &policy.sampling;
    key_values(&[
        ("tracker", policy.tracker.clone()),
        ("interval", duration_ms(policy.interval_ms)),
        ("fast quota", quota),
        ("promote rate", format!("{} MB/s", policy.promote_rate_mbps)),
        ("demote rate", format!("{} MB/s", policy.demote_rate_mbps)),
        ("threshold", threshold),
        ("headroom", size(policy.headroom_bytes)),
        ("significance", format!("{} sd", policy.significance)),
        ("min residency", duration_ms(policy.min_residency_ms)),
        (
            "exchange",
            if policy.exchange { "on" } else { "off" }.to_owned(),
        ),
        ("pinned", pinned),
        (
            "heat",
            format!(
                "read weight {}, write weight {}, half-life {}",
                h.read_weight,
                h.write_weight,
                duration_ms(h.half_life_ms)
            ),
        ),
        (
            "sampling",
            format!(
                "{} pages/s, a window every {} us, {}..{} us long",
                sm.budget_pages_per_sec, sm.window_period_us, sm.min_window_us, sm.max_window_us
            ),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use tiering::PinnedRange;

    use super::*;

    #[test]
    fn every_knob_is_listed() {
        let mut policy = TieringPolicy::with_quota(128 << 20);
        let text = render_policy(&policy);
        assert_eq!(
            text,
            "tracker        dirty-log\n\
             interval       200 ms\n\
             fast quota     max 128 MiB\n\
             promote rate   256 MB/s\n\
             demote rate    256 MB/s\n\
             threshold      auto\n\
             headroom       0 B\n\
             significance   2 sd\n\
             min residency  2.0 s\n\
             exchange       on\n\
             pinned         none\n\
             heat           read weight 1, write weight 2, half-life 500 ms\n\
             sampling       8192 pages/s, a window every 200000 us, 500..200000 us long\n"
        );
        policy.fast_quota.min_bytes = 2 << 20;
        policy.threshold = Threshold::Manual { heat: 500.0 };
        policy.exchange = false;
        policy.pinned = vec![
            PinnedRange {
                gpa: 0,
                len: 2 << 20,
            },
            PinnedRange {
                gpa: 0x4000_0000,
                len: 4096,
            },
        ];
        let text = render_policy(&policy);
        for expected in [
            "fast quota     max 128 MiB, min 2 MiB\n",
            "threshold      manual, heat 500\n",
            "exchange       off\n",
            "pinned         0x0 +2 MiB, 0x40000000 +4 KiB\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }
}

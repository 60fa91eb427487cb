//! A page of frames as a table (`tierctl frames`).

use api::types::FramesPage;

use crate::render::table::Table;
use crate::render::units::{heat, size};

/// The page's frames (index, guest-physical address, tier, heat) under a
/// line saying which part of guest memory they are.
pub fn render_frames(page: &FramesPage) -> String {
    let mut out = match (page.frames.first(), page.frames.last()) {
        (Some(first), Some(last)) => format!(
            "frames {}..={} of {} ({} each)\n\n",
            first.index,
            last.index,
            page.total_frames,
            size(page.frame_size)
        ),
        _ => format!(
            "no frames from {} ({} frames of {} in all)\n",
            page.offset,
            page.total_frames,
            size(page.frame_size)
        ),
    };
    if page.frames.is_empty() {
        return out;
    }
    let mut table = Table::new(&["FRAME", "GPA", "TIER", "HEAT"]).right_align(&[0, 1, 3]);
    for f in &page.frames {
        let tier = page.tiers.get(usize::from(f.tier)).map_or_else(
            || format!("{} ?", f.tier),
            |name| format!("{} {name}", f.tier),
        );
        table.row(vec![
            f.index.to_string(),
            format!("{:#x}", f.gpa),
            tier,
            heat(f64::from(f.heat)),
        ]);
    }
    out.push_str(&table.render());
    out
}

#[cfg(test)]
mod tests {
    use api::types::FrameEntry;

    use super::*;

    fn page(frames: Vec<FrameEntry>) -> FramesPage {
        FramesPage {
            frame_size: 2 << 20,
            total_frames: 512,
            offset: 4,
            tiers: vec!["dram".into(), "slow".into()],
            frames,
        }
    }

    #[test]
    fn frames_are_listed_with_tier_names() {
        let entry = |index, tier, heat| FrameEntry {
            index,
            gpa: index * (2 << 20),
            tier,
            heat,
        };
        let text = render_frames(&page(vec![
            entry(4, 0, 7900.0),
            entry(5, 1, 0.0),
            entry(6, 7, 1.25),
        ]));
        assert_eq!(
            text,
            "frames 4..=6 of 512 (2 MiB each)\n\n\
             FRAME       GPA  TIER    HEAT\n    \
                 4  0x800000  0 dram  7900\n    \
                 5  0xa00000  1 slow   0.0\n    \
                 6  0xc00000  7 ?      1.2\n"
        );
        assert_eq!(
            render_frames(&page(Vec::new())),
            "no frames from 4 (512 frames of 2 MiB in all)\n"
        );
    }
}

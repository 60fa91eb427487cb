//! Today's date in UTC (what `date -u +%F` prints), computed from the
//! system clock with the civil-from-days algorithm (H. Hinnant), so no
//! date crate is needed for one line of a report.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds in a day.
const DAY: u64 = 86_400;

/// Today's UTC date as `YYYY-MM-DD`. A clock before 1970 reads as
/// 1970-01-01.
pub fn utc_today() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (year, month, day) = civil_from_days((secs / DAY) as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date (year, month 1..=12, day 1..=31) of the
/// day `days` after 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01 so that leap days end each 400-year era.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153; // March = 0
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        assert_eq!(civil_from_days(19_722), (2023, 12, 31));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
    }

    #[test]
    fn consecutive_days_advance_by_one() {
        let mut previous = civil_from_days(0);
        for day in 1..(366 * 8) {
            let next = civil_from_days(day);
            let same_month = next.0 == previous.0 && next.1 == previous.1;
            if same_month {
                assert_eq!(next.2, previous.2 + 1);
            } else {
                assert_eq!(next.2, 1, "{next:?} after {previous:?}");
            }
            previous = next;
        }
    }

    #[test]
    fn today_looks_like_a_date() {
        let today = utc_today();
        assert_eq!(today.len(), 10);
        assert_eq!(&today[4..5], "-");
        assert_eq!(&today[7..8], "-");
        assert!(today.as_str() >= "2024-01-01");
    }
}

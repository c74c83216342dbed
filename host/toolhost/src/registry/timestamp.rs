//! Instants as the host prints them in results and records: RFC 3339 / ISO 8601 in UTC,
//! to the millisecond (MCP task timestamps, audit records).

use std::time::{SystemTime, UNIX_EPOCH};

/// `at` as `2026-07-28T09:30:00.123Z`: UTC, to the millisecond; an instant before 1970
/// prints as the epoch.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use toolhost::registry::format_utc_time;
///
/// let at = UNIX_EPOCH + Duration::from_millis(951_782_400_123);
/// assert_eq!(format_utc_time(at), "2000-02-29T00:00:00.123Z");
/// ```
pub fn format_utc_time(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_utc_time(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_utc_time(UNIX_EPOCH + Duration::from_millis(951_782_400_123)),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            format_utc_time(UNIX_EPOCH + Duration::from_secs(1_785_231_000)),
            "2026-07-28T09:30:00.000Z"
        );
        assert_eq!(
            format_utc_time(UNIX_EPOCH + Duration::from_millis(1_796_413_826_123)),
            "2026-12-04T19:50:26.123Z"
        );
        assert_eq!(
            format_utc_time(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00.000Z"
        );
    }
}

//! Dates as users type them (`--since 2025-06-01`, `--since 7d`) and as stores keep them.

use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, Zoned};

use crate::StoreError;

/// Reads a `--since`/`--until` value in the local time zone: a date (`2025-06-01`, its
/// midnight), a date and time (`2025-06-01T14:30`, `2025-06-01 14:30:00`), an RFC 3339 time
/// with an offset (`2025-06-01T14:30:00Z`), or an age (`30m`, `12h`, `7d`, `2w`: that long
/// before now).
pub fn parse_date(s: &str) -> Result<Timestamp, StoreError> {
    parse_date_at(s, &Zoned::now())
}

/// [`parse_date`] with "now" and the time zone given.
pub fn parse_date_at(s: &str, now: &Zoned) -> Result<Timestamp, StoreError> {
    let bad = || StoreError::BadDate(s.to_string());
    let t = s.trim();
    if let Ok(ts) = t.parse::<Timestamp>() {
        return Ok(ts);
    }
    if let Some(span) = age(t) {
        return now.checked_sub(span).map(|z| z.timestamp()).map_err(|_| StoreError::AgeTooLong(s.to_string()));
    }
    if t.find(|c: char| !c.is_ascii_digit()).is_some_and(|i| i > 0 && age(&format!("1{}", &t[i..])).is_some()) {
        // A number of units too large to be a span at all.
        return Err(StoreError::AgeTooLong(s.to_string()));
    }
    let civil = t.replacen(' ', "T", 1);
    if let Ok(dt) = civil.parse::<jiff::civil::DateTime>() {
        return dt.to_zoned(now.time_zone().clone()).map(|z| z.timestamp()).map_err(|_| bad());
    }
    if let Ok(d) = civil.parse::<jiff::civil::Date>() {
        return d.to_zoned(now.time_zone().clone()).map(|z| z.timestamp()).map_err(|_| bad());
    }
    Err(bad())
}

/// `30m`, `12h`, `7d`, `2w`, `90s`.
fn age(s: &str) -> Option<Span> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: i64 = n.parse().ok()?;
    match unit.trim() {
        "s" => Span::new().try_seconds(n).ok(),
        "m" | "min" => Span::new().try_minutes(n).ok(),
        "h" => Span::new().try_hours(n).ok(),
        "d" => Span::new().try_days(n).ok(),
        "w" => Span::new().try_weeks(n).ok(),
        _ => None,
    }
}

/// A timestamp as the store writes it: RFC 3339 in UTC with milliseconds.
pub(crate) fn rfc3339_utc(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// vLLM's `date` (`20250601-143000`, local time of the machine that ran it) in time zone
/// `tz`, as RFC 3339 with the offset; `None` when it is not such a date.
pub(crate) fn from_vllm_date(date: &str, tz: &TimeZone) -> Option<String> {
    let dt = jiff::civil::DateTime::strptime("%Y%m%d-%H%M%S", date).ok()?;
    let z = dt.to_zoned(tz.clone()).ok()?;
    Some(z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Zoned {
        "2025-06-10T12:00:00+02:00[Etc/GMT-2]".parse().unwrap()
    }

    fn at(s: &str) -> String {
        rfc3339_utc(parse_date_at(s, &now()).unwrap())
    }

    #[test]
    fn dates_times_and_ages_are_read_in_the_local_zone() {
        assert_eq!(at("2025-06-01"), "2025-05-31T22:00:00.000Z");
        assert_eq!(at("2025-06-01T14:30"), "2025-06-01T12:30:00.000Z");
        assert_eq!(at("2025-06-01 14:30:05"), "2025-06-01T12:30:05.000Z");
        assert_eq!(at("2025-06-01T14:30:00Z"), "2025-06-01T14:30:00.000Z");
        assert_eq!(at("2025-06-01T14:30:00-05:00"), "2025-06-01T19:30:00.000Z");
        assert_eq!(at("7d"), "2025-06-03T10:00:00.000Z");
        assert_eq!(at("12h"), "2025-06-09T22:00:00.000Z");
        assert_eq!(at("2w"), "2025-05-27T10:00:00.000Z");
    }

    #[test]
    fn anything_else_is_an_error_that_shows_the_accepted_forms() {
        for bad in ["", "yesterday", "7x", "2025-13-01", "d"] {
            let err = parse_date_at(bad, &now()).unwrap_err();
            assert!(err.to_string().contains("7d"), "{err}");
        }
    }

    #[test]
    fn an_age_too_long_to_count_back_says_so() {
        for long in ["99999999999999d", "99999999999999999999w", "9999999999w"] {
            let err = parse_date_at(long, &now()).unwrap_err();
            assert!(err.to_string().contains("reaches back before the earliest date there is"), "{long}: {err}");
        }
    }

    #[test]
    fn vllm_dates_take_the_given_zone() {
        let tz = TimeZone::fixed(jiff::tz::offset(2));
        assert_eq!(from_vllm_date("20250601-143000", &tz).as_deref(), Some("2025-06-01T14:30:00+02:00"));
        assert_eq!(from_vllm_date("2025-06-01", &tz), None);
    }
}

//! UTC calendar arithmetic for budget periods, hour buckets and `--expires` dates. Budgets
//! reset at UTC midnight and on the first of the month (UTC), so every replica agrees on the
//! period without sharing a clock library or a time zone database.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::GatewayError;

const MS_PER_DAY: i64 = 86_400_000;

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub use pagoda_calendar::{civil_from_days, days_from_civil};

/// A budget period: which one it is, as a number that changes when it rolls over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Period {
    Day,
    Month,
}

impl Period {
    pub fn name(self) -> &'static str {
        match self {
            Period::Day => "daily",
            Period::Month => "monthly",
        }
    }

    /// Days since the epoch, or months since January 1970.
    pub fn key(self, ms: i64) -> i64 {
        let days = ms.div_euclid(MS_PER_DAY);
        match self {
            Period::Day => days,
            Period::Month => {
                let (y, m, _) = civil_from_days(days);
                (y - 1970) * 12 + i64::from(m) - 1
            }
        }
    }

    /// When the period containing `ms` began.
    pub fn start_ms(self, ms: i64) -> i64 {
        match self {
            Period::Day => ms.div_euclid(MS_PER_DAY) * MS_PER_DAY,
            Period::Month => {
                let (y, m, _) = civil_from_days(ms.div_euclid(MS_PER_DAY));
                days_from_civil(y, m, 1) * MS_PER_DAY
            }
        }
    }

    /// When the period containing `ms` ends (the next one starts).
    pub fn end_ms(self, ms: i64) -> i64 {
        match self {
            Period::Day => self.start_ms(ms) + MS_PER_DAY,
            Period::Month => {
                let (y, m, _) = civil_from_days(ms.div_euclid(MS_PER_DAY));
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                days_from_civil(ny, nm, 1) * MS_PER_DAY
            }
        }
    }

    pub fn until_end(self, ms: i64) -> Duration {
        Duration::from_millis((self.end_ms(ms) - ms).max(1000) as u64)
    }
}

/// "2026-11-30T11:00:00Z" for the hour bucket containing `ms`.
pub fn hour_label(ms: i64) -> String {
    let hour_ms = ms.div_euclid(3_600_000) * 3_600_000;
    let (y, m, d) = civil_from_days(hour_ms.div_euclid(MS_PER_DAY));
    let hour = hour_ms.rem_euclid(MS_PER_DAY) / 3_600_000;
    format!("{y:04}-{m:02}-{d:02}T{hour:02}:00:00Z")
}

/// "2026-11-30", "2026-11-30T12:00:00Z" / "2026-11-30T12:00Z" / "2026-11-30 12:00:00" (UTC),
/// or seconds since the epoch. Returns milliseconds since the epoch.
pub fn parse_time(text: &str) -> Result<i64, GatewayError> {
    let bad = || {
        GatewayError::invalid(
            "time",
            format!(
                "`{text}` is not a date such as 2026-12-31, 2026-12-31T08:00:00Z or a unix time"
            ),
        )
    };
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let secs: i64 = text.parse().map_err(|_| bad())?;
        // Up to the end of year 9999, as far as the dates go.
        if secs > 253_402_300_799 {
            return Err(bad());
        }
        return Ok(secs * 1000);
    }
    let (date, time) = match text.find(['T', ' ']) {
        Some(i) => (&text[..i], Some(text[i + 1..].trim_end_matches('Z'))),
        None => (text, None),
    };
    let parts: Vec<&str> = date.split('-').collect();
    if parts.len() != 3 || parts[0].len() != 4 {
        return Err(bad());
    }
    // Four digits, so the day count below cannot overflow.
    let year: i64 = parts[0].parse().map_err(|_| bad())?;
    let month: u32 = parts[1].parse().map_err(|_| bad())?;
    let day: u32 = parts[2].parse().map_err(|_| bad())?;
    if !(1..=12).contains(&month) || day == 0 || day > pagoda_calendar::days_in_month(year, month) {
        return Err(bad());
    }
    let mut ms = days_from_civil(year, month, day) * MS_PER_DAY;
    if let Some(time) = time {
        let fields: Vec<&str> = time.split(':').collect();
        if fields.len() < 2 || fields.len() > 3 {
            return Err(bad());
        }
        let h: i64 = fields[0].parse().map_err(|_| bad())?;
        let m: i64 = fields[1].parse().map_err(|_| bad())?;
        let s: i64 = match fields.get(2) {
            Some(s) => s.parse().map_err(|_| bad())?,
            None => 0,
        };
        if !(0..24).contains(&h) || !(0..60).contains(&m) || !(0..60).contains(&s) {
            return Err(bad());
        }
        ms += ((h * 60 + m) * 60 + s) * 1000;
    }
    Ok(ms)
}

/// "2026-11-30 11:05:00" for listings.
pub fn format_ms(ms: i64) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(MS_PER_DAY));
    let secs = ms.rem_euclid(MS_PER_DAY) / 1000;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip_and_match_known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
        for d in -1000..30_000 {
            let (y, m, day) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, day), d);
        }
    }

    #[test]
    fn periods_start_and_end_on_utc_boundaries() {
        let t = parse_time("2026-12-31T23:59:59Z").unwrap();
        assert_eq!(Period::Day.end_ms(t), parse_time("2027-01-01").unwrap());
        assert_eq!(Period::Month.start_ms(t), parse_time("2026-12-01").unwrap());
        assert_eq!(Period::Month.end_ms(t), parse_time("2027-01-01").unwrap());
        let feb = parse_time("2028-02-10").unwrap();
        assert_eq!(Period::Month.end_ms(feb), parse_time("2028-03-01").unwrap());
        assert_ne!(Period::Month.key(t), Period::Month.key(t + 1000));
        assert_eq!(hour_label(t), "2026-12-31T23:00:00Z");
    }

    #[test]
    fn bad_dates_are_refused() {
        for bad in [
            "",
            "tomorrow",
            "2026-13-01",
            "2026-02-30",
            "2026-1-1x",
            "2026-01-01T25:00",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_time("86400").unwrap(), 86_400_000);
    }

    #[test]
    fn unix_times_that_overflow_milliseconds_are_refused() {
        assert!(parse_time("9223372036854775").is_err());
        assert!(parse_time("9223372036854776").is_err());
        assert_eq!(parse_time("253402300799").unwrap(), 253_402_300_799_000);
        assert!(parse_time("99999999999999999999").is_err());
        assert_eq!(parse_time("1700000000").unwrap(), 1_700_000_000_000);
    }
}

//! `strftime_now(fmt)` for templates that stamp today's date into the system prompt.
//!
//! Only the C-locale conversions templates use are supported; time is UTC, which is what a
//! server container's local time usually is. Written here to avoid a date-time dependency.
use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

struct Civil {
    year: i64,
    month: u32,     // 1..=12
    day: u32,       // 1..=31
    yday: u32,      // 1..=366
    weekday: usize, // 0 = Monday
    hour: u32,
    minute: u32,
    second: u32,
}

fn civil(unix: i64) -> Civil {
    let days = unix.div_euclid(pagoda_calendar::SECS_PER_DAY);
    let secs = unix.rem_euclid(pagoda_calendar::SECS_PER_DAY) as u32;
    let (year, month, day) = pagoda_calendar::civil_from_days(days);
    Civil {
        year,
        month,
        day,
        yday: pagoda_calendar::day_of_year(year, month, day),
        weekday: pagoda_calendar::weekday(days),
        hour: secs / 3600,
        minute: secs / 60 % 60,
        second: secs % 60,
    }
}

/// Formats `unix` (UTC) like Python's `datetime.strftime`; unknown conversions are kept as is.
pub fn strftime(format: &str, unix: i64) -> String {
    let t = civil(unix);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        // glibc's `%-d` drops the zero padding.
        let mut spec = chars.next();
        let pad = spec != Some('-');
        if !pad {
            spec = chars.next();
        }
        let num = |n: u32, width: usize| {
            if pad {
                format!("{n:0width$}")
            } else {
                n.to_string()
            }
        };
        match spec {
            Some('Y') => out.push_str(&t.year.to_string()),
            Some('y') => out.push_str(&num(t.year.rem_euclid(100) as u32, 2)),
            Some('m') => out.push_str(&num(t.month, 2)),
            Some('d') => out.push_str(&num(t.day, 2)),
            Some('e') => out.push_str(&format!("{:>2}", t.day)),
            Some('j') => out.push_str(&num(t.yday, 3)),
            Some('H') => out.push_str(&num(t.hour, 2)),
            Some('I') => out.push_str(&num((t.hour + 11) % 12 + 1, 2)),
            Some('M') => out.push_str(&num(t.minute, 2)),
            Some('S') => out.push_str(&num(t.second, 2)),
            Some('p') => out.push_str(if t.hour < 12 { "AM" } else { "PM" }),
            Some('B') => out.push_str(MONTHS[t.month as usize - 1]),
            Some('b') | Some('h') => out.push_str(&MONTHS[t.month as usize - 1][..3]),
            Some('A') => out.push_str(WEEKDAYS[t.weekday]),
            Some('a') => out.push_str(&WEEKDAYS[t.weekday][..3]),
            Some('u') => out.push_str(&(t.weekday + 1).to_string()),
            Some('w') => out.push_str(&((t.weekday + 1) % 7).to_string()),
            Some('F') => out.push_str(&format!("{}-{:02}-{:02}", t.year, t.month, t.day)),
            Some('T') => out.push_str(&format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if !pad {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-01-15T09:30:05Z, a Thursday.
    const T: i64 = 1_768_469_405;

    #[test]
    fn strftime_formats_the_conversions_templates_use() {
        assert_eq!(strftime("%d %b %Y", T), "15 Jan 2026");
        assert_eq!(strftime("%Y-%m-%d %H:%M:%S", T), "2026-01-15 09:30:05");
        assert_eq!(
            strftime("%A, %B %-d, %y (%j) %I%p %%", T),
            "Thursday, January 15, 26 (015) 09AM %"
        );
    }

    #[test]
    fn strftime_handles_leap_days_and_the_epoch() {
        assert_eq!(strftime("%F %a %j", 951_782_400), "2000-02-29 Tue 060");
        assert_eq!(strftime("%F %T %A", 0), "1970-01-01 00:00:00 Thursday");
    }
}

//! `strftime_now(format)`, the global Hugging Face gives chat templates (Python's
//! `datetime.now().strftime(format)`), for the common directives, in UTC (the engines'
//! containers run in UTC). An unknown directive is written as Python leaves it.

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
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// The template function.
pub(crate) fn strftime_now(format: String) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    strftime(&format, secs)
}

/// Civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// `format` for `secs` since the epoch, UTC.
pub(crate) fn strftime(format: &str, secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (h, mi, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    let (y, m, d) = civil(days);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday.
    let cum = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = cum[m as usize - 1] + d + u32::from(m > 2 && is_leap(y));
    let month = MONTHS[m as usize - 1];
    let day = DAYS[weekday];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(f) = chars.next() else {
            out.push('%');
            break;
        };
        let piece = match f {
            'Y' => y.to_string(),
            'y' => format!("{:02}", y % 100),
            'm' => format!("{m:02}"),
            'd' => format!("{d:02}"),
            '-' => match chars.next() {
                Some('d') => d.to_string(),
                Some('m') => m.to_string(),
                Some(o) => format!("%-{o}"),
                None => "%-".into(),
            },
            'e' => format!("{d:>2}"),
            'B' => month.to_string(),
            'b' | 'h' => month[..3].to_string(),
            'A' => day.to_string(),
            'a' => day[..3].to_string(),
            'H' => format!("{h:02}"),
            'I' => format!("{:02}", if h % 12 == 0 { 12 } else { h % 12 }),
            'p' => if h < 12 { "AM" } else { "PM" }.to_string(),
            'M' => format!("{mi:02}"),
            'S' => format!("{s:02}"),
            'j' => format!("{yday:03}"),
            '%' => "%".into(),
            o => format!("%{o}"),
        };
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strftime;

    #[test]
    fn formats_like_python() {
        // 2024-07-26 13:05:09 UTC, a Friday (Python: datetime(2024,7,26,13,5,9).strftime).
        let t = 1_722_000_309;
        assert_eq!(strftime("%d %b %Y", t), "26 Jul 2024");
        assert_eq!(strftime("%B %-d, %Y", t), "July 26, 2024");
        assert_eq!(
            strftime("%A %H:%M:%S %p %j %%", t),
            "Friday 13:25:09 PM 208 %"
        );
    }
}

//! Event times: RFC 3339 (`2026-08-17T08:00:01.25Z`,
//! `2026-08-17T10:00:01+02:00`) to milliseconds since the epoch, offsets
//! applied. Anything else is no time at all: the silence rules then leave
//! that event's time out rather than guess.

/// Milliseconds since 1970-01-01T00:00:00Z, or `None` for a text that is
/// not an RFC 3339 date-time.
pub fn millis(at: &[u8]) -> Option<i64> {
    let num = |s: &[u8]| -> Option<i64> {
        s.iter()
            .all(u8::is_ascii_digit)
            .then(|| s.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    if at.len() < 20
        || at[4] != b'-'
        || at[7] != b'-'
        || !matches!(at[10], b'T' | b't' | b' ')
        || at[13] != b':'
        || at[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(&at[0..4])?, num(&at[5..7])?, num(&at[8..10])?);
    let (hour, minute, second) = (num(&at[11..13])?, num(&at[14..16])?, num(&at[17..19])?);
    // A leap second (:60) is kept as the next second's start: neither the
    // epoch count nor a SIEM's date type can hold it.
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &at[19..];
    let mut fraction_ms = 0i64;
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for (i, d) in frac[..digits].iter().take(3).enumerate() {
            fraction_ms += i64::from(d - b'0') * [100, 10, 1][i];
        }
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (h, m) = (num(&[*h1, *h2])?, num(&[*m1, *m2])?);
            if h > 23 || m > 59 {
                return None;
            }
            let total = h * 60 + m;
            if *sign == b'+' { total } else { -total }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    Some(secs * 1000 + fraction_ms)
}

/// The instants [`rfc3339_millis`] can write: years 0000 to 9999 in UTC
/// (an offset can carry a stored time outside them).
pub const RFC3339_RANGE: std::ops::RangeInclusive<i64> = -62_167_219_200_000..=253_402_300_799_999;

/// `ms` since the epoch as RFC 3339 in UTC with milliseconds
/// (`2026-08-17T08:00:01.250Z`): the one form every SIEM parses; `None`
/// outside [`RFC3339_RANGE`].
pub fn rfc3339_millis(ms: i64) -> Option<Rfc3339Millis> {
    if !RFC3339_RANGE.contains(&ms) {
        return None;
    }
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let mut text = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut n: i64| {
        for i in (at..at + width).rev() {
            text[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, 4, y);
    put(5, 2, m);
    put(8, 2, d);
    put(11, 2, ms_of_day / 3_600_000);
    put(14, 2, ms_of_day / 60_000 % 60);
    put(17, 2, ms_of_day / 1000 % 60);
    put(20, 3, ms_of_day % 1000);
    Some(Rfc3339Millis(text))
}

/// A time as [`rfc3339_millis`] writes it, without an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rfc3339Millis([u8; 24]);

impl Rfc3339Millis {
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("ASCII digits and separators")
    }
}

impl std::fmt::Display for Rfc3339Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The date of a day count since 1970-01-01 (the inverse of `days_from_civil`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::{RFC3339_RANGE, millis, rfc3339_millis};

    #[test]
    fn millis_format_back_to_the_same_instant() {
        assert_eq!(rfc3339_millis(0).unwrap().as_str(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(1_786_953_601_250).unwrap().as_str(),
            "2026-08-17T08:00:01.250Z"
        );
        assert_eq!(
            rfc3339_millis(951_868_800_000).unwrap().as_str(),
            "2000-03-01T00:00:00.000Z"
        );
        assert_eq!(rfc3339_millis(-1).unwrap().as_str(), "1969-12-31T23:59:59.999Z");
        // The range's ends are the first and last instants of years 0000 and 9999.
        assert_eq!(millis(b"0000-01-01T00:00:00Z"), Some(*RFC3339_RANGE.start()));
        assert_eq!(millis(b"9999-12-31T23:59:59.999Z"), Some(*RFC3339_RANGE.end()));
        assert_eq!(
            rfc3339_millis(*RFC3339_RANGE.end()).unwrap().as_str(),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339_millis(*RFC3339_RANGE.start()).unwrap().as_str(),
            "0000-01-01T00:00:00.000Z"
        );
        assert_eq!(rfc3339_millis(*RFC3339_RANGE.end() + 1), None);
        assert_eq!(rfc3339_millis(*RFC3339_RANGE.start() - 1), None);
        // Every day of four centuries round-trips through the parser.
        for day in (-146_097i64..146_097).step_by(7) {
            let ms = day * 86_400_000 + (day.rem_euclid(86_400)) * 1000 + 123;
            assert_eq!(
                millis(rfc3339_millis(ms).unwrap().as_str().as_bytes()),
                Some(ms),
                "day {day}"
            );
        }
    }

    #[test]
    fn offsets_and_fractions_are_applied() {
        let z = millis(b"2026-08-17T08:00:00Z").unwrap();
        assert_eq!(z, 1_786_953_600_000);
        assert_eq!(millis(b"2026-08-17T08:00:01.25Z"), Some(z + 1250));
        assert_eq!(millis(b"2026-08-17T08:00:01.250123456Z"), Some(z + 1250));
        assert_eq!(millis(b"2026-08-17T10:00:00+02:00"), Some(z));
        assert_eq!(millis(b"2026-08-17T04:00:00.000-04:00"), Some(z));
        assert_eq!(millis(b"2026-08-17T09:10:00.000+01:00"), Some(z + 10 * 60_000));
        assert_eq!(millis(b"1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(millis(b"2000-03-01T00:00:00Z"), Some(951_868_800_000));
        assert_eq!(millis(b"2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        assert_eq!(millis(b"2026-08-17T07:59:60Z"), Some(z));
        for bad in [
            &b"2026-08-17"[..],
            b"2026-08-17T08:00:00",
            b"2026-13-01T00:00:00Z",
            b"2026-02-30T08:00:00Z",
            b"2025-02-29T08:00:00Z",
            b"2026-04-31T08:00:00Z",
            b"2026-08-17T08:00:00+2:00",
            b"x026-08-17T08:00:00Z",
            b"2026-08-17T08:00:00.Z",
        ] {
            assert_eq!(millis(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}

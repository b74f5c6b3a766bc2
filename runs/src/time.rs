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
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
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
    use super::millis;

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
        for bad in [
            &b"2026-08-17"[..],
            b"2026-08-17T08:00:00",
            b"2026-13-01T00:00:00Z",
            b"2026-08-17T08:00:00+2:00",
            b"x026-08-17T08:00:00Z",
            b"2026-08-17T08:00:00.Z",
        ] {
            assert_eq!(millis(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}

//! RFC 3339 UTC timestamps without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// `SystemTime` as `YYYY-MM-DDTHH:MM:SSZ` (seconds precision, UTC).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// `SystemTime` as `YYYY-MM-DDTHH:MM:SS.mmmZ`: RFC 3339 UTC with milliseconds, for records
/// whose order within one second matters (queue entries). Sorts with [`rfc3339`] strings of
/// other seconds as times do.
pub fn rfc3339_millis(t: SystemTime) -> String {
    let millis = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    let secs = rfc3339(t);
    format!("{}.{millis:03}Z", secs.trim_end_matches('Z'))
}

/// The current time as RFC 3339 UTC.
pub fn now() -> String {
    rfc3339(SystemTime::now())
}

/// Seconds since the Unix epoch of an RFC 3339 UTC time as [`rfc3339`] writes it
/// (`YYYY-MM-DDTHH:MM:SSZ`); `None` for anything else.
pub fn seconds_of(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, min, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || min > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(y, m as u32, d as u32) * 86_400 + h * 3600 + min * 60 + s)
}

/// `YYYY-MM` of an RFC 3339 time (its month), `None` when it is not one.
pub fn month_of(text: &str) -> Option<&str> {
    seconds_of(text)?;
    text.get(0..7)
}

/// An age such as `90d`: a whole number and a unit, `s` (seconds), `h` (hours), `d` (days) or
/// `w` (weeks); `0` alone is no age at all. In seconds, or why it is not one.
pub fn parse_age(text: &str) -> Result<u64, String> {
    if text == "0" {
        return Ok(0);
    }
    let unit = text.chars().last().ok_or("an age cannot be empty")?;
    let per = match unit {
        's' => 1,
        'h' => 3600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => {
            return Err(format!(
                "{text:?} has no unit: write a number and s, h, d or w (e.g. 90d)"
            ))
        }
    };
    let number = &text[..text.len() - 1];
    if number.is_empty() || !number.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "{text:?} is not a whole number and a unit (e.g. 90d, 12w, 36h)"
        ));
    }
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(per))
        .ok_or_else(|| format!("{text:?} is too long an age"))
}

// Howard Hinnant's days-from-civil algorithm, the inverse of `civil_from_days`.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_709_251_199)),
            "2024-02-29T23:59:59Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(4_102_444_800)),
            "2100-01-01T00:00:00Z"
        );
        assert_eq!(
            rfc3339_millis(UNIX_EPOCH + Duration::from_millis(1_709_251_199_042)),
            "2024-02-29T23:59:59.042Z"
        );
    }

    #[test]
    fn times_read_back_to_their_instant() {
        for secs in [
            0u64,
            1_709_251_199,
            4_102_444_800,
            951_782_400,
            1_798_761_599,
        ] {
            let text = rfc3339(UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(seconds_of(&text), Some(secs as i64), "{text}");
        }
        assert_eq!(month_of("2024-02-29T23:59:59Z"), Some("2024-02"));
        for bad in [
            "2024-02-29",
            "2024-13-01T00:00:00Z",
            "2024-02-29T23:59:59+01:00",
            "x",
        ] {
            assert_eq!(seconds_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn ages_have_a_unit() {
        assert_eq!(parse_age("90d"), Ok(90 * 86_400));
        assert_eq!(parse_age("2w"), Ok(14 * 86_400));
        assert_eq!(parse_age("36h"), Ok(36 * 3600));
        assert_eq!(parse_age("0s"), Ok(0));
        assert_eq!(parse_age("0"), Ok(0));
        for bad in ["", "90", "d", "1.5d", "-1d", "3m", "99999999999999999999w"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}

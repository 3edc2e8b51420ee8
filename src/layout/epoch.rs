//! An epoch as text: Unix milliseconds or RFC 3339 (`2024-01-01`, `2024-01-01T00:00:00Z`,
//! `2020-02-20T02:20:02+08:00`), as the spec's `epoch=` and [`LayoutBuilder::epoch`] take it.
//!
//! A leaf: `spec.rs` and `builder.rs` both read epochs through it.
//!
//! [`LayoutBuilder::epoch`]: super::LayoutBuilder::epoch

/// Unix milliseconds, or RFC 3339 (a date alone is midnight UTC); the reason, with the forms
/// accepted, when `value` is neither.
pub(super) fn parse_epoch_text(value: &str) -> Result<u64, String> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value
            .parse()
            .map_err(|_| format!("the epoch {value} is too large for Unix milliseconds"));
    }
    parse_rfc3339(value).map_err(|reason| {
        format!(
            "the epoch is RFC 3339 (2024-01-01T00:00:00Z, 2020-02-20T02:20:02+08:00, \
             2024-01-01) or Unix milliseconds; {reason}"
        )
    })
}

/// A cursor over ASCII text, for the RFC 3339 reader.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize, what: &str) -> Result<u64, String> {
        let end = self.at + n;
        match self.bytes.get(self.at..end) {
            Some(d) if d.iter().all(u8::is_ascii_digit) => {
                self.at = end;
                Ok(d.iter().fold(0, |acc, &b| acc * 10 + u64::from(b - b'0')))
            }
            _ => Err(format!(
                "expected {n} digits of {what} at position {}",
                self.at
            )),
        }
    }

    fn expect(&mut self, one_of: &[u8], what: &str) -> Result<u8, String> {
        match self.bytes.get(self.at) {
            Some(b) if one_of.contains(b) => {
                self.at += 1;
                Ok(*b)
            }
            _ => Err(format!("expected {what} at position {}", self.at)),
        }
    }

    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// An RFC 3339 date-time (`2024-01-01T00:00:00Z`, `2020-02-20T02:20:02+08:00`, at most
/// milliseconds) or a date alone (midnight UTC), as Unix milliseconds.
fn parse_rfc3339(text: &str) -> Result<u64, String> {
    let mut c = Cursor {
        bytes: text.as_bytes(),
        at: 0,
    };
    let year = c.digits(4, "the year")?;
    c.expect(b"-", "'-'")?;
    let month = c.digits(2, "the month")?;
    c.expect(b"-", "'-'")?;
    let day = c.digits(2, "the day")?;
    if !(1..=12).contains(&month) {
        return Err(format!("month {month} is not 1..=12"));
    }
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let last = month_days[(month - 1) as usize];
    if !(1..=last).contains(&day) {
        return Err(format!(
            "day {day} is not 1..={last} in {year:04}-{month:02}"
        ));
    }
    let days = days_from_civil(year, month, day);
    let (mut ms, mut offset_ms) = (0u64, 0i64);
    if !c.done() {
        c.expect(b"Tt ", "'T' between date and time")?;
        let hour = c.digits(2, "the hour")?;
        c.expect(b":", "':'")?;
        let minute = c.digits(2, "the minute")?;
        c.expect(b":", "':'")?;
        let second = c.digits(2, "the second")?;
        if hour > 23 || minute > 59 || second > 59 {
            return Err(format!(
                "{hour:02}:{minute:02}:{second:02} is not a time of day"
            ));
        }
        ms = (hour * 3600 + minute * 60 + second) * 1000;
        if c.expect(b".", "").is_ok() {
            let start = c.at;
            let mut place = 100;
            while let Ok(d) = c.digits(1, "a fraction") {
                if place == 0 && d != 0 {
                    return Err("the epoch is finer than a millisecond".into());
                }
                ms += d * place;
                place /= 10;
            }
            if c.at == start {
                return Err(format!("expected digits after '.' at position {start}"));
            }
        }
        let zone = c.expect(b"Zz+-", "a zone (Z or +HH:MM)")?;
        if zone == b'+' || zone == b'-' {
            let hours = c.digits(2, "the zone's hours")?;
            c.expect(b":", "':'")?;
            let minutes = c.digits(2, "the zone's minutes")?;
            if hours > 23 || minutes > 59 {
                return Err(format!("{hours:02}:{minutes:02} is not a zone offset"));
            }
            let offset = i64::try_from((hours * 60 + minutes) * 60_000).unwrap_or(0);
            offset_ms = if zone == b'+' { offset } else { -offset };
        }
        if !c.done() {
            return Err(format!("unexpected text at position {}", c.at));
        }
    }
    let local = i128::from(days) * 86_400_000 + i128::from(ms);
    let utc = local - i128::from(offset_ms);
    u64::try_from(utc).map_err(|_| format!("{text} is before 1970-01-01T00:00:00Z"))
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm), negative before it.
fn days_from_civil(year: u64, month: u64, day: u64) -> i64 {
    let y = i64::try_from(year).unwrap_or(0) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::try_from(month).unwrap_or(1);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::try_from(day).unwrap_or(1) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_reads_what_rfc3339_writes_and_offsets() {
        for ms in [0, 951_782_400_000, 1_288_834_974_657, 4_102_444_799_999] {
            assert_eq!(parse_rfc3339(&crate::rfc3339(ms)), Ok(ms));
        }
        assert_eq!(
            parse_rfc3339("2020-02-20T02:20:02+08:00"),
            Ok(1_582_136_402_000)
        );
        assert_eq!(parse_rfc3339("2016-05-20"), Ok(1_463_702_400_000));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00.5Z"), Ok(500));
        assert!(
            parse_rfc3339("1969-12-31T23:59:59Z")
                .unwrap_err()
                .contains("before 1970")
        );
        assert!(
            parse_rfc3339("2023-02-29")
                .unwrap_err()
                .contains("day 29 is not 1..=28")
        );
        assert!(
            parse_rfc3339("2023-01-01T00:00:00")
                .unwrap_err()
                .contains("a zone")
        );
        assert!(
            parse_rfc3339("2023-01-01T00:00:00.0001Z")
                .unwrap_err()
                .contains("finer")
        );
        assert!(parse_rfc3339("2023-01-01T24:00:00Z").is_err());
    }
}

//! Durations as clients write them (`90s`, `1h`, `7d`): one parser shared by TTL indexes,
//! time-series retention and steps, and the task interval flags, so all accept the same spellings.

/// Milliseconds of `text`: a whole number followed by one unit, `ms`, `s`, `m`, `h`, `d` or `w`
/// (`1500ms`, `90s`, `15m`, `1h`, `7d`, `2w`). `None` for anything else: no unit, a sign, a
/// fraction, spaces, zero, or a value whose milliseconds overflow an `i64`.
pub fn parse_duration_ms(text: &str) -> Option<i64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    // `str::parse` takes a leading `+`; the digits were counted first, so none is here
    let n: i64 = if number.is_empty() { return None } else { number.parse().ok()? };
    let per = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 604_800_000,
        _ => return None,
    };
    n.checked_mul(per).filter(|ms| *ms > 0)
}

#[cfg(test)]
mod tests {
    use super::parse_duration_ms;

    #[test]
    fn units_and_refusals() {
        assert_eq!(parse_duration_ms("1500ms"), Some(1500));
        assert_eq!(parse_duration_ms("90s"), Some(90_000));
        assert_eq!(parse_duration_ms("15m"), Some(900_000));
        assert_eq!(parse_duration_ms("1h"), Some(3_600_000));
        assert_eq!(parse_duration_ms("7d"), Some(604_800_000));
        assert_eq!(parse_duration_ms("2w"), Some(1_209_600_000));
        for bad in ["", "h", "1", "0s", "-1s", "+1s", "1.5h", " 1h", "1h ", "1H", "1y", "1hh", "99999999999999999w"] {
            assert_eq!(parse_duration_ms(bad), None, "{bad:?}");
        }
    }
}

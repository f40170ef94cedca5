//! Durations as written in run files: `90s`, `30m`, `1h30m`.

use std::time::Duration;

use crate::AGENT_TIMEOUT_MAX;

/// Parses `[Nh][Nm][Ns]`; at least one part, and a total above zero. Numbers too large for the
/// arithmetic are refused, never wrapped or saturated.
pub fn parse(text: &str) -> Result<Duration, String> {
    let mut total = 0u64;
    let mut digits = String::new();
    let mut seen_units = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("{text:?}: unexpected {c:?}; use h, m and s, e.g. 1h30m")),
        };
        // Units must come in order h, m, s and once each, as the CRD's pattern requires.
        if seen_units.contains(c) || (c == 'h' && !seen_units.is_empty()) || (c == 'm' && seen_units.contains('s')) {
            return Err(format!("{text:?}: units must appear once each, in the order h, m, s"));
        }
        if digits.is_empty() {
            return Err(format!("{text:?}: a number must come before {c:?}"));
        }
        let too_long = || format!("{text:?}: too long to be a duration");
        let n: u64 = digits.parse().map_err(|_| too_long())?;
        total = n.checked_mul(unit).and_then(|seconds| total.checked_add(seconds)).ok_or_else(too_long)?;
        digits.clear();
        seen_units.push(c);
    }
    if !digits.is_empty() || seen_units.is_empty() {
        return Err(format!("{text:?}: every number needs a unit (h, m or s)"));
    }
    if total == 0 {
        return Err(format!("{text:?}: must be longer than zero"));
    }
    Ok(Duration::from_secs(total))
}

/// Parses an agent timeout: [`parse`], and at most [`AGENT_TIMEOUT_MAX`] (the bound the CRD's
/// rule holds it to), so that adding it to a clock can never overflow.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let duration = parse(text)?;
    let max = parse(AGENT_TIMEOUT_MAX).expect("AGENT_TIMEOUT_MAX is a duration");
    if duration > max {
        return Err(format!("{text:?}: longer than the maximum, {AGENT_TIMEOUT_MAX}"));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!(parse("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("1h2m3s").unwrap(), Duration::from_secs(3723));
    }

    #[test]
    fn refuses_the_rest() {
        for bad in ["", "30", "m", "0s", "1m1h", "5x", "1h1h"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn numbers_past_the_arithmetic_are_refused_not_wrapped() {
        for huge in ["18446744073709551616s", "5124095576030432h", "307445734561825861m", "99999999999999999999999h"] {
            let error = parse(huge).expect_err(huge);
            assert!(error.contains("too long to be a duration"), "{huge}: {error}");
        }
        // The largest total that fits parses; bounding it is parse_timeout's job.
        assert_eq!(parse("18446744073709551615s").unwrap(), Duration::from_secs(u64::MAX));
    }

    #[test]
    fn timeouts_are_bounded_by_the_crd_maximum() {
        assert_eq!(parse_timeout(AGENT_TIMEOUT_MAX).unwrap(), Duration::from_secs(24 * 3600));
        let error = parse_timeout("24h1s").unwrap_err();
        assert!(error.contains("longer than the maximum, 24h"), "{error}");
        let error = parse_timeout("18446744073709551615s").unwrap_err();
        assert!(error.contains("longer than the maximum"), "{error}");
    }
}

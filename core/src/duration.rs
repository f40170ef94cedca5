//! Durations as written in run files: `90s`, `30m`, `1h30m`.

use std::time::Duration;

/// Parses `[Nh][Nm][Ns]`; at least one part, and a total above zero.
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
        let n: u64 = digits.parse().map_err(|_| format!("{text:?}: a number must come before {c:?}"))?;
        total = total.saturating_add(n.saturating_mul(unit));
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
}

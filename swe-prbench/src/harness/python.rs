//! The few Python builtin semantics the reference harness leans on, over JSON values: `str()`,
//! `int()`, truthiness, `==` between JSON scalars, `round(x, 3)`, `str.strip()` and
//! `json.JSONDecoder.raw_decode`. Each is exact for what JSON can hold, except where noted.

use serde_json::Value;

/// `str(map.get(key) or "")`: a member's text, empty when it is missing or falsy.
pub fn text_or_empty(map: &serde_json::Map<String, Value>, key: &str) -> String {
    map.get(key).filter(|v| truthy(v)).map(str_of).unwrap_or_default()
}

/// Python truthiness of a JSON value: `null`, `false`, `0`, `0.0`, `""`, `[]` and `{}` are false.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python `str(value)` of a decoded JSON value (`None`, `True`, `5`, `5.0`, lists and dicts in
/// Python's repr). Floats follow Python's shortest repr; exponents are written as Python does
/// (`1e+20`).
pub fn str_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

fn repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_string(),
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => float_repr(f),
            _ => n.to_string(),
        },
        Value::String(s) => string_repr(s),
        Value::Array(items) => format!("[{}]", items.iter().map(repr).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter().map(|(k, v)| format!("{}: {}", string_repr(k), repr(v))).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn string_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr(float)`: the shortest round-trip digits, positional for exponents in
/// [-4, 16), scientific (`1e+20`, `1.5e-07`) otherwise, always with a `.0` when integral.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("Rust's {:e} always has an exponent");
    let exponent: i32 = exponent.parse().expect("Rust's exponent is an integer");
    if (-4..16).contains(&exponent) {
        let plain = format!("{f}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// Python `int(value)`, `None` where Python raises: booleans give 0/1, floats truncate (not
/// NaN or infinities), strings are trimmed and read as an optionally signed decimal with single
/// underscores between digits (`"4.5"` fails). Values beyond `i64` fail too.
pub fn int_of(value: &Value) -> Option<i64> {
    match value {
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i)
            } else {
                let f = n.as_f64()?;
                (f.is_finite() && f.trunc().abs() < 9.2e18).then(|| f.trunc() as i64)
            }
        }
        Value::String(s) => int_of_str(s),
        _ => None,
    }
}

fn int_of_str(text: &str) -> Option<i64> {
    let text = strip(text);
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut value: i64 = 0;
    for c in digits.chars().filter(|c| *c != '_') {
        let digit = c.to_digit(10)?;
        value = value.checked_mul(10)?.checked_add(i64::from(digit))?;
    }
    Some(if negative { -value } else { value })
}

/// Python `a == b` for JSON values as set membership uses it: numbers (and booleans, as 0/1)
/// compare by value, `"501"` is not `501`.
pub fn equal(a: &Value, b: &Value) -> bool {
    let number = |v: &Value| match v {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        _ => None,
    };
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x == y,
        (None, None) => a == b,
        _ => false,
    }
}

/// Python `str.strip()` with no argument: Unicode whitespace, plus the separators
/// U+001C–U+001F that Python counts as whitespace and Rust does not.
pub fn strip(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// Python `str.splitlines()`: splits at `\n`, `\r\n`, `\r`, `\x0b`, `\x0c`, `\x1c`–`\x1e`,
/// U+0085, U+2028 and U+2029; no empty last line for a trailing break.
pub fn splitlines(text: &str) -> Vec<&str> {
    let is_break = |c: char| {
        matches!(c, '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}'..='\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}')
    };
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if is_break(c) {
            lines.push(&text[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some((j, '\n')) = chars.peek().copied() {
                    chars.next();
                    end = j + 1;
                }
            }
            start = end;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Python `round(x, 3)`: the double nearest to `x` rounded to three decimals, ties (on the
/// exact binary value) to even.
pub fn round3(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    // Rust's fixed-precision formatting rounds the exact binary value, ties to even, as
    // Python's round() does; parsing the digits back gives the nearest double.
    format!("{x:.3}").parse().expect("a formatted finite float parses")
}

/// Python `json.JSONDecoder().raw_decode(text)`: one JSON value at the very start of `text`
/// (no leading whitespace), whatever follows it.
pub fn decode_prefix(text: &str) -> Option<Value> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match values.next() {
        Some(Ok(value)) => Some(value),
        _ => None,
    }
}

/// Python `json.loads(text)`: exactly one JSON value, surrounding whitespace allowed.
pub fn loads(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int_follows_python() {
        assert_eq!(int_of(&json!("53")), Some(53));
        assert_eq!(int_of(&json!(" -7 ")), Some(-7));
        assert_eq!(int_of(&json!("1_000")), Some(1000));
        assert_eq!(int_of(&json!("4.5")), None);
        assert_eq!(int_of(&json!("high")), None);
        assert_eq!(int_of(&json!(12.9)), Some(12));
        assert_eq!(int_of(&json!(-12.9)), Some(-12));
        assert_eq!(int_of(&json!(true)), Some(1));
        assert_eq!(int_of(&json!(null)), None);
        assert_eq!(int_of(&json!([1])), None);
    }

    #[test]
    fn str_follows_python() {
        assert_eq!(str_of(&json!(5)), "5");
        assert_eq!(str_of(&json!(5.0)), "5.0");
        assert_eq!(str_of(&json!(1e20)), "1e+20");
        assert_eq!(str_of(&json!(0.0001)), "0.0001");
        assert_eq!(str_of(&json!(true)), "True");
        assert_eq!(str_of(&json!(null)), "None");
        assert_eq!(str_of(&json!(["a", 1])), "['a', 1]");
    }

    #[test]
    fn round_follows_python() {
        assert_eq!(round3(0.0625), 0.062);
        assert_eq!(round3(0.4335), 0.433); // 0.4335 is stored just below the tie
        assert_eq!(round3(2.0 / 3.0), 0.667);
        assert_eq!(round3(0.0005), 0.001); // stored just above
    }

    #[test]
    fn splitlines_follows_python() {
        assert_eq!(splitlines("a\r\nb\rc\n"), vec!["a", "b", "c"]);
        assert_eq!(splitlines("a\n\nb"), vec!["a", "", "b"]);
        assert!(splitlines("").is_empty());
    }

    #[test]
    fn raw_decode_allows_trailing_text() {
        assert_eq!(decode_prefix("[1] and more"), Some(json!([1])));
        assert_eq!(decode_prefix("{oops"), None);
    }
}

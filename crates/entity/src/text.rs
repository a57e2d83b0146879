//! Rules on JSON text that the parsers do not enforce, checked in one linear pass over the bytes
//! before parsing, so that every path (serde_json bodies, the simd-json import) applies the same:
//!
//! - an object must not repeat a key (compared after unescaping): serde_json would keep the last
//!   value, simd-json both;
//! - an integer (no fraction, no exponent) must fit i64 or u64; `-0` is the integer 0;
//! - a float must be finite and, unless its digits are all zero, must not round to zero;
//! - containers nest at most a given depth (checked first, so parsing never recurses deeper).
//!
//! The pass does not validate the syntax (the parser does, right after); on malformed text it
//! may report one of these errors or none, never panic, and it never allocates more than the text
//! warrants.

use std::borrow::Cow;

/// Why a JSON text breaks one of the rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// An object repeats a key.
    #[error("duplicate key {0:?} in an object")]
    DuplicateKey(String),
    /// A number cannot be stored exactly.
    #[error("number {0}: {1}")]
    InvalidNumber(String, &'static str),
    /// Containers nest deeper than the limit.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
}

/// What a successful check found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checked {
    /// the text holds an integer `-0`, which [`rewrite_negative_zero`] turns into `0`
    pub negative_zero: bool,
}

/// Longest number token shown in an error.
const SHOWN_NUMBER: usize = 40;

struct Frame {
    object: bool,
    /// the next string in this object is a key
    expect_key: bool,
    /// where this object's keys start in the key list
    keys_start: usize,
}

/// Checks `text` against the rules above; `max_depth` counts the root container as 1.
///
/// # Errors
/// The first rule the text breaks.
pub fn check(text: &[u8], max_depth: usize) -> Result<Checked, TextError> {
    let mut found = Checked::default();
    let mut stack: Vec<Frame> = Vec::new();
    let mut keys: Vec<Cow<'_, [u8]>> = Vec::new();
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        match b {
            b'{' | b'[' => {
                if stack.len() >= max_depth {
                    return Err(TextError::TooDeep(max_depth));
                }
                stack.push(Frame { object: b == b'{', expect_key: b == b'{', keys_start: keys.len() });
                i += 1;
            }
            b'}' | b']' => {
                if let Some(frame) = stack.pop()
                    && frame.object
                {
                    let own = keys.get_mut(frame.keys_start..).unwrap_or_default();
                    if let Some(dup) = duplicate(own) {
                        return Err(TextError::DuplicateKey(String::from_utf8_lossy(&dup).into_owned()));
                    }
                    keys.truncate(frame.keys_start);
                }
                i += 1;
            }
            b',' => {
                if let Some(top) = stack.last_mut() {
                    top.expect_key = top.object;
                }
                i += 1;
            }
            b'"' => {
                let (end, escaped) = string_end(text, i + 1);
                if let Some(top) = stack.last_mut()
                    && top.expect_key
                {
                    top.expect_key = false;
                    let raw = text.get(i + 1..end).unwrap_or_default();
                    keys.push(if escaped { Cow::Owned(unescape(raw)) } else { Cow::Borrowed(raw) });
                }
                i = end + 1;
            }
            b'-' | b'0'..=b'9' => {
                let len = text.get(i..).unwrap_or_default().iter().take_while(|c| is_number_byte(**c)).count();
                let token = text.get(i..i + len).unwrap_or_default();
                if number(token)? {
                    found.negative_zero = true;
                }
                i += len;
            }
            _ => i += 1,
        }
    }
    Ok(found)
}

/// Turns every integer `-0` outside strings into ` 0` (same length, still valid JSON).
pub fn rewrite_negative_zero(text: &mut [u8]) {
    let mut i = 0;
    while i < text.len() {
        match text.get(i) {
            Some(b'"') => i = string_end(text, i + 1).0 + 1,
            Some(b'-' | b'0'..=b'9') => {
                let len = text.get(i..).unwrap_or_default().iter().take_while(|c| is_number_byte(**c)).count();
                if text.get(i..i + len) == Some(b"-0")
                    && let Some(sign) = text.get_mut(i)
                {
                    *sign = b' ';
                }
                i += len.max(1);
            }
            _ => i += 1,
        }
    }
}

fn is_number_byte(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
}

/// The index of the quote closing a string whose content starts at `from` (the text's length
/// when it is unterminated), and whether the string holds an escape.
fn string_end(text: &[u8], from: usize) -> (usize, bool) {
    let mut escaped = false;
    let mut i = from;
    while let Some(rest) = text.get(i..) {
        match rest.iter().position(|&c| c == b'"' || c == b'\\') {
            None => return (text.len(), escaped),
            Some(p) if rest.get(p) == Some(&b'"') => return (i + p, escaped),
            Some(p) => {
                escaped = true;
                i += p + 2;
            }
        }
    }
    (text.len(), escaped)
}

/// Checks one number token; `Ok(true)` for the integer `-0`. A token that does not parse is left
/// to the parser to report.
fn number(token: &[u8]) -> Result<bool, TextError> {
    let Ok(s) = std::str::from_utf8(token) else { return Ok(false) };
    let bad = |why| {
        let shown =
            if s.len() > SHOWN_NUMBER { format!("{}…", s.get(..SHOWN_NUMBER).unwrap_or(s)) } else { s.to_owned() };
        Err(TextError::InvalidNumber(shown, why))
    };
    if !token.iter().any(|c| matches!(c, b'.' | b'e' | b'E')) {
        if s == "-0" {
            return Ok(true);
        }
        // 18 digits always fit an i64
        if s.len() <= 18 {
            return Ok(false);
        }
        let overflow = match s.strip_prefix('-') {
            Some(_) => s.parse::<i64>().err(),
            None => s.parse::<u64>().err(),
        };
        return match overflow.map(|e| *e.kind()) {
            Some(std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow) => {
                bad("integers must fit a 64-bit signed or unsigned integer")
            }
            _ => Ok(false),
        };
    }
    let has_exponent = token.iter().any(|c| matches!(c, b'e' | b'E'));
    // Without an exponent, 300 characters can neither overflow (1e308) nor underflow (5e-324).
    if !has_exponent && s.len() <= 300 {
        return Ok(false);
    }
    let Ok(x) = s.parse::<f64>() else { return Ok(false) };
    if x.is_infinite() {
        return bad("beyond the range of a 64-bit float");
    }
    let mantissa = s.split(['e', 'E']).next().unwrap_or_default();
    if x == 0.0 && mantissa.bytes().any(|c| matches!(c, b'1'..=b'9')) {
        return bad("too small for a 64-bit float (it would become 0)");
    }
    Ok(false)
}

/// A key that appears twice in `keys` (sorts it when long).
fn duplicate(keys: &mut [Cow<'_, [u8]>]) -> Option<Vec<u8>> {
    if keys.len() <= 8 {
        for (i, k) in keys.iter().enumerate() {
            if keys.get(i + 1..).unwrap_or_default().contains(k) {
                return Some(k.to_vec());
            }
        }
        return None;
    }
    keys.sort_unstable();
    keys.windows(2).find(|w| w.first() == w.get(1)).and_then(|w| w.first()).map(|k| k.to_vec())
}

/// The UTF-8 bytes a JSON string body stands for (malformed escapes are kept as they are; the
/// parser rejects them).
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    let hex = |at: usize| -> Option<u32> {
        let digits = std::str::from_utf8(raw.get(at..at + 4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    };
    while let Some(&b) = raw.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let simple = match raw.get(i + 1) {
            Some(b'n') => Some(b'\n'),
            Some(b't') => Some(b'\t'),
            Some(b'r') => Some(b'\r'),
            Some(b'b') => Some(0x08),
            Some(b'f') => Some(0x0C),
            Some(&c @ (b'"' | b'\\' | b'/')) => Some(c),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            i += 2;
            continue;
        }
        let Some(high) = raw.get(i + 1).filter(|c| **c == b'u').and_then(|_| hex(i + 2)) else {
            out.push(b);
            i += 1;
            continue;
        };
        let (code, used) = if (0xD800..0xDC00).contains(&high)
            && raw.get(i + 6) == Some(&b'\\')
            && raw.get(i + 7) == Some(&b'u')
            && let Some(low) = hex(i + 8).filter(|l| (0xDC00..0xE000).contains(l))
        {
            (0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00), 12)
        } else {
            (high, 6)
        };
        let c = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        i += used;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn err(text: &str) -> TextError {
        check(text.as_bytes(), 128).unwrap_err()
    }

    #[test]
    fn duplicate_keys_are_found_at_any_depth_and_after_unescaping() {
        assert_eq!(err(r#"{"_id":"d1","x":1,"_id":"d2"}"#), TextError::DuplicateKey("_id".into()));
        assert_eq!(err(r#"{"a":{"b":1,"b":2}}"#), TextError::DuplicateKey("b".into()));
        assert_eq!(err(r#"[{"k":1},{"a":"\u006b","k":[],"\u006b":2}]"#), TextError::DuplicateKey("k".into()));
        let many: String = (0..50).map(|i| format!("\"k{i}\":{i},")).collect();
        assert_eq!(err(&format!("{{{many}\"k7\":0}}")), TextError::DuplicateKey("k7".into()));
        // the same key in sibling objects, keys as values, and escaped quotes are fine
        assert!(check(br#"{"a":{"k":1},"b":{"k":"k"},"c":["k","k"],"d\"":"\"d"}"#, 128).is_ok());
        assert!(check(format!("{{{many}\"z\":0}}").as_bytes(), 128).is_ok());
    }

    #[test]
    fn numbers_are_exact_or_refused() {
        for ok in [
            "0",
            "-1",
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551615",
            "1.5",
            "-0.0",
            "1e308",
            "5e-324",
            "0e-999",
            "0.0000e5000",
            "123456789012345678901234567890.5",
        ] {
            assert_eq!(check(ok.as_bytes(), 1), Ok(Checked::default()), "{ok}");
        }
        for bad in ["18446744073709551616", "-9223372036854775809", "1e400", "-1e309", "1e-400", "0.0001e-330"] {
            assert!(matches!(err(&format!("[{bad}]")), TextError::InvalidNumber(..)), "{bad}");
        }
        let long = format!("0.{}1", "0".repeat(400));
        assert!(matches!(err(&long), TextError::InvalidNumber(..)));
        // numbers inside strings are text
        assert!(check(br#"{"n":"1e400","m":"-0"}"#, 128).is_ok());
    }

    #[test]
    fn negative_zero_becomes_the_integer_zero() {
        let mut text = br#"{"a":-0,"b":[-0, -0.0],"c":"-0"}"#.to_vec();
        assert!(check(&text, 128).unwrap().negative_zero);
        rewrite_negative_zero(&mut text);
        assert_eq!(text, br#"{"a": 0,"b":[ 0, -0.0],"c":"-0"}"#.to_vec());
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v, serde_json::json!({"a": 0, "b": [0, -0.0], "c": "-0"}));
        assert!(v["a"].is_u64() && v["b"][1].is_f64());
    }

    #[test]
    fn depth_is_capped_before_parsing() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(check(deep(128).as_bytes(), 128).is_ok());
        assert_eq!(check(deep(129).as_bytes(), 128), Err(TextError::TooDeep(128)));
        // brackets in strings do not count
        assert!(check(format!("[\"{}\"]", "[".repeat(500)).as_bytes(), 2).is_ok());
    }

    #[test]
    fn malformed_text_never_panics() {
        for text in ["", "\"", "\"\\", "{\"a", "{\"a\\u12", "}}]]", "{,,\"a\":1,\"a\"", "-", "1e", "[\"\\ud800\\u\"]"] {
            let _ = check(text.as_bytes(), 4);
            let mut t = text.as_bytes().to_vec();
            rewrite_negative_zero(&mut t);
        }
    }
}

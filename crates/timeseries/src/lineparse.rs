//! One line of InfluxDB line protocol, parsed by hand: the ingest's hot path, where influxdata's
//! nom-based parser (`influxdb-line-protocol`) was most of the request threads' time. It follows
//! that crate's grammar exactly, quirks included (it ports the Go parser), and a property test
//! holds it to the crate's answers on random lines: same points, or an error for both. The crate
//! still splits the body into lines (`split_lines`: newlines inside quoted strings do not end a
//! line).
//!
//! `measurement[,tag=value…] field=value[,field=value…] [timestamp]`: sections separated by one
//! or more spaces; leading whitespace and `#` comment lines skipped; trailing spaces only after a
//! timestamp (and one comma after a line's only field). Escapes: in the measurement `\,` `\ ` `\\`; in tag keys, tag values and field keys
//! also `\=`; any other backslash is kept with the character after it, and a name that ends with
//! a backslash is refused. Field values: `-?\d+i` (i64), `\d+u` (u64), floats `-?\d+(\.\d+)?
//! ([eE][+-]?\d+)?`, `"strings"` (`\"` and `\\` escaped), booleans `t T true True TRUE f F false
//! False FALSE`.

use std::borrow::Cow;

/// A field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Field<'a> {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(Cow<'a, str>),
}

/// A parsed line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    pub measurement: Cow<'a, str>,
    pub tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// the measurement and tags as written (equal texts: the same series)
    pub series: &'a str,
    pub fields: Vec<(Cow<'a, str>, Field<'a>)>,
    pub timestamp: Option<i64>,
}

/// The line in `text` (one piece of `split_lines`): None for a blank or comment line.
pub fn parse(text: &str) -> Option<Result<Line<'_>, String>> {
    let i = trim_leading(text);
    (!i.is_empty()).then(|| line(i))
}

/// Skips whitespace and whole `#` comment lines at the start.
fn trim_leading(mut i: &str) -> &str {
    loop {
        i = i.trim_start_matches([' ', '\t', '\n']);
        if i.starts_with('#') {
            i = &i[i.find('\n').unwrap_or(i.len())..];
        } else {
            return i;
        }
    }
}

/// Which name is being read: where it ends, and which escapes it knows.
#[derive(Clone, Copy, PartialEq)]
enum Name {
    Measurement,
    TagKey,
    TagValue,
    FieldKey,
}

impl Name {
    fn ends_at(self, c: char) -> bool {
        matches!(c, ' ' | '\t' | '\n')
            || match self {
                Name::Measurement => c == ',' || c == '\0',
                Name::TagKey | Name::FieldKey => c == '=',
                Name::TagValue => c == ',',
            }
    }

    fn escapes(self, c: char) -> bool {
        matches!(c, ',' | ' ' | '\\') || (self != Name::Measurement && c == '=')
    }

    fn what(self) -> &'static str {
        match self {
            Name::Measurement => "measurement",
            Name::TagKey => "tag key",
            Name::TagValue => "tag value",
            Name::FieldKey => "field key",
        }
    }
}

/// Reads a name off the front of `i`: the name (unescaped) and the rest.
fn name(i: &str, kind: Name) -> Result<(Cow<'_, str>, &str), String> {
    let mut owned: Option<String> = None;
    let mut at = 0;
    // the start of the text not yet copied into `owned`
    let mut copied = 0;
    while at < i.len() {
        let c = i[at..].chars().next().unwrap_or('\0');
        if c == '\\' {
            let out = owned.get_or_insert_with(String::new);
            out.push_str(&i[copied..at]);
            match i[at + 1..].chars().next() {
                Some(n) if kind.escapes(n) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => {
                    out.push('\\');
                    at += 1;
                    copied = at;
                    break;
                }
            }
            let n = i[at + 1..].chars().next().map_or(0, char::len_utf8);
            at += 1 + n;
            copied = at;
            continue;
        }
        if kind.ends_at(c) {
            break;
        }
        at += c.len_utf8();
    }
    if at == 0 {
        return Err(format!("a {} is missing", kind.what()));
    }
    let value: Cow<'_, str> = match owned {
        Some(mut s) => {
            s.push_str(&i[copied..at]);
            Cow::Owned(s)
        }
        None => Cow::Borrowed(&i[..at]),
    };
    if value.ends_with('\\') {
        return Err(format!("the {} {value:?} ends with a backslash", kind.what()));
    }
    Ok((value, &i[at..]))
}

/// One or more spaces.
fn spaces(i: &str) -> Option<&str> {
    let rest = i.trim_start_matches(' ');
    (rest.len() < i.len()).then_some(rest)
}

fn line(i: &str) -> Result<Line<'_>, String> {
    let (measurement, mut rest) = name(i, Name::Measurement).map_err(|_| "a measurement is missing".to_owned())?;
    let mut tags = Vec::new();
    if let Some(r) = rest.strip_prefix(',') {
        rest = r;
        loop {
            let (k, r) = name(rest, Name::TagKey).map_err(|e| format!("malformed tag set: {e}"))?;
            let r = r.strip_prefix('=').ok_or("malformed tag set: a tag without =")?;
            let (v, r) = name(r, Name::TagValue).map_err(|e| format!("malformed tag set: {e}"))?;
            tags.push((k, v));
            rest = r;
            match rest.strip_prefix(',') {
                Some(r) => rest = r,
                None => break,
            }
        }
    }
    let series = &i[..i.len() - rest.len()];
    rest = spaces(rest).ok_or("no field set")?;
    let mut fields = Vec::new();
    loop {
        let (k, r) = name(rest, Name::FieldKey).map_err(|e| format!("no field set: {e}"))?;
        let r = r.strip_prefix('=').ok_or_else(|| format!("field {k:?} has no value"))?;
        let (v, r) = field_value(r).map_err(|e| format!("field {k:?}: {e}"))?;
        fields.push((k, v));
        rest = r;
        match rest.strip_prefix(',') {
            // The crate's quirk (its separated list): a comma after the first field, with no
            // field after it, is taken as part of the field set.
            Some(r) if fields.len() == 1 && r.chars().next().is_none_or(|c| matches!(c, ' ' | '\t' | '\n')) => {
                rest = r;
                break;
            }
            Some(r) => rest = r,
            None => break,
        }
    }
    let mut timestamp = None;
    if let Some(r) = spaces(rest) {
        let end = r.find(|c: char| c != '-' && !c.is_ascii_digit()).unwrap_or(r.len());
        let text = &r[..end];
        if is_integer(text) {
            timestamp = Some(text.parse::<i64>().map_err(|_| format!("timestamp {text} is not a 64-bit integer"))?);
            rest = &r[end..];
            rest = spaces(rest).unwrap_or(rest);
        }
    }
    if !rest.is_empty() {
        return Err(format!("unexpected text at the end of the line: {rest:?}"));
    }
    Ok(Line { measurement, tags, series, fields, timestamp })
}

/// `-?\d+`
fn is_integer(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `-?\d+(\.\d+)?([eE][+-]?\d+)?`
fn is_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (mantissa, None),
    };
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    is_integer(whole)
        && fraction.is_none_or(digits)
        && exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)))
}

fn field_value(i: &str) -> Result<(Field<'_>, &str), String> {
    if let Some(body) = i.strip_prefix('"') {
        return quoted(body);
    }
    let end = i.find([',', ' ', '\t', '\n']).unwrap_or(i.len());
    let (token, rest) = i.split_at(end);
    let value = if let Some(n) = token.strip_suffix('i').filter(|n| is_integer(n)) {
        Field::I64(n.parse().map_err(|_| format!("{token} is not a 64-bit integer"))?)
    } else if let Some(n) = token.strip_suffix('u').filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
        Field::U64(n.parse().map_err(|_| format!("{token} is not a 64-bit unsigned integer"))?)
    } else if is_float(token) {
        Field::F64(token.parse().map_err(|_| format!("{token} is not a number"))?)
    } else {
        match token {
            "t" | "T" | "true" | "True" | "TRUE" => Field::Bool(true),
            "f" | "F" | "false" | "False" | "FALSE" => Field::Bool(false),
            _ => return Err(format!("{token:?} is not a field value")),
        }
    };
    Ok((value, rest))
}

/// A string field after its opening quote: `\"` is a quote, `\\` a backslash, any other
/// backslash itself.
fn quoted(i: &str) -> Result<(Field<'_>, &str), String> {
    let mut owned: Option<String> = None;
    let mut copied = 0;
    let mut at = 0;
    let bytes = i.as_bytes();
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                let value = match owned {
                    Some(mut s) => {
                        s.push_str(&i[copied..at]);
                        Cow::Owned(s)
                    }
                    None => Cow::Borrowed(&i[..at]),
                };
                return Ok((Field::Str(value), &i[at + 1..]));
            }
            b'\\' if matches!(bytes.get(at + 1), Some(b'"' | b'\\')) => {
                let out = owned.get_or_insert_with(String::new);
                out.push_str(&i[copied..at]);
                out.push(bytes[at + 1] as char);
                at += 2;
                copied = at;
            }
            _ => at += 1,
        }
    }
    Err("a string field without its closing quote".into())
}

#[cfg(test)]
mod tests;

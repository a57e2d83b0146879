//! The tokens of InfluxQL: identifiers (bare or in double quotes), strings (single quotes),
//! numbers, durations (`90s`, `1h30m`, `1700000000000ms`), regular expressions (`/…/`),
//! operators and punctuation. Division is not part of the supported subset, so a `/` always
//! opens a regular expression.

/// One token, with the character offset it starts at (for errors).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// an identifier or keyword; `quoted` when written in double quotes (never a keyword then)
    Ident { name: String, quoted: bool },
    /// a single-quoted string
    Str(String),
    /// an integer
    Int(i64),
    /// a number with a fraction
    Float(f64),
    /// a duration, in nanoseconds
    Duration(i64),
    /// a regular expression's text, between slashes
    Regex(String),
    /// an operator or punctuation: `= != <> < <= > >= =~ !~ + - * ( ) , ; . ::`
    Sym(&'static str),
}

/// Nanoseconds of a duration unit of InfluxQL.
pub(super) fn unit_nanos(unit: &str) -> Option<i64> {
    Some(match unit {
        "ns" => 1,
        "u" | "µ" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        "w" => 604_800_000_000_000,
        _ => return None,
    })
}

const SYMBOLS: [&str; 17] =
    ["=~", "!~", "!=", "<>", "<=", ">=", "::", "=", "<", ">", "+", "-", "*", "(", ")", ",", ";"];

/// The tokens of `text` with their character offsets, or what is wrong and where.
pub(super) fn tokens(text: &str) -> Result<Vec<(Tok, usize)>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '-' && chars.get(i + 1) == Some(&'-') {
            // a comment to the end of the line
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident { name: chars[start..i].iter().collect(), quoted: false }, start));
            continue;
        }
        if c.is_ascii_digit() {
            let (tok, end) = number(&chars, i)?;
            out.push((tok, start));
            i = end;
            continue;
        }
        match c {
            '"' | '\'' => {
                let (s, end) = quoted(&chars, i)?;
                out.push((if c == '"' { Tok::Ident { name: s, quoted: true } } else { Tok::Str(s) }, start));
                i = end;
            }
            '/' => {
                let (s, end) = regex(&chars, i)?;
                out.push((Tok::Regex(s), start));
                i = end;
            }
            '.' => {
                out.push((Tok::Sym("."), start));
                i += 1;
            }
            _ => {
                let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
                let Some(sym) = SYMBOLS.iter().find(|s| rest.starts_with(*s)) else {
                    return Err(format!("unexpected {c:?} at character {}", i + 1));
                };
                out.push((Tok::Sym(sym), start));
                i += sym.len();
            }
        }
    }
    Ok(out)
}

/// A number, or a duration (digits and a unit, repeated: `1h30m`), from `chars[i]` on.
fn number(chars: &[char], mut i: usize) -> Result<(Tok, usize), String> {
    let at = i + 1;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < chars.len() && chars[*i].is_ascii_digit() {
            *i += 1;
        }
        chars[s..*i].iter().collect::<String>()
    };
    let whole = digits(&mut i);
    if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
        i += 1;
        let frac = digits(&mut i);
        let v: f64 = format!("{whole}.{frac}").parse().map_err(|_| format!("bad number at character {at}"))?;
        return Ok((Tok::Float(v), i));
    }
    let too_big = || format!("the number at character {at} is out of range");
    let n: i64 = whole.parse().map_err(|_| too_big())?;
    let unit_at = |i: usize| {
        let s = i;
        let mut e = i;
        while e < chars.len() && (chars[e].is_alphabetic()) {
            e += 1;
        }
        (chars[s..e].iter().collect::<String>(), e)
    };
    let (unit, end) = unit_at(i);
    if unit.is_empty() {
        if chars.get(i).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
            return Err(format!("bad number at character {at}"));
        }
        return Ok((Tok::Int(n), i));
    }
    // a duration: number-unit pairs
    let (mut total, mut n, mut unit, mut end) = (0i64, n, unit, end);
    loop {
        let per = unit_nanos(&unit).ok_or_else(|| {
            format!("{unit:?} at character {at} is not a duration unit (ns, u, µ, ms, s, m, h, d, w)")
        })?;
        total = n.checked_mul(per).and_then(|v| total.checked_add(v)).ok_or_else(too_big)?;
        i = end;
        if !chars.get(i).is_some_and(char::is_ascii_digit) {
            break;
        }
        n = digits(&mut i).parse().map_err(|_| too_big())?;
        (unit, end) = unit_at(i);
        if unit.is_empty() {
            return Err(format!("a duration at character {at} ends in a number without a unit"));
        }
    }
    if chars.get(i).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
        return Err(format!("bad duration at character {at}"));
    }
    Ok((Tok::Duration(total), i))
}

/// A string or quoted identifier from its opening quote at `chars[i]`: `\\`, `\n`, `\t` and the
/// quote escaped; any other backslash kept with what follows.
fn quoted(chars: &[char], i: usize) -> Result<(String, usize), String> {
    let quote = chars[i];
    let mut out = String::new();
    let mut j = i + 1;
    while j < chars.len() {
        match chars[j] {
            '\\' if j + 1 < chars.len() => {
                match chars[j + 1] {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    '\\' => out.push('\\'),
                    c if c == quote => out.push(c),
                    c => {
                        out.push('\\');
                        out.push(c);
                    }
                }
                j += 2;
            }
            c if c == quote => return Ok((out, j + 1)),
            c => {
                out.push(c);
                j += 1;
            }
        }
    }
    Err(format!("the {quote} opened at character {} is never closed", i + 1))
}

/// A regular expression from its opening `/` at `chars[i]`: `\/` is a slash, any other escape
/// is the regular expression's own.
fn regex(chars: &[char], i: usize) -> Result<(String, usize), String> {
    let mut out = String::new();
    let mut j = i + 1;
    while j < chars.len() {
        match chars[j] {
            '\\' if chars.get(j + 1) == Some(&'/') => {
                out.push('/');
                j += 2;
            }
            '\\' if j + 1 < chars.len() => {
                out.push('\\');
                out.push(chars[j + 1]);
                j += 2;
            }
            '/' => return Ok((out, j + 1)),
            c => {
                out.push(c);
                j += 1;
            }
        }
    }
    Err(format!("the regular expression opened at character {} is never closed (division is not supported)", i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        tokens(text).unwrap_or_else(|e| panic!("{text}: {e}")).into_iter().map(|(t, _)| t).collect()
    }

    fn id(s: &str) -> Tok {
        Tok::Ident { name: s.into(), quoted: false }
    }

    #[test]
    fn tokens_of_a_query() {
        assert_eq!(
            toks("SELECT mean(\"v\") FROM cpu WHERE host =~ /a\\/b/ AND time > now() - 1h30m;"),
            vec![
                id("SELECT"),
                id("mean"),
                Tok::Sym("("),
                Tok::Ident { name: "v".into(), quoted: true },
                Tok::Sym(")"),
                id("FROM"),
                id("cpu"),
                id("WHERE"),
                id("host"),
                Tok::Sym("=~"),
                Tok::Regex("a/b".into()),
                id("AND"),
                id("time"),
                Tok::Sym(">"),
                id("now"),
                Tok::Sym("("),
                Tok::Sym(")"),
                Tok::Sym("-"),
                Tok::Duration(5_400_000_000_000),
                Tok::Sym(";"),
            ]
        );
        assert_eq!(
            toks("1700000000000ms 1.5 'it\\'s' 10 <> <="),
            vec![
                Tok::Duration(1_700_000_000_000_000_000),
                Tok::Float(1.5),
                Tok::Str("it's".into()),
                Tok::Int(10),
                Tok::Sym("<>"),
                Tok::Sym("<=")
            ]
        );
        assert_eq!(toks("5µ"), vec![Tok::Duration(5_000)]);
        assert_eq!(toks("a -- comment\nb"), vec![id("a"), id("b")]);
    }

    #[test]
    fn bad_tokens_say_where() {
        for (text, says) in [
            ("'open", "never closed"),
            ("\"open", "never closed"),
            ("/open", "never closed"),
            ("5x", "not a duration unit"),
            ("99999999999999999999", "out of range"),
            ("9999999999999999w", "out of range"),
            ("a # b", "character 3"),
            ("1h5", "without a unit"),
        ] {
            let err = tokens(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}

//! Series selectors, as Prometheus writes them: `{host="a",region=~"eu-.*",env!="dev"}` (the
//! braces may be left out). `=` and `!=` compare a label's value, `=~` and `!~` match it against a
//! regular expression anchored at both ends; a series without the label has the empty value
//! there, so `env!="dev"` keeps series without `env` and `env=""` selects exactly them.
//!
//! Selecting reads the series index (see [`super::labels`]) for the `name="value"` matchers with a
//! non-empty value (the series having every such label), else every series record of the metric,
//! then keeps the series whose labels satisfy every matcher.

use super::labels::{self, Label};
use super::stats::{self, SeriesStats};
use mosaic_core::cancel::{Stop, Watched};
use mosaic_core::{Result, ServiceError};
use mosaic_keys::MetaKey;
use mosaic_storage::{KeyRange, ReadView, Space};

/// Most matchers one selector may hold.
const MAX_MATCHERS: usize = 32;
/// The compiled size a matcher's regular expression may take.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// How a matcher compares.
#[derive(Debug, Clone)]
enum Op {
    Eq(String),
    Ne(String),
    Re(regex::Regex),
    NotRe(regex::Regex),
}

/// One `name op "value"` of a selector.
#[derive(Debug, Clone)]
pub struct Matcher {
    name: String,
    op: Op,
}

impl Matcher {
    fn matches(&self, labels: &[Label]) -> bool {
        let value = labels.iter().find(|(n, _)| *n == self.name).map_or("", |(_, v)| v.as_str());
        match &self.op {
            Op::Eq(v) => value == v,
            Op::Ne(v) => value != v,
            Op::Re(re) => re.is_match(value),
            Op::NotRe(re) => !re.is_match(value),
        }
    }
}

/// A parsed selector: the series whose labels satisfy every matcher (none: every series).
#[derive(Debug, Clone, Default)]
pub struct Selector {
    matchers: Vec<Matcher>,
}

impl Selector {
    /// Parses `{name="value",…}`; the error says what is wrong and where.
    pub fn parse(text: &str) -> std::result::Result<Selector, String> {
        let mut p = Parser { text, at: 0 };
        p.space();
        let braced = p.eat('{');
        let mut matchers = Vec::new();
        loop {
            p.space();
            if p.done() || (braced && p.peek() == Some('}')) {
                break;
            }
            if matchers.len() == MAX_MATCHERS {
                return Err(format!("at most {MAX_MATCHERS} matchers"));
            }
            matchers.push(p.matcher()?);
            p.space();
            if !p.eat(',') {
                break;
            }
        }
        p.space();
        if braced && !p.eat('}') {
            return Err(p.error("`}`"));
        }
        p.space();
        if !p.done() {
            return Err(p.error("`,` or the end"));
        }
        Ok(Selector { matchers })
    }

    /// The selector of `name="value"` matchers only (a PromQL selector's equal matchers, which
    /// the series index answers; the caller checks the rest).
    pub fn equal(pairs: Vec<(String, String)>) -> Selector {
        Selector { matchers: pairs.into_iter().map(|(name, v)| Matcher { name, op: Op::Eq(v) }).collect() }
    }

    /// True when the selector selects every series.
    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty()
    }

    fn matches(&self, entity: &str) -> bool {
        let labels = labels::of(entity);
        self.matchers.iter().all(|m| m.matches(&labels))
    }

    /// The series of `metric` (or only `entity`, if given) the selector selects, with their
    /// records, in entity name order.
    pub fn select(
        &self,
        view: &ReadView,
        metric: &str,
        entity: Option<&str>,
        stop: &Stop,
    ) -> Result<Vec<(String, SeriesStats)>> {
        let equal: Vec<(&str, &str)> = self
            .matchers
            .iter()
            .filter_map(|m| match &m.op {
                Op::Eq(v) if !v.is_empty() => Some((m.name.as_str(), v.as_str())),
                _ => None,
            })
            .collect();
        if entity.is_some() || equal.is_empty() {
            let mut all = stats::records(view, metric, entity, stop)?;
            if !self.is_empty() {
                all.retain(|(e, _)| self.matches(e));
            }
            return Ok(all);
        }
        // the series having every equal label: the intersection of their postings
        let mut candidates: Option<Vec<String>> = None;
        for (name, value) in equal {
            let mut posted = postings(view, metric, name, value, stop)?;
            if let Some(before) = candidates {
                let keep: std::collections::HashSet<String> = before.into_iter().collect();
                posted.retain(|e| keep.contains(e));
            }
            candidates = Some(posted);
        }
        let mut out = Vec::new();
        for (n, entity) in candidates.unwrap_or_default().into_iter().enumerate() {
            if n % 1024 == 1023 {
                stop.check()?;
            }
            if !self.matches(&entity) {
                continue;
            }
            if let Some((_, record)) = stats::records(view, metric, Some(&entity), stop)?.pop() {
                out.push((entity, record));
            }
        }
        Ok(out)
    }
}

/// The entities of `metric` whose label `name` is `value`, in name order.
fn postings(view: &ReadView, metric: &str, name: &str, value: &str, stop: &Stop) -> Result<Vec<String>> {
    let scan = view.scan(Space::Meta, KeyRange::Prefix(MetaKey::label_postings(metric, name, value)), false);
    let mut out = Vec::new();
    for item in Watched::new(scan.map(|r| r.map_err(ServiceError::from)), stop) {
        let (key, _) = item?;
        match MetaKey::decode(&key) {
            Ok(MetaKey::Label(_, _, _, e)) => out.push(e.into_owned()),
            _ => return Err(ServiceError::damaged("meta", "a series index key does not decode")),
        }
    }
    Ok(out)
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn done(&self) -> bool {
        self.at == self.text.len()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += c.len_utf8();
            return true;
        }
        false
    }

    fn space(&mut self) {
        while let Some(c) = self.peek().filter(|c| c.is_whitespace()) {
            self.at += c.len_utf8();
        }
    }

    fn error(&self, expected: &str) -> String {
        match self.peek() {
            Some(c) => {
                format!("expected {expected} at character {}, found {c:?}", self.text[..self.at].chars().count() + 1)
            }
            None => format!("expected {expected} at the end"),
        }
    }

    fn matcher(&mut self) -> std::result::Result<Matcher, String> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '-') {
            self.at += self.peek().map_or(1, char::len_utf8);
        }
        if self.at == start {
            return Err(self.error("a label name"));
        }
        let name = self.text[start..self.at].to_owned();
        self.space();
        let op = ["=~", "!~", "!=", "="].into_iter().find(|op| self.rest().starts_with(op));
        let Some(op) = op else { return Err(self.error("one of = != =~ !~")) };
        self.at += op.len();
        self.space();
        let value = self.quoted()?;
        let regex = |v: &str| {
            regex::RegexBuilder::new(&format!("^(?:{v})$"))
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| format!("{name}{op}{v:?}: {e}"))
        };
        let op = match op {
            "=" => Op::Eq(value),
            "!=" => Op::Ne(value),
            "=~" => Op::Re(regex(&value)?),
            _ => Op::NotRe(regex(&value)?),
        };
        Ok(Matcher { name, op })
    }

    /// A value in double or single quotes, with the escapes of Prometheus' strings: `\\`, `\"`,
    /// `\'`, `\n`, `\t` (any other is refused: a regular expression's `\d` is written `\\d`).
    fn quoted(&mut self) -> std::result::Result<String, String> {
        let Some(quote) = self.peek().filter(|c| *c == '"' || *c == '\'') else {
            return Err(self.error("a quoted value"));
        };
        self.at += 1;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, e @ ('\\' | '"' | '\''))) => out.push(e),
                    Some((_, e)) => {
                        return Err(format!("unknown escape \\{e} in a value (a backslash is written \\\\)"));
                    }
                    None => break,
                },
                c if c == quote => {
                    self.at += i + 1;
                    return Ok(out);
                }
                c => out.push(c),
            }
        }
        self.at = self.text.len();
        Err(format!("a value is missing its closing {quote}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selects(selector: &str, entity: &str) -> bool {
        Selector::parse(selector).unwrap_or_else(|e| panic!("{selector}: {e}")).matches(entity)
    }

    #[test]
    fn matchers_compare_like_prometheus() {
        let e = "host=a,region=eu-west";
        assert!(selects("{host=\"a\"}", e));
        assert!(selects("host='a', region=~\"eu-.*\"", e));
        assert!(!selects("{region=~\"eu\"}", e), "anchored at both ends");
        assert!(selects("{env!=\"dev\"}", e), "a missing label is the empty value");
        assert!(selects("{env=\"\"}", e));
        assert!(!selects("{host!~\"a|b\"}", e));
        assert!(selects("{}", e));
        assert!(selects("", "server1"));
        assert!(!selects("{host=\"a\"}", "server1"));
        assert!(selects("{k=\"v,w\"}", "k=v\\,w"));
        assert!(selects("{ k = \"say \\\"hi\\\"\" , }", "k=say \"hi\""));
    }

    #[test]
    fn bad_selectors_say_why() {
        for (text, says) in [
            ("{host=\"a\"", "`}`"),
            ("{host=a}", "a quoted value"),
            ("{=\"a\"}", "a label name"),
            ("{host>\"a\"}", "one of"),
            ("{host=\"a}", "closing"),
            ("{host=~\"(\"}", "host=~"),
            ("{a=\"1\"} x", "the end"),
            ("{a=~\"\\d\"}", "unknown escape"),
        ] {
            let err = Selector::parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        let many = (0..40).map(|i| format!("l{i}=\"x\"")).collect::<Vec<_>>().join(",");
        assert!(Selector::parse(&many).unwrap_err().contains("at most"));
    }
}

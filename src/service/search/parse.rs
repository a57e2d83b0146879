//! The search query syntax: bare terms, `"quoted phrases"`, `prefix*`, `-excluded`, `term~1` /
//! `term~2` (typo-tolerant). Clauses are separated by whitespace; each is analyzed with the
//! index's analyzer. Errors name the character position.

use super::analyzer::Analyzer;
use crate::service::{Result, ServiceError};
use unicode_segmentation::UnicodeSegmentation;

/// Longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Most clauses (included and excluded together).
pub const MAX_CLAUSES: usize = 64;
/// Most terms of one phrase.
pub const MAX_PHRASE_TERMS: usize = 32;

/// One clause of a query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Clause {
    /// one analyzed term
    Term(String),
    /// terms at fixed distances: `(term, offset from the first)`
    Phrase(Vec<(String, u32)>),
    /// every indexed term starting with this (folded, not stemmed) text
    Prefix(String),
    /// every indexed term within `distance` edits of this analyzed term
    Fuzzy(String, u8),
}

/// A parsed query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// clauses a hit matches (any or all, per `mode`), deduplicated
    pub include: Vec<Clause>,
    /// clauses no hit matches
    pub exclude: Vec<Clause>,
}

fn invalid(position: usize, reason: impl Into<String>) -> ServiceError {
    ServiceError::InvalidQuery { position, reason: reason.into() }
}

/// Parses `text` with `analyzer`.
pub fn parse(text: &str, analyzer: &Analyzer) -> Result<Query> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(invalid(0, format!("a query is at most {MAX_QUERY_BYTES} bytes")));
    }
    let chars: Vec<char> = text.chars().collect();
    let mut q = Query::default();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let negated = chars[i] == '-';
        if negated {
            i += 1;
            if i >= chars.len() || chars[i].is_whitespace() {
                return Err(invalid(start, "`-` needs a term or phrase right after it"));
            }
        }
        let clause = if chars[i] == '"' {
            let open = i;
            let close = chars[i + 1..].iter().position(|c| *c == '"').map(|p| p + i + 1);
            let Some(close) = close else { return Err(invalid(open, "this quote is never closed")) };
            let inner: String = chars[open + 1..close].iter().collect();
            i = close + 1;
            if i < chars.len() && !chars[i].is_whitespace() {
                return Err(invalid(i, "a phrase ends with its closing quote"));
            }
            phrase(&inner, analyzer, open)?
        } else {
            let end = chars[i..].iter().position(|c| c.is_whitespace()).map_or(chars.len(), |p| p + i);
            let word: String = chars[i..end].iter().collect();
            let at = i;
            i = end;
            if word.contains('"') {
                return Err(invalid(
                    at + word.chars().position(|c| c == '"').unwrap_or(0),
                    "a quote starts a phrase only at the start of a clause",
                ));
            }
            word_clause(&word, analyzer, at)?
        };
        if let Some(c) = clause {
            let list = if negated { &mut q.exclude } else { &mut q.include };
            if !list.contains(&c) {
                list.push(c);
            }
        }
        if q.include.len() + q.exclude.len() > MAX_CLAUSES {
            return Err(invalid(start, format!("a query has at most {MAX_CLAUSES} clauses")));
        }
    }
    Ok(q)
}

/// The terms of a text with their positions.
fn analyzed(text: &str, analyzer: &Analyzer) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    analyzer.tokens(text, 0, |t| out.push((t.term, t.position)));
    out
}

/// A phrase: its terms at their distances from the first; one term is a plain term, none (all
/// stop words) is no clause.
fn phrase(text: &str, analyzer: &Analyzer, at: usize) -> Result<Option<Clause>> {
    let terms = analyzed(text, analyzer);
    if terms.len() > MAX_PHRASE_TERMS {
        return Err(invalid(at, format!("a phrase has at most {MAX_PHRASE_TERMS} terms")));
    }
    let first = terms.first().map_or(0, |(_, p)| *p);
    Ok(match terms.len() {
        0 => None,
        1 => terms.into_iter().next().map(|(t, _)| Clause::Term(t)),
        _ => Some(Clause::Phrase(terms.into_iter().map(|(t, p)| (t, p - first)).collect())),
    })
}

/// A bare word, a `prefix*` or a `term~n`.
fn word_clause(word: &str, analyzer: &Analyzer, at: usize) -> Result<Option<Clause>> {
    if let Some(stem) = word.strip_suffix('*') {
        let words: Vec<&str> = stem.unicode_words().collect();
        if words.len() != 1 || words[0] != stem {
            return Err(invalid(at, "a prefix is one word followed by `*`"));
        }
        return Ok(Some(Clause::Prefix(analyzer.fold_only(stem))));
    }
    if let Some((term, distance)) = word.rsplit_once('~') {
        let distance = match distance {
            "" | "1" => 1,
            "2" => 2,
            _ => return Err(invalid(at + term.chars().count(), "a typo tolerance is `~1` or `~2`")),
        };
        let terms = analyzed(term, analyzer);
        return match terms.as_slice() {
            [] if term.unicode_words().next().is_some() => Ok(None), // a stop word
            [] => Err(invalid(at, "`~` follows a word")),
            [(t, _)] => Ok(Some(Clause::Fuzzy(t.clone(), distance))),
            _ => Err(invalid(at, "a typo-tolerant term is one word followed by `~1` or `~2`")),
        };
    }
    if word.contains('*') {
        return Err(invalid(at + word.chars().position(|c| c == '*').unwrap_or(0), "`*` ends a prefix"));
    }
    // a word the analyzer splits (`e-mail`) is a phrase of its parts
    phrase(word, analyzer, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::search::options::FulltextOptions;

    fn q(text: &str) -> Result<Query> {
        parse(text, &Analyzer::new(&FulltextOptions { stemming: false, ..Default::default() }))
    }

    fn term(t: &str) -> Clause {
        Clause::Term(t.into())
    }

    #[test]
    fn every_form_parses() {
        let parsed = q(r#"Graph  "fast  Database" data* -slow typo~2 colour~ e-mail graph"#).unwrap();
        assert_eq!(
            parsed.include,
            vec![
                term("graph"),
                Clause::Phrase(vec![("fast".into(), 0), ("database".into(), 1)]),
                Clause::Prefix("data".into()),
                Clause::Fuzzy("typo".into(), 2),
                Clause::Fuzzy("colour".into(), 1),
                Clause::Phrase(vec![("e".into(), 0), ("mail".into(), 1)]),
            ]
        );
        assert_eq!(parsed.exclude, vec![term("slow")]);
        assert_eq!(q(r#"-"a b""#).unwrap().exclude, vec![Clause::Phrase(vec![("a".into(), 0), ("b".into(), 1)])]);
        assert_eq!(q("  ").unwrap(), Query::default());
    }

    #[test]
    fn errors_name_the_position() {
        for (text, position) in [
            (r#"ok "open"#, 3),
            ("a - b", 2),
            ("x~3", 1),
            ("*", 0),
            ("ab*c", 2),
            (r#"a"b"#, 1),
            (r#""a"b"#, 3),
            ("ÆØ foo bar~9", 10),
        ] {
            match q(text) {
                Err(ServiceError::InvalidQuery { position: p, .. }) => assert_eq!(p, position, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(q(&"a ".repeat(3000)).is_err());
        let many: String = (0..65).map(|i| format!("w{i} ")).collect();
        assert!(q(&many).is_err());
    }
}

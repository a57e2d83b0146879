//! Highlights: for each indexed field of a hit with a matched term, a fragment of about
//! `fragment_chars` characters around the first match, each matched word wrapped in `pre`/`post`.
//! Offsets come from the analyzer, so they fall on character boundaries in any script.

use super::HighlightRequest;
use super::analyzer::Analyzer;
use crate::catalog::IndexDef;
use crate::entity::FieldDict;
use crate::service::Result;
use foldhash::HashSet;
use serde_json::{Map, Value};

/// Characters of context shown before the first match.
const LEAD: usize = 20;

/// The highlights of one document.
pub fn highlights(
    def: &IndexDef,
    analyzer: &Analyzer,
    blob: &[u8],
    dict: &FieldDict,
    terms: &HashSet<&str>,
    opts: &HighlightRequest,
) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for field in &def.fields {
        for text in super::postings::texts(blob, dict, field)? {
            let mut matches = Vec::new();
            analyzer.tokens(text, 0, |t| {
                if terms.contains(t.term.as_str()) {
                    matches.push((t.start, t.end));
                }
            });
            if !matches.is_empty() {
                out.insert(field.clone(), Value::String(fragment(text, &matches, opts)));
                break;
            }
        }
    }
    Ok(out)
}

/// The fragment of `text` starting a little before the first match.
fn fragment(text: &str, matches: &[(usize, usize)], opts: &HighlightRequest) -> String {
    let first = matches.first().map_or(0, |m| m.0);
    // start LEAD characters before the first match, at a word boundary if one is near
    let before: Vec<(usize, char)> = text[..first].char_indices().collect();
    let lead = LEAD.min(opts.fragment_chars / 4);
    let mut start = before.len().checked_sub(lead).and_then(|i| before.get(i)).map_or(0, |(b, _)| *b);
    if start > 0
        && let Some(space) = text[start..first].find(char::is_whitespace)
    {
        start += space;
        start += text[start..].chars().next().map_or(0, char::len_utf8);
    }
    let end = text[start..].char_indices().nth(opts.fragment_chars).map_or(text.len(), |(i, _)| start + i);
    let mut out = String::with_capacity(end - start + 16);
    if start > 0 {
        out.push('…');
    }
    let mut at = start;
    for &(s, e) in matches.iter().filter(|(s, e)| *s >= start && *e <= end) {
        out.push_str(&text[at..s]);
        out.push_str(&opts.pre);
        out.push_str(&text[s..e]);
        out.push_str(&opts.post);
        at = e;
    }
    out.push_str(&text[at..end]);
    if end < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(chars: usize) -> HighlightRequest {
        HighlightRequest { pre: "[".into(), post: "]".into(), fragment_chars: chars }
    }

    #[test]
    fn fragments_mark_matches_on_character_boundaries() {
        let text = "Ünïcode — 日本語 and naïve cafés";
        let s = text.find("naïve").unwrap();
        let m = [(s, s + "naïve".len())];
        assert_eq!(fragment(text, &m, &opts(1000)), "Ünïcode — 日本語 and [naïve] cafés");
        let short = fragment(text, &m, &opts(7));
        assert!(short.ends_with('…') && short.contains("[naïve]"), "{short}");
        let long: String = "word ".repeat(50) + "target end";
        let s = long.find("target").unwrap();
        let f = fragment(&long, &[(s, s + 6)], &opts(30));
        assert!(f.starts_with('…') && f.contains("[target]"), "{f}");
        assert!(f.chars().count() <= 30 + 2 + 2, "{f}");
    }
}

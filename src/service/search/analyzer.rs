//! The analyzer: text → tokens with positions.
//!
//! Words are found by Unicode word segmentation (UAX #29, `unicode-segmentation`), then each is
//! lowercased and folded (decomposed, combining marks dropped: `Café` → `cafe`), dropped if it is a
//! stop word, and stemmed with the language's Snowball stemmer (`rust-stemmers`). Every word takes
//! a position, kept or not, so a phrase with a stop word in it still needs the gap; the elements
//! of an array field are [`ELEMENT_GAP`] positions apart, so no phrase spans two of them.

use super::options::{FulltextOptions, StopWords};
use foldhash::{HashMap, HashSet};
use rust_stemmers::Stemmer;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;
use unicode_segmentation::UnicodeSegmentation;

/// Positions between two elements of an array field.
pub const ELEMENT_GAP: u32 = 100;
/// Longest token kept, in bytes after folding; longer words take a position but are not indexed.
pub const MAX_TOKEN_BYTES: usize = 128;

/// One token of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// the analyzed term
    pub term: String,
    /// the word's position in its field
    pub position: u32,
    /// the word's byte range in the text
    pub start: usize,
    /// end of the byte range
    pub end: usize,
}

/// Words remembered per thread (their terms), over all analyzers, before the memory is cleared.
const CACHED_WORDS: usize = 50_000;

/// Numbers analyzers, so a thread's word cache tells them apart.
static NEXT_ANALYZER: AtomicU64 = AtomicU64::new(1);

/// One analyzer's words on one thread: word → term number (`DROPPED` for a dropped word), and
/// the terms by number.
#[derive(Default)]
struct Words {
    ids: HashMap<Box<str>, u32>,
    /// term → its number: words that become one term (`graph`, `graphs`) share it
    numbers: HashMap<Box<str>, u32>,
    terms: Vec<Box<str>>,
}

/// The number of a word the analyzer drops.
const DROPPED: u32 = u32::MAX;

impl Words {
    fn id(&mut self, analyzer: &Analyzer, word: &str) -> u32 {
        if let Some(id) = self.ids.get(word) {
            return *id;
        }
        let id = match analyzer.analyze_word(word) {
            None => DROPPED,
            Some(term) => match self.numbers.get(term.as_str()) {
                Some(n) => *n,
                None => {
                    let n = self.terms.len() as u32;
                    self.terms.push(term.as_str().into());
                    self.numbers.insert(term.into(), n);
                    n
                }
            },
        };
        self.ids.insert(word.into(), id);
        id
    }
}

/// Per analyzer: its words.
type WordCache = HashMap<u64, Words>;

thread_local! {
    /// Words analyzed before, per analyzer: text follows a Zipf law, so most words of a document
    /// were seen before, and folding and stemming them again was most of the cost of indexing.
    static TERMS: RefCell<(usize, WordCache)> = RefCell::default();
}

/// The tokens of a document's fields: its length and each distinct term's `(field, positions)`,
/// in term order.
pub type DocumentTokens = (u64, Vec<(String, FieldPositions)>);

/// A term's positions per field: `(field number, positions)`.
pub type FieldPositions = Vec<(u16, Vec<u32>)>;

/// An analyzer built from an index's options.
pub struct Analyzer {
    id: u64,
    stemmer: Option<Stemmer>,
    stop: HashSet<String>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("stemming", &self.stemmer.is_some())
            .field("stop_words", &self.stop.len())
            .finish()
    }
}

/// Lowercases and folds one word.
pub fn fold(word: &str) -> String {
    if word.is_ascii() {
        return word.to_ascii_lowercase();
    }
    word.to_lowercase().nfd().filter(|c| !is_combining_mark(*c)).nfc().collect()
}

impl Analyzer {
    /// The analyzer `options` describe.
    pub fn new(options: &FulltextOptions) -> Analyzer {
        let language = options.language;
        let stemmer = language.filter(|_| options.stemming).map(|l| Stemmer::create(l.algorithm()));
        let stop = match &options.stop_words {
            StopWords::None => HashSet::default(),
            StopWords::Language => language
                .and_then(|l| stop_words::lookup(l.code()))
                .map(|words| words.iter().map(|w| fold(w)).collect())
                .unwrap_or_default(),
            StopWords::Custom(words) => words.iter().map(|w| fold(w)).collect(),
        };
        Analyzer { id: NEXT_ANALYZER.fetch_add(1, Ordering::Relaxed), stemmer, stop }
    }

    /// The term one word becomes, or `None` for a stop word or an overlong word (remembered per
    /// thread).
    pub fn term(&self, word: &str) -> Option<String> {
        self.with_words(|words| {
            let id = words.id(self, word);
            words.terms.get(id as usize).map(|t| t.to_string())
        })
    }

    /// Runs `f` with this analyzer's words on this thread (cleared first if the thread's cache
    /// is full: never while `f` runs, so its term numbers hold until it returns).
    fn with_words<R>(&self, f: impl FnOnce(&mut Words) -> R) -> R {
        TERMS.with(|cache| {
            let mut cache = cache.borrow_mut();
            let (_, maps) = &mut *cache;
            let total: usize = maps.values().map(|w| w.ids.len()).sum();
            if total >= CACHED_WORDS {
                maps.clear();
            }
            f(maps.entry(self.id).or_default())
        })
    }

    /// The tokens of a document: `fields` are `(field number, its texts)`; positions start at 0
    /// in each field, and each text after the first [`ELEMENT_GAP`] positions past the last word
    /// of the one before. The length counts the kept tokens. Words are numbered through the
    /// thread's cache, so the occurrences sort as integers and each term is copied once.
    pub fn document(&self, fields: &[(u16, Vec<&str>)]) -> DocumentTokens {
        self.with_words(|words| {
            let mut occurrences: Vec<(u32, u16, u32)> = Vec::with_capacity(256);
            for (field, texts) in fields {
                let mut next = 0u32;
                for text in texts {
                    let mut position = next;
                    for word in text.unicode_words() {
                        let id = words.id(self, word);
                        if id != DROPPED {
                            occurrences.push((id, *field, position));
                        }
                        position = position.saturating_add(1);
                    }
                    next = position.saturating_add(ELEMENT_GAP);
                }
            }
            occurrences.sort_unstable();
            let mut out: Vec<(String, FieldPositions)> = Vec::new();
            let mut last = DROPPED;
            for (id, field, position) in &occurrences {
                if *id != last {
                    last = *id;
                    let term = words.terms.get(*id as usize).map(|t| t.to_string()).unwrap_or_default();
                    out.push((term, Vec::new()));
                }
                if let Some((_, hits)) = out.last_mut() {
                    match hits.last_mut() {
                        Some((f, positions)) if f == field => positions.push(*position),
                        _ => hits.push((*field, vec![*position])),
                    }
                }
            }
            out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            (occurrences.len() as u64, out)
        })
    }

    fn analyze_word(&self, word: &str) -> Option<String> {
        let folded = fold(word);
        if folded.len() > MAX_TOKEN_BYTES || self.stop.contains(&folded) {
            return None;
        }
        Some(match &self.stemmer {
            Some(s) => match s.stem(&folded) {
                std::borrow::Cow::Borrowed(_) => folded,
                std::borrow::Cow::Owned(stemmed) => stemmed,
            },
            None => folded,
        })
    }

    /// Folds a word without stemming or dropping it (for prefixes: a word's start is not a word).
    pub fn fold_only(&self, word: &str) -> String {
        fold(word)
    }

    /// Calls `f` with every token of `text`, positions starting at `first`; returns the position
    /// after the last word.
    pub fn tokens(&self, text: &str, first: u32, mut f: impl FnMut(Token)) -> u32 {
        let mut position = first;
        for (start, word) in text.unicode_word_indices() {
            if let Some(term) = self.term(word) {
                f(Token { term, position, start, end: start + word.len() });
            }
            position = position.saturating_add(1);
        }
        position
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::search::options::Language;

    fn english() -> Analyzer {
        Analyzer::new(&FulltextOptions {
            language: Some(Language::English),
            stemming: true,
            stop_words: StopWords::Language,
            field_weights: Default::default(),
        })
    }

    fn terms(a: &Analyzer, text: &str) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        a.tokens(text, 0, |t| out.push((t.term, t.position)));
        out
    }

    #[test]
    fn words_are_folded_stemmed_and_stop_words_keep_their_position() {
        let a = english();
        assert_eq!(
            terms(&a, "The Graphs of Cafés, running!"),
            vec![("graph".into(), 1), ("cafe".into(), 3), ("run".into(), 4)]
        );
    }

    #[test]
    fn offsets_point_at_the_words_in_multibyte_text() {
        let a = Analyzer::new(&FulltextOptions::default());
        let text = "Ærø — Ünïcode naïve";
        let mut seen = Vec::new();
        a.tokens(text, 0, |t| seen.push((t.term.clone(), &text[t.start..t.end])));
        assert_eq!(seen, vec![("ærø".into(), "Ærø"), ("unicode".into(), "Ünïcode"), ("naive".into(), "naïve")]);
    }

    #[test]
    fn custom_stop_words_are_folded_like_the_text() {
        let a = Analyzer::new(&FulltextOptions {
            language: None,
            stemming: false,
            stop_words: StopWords::Custom(vec!["Über".into()]),
            field_weights: Default::default(),
        });
        assert_eq!(terms(&a, "uber alles"), vec![("alles".into(), 1)]);
    }
}

#[cfg(test)]
mod document_tests {
    use super::*;
    use crate::service::search::options::{FulltextOptions, Language, StopWords};

    #[test]
    fn document_tokens_group_by_term_with_positions() {
        let a = Analyzer::new(&FulltextOptions {
            language: Some(Language::English),
            stemming: true,
            stop_words: StopWords::Language,
            field_weights: Default::default(),
        });
        let (len, terms) = a.document(&[(0, vec!["Graph databases"]), (1, vec!["A graph database stores", "graph"])]);
        assert_eq!(len, 6);
        assert_eq!(
            terms,
            vec![
                ("databas".to_owned(), vec![(0, vec![1]), (1, vec![2])]),
                ("graph".to_owned(), vec![(0, vec![0]), (1, vec![1, 104])]),
                ("store".to_owned(), vec![(1, vec![3])]),
            ]
        );
    }
}

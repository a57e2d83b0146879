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
const CACHED_WORDS: usize = 100_000;

/// Numbers analyzers, so a thread's word cache tells them apart.
static NEXT_ANALYZER: AtomicU64 = AtomicU64::new(1);

/// Per analyzer: word → term.
type WordCache = HashMap<u64, HashMap<Box<str>, Option<Box<str>>>>;

thread_local! {
    /// word → term (None: dropped), per analyzer: text follows a Zipf law, so most words of a
    /// document were analyzed before, and folding and stemming them again is most of the cost.
    static TERMS: RefCell<(usize, WordCache)> = RefCell::default();
}

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
        TERMS.with(|cache| {
            let mut cache = cache.borrow_mut();
            let (count, maps) = &mut *cache;
            if let Some(t) = maps.get(&self.id).and_then(|m| m.get(word)) {
                return t.as_deref().map(str::to_owned);
            }
            let t = self.analyze_word(word);
            if *count >= CACHED_WORDS {
                maps.clear();
                *count = 0;
            }
            *count += 1;
            maps.entry(self.id).or_default().insert(word.into(), t.as_deref().map(Into::into));
            t
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
    use super::super::options::Language;
    use super::*;

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

//! The options of a `fulltext` index, checked at creation and stored with the definition (with
//! every default filled in, so the definition shows exactly what the analyzer does).

use crate::service::{Result, ServiceError};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Most custom stop words.
const MAX_STOP_WORDS: usize = 10_000;
/// Largest field weight.
const MAX_WEIGHT: f64 = 1000.0;

/// The Snowball languages (those `rust-stemmers` has), with their stop-word lists (NLTK's, from
/// the `stop-words` crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Language {
    Arabic,
    Danish,
    Dutch,
    English,
    Finnish,
    French,
    German,
    Greek,
    Hungarian,
    Italian,
    Norwegian,
    Portuguese,
    Romanian,
    Russian,
    Spanish,
    Swedish,
    Tamil,
    Turkish,
}

const LANGUAGES: [(&str, &str, Language); 18] = [
    ("arabic", "ar", Language::Arabic),
    ("danish", "da", Language::Danish),
    ("dutch", "nl", Language::Dutch),
    ("english", "en", Language::English),
    ("finnish", "fi", Language::Finnish),
    ("french", "fr", Language::French),
    ("german", "de", Language::German),
    ("greek", "el", Language::Greek),
    ("hungarian", "hu", Language::Hungarian),
    ("italian", "it", Language::Italian),
    ("norwegian", "no", Language::Norwegian),
    ("portuguese", "pt", Language::Portuguese),
    ("romanian", "ro", Language::Romanian),
    ("russian", "ru", Language::Russian),
    ("spanish", "es", Language::Spanish),
    ("swedish", "sv", Language::Swedish),
    ("tamil", "ta", Language::Tamil),
    ("turkish", "tr", Language::Turkish),
];

/// The language option values (`none` aside), for the OpenAPI document.
pub fn language_names() -> impl Iterator<Item = &'static str> {
    LANGUAGES.iter().map(|(name, _, _)| *name)
}

impl Language {
    fn entry(self) -> &'static (&'static str, &'static str, Language) {
        LANGUAGES.iter().find(|(_, _, l)| *l == self).unwrap_or(&LANGUAGES[3])
    }

    /// The option value, e.g. `english`.
    pub fn name(self) -> &'static str {
        self.entry().0
    }

    /// The ISO 639-1 code of the stop-word list.
    pub fn code(self) -> &'static str {
        self.entry().1
    }

    /// The Snowball stemmer.
    pub fn algorithm(self) -> rust_stemmers::Algorithm {
        use rust_stemmers::Algorithm as A;
        match self {
            Language::Arabic => A::Arabic,
            Language::Danish => A::Danish,
            Language::Dutch => A::Dutch,
            Language::English => A::English,
            Language::Finnish => A::Finnish,
            Language::French => A::French,
            Language::German => A::German,
            Language::Greek => A::Greek,
            Language::Hungarian => A::Hungarian,
            Language::Italian => A::Italian,
            Language::Norwegian => A::Norwegian,
            Language::Portuguese => A::Portuguese,
            Language::Romanian => A::Romanian,
            Language::Russian => A::Russian,
            Language::Spanish => A::Spanish,
            Language::Swedish => A::Swedish,
            Language::Tamil => A::Tamil,
            Language::Turkish => A::Turkish,
        }
    }
}

/// Which stop words are dropped.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum StopWords {
    /// none
    #[default]
    None,
    /// the language's list
    Language,
    /// these words
    Custom(Vec<String>),
}

/// A fulltext index's analyzer and ranking options.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FulltextOptions {
    /// `None`: no stemming, no language stop words
    pub language: Option<Language>,
    /// stem with the language's Snowball stemmer
    pub stemming: bool,
    /// stop words
    pub stop_words: StopWords,
    /// per-field weights (default 1)
    pub field_weights: BTreeMap<String, f64>,
}

fn bad(msg: impl Into<String>) -> ServiceError {
    ServiceError::InvalidRequest(msg.into())
}

impl FulltextOptions {
    /// Checks the options of a new index on `fields`; defaults: English, stemming on, no stop words.
    pub fn parse(options: &Map<String, Value>, fields: &[String]) -> Result<FulltextOptions> {
        let mut out = FulltextOptions { language: Some(Language::English), stemming: true, ..Default::default() };
        for (key, value) in options {
            match key.as_str() {
                "language" => {
                    let name = value.as_str().ok_or_else(|| bad("`language` is a string"))?;
                    out.language = match name {
                        "none" => None,
                        _ => Some(LANGUAGES.iter().find(|(n, _, _)| *n == name).map(|(_, _, l)| *l).ok_or_else(
                            || {
                                let names: Vec<_> = LANGUAGES.iter().map(|(n, _, _)| *n).collect();
                                bad(format!("unknown language {name:?}: one of none, {}", names.join(", ")))
                            },
                        )?),
                    };
                }
                "stemming" => out.stemming = value.as_bool().ok_or_else(|| bad("`stemming` is true or false"))?,
                "stop_words" => {
                    out.stop_words = match value {
                        Value::Bool(true) => StopWords::Language,
                        Value::Bool(false) => StopWords::None,
                        Value::Array(words) if words.len() <= MAX_STOP_WORDS => StopWords::Custom(
                            words
                                .iter()
                                .map(|w| w.as_str().filter(|w| !w.is_empty() && w.len() <= 128).map(str::to_owned))
                                .collect::<Option<Vec<_>>>()
                                .ok_or_else(|| bad("custom `stop_words` are non-empty strings of at most 128 bytes"))?,
                        ),
                        Value::Array(_) => return Err(bad(format!("at most {MAX_STOP_WORDS} custom stop words"))),
                        _ => return Err(bad("`stop_words` is true, false or a list of words")),
                    }
                }
                "field_weights" => {
                    let weights = value.as_object().ok_or_else(|| bad("`field_weights` maps fields to weights"))?;
                    for (field, w) in weights {
                        if !fields.contains(field) {
                            return Err(bad(format!("field_weights: {field:?} is not one of the index's fields")));
                        }
                        let w =
                            w.as_f64().filter(|w| w.is_finite() && *w > 0.0 && *w <= MAX_WEIGHT).ok_or_else(|| {
                                bad(format!(
                                    "field_weights: the weight of {field:?} is a number above 0, at most {MAX_WEIGHT}"
                                ))
                            })?;
                        out.field_weights.insert(field.clone(), w);
                    }
                }
                other => {
                    return Err(bad(format!(
                        "unknown fulltext option {other:?}: language, stemming, stop_words, field_weights"
                    )));
                }
            }
        }
        if out.stop_words == StopWords::Language && out.language.is_none() {
            return Err(bad("`stop_words: true` needs a language; give a list of words instead"));
        }
        Ok(out)
    }

    /// Reads the stored options (written by [`FulltextOptions::to_json`]).
    pub fn stored(options: &Map<String, Value>, fields: &[String]) -> FulltextOptions {
        // Stored options passed `parse` at creation; a damaged definition falls back to defaults.
        FulltextOptions::parse(options, fields).unwrap_or_default()
    }

    /// The options with every default filled in.
    pub fn to_json(&self) -> Map<String, Value> {
        let stop_words = match &self.stop_words {
            StopWords::None => json!(false),
            StopWords::Language => json!(true),
            StopWords::Custom(w) => json!(w),
        };
        let mut m = Map::new();
        m.insert("language".into(), json!(self.language.map_or("none", Language::name)));
        m.insert("stemming".into(), json!(self.stemming));
        m.insert("stop_words".into(), stop_words);
        m.insert("field_weights".into(), json!(self.field_weights));
        m
    }

    /// The weight of field `field`.
    pub fn weight(&self, field: &str) -> f64 {
        self.field_weights.get(field).copied().unwrap_or(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<FulltextOptions> {
        FulltextOptions::parse(v.as_object().unwrap(), &["title".into(), "body".into()])
    }

    #[test]
    fn defaults_and_round_trip() {
        let o = parse(json!({})).unwrap();
        assert_eq!(o.language, Some(Language::English));
        assert!(o.stemming);
        assert_eq!(parse(Value::Object(o.to_json())).unwrap(), o);
        let o = parse(json!({"language": "none", "stop_words": ["a"], "field_weights": {"title": 2}})).unwrap();
        assert_eq!(parse(Value::Object(o.to_json())).unwrap(), o);
        assert!((o.weight("title") - 2.0).abs() < f64::EPSILON && (o.weight("body") - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn bad_options_are_refused() {
        for bad in [
            json!({"language": "klingon"}),
            json!({"stemming": "yes"}),
            json!({"stop_words": [1]}),
            json!({"language": "none", "stop_words": true}),
            json!({"field_weights": {"nope": 1}}),
            json!({"field_weights": {"title": 0}}),
            json!({"field_weights": {"title": 1e9}}),
            json!({"colour": "blue"}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }
}

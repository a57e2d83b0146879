//! From clauses to indexed terms: prefixes and typo-tolerant terms read the index's term
//! dictionary (`ftterm` keys, one per distinct term) of the search's snapshot.

use super::parse::Clause;
use crate::keys::FtStatKey;
use crate::service::core::cancel::{Stop, Watched};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};
use levenshtein_automata::{Distance, LevenshteinAutomatonBuilder};
use std::sync::OnceLock;

/// Most terms one prefix or typo-tolerant clause expands to.
pub const MAX_EXPANSIONS: usize = 1024;

/// The automaton builders for one and two edits (a transposition counts as one edit), built once.
fn builder(distance: u8) -> &'static LevenshteinAutomatonBuilder {
    static ONE: OnceLock<LevenshteinAutomatonBuilder> = OnceLock::new();
    static TWO: OnceLock<LevenshteinAutomatonBuilder> = OnceLock::new();
    if distance <= 1 {
        ONE.get_or_init(|| LevenshteinAutomatonBuilder::new(1, true))
    } else {
        TWO.get_or_init(|| LevenshteinAutomatonBuilder::new(2, true))
    }
}

fn too_many(clause: &Clause) -> ServiceError {
    let shown = match clause {
        Clause::Prefix(p) => format!("{p}*"),
        Clause::Fuzzy(t, d) => format!("{t}~{d}"),
        other => format!("{other:?}"),
    };
    ServiceError::QueryTooComplex(format!(
        "{shown} matches more than {MAX_EXPANSIONS} indexed terms; make it longer or stricter"
    ))
}

/// The indexed terms a prefix or fuzzy clause stands for, in term order; a plain term stands for
/// itself. (Phrases are matched term by term elsewhere.)
pub fn expand(view: &ReadView, table: &str, index: &str, clause: &Clause, stop: &Stop) -> Result<Vec<String>> {
    let (start, fuzzy) = match clause {
        Clause::Term(t) => return Ok(vec![t.clone()]),
        Clause::Phrase(_) => return Ok(Vec::new()),
        Clause::Prefix(p) => (p.as_str(), None),
        Clause::Fuzzy(t, d) => ("", Some(builder(*d).build_dfa(t))),
    };
    let prefix = FtStatKey::term_prefix(table, index, start);
    let mut out = Vec::new();
    let scan = view.scan(Space::Ftstat, KeyRange::Prefix(prefix), false).map(|i| i.map_err(ServiceError::from));
    for item in Watched::new(scan, stop) {
        let (key, _) = item?;
        let FtStatKey::Term { token, .. } =
            FtStatKey::decode(&key).map_err(|e| ServiceError::damaged("ftstat", format!("a term key: {e}")))?
        else {
            continue;
        };
        if let Some(dfa) = &fuzzy
            && !matches!(dfa.eval(token.as_bytes()), Distance::Exact(_))
        {
            continue;
        }
        if out.len() == MAX_EXPANSIONS {
            return Err(too_many(clause));
        }
        out.push(token.into_owned());
    }
    Ok(out)
}

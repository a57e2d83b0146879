//! The exhaustive search: every posting of every query term read into a map of matches with
//! their exact BM25 scores (so `total` is exact). Queries with a phrase or a filter take it (a
//! phrase needs every candidate's positions, a filter every match); term queries take the
//! document-at-a-time top-k of `daat`, which gives the same scores.

use super::daat;
use super::parse::Query;
use super::postings;
use super::score::{self, Bm25};
use crate::service::Result;
use crate::service::stop::Stop;
use crate::storage::Slice;
use foldhash::{HashMap, HashSet};

/// A term of the query with its document frequency (the sum of its blocks' counts).
#[derive(Debug, Clone)]
pub(super) struct DictTerm {
    /// the term
    pub term: String,
    /// how many documents hold it
    pub df: u64,
}

/// A matching document's running score.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Acc {
    /// the score so far
    pub score: f64,
    /// bit `i`: included clause `i` matched
    pub matched: u64,
}

/// What one search found: every match with its score.
pub(super) struct Scored<'b> {
    /// every match, with its score
    pub accs: HashMap<&'b [u8], Acc>,
    /// the terms that matched, for highlights
    pub terms: HashSet<String>,
}

/// Scores every document matching an included clause; removes those matching an excluded one.
pub(super) fn score_all<'b>(
    weights: &[f64],
    q: &Query,
    stats: Bm25,
    keys: &'b [Slice],
    store: &'b [Slice],
    plan: &'b [ClausePlan],
    stop: &Stop,
) -> Result<Scored<'b>> {
    let weight = |field: u16| weights.get(usize::from(field)).copied().unwrap_or(1.0);
    // sized for the largest clause's matches up front: growing it rehashed every posting
    let largest = plan
        .iter()
        .take(q.include.len())
        .map(|cp| match cp {
            ClausePlan::Terms(list) => list.iter().map(|(t, _)| t.df).sum::<u64>(),
            ClausePlan::Phrase { terms, .. } => terms.iter().map(|(t, _)| t.df).min().unwrap_or(0),
        })
        .max()
        .unwrap_or(0);
    let mut accs: HashMap<&'b [u8], Acc> =
        HashMap::with_capacity_and_hasher(usize::try_from(largest.min(1 << 20)).unwrap_or(0), Default::default());
    let mut excluded: HashSet<&'b [u8]> = HashSet::default();
    let mut terms = HashSet::default();
    for (i, cp) in plan.iter().enumerate() {
        stop.check()?;
        // included clauses score; excluded ones only name documents to drop
        let bit = if i < q.include.len() { 1u64 << i } else { 0 };
        let mut hit = |id: &'b [u8], contribution: f64| {
            if bit == 0 {
                excluded.insert(id);
                return;
            }
            let acc = accs.entry(id).or_default();
            acc.score += contribution;
            acc.matched |= bit;
        };
        match cp {
            ClausePlan::Terms(list) => {
                for (t, range) in list {
                    let idf = stats.idf(t.df);
                    for value in &store[range.clone()] {
                        for p in postings::decode_block(value)? {
                            let mut contribution = 0.0;
                            p.fields(|f| {
                                contribution += weight(f.field) * idf * stats.tf_part(f64::from(f.tf), p.len)
                            })?;
                            hit(p.id, contribution);
                        }
                    }
                    if bit != 0 {
                        terms.insert(t.term.clone());
                    }
                }
            }
            ClausePlan::Phrase { terms: list, offsets } => {
                let idf: f64 = list.iter().map(|(t, _)| stats.idf(t.df)).sum();
                for (id, len, per_field) in phrase_matches(keys, store, list, offsets, stop)? {
                    let contribution: f64 = per_field
                        .iter()
                        .map(|(field, freq)| weight(*field) * idf * stats.tf_part(f64::from(*freq), len))
                        .sum();
                    hit(id, contribution);
                }
                if bit != 0 {
                    terms.extend(list.iter().map(|(t, _)| t.term.clone()));
                }
            }
        }
    }
    accs.retain(|id, _| !excluded.contains(id));
    Ok(Scored { accs, terms })
}

/// A clause with its terms and where their blocks are in the block store.
pub(super) enum ClausePlan {
    /// terms (one, or a prefix's or typo's expansion): a document holding any matches
    Terms(Vec<(DictTerm, std::ops::Range<usize>)>),
    /// a phrase: its terms and each one's offset in it
    Phrase { terms: Vec<(DictTerm, std::ops::Range<usize>)>, offsets: Vec<u32> },
}

type PhraseMatch<'b> = (&'b [u8], u64, Vec<(u16, u32)>);

/// The documents where a phrase occurs: id, length, and per field how often. The documents
/// holding every term come from a merge of the terms' postings (`daat::common`: no map of the
/// rarest term's documents, no probe for every posting of the others), and positions are
/// decoded (into reused buffers) only for those.
fn phrase_matches<'b>(
    keys: &'b [Slice],
    store: &'b [Slice],
    terms: &'b [(DictTerm, std::ops::Range<usize>)],
    offsets: &[u32],
    stop: &Stop,
) -> Result<Vec<PhraseMatch<'b>>> {
    let n = terms.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let inputs = terms
        .iter()
        .map(|(t, range)| daat::term(keys, store, &t.term, t.df, range.clone(), 0, Bm25::new(0, 0)))
        .collect::<Result<Vec<_>>>()?;
    let rows = daat::common(&inputs, stop)?;
    let mut out = Vec::new();
    let mut positions: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut fields: Vec<Vec<postings::FieldPosting<'b>>> = vec![Vec::new(); n];
    for row in rows.chunks(n) {
        for (k, p) in row.iter().enumerate() {
            fields[k].clear();
            p.fields(|f| fields[k].push(f))?;
        }
        let mut per_field = Vec::new();
        'field: for i in 0..fields[0].len() {
            let field = fields[0][i].field;
            for k in 0..n {
                let Some(fk) = fields[k].iter().find(|g| g.field == field) else { continue 'field };
                fk.positions_into(&mut positions[k])?;
            }
            let freq = score::phrase_frequency(&positions, offsets);
            if freq > 0 {
                per_field.push((field, freq));
            }
        }
        if let (false, Some(first)) = (per_field.is_empty(), row.first()) {
            out.push((first.id, first.len, per_field));
        }
    }
    out.sort_by(|a, b| a.0.cmp(b.0));
    Ok(out)
}

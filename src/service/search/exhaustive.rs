//! The exhaustive search: every posting of every query term read into a map of matches with
//! their exact BM25 scores (so `total` is exact). Queries with a phrase or a filter take it (a
//! phrase needs every candidate's positions, a filter every match); term queries take the
//! document-at-a-time top-k of `daat`, which gives the same scores.

use super::block::{self, Decoded};
use super::parse::Query;
use super::score::{self, Bm25};
use super::{cursor, daat};
use crate::keys::FtidxKey;
use crate::service::core::cancel::Stop;
use crate::service::{Result, ServiceError};
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
pub(super) struct Scored {
    /// every match (by document number), with its score
    pub accs: HashMap<u64, Acc>,
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
) -> Result<Scored> {
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
    let mut accs: HashMap<u64, Acc> =
        HashMap::with_capacity_and_hasher(usize::try_from(largest.min(1 << 20)).unwrap_or(0), Default::default());
    let mut excluded: HashSet<u64> = HashSet::default();
    let mut d = Decoded::default();
    let mut terms = HashSet::default();
    for (i, cp) in plan.iter().enumerate() {
        stop.check()?;
        // included clauses score; excluded ones only name documents to drop
        let bit = if i < q.include.len() { 1u64 << i } else { 0 };
        let mut hit = |id: u64, contribution: f64| {
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
                    for i in range.clone() {
                        d.load(first_of(&keys[i])?, &store[i])?;
                        d.fill()?;
                        for j in 0..d.len() {
                            let len = d.lens[j];
                            let contribution: f64 = d
                                .pairs_of(j)
                                .iter()
                                .map(|&(f, tf)| weight(f) * idf * stats.tf_part(f64::from(tf), len))
                                .sum();
                            hit(d.docs[j], contribution);
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

/// The first number of a block, from its key.
fn first_of(key: &[u8]) -> Result<u64> {
    Ok(FtidxKey::decode(key).map_err(|e| ServiceError::damaged("ftidx", format!("a key: {e}")))?.first)
}

/// A clause with its terms and where their blocks are in the block store.
pub(super) enum ClausePlan {
    /// terms (one, or a prefix's or typo's expansion): a document holding any matches
    Terms(Vec<(DictTerm, std::ops::Range<usize>)>),
    /// a phrase: its terms and each one's offset in it
    Phrase { terms: Vec<(DictTerm, std::ops::Range<usize>)>, offsets: Vec<u32> },
}

type PhraseMatch = (u64, u64, Vec<(u16, u32)>);

/// The documents where a phrase occurs: number, length, and per field how often. The documents
/// holding every term come from a merge of the terms' postings (`daat::common`: no map of the
/// rarest term's documents, no probe for every posting of the others), and positions are
/// decoded (into reused buffers) only for those.
fn phrase_matches(
    keys: &[Slice],
    store: &[Slice],
    terms: &[(DictTerm, std::ops::Range<usize>)],
    offsets: &[u32],
    stop: &Stop,
) -> Result<Vec<PhraseMatch>> {
    let n = terms.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let inputs = terms
        .iter()
        .map(|(t, range)| cursor::term(keys, store, &t.term, t.df, range.clone(), 0, Bm25::new(0, 0)))
        .collect::<Result<Vec<_>>>()?;
    let mut out = Vec::new();
    // per term, the positions of each of its fields
    let mut lists: Vec<Vec<Vec<u32>>> = vec![Vec::new(); n];
    let mut positions: Vec<Vec<u32>> = vec![Vec::new(); n];
    daat::common(&inputs, stop, |num, row| {
        for (k, held) in row.iter().enumerate() {
            lists[k].resize_with(held.pairs.len(), Vec::new);
            block::field_positions(held.positions, held.pairs, &mut lists[k])?;
        }
        let mut per_field = Vec::new();
        'field: for (i, &(field, _)) in row[0].pairs.iter().enumerate() {
            for k in 0..n {
                let Some(j) = row[k].pairs.iter().position(|g| g.0 == field) else { continue 'field };
                positions[k].clone_from(&lists[k][if k == 0 { i } else { j }]);
            }
            let freq = score::phrase_frequency(&positions, offsets);
            if freq > 0 {
                per_field.push((field, freq));
            }
        }
        if !per_field.is_empty() {
            out.push((num, row[0].len, per_field));
        }
        Ok(())
    })?;
    Ok(out)
}

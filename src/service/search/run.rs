//! Running a search on one snapshot: clauses → terms → postings → exact BM25 for every matching
//! document (so `total` is exact), exclusions and the filter applied, then the top
//! `offset + limit` by a bounded heap, their documents and highlights.
//!
//! Every posting of every query term is read: `total` counts all matches, so no pruning could
//! skip a posting without losing the count. What is skipped is what scoring does not need:
//! positions are decoded only for phrases, and documents are read only for the returned page
//! (and for a filter no index narrows).

use super::expand;
use super::parse::{self, Clause, Query};
use super::postings::{self, Posting};
use super::score::{self, Bm25};
use super::{AnalyzeRequest, AnalyzeResponse, AnalyzedToken, MAX_DEPTH, MAX_FRAGMENT_CHARS, MAX_LIMIT, Mode};
use super::{SearchRequest, highlight, maintain};
use crate::catalog::{IndexDef, IndexKind};
use crate::keys::{EntityKey, FtStatKey, FtidxKey};
use crate::service::query::filter::Filter;
use crate::service::query::{self};
use crate::service::stop::{Stop, Watched};
use crate::service::ttl::expiry::{Expiry, now_ms};
use crate::service::{Db, Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Slice, Space};
use foldhash::{HashMap, HashSet};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Most bytes of postings a search run on the request's own thread may read (see [`Db::search`]):
/// past it the search starts again on the blocking pool (measured on the peers bench: 1-term
/// searches 194 → 121 µs server-side, 2-term and phrase searches unchanged within the noise).
pub const INLINE_POSTING_BYTES: usize = 64 * 1024;
/// Deepest page (`offset + limit`) of a search run on the request's own thread.
pub const INLINE_DEPTH: usize = 100;

/// Longest text `analyze` takes, in bytes.
const MAX_ANALYZE_BYTES: usize = 64 * 1024;
/// Candidates above which a filter is applied through an index scan rather than document by
/// document (when an index narrows it to fewer).
const FILTER_BY_INDEX_ABOVE: usize = 256;

/// A posting's document id as text (ids are UTF-8 when written; a damaged one is an error).
fn text_id(id: &[u8]) -> Result<&str> {
    std::str::from_utf8(id).map_err(|_| ServiceError::Internal("a damaged document id in a posting".into()))
}

/// A matching document's running score.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    score: f64,
    /// bit `i`: included clause `i` matched
    matched: u64,
}

/// A hit in the top-k heap: ordered so the heap's top is the worst kept hit.
#[derive(Debug)]
struct Ranked<'a> {
    score: f64,
    id: &'a [u8],
}
impl PartialEq for Ranked<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ranked<'_> {}
impl Ord for Ranked<'_> {
    /// better = higher score, then smaller id; "greater" here means worse
    fn cmp(&self, o: &Self) -> Ordering {
        o.score.total_cmp(&self.score).then_with(|| self.id.cmp(o.id))
    }
}
impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// A term of the query with its document frequency (the sum of its blocks' counts).
#[derive(Debug, Clone)]
struct DictTerm {
    term: String,
    df: u64,
}

/// The posting blocks of one term, read from the snapshot.
fn blocks(view: &ReadView, def: &IndexDef, term: &str, stop: &Stop, budget: &mut usize) -> Result<Option<Vec<Slice>>> {
    let prefix = FtidxKey::token_prefix(&def.table, &def.name, term);
    let scan = view.scan(Space::Ftidx, KeyRange::Prefix(prefix), false).map(|i| i.map_err(ServiceError::from));
    let mut out = Vec::new();
    for item in Watched::new(scan, stop) {
        let (_, block) = item?;
        match budget.checked_sub(block.len()) {
            Some(left) => *budget = left,
            None => return Ok(None),
        }
        out.push(block);
    }
    Ok(Some(out))
}

/// The fulltext index a search uses, as of the snapshot.
fn search_index(view: &ReadView, db: &Db, table: &str, name: Option<&str>) -> Result<IndexDef> {
    let defs = query::ready_indexes(view, db.catalog(), table)?;
    let fulltext: Vec<&IndexDef> = defs.iter().filter(|d| d.kind == IndexKind::Fulltext).collect();
    match name {
        Some(n) => match defs.iter().find(|d| d.name == n) {
            Some(d) if d.kind == IndexKind::Fulltext => Ok(d.clone()),
            Some(_) => Err(ServiceError::NoSearchIndex(format!("index {n:?} is not a fulltext index"))),
            None if db.catalog().index(table, n).is_some() => {
                Err(ServiceError::NoSearchIndex(format!("index {n:?} is still building; its state shows progress")))
            }
            // the index is named in the body, not the path: the table (the resource) exists
            None => Err(ServiceError::NoSearchIndex(format!("table {table:?} has no index {n:?}"))),
        },
        None => match fulltext.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(ServiceError::NoSearchIndex(format!("table {table:?} has no ready fulltext index"))),
            _ => Err(ServiceError::NoSearchIndex(format!(
                "table {table:?} has several fulltext indexes: name one in `index`"
            ))),
        },
    }
}

/// What one search found: every match with its score.
struct Scored<'b> {
    accs: HashMap<&'b [u8], Acc>,
    /// the terms that matched, for highlights
    terms: HashSet<String>,
}

/// Scores every document matching an included clause; removes those matching an excluded one.
fn score_all<'b>(
    def: &IndexDef,
    q: &Query,
    stats: Bm25,
    store: &'b [Slice],
    plan: &[ClausePlan],
    stop: &Stop,
) -> Result<Scored<'b>> {
    let options = super::options::FulltextOptions::stored(&def.options, &def.fields);
    let weights: Vec<f64> = def.fields.iter().map(|f| options.weight(f)).collect();
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
                for (id, len, per_field) in phrase_matches(store, list, offsets)? {
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
enum ClausePlan {
    Terms(Vec<(DictTerm, std::ops::Range<usize>)>),
    Phrase { terms: Vec<(DictTerm, std::ops::Range<usize>)>, offsets: Vec<u32> },
}

type PhraseMatch<'b> = (&'b [u8], u64, Vec<(u16, u32)>);

/// The documents where a phrase occurs: id, length, and per field how often. The rarest term's
/// documents are the candidates; each other term's postings are kept only for those still in
/// the running, and positions are decoded (into reused buffers) only for documents that hold
/// every term.
fn phrase_matches<'b>(
    store: &'b [Slice],
    terms: &[(DictTerm, std::ops::Range<usize>)],
    offsets: &[u32],
) -> Result<Vec<PhraseMatch<'b>>> {
    let n = terms.len();
    let Some((rarest, _)) = terms.iter().enumerate().min_by_key(|(_, (t, _))| t.df) else { return Ok(Vec::new()) };
    // candidate i's posting of term k is slots[i * n + k]
    let expected = usize::try_from(terms[rarest].0.df.min(1 << 20)).unwrap_or(0);
    let mut index: HashMap<&'b [u8], usize> = HashMap::with_capacity_and_hasher(expected, Default::default());
    let mut slots: Vec<Option<Posting<'b>>> = Vec::with_capacity(expected * n);
    for value in &store[terms[rarest].1.clone()] {
        for p in postings::decode_block(value)? {
            let at = slots.len();
            index.insert(p.id, at / n);
            slots.extend(std::iter::repeat_n(None, n));
            slots[at + rarest] = Some(p);
        }
    }
    for (k, (_, range)) in terms.iter().enumerate().filter(|(k, _)| *k != rarest) {
        for value in &store[range.clone()] {
            for p in postings::decode_block(value)? {
                if let Some(&i) = index.get(p.id) {
                    slots[i * n + k] = Some(p);
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut positions: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut fields: Vec<Vec<postings::FieldPosting<'b>>> = vec![Vec::new(); n];
    for row in slots.chunks(n) {
        if row.iter().any(Option::is_none) {
            continue;
        }
        for (k, p) in row.iter().enumerate() {
            fields[k].clear();
            if let Some(p) = p {
                p.fields(|f| fields[k].push(f))?;
            }
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
        if let (false, Some(Some(first))) = (per_field.is_empty(), row.first()) {
            out.push((first.id, first.len, per_field));
        }
    }
    out.sort_by(|a, b| a.0.cmp(b.0));
    Ok(out)
}

impl Db {
    /// Searches a table's fulltext index.
    pub async fn search(self: &Arc<Self>, table: String, req: SearchRequest) -> Result<Vec<u8>> {
        if req.vector.is_some() || req.fusion.is_some() {
            return Err(ServiceError::InvalidRequest(
                "`vector` and `fusion` make a hybrid search (hybrid_search)".into(),
            ));
        }
        let limit = req.limit.unwrap_or(10);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_LIMIT}")));
        }
        let offset = req.offset.unwrap_or(0);
        if offset.saturating_add(limit) > MAX_DEPTH {
            return Err(ServiceError::InvalidRequest(format!("offset + limit must be at most {MAX_DEPTH}")));
        }
        if let Some(h) = &req.highlight
            && (!(1..=MAX_FRAGMENT_CHARS).contains(&h.fragment_chars) || h.pre.len() > 256 || h.post.len() > 256)
        {
            return Err(ServiceError::InvalidRequest(format!(
                "highlight: fragment_chars is 1-{MAX_FRAGMENT_CHARS}, pre and post at most 256 bytes"
            )));
        }
        if let Some(fields) = &req.fields {
            if fields.len() > query::MAX_FIELDS {
                return Err(ServiceError::QueryTooComplex(format!(
                    "a search returns at most {} fields",
                    query::MAX_FIELDS
                )));
            }
            if fields.iter().any(|f| f.is_empty() || f.split('.').any(str::is_empty)) {
                return Err(ServiceError::InvalidRequest("fields are non-empty dotted paths".into()));
            }
        }
        let filter = req.filter.as_ref().map(Filter::parse).transpose()?;
        self.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let (stop, _abandon) = self.request_stop();
        // A search of few postings (no filter, no highlights, a shallow page) runs here: its reads
        // are a few point reads and short scans, and the hop to the blocking pool cost a third of
        // a 1-term search's samples (task switches and wake-ups) on the peers bench's texts.
        if filter.is_none()
            && req.highlight.is_none()
            && offset + limit <= INLINE_DEPTH
            && let Some(out) = self.run_search(&table, &req, None, limit, offset, &stop, true)?
        {
            return Ok(out);
        }
        self.read(move |db| {
            db.run_search(&table, &req, filter.as_ref(), limit, offset, &stop, false)?
                .ok_or_else(|| ServiceError::Internal("a search on the blocking pool was refused".into()))
        })
        .await
    }

    /// The search. `inline`: only one whose postings take at most [`INLINE_POSTING_BYTES`] —
    /// `None` (nothing done) once its terms' postings are found to take more.
    #[allow(clippy::too_many_arguments)]
    fn run_search(
        &self,
        table: &str,
        req: &SearchRequest,
        filter: Option<&Filter>,
        limit: usize,
        offset: usize,
        stop: &Stop,
        inline: bool,
    ) -> Result<Option<Vec<u8>>> {
        let view = self.store.snapshot();
        let def = search_index(&view, self, table, req.index.as_deref())?;
        let analyzer = maintain::analyzer(&def);
        let q = parse::parse(&req.query, &analyzer)?;
        if q.include.is_empty() {
            return Err(ServiceError::InvalidQuery {
                position: 0,
                reason: "the query needs a term that is neither excluded nor a stop word".into(),
            });
        }
        let (n, total_len) =
            postings::decode_stat(view.get(Space::Ftstat, &FtStatKey::stat(table, &def.name).encode())?.as_deref());
        let stats = Bm25::new(n, total_len);
        // every clause's terms, and all their blocks read once into one store
        let mut store: Vec<Slice> = Vec::new();
        let mut read: HashMap<String, std::ops::Range<usize>> = HashMap::default();
        // (inline: `None` once the postings read pass the budget)
        let mut budget = if inline { INLINE_POSTING_BYTES } else { usize::MAX };
        let mut load = |term: String, store: &mut Vec<Slice>| -> Result<Option<(DictTerm, std::ops::Range<usize>)>> {
            let range = match read.get(&term) {
                Some(r) => r.clone(),
                None => {
                    let start = store.len();
                    let Some(found) = blocks(&view, &def, &term, stop, &mut budget)? else { return Ok(None) };
                    store.extend(found);
                    read.insert(term.clone(), start..store.len());
                    start..store.len()
                }
            };
            let df = store[range.clone()].iter().map(|b| postings::block_len(b)).sum::<Result<u64>>()?;
            Ok(Some((DictTerm { term, df }, range)))
        };
        let mut plan = Vec::new();
        for clause in q.include.iter().chain(&q.exclude) {
            plan.push(match clause {
                Clause::Phrase(parts) => {
                    let mut terms = Vec::new();
                    for (t, _) in parts {
                        let Some(term) = load(t.clone(), &mut store)? else { return Ok(None) };
                        terms.push(term);
                    }
                    ClausePlan::Phrase { terms, offsets: parts.iter().map(|(_, o)| *o).collect() }
                }
                other => {
                    let mut terms = Vec::new();
                    for t in expand::expand(&view, table, &def.name, other, stop)? {
                        let Some(term) = load(t, &mut store)? else { return Ok(None) };
                        terms.push(term);
                    }
                    ClausePlan::Terms(terms)
                }
            });
        }
        let Scored { mut accs, terms } = score_all(&def, &q, stats, &store, &plan, stop)?;
        let all = if q.include.len() >= 64 { u64::MAX } else { (1u64 << q.include.len()) - 1 };
        accs.retain(|_, a| if req.mode == Mode::All { a.matched == all } else { a.matched != 0 });
        let dict = self.catalog.dict();
        if let Some(filter) = filter {
            let by_index = if accs.len() > FILTER_BY_INDEX_ABOVE {
                query::indexed_matches(&view, &self.catalog, table, filter, accs.len() as u64, stop)?
            } else {
                None
            };
            match by_index {
                Some(ids) => accs.retain(|id, _| std::str::from_utf8(id).is_ok_and(|id| ids.contains(id))),
                None => {
                    let mut keep = HashSet::default();
                    for id in accs.keys() {
                        stop.check()?;
                        let text = text_id(id)?;
                        if let Some(blob) = view.get(Space::Entity, &EntityKey::new(table, text).encode())?
                            && filter.matches(text, &blob, &dict)?
                        {
                            keep.insert(*id);
                        }
                    }
                    accs.retain(|id, _| keep.contains(id));
                }
            }
        }
        // Expired documents not yet swept are no hits, and not in `total`: their expiry entries
        // name them (one range scan, empty once the sweep has run).
        let rules = Expiry::of(&self.catalog, &dict, table);
        let now = now_ms();
        if rules.is_some() {
            let gone = crate::service::ttl::expired_ids(&view, table, now, stop)?;
            if !gone.is_empty() {
                accs.retain(|id, _| std::str::from_utf8(id).is_ok_and(|id| !gone.contains(id)));
            }
        }
        let total = accs.len() as u64;
        let depth = offset + limit;
        let mut heap: BinaryHeap<Ranked<'_>> = BinaryHeap::with_capacity(depth + 1);
        for (id, acc) in &accs {
            let hit = Ranked { score: acc.score, id };
            // a full heap takes only hits better than its worst
            if heap.len() == depth && heap.peek().is_some_and(|worst| hit >= *worst) {
                continue;
            }
            heap.push(hit);
            if heap.len() > depth {
                heap.pop();
            }
        }
        let ranked: Vec<Ranked<'_>> = heap.into_sorted_vec().into_iter().skip(offset).collect();
        let matched: HashSet<&str> = terms.iter().map(String::as_str).collect();
        let mut out = Vec::with_capacity(256 * ranked.len() + 32);
        out.extend_from_slice(b"{\"hits\":[");
        let mut first = true;
        for r in &ranked {
            let id = text_id(r.id)?;
            let Some(blob) = view.get(Space::Entity, &EntityKey::new(table, id).encode())? else { continue };
            // one whose entry a building TTL index has not moved yet
            if rules.as_ref().map(|r| r.expired(&blob, &dict, now)).transpose()? == Some(true) {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(b"{\"_id\":");
            serde_json::to_writer(&mut out, id).map_err(|e| ServiceError::Internal(e.to_string()))?;
            out.extend_from_slice(b",\"score\":");
            serde_json::to_writer(&mut out, &r.score).map_err(|e| ServiceError::Internal(e.to_string()))?;
            out.extend_from_slice(b",\"document\":");
            out.extend_from_slice(&query::project(&blob, &dict, id, req.fields.as_deref())?);
            if let Some(h) = &req.highlight {
                let marks = highlight::highlights(&def, &analyzer, &blob, &dict, &matched, h)?;
                out.extend_from_slice(b",\"highlights\":");
                serde_json::to_writer(&mut out, &marks).map_err(|e| ServiceError::Internal(e.to_string()))?;
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"total\":");
        out.extend_from_slice(total.to_string().as_bytes());
        out.push(b'}');
        Ok(Some(out))
    }

    /// The tokens an index makes of a text.
    pub async fn analyze(
        self: &Arc<Self>,
        table: String,
        index: String,
        req: AnalyzeRequest,
    ) -> Result<AnalyzeResponse> {
        if req.text.len() > MAX_ANALYZE_BYTES {
            return Err(ServiceError::InvalidRequest(format!(
                "analyze takes at most {MAX_ANALYZE_BYTES} bytes of text"
            )));
        }
        self.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let def = self
            .catalog
            .index(&table, &index)
            .ok_or_else(|| ServiceError::IndexNotFound { table: table.clone(), index: index.clone() })?;
        if def.kind != IndexKind::Fulltext {
            return Err(ServiceError::NoSearchIndex(format!("index {index:?} is not a fulltext index")));
        }
        let mut tokens = Vec::new();
        maintain::analyzer(&def).tokens(&req.text, 0, |t| {
            tokens.push(AnalyzedToken { token: t.term, position: t.position, start: t.start, end: t.end })
        });
        Ok(AnalyzeResponse { tokens })
    }
}

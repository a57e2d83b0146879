//! Running a search on one snapshot: clauses → terms → their posting blocks, then the top
//! `offset + limit` with exact BM25 scores and `total`, their documents and highlights.
//!
//! Queries of term clauses (terms, prefixes, typo-tolerant terms, exclusions) take the
//! document-at-a-time top-k of `daat`, which counts exactly up to a threshold (default
//! [`TOTAL_THRESHOLD`], `"total": "exact"` for no limit) and past it skips blocks that cannot enter
//! the top k. Queries with a phrase or a filter take the exhaustive search (`exhaustive`), whose
//! `total` is always exact. Documents are read only for the returned page (and for a filter no
//! index narrows).

use super::Search;
use super::block;
use super::cursor;
use super::daat::{self, Ask};
use super::exhaustive::{self, ClausePlan, DictTerm};
use super::expand;
use super::parse::{self, Clause};
use super::postings::{LenRecord, Stat};
use super::ranked::{self, Ranked};
use super::score::Bm25;
use super::{AnalyzeRequest, AnalyzeResponse, AnalyzedToken, MAX_DEPTH, MAX_FRAGMENT_CHARS, MAX_LIMIT, Mode};
use super::{SearchRequest, TotalMode, highlight, maintain};
use crate::catalog::Catalog;
use crate::catalog::{IndexDef, IndexKind};
use crate::keys::{EntityKey, FtStatKey, FtidxKey};
use crate::service::core::Handle;
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::expiry::{Expiry, now_ms};
use crate::service::core::fields::ID_FIELD;
use crate::service::core::filter::Filter;
use crate::service::query::{self};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Slice, Space};
use foldhash::{HashMap, HashSet};
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Most bytes of postings (keys and values) a search run on the request's own thread may read
/// (see [`Search::search`]): past it the search starts again on the blocking pool. At 64 KiB (measured
/// on the peers bench): 1-term searches 194 → 121 µs server-side. Raised to 256 KiB once term
/// queries merged postings rather than filling a map — about half a millisecond of work at most
/// on a worker thread: the c32 mix of 1- and 2-term searches 5.9k → 6.7–6.8k queries/s (512 KiB
/// gave 7.2–7.3k but lets one search hold a worker about a millisecond).
pub const INLINE_POSTING_BYTES: usize = 256 * 1024;
/// Deepest page (`offset + limit`) of a search run on the request's own thread.
pub const INLINE_DEPTH: usize = 100;

/// How many matches a search counts exactly unless it asks for `"total": "exact"` (as
/// Elasticsearch's `track_total_hits`): past it `total` says "at least".
pub const TOTAL_THRESHOLD: u64 = 10_000;

/// Longest text `analyze` takes, in bytes.
const MAX_ANALYZE_BYTES: usize = 64 * 1024;
/// Candidates above which a filter is applied through an index scan rather than document by
/// document (when an index narrows it to fewer).
const FILTER_BY_INDEX_ABOVE: usize = 256;

/// The id of the document numbered `num` in an index (`ftdoc`), as of the snapshot.
fn doc_id(view: &ReadView, def: &IndexDef, num: u64) -> Result<String> {
    let key = FtStatKey::doc(&def.table, &def.name, num).encode();
    let bytes = view.get(Space::Ftstat, &key)?.ok_or_else(|| {
        ServiceError::Internal(format!("{} is missing for a posting", crate::keys::display("ftstat", &key)))
    })?;
    String::from_utf8(bytes.to_vec()).map_err(|_| ServiceError::damaged("ftstat", "a document id in ftdoc"))
}

/// The number of document `id` in an index (from its length record), as of the snapshot; `None`
/// when the index does not hold it.
fn doc_num(view: &ReadView, def: &IndexDef, id: &str) -> Result<Option<u64>> {
    let key = FtStatKey::doc_len(&def.table, &def.name, id).encode();
    view.get(Space::Ftstat, &key)?.map(|record| Ok(LenRecord::decode(&record)?.num)).transpose()
}

/// The posting blocks of one term (keys and values), read from the snapshot.
fn blocks(
    view: &ReadView,
    def: &IndexDef,
    term: &str,
    stop: &Stop,
    budget: &mut usize,
) -> Result<Option<Vec<(Slice, Slice)>>> {
    let prefix = FtidxKey::token_prefix(&def.table, &def.name, term);
    let scan = view.scan(Space::Ftidx, KeyRange::Prefix(prefix), false).map(|i| i.map_err(ServiceError::from));
    let mut out = Vec::new();
    for item in Watched::new(scan, stop) {
        let (key, block) = item?;
        match budget.checked_sub(block.len() + key.len()) {
            Some(left) => *budget = left,
            None => return Ok(None),
        }
        out.push((key, block));
    }
    Ok(Some(out))
}

impl Search {
    /// The posting blocks of one term, as remembered for the view's state (see `cache.rs`) or
    /// read from it; `None` (inline only) once the postings read pass the budget.
    fn term_blocks(
        &self,
        view: &ReadView,
        def: &IndexDef,
        term: &str,
        stop: &Stop,
        budget: &mut usize,
    ) -> Result<Option<super::cache::Blocks>> {
        let (state, cache) = (view.state(), &self.term_blocks);
        if let Some((found, bytes)) = cache.get(state, &def.table, &def.name, def.created_at, term) {
            return Ok(budget.checked_sub(bytes).map(|left| {
                *budget = left;
                found
            }));
        }
        let Some(found) = blocks(view, def, term, stop, budget)? else { return Ok(None) };
        Ok(Some(cache.put(state, &def.table, &def.name, def.created_at, term, found.into())))
    }
}

/// The fulltext index a search uses, as of the snapshot.
fn search_index(view: &ReadView, catalog: &Catalog, table: &str, name: Option<&str>) -> Result<IndexDef> {
    let defs = query::ready_indexes(view, catalog, table)?;
    let fulltext: Vec<&IndexDef> = defs.iter().filter(|d| d.kind == IndexKind::Fulltext).collect();
    match name {
        Some(n) => match defs.iter().find(|d| d.name == n) {
            Some(d) if d.kind == IndexKind::Fulltext => Ok(d.clone()),
            Some(_) => Err(ServiceError::NoSearchIndex(format!("index {n:?} is not a fulltext index"))),
            None if catalog.index(table, n).is_some() => {
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

impl Search {
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
            if fields.len() > crate::service::core::filter::MAX_FIELDS {
                return Err(ServiceError::QueryTooComplex(format!(
                    "a search returns at most {} fields",
                    crate::service::core::filter::MAX_FIELDS
                )));
            }
            if fields.iter().any(|f| f.is_empty() || f.split('.').any(str::is_empty)) {
                return Err(ServiceError::InvalidRequest("fields are non-empty dotted paths".into()));
            }
        }
        let filter = req.filter.as_ref().map(Filter::parse).transpose()?;
        self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let (stop, _abandon) = self.core.request_stop();
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
        self.read(move |search| {
            search
                .run_search(&table, &req, filter.as_ref(), limit, offset, &stop, false)?
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
        let view = self.core.store.snapshot();
        let def = search_index(&view, &self.core.catalog, table, req.index.as_deref())?;
        let analyzer = maintain::analyzer(&def);
        let q = parse::parse(&req.query, &analyzer)?;
        if q.include.is_empty() {
            return Err(ServiceError::InvalidQuery {
                position: 0,
                reason: "the query needs a term that is neither excluded nor a stop word".into(),
            });
        }
        let stat = Stat::decode(view.get(Space::Ftstat, &FtStatKey::stat(table, &def.name).encode())?.as_deref())?;
        let stats = Bm25::new(stat.n, stat.total);
        // every clause's terms, and all their blocks read once into one store (keys beside)
        let (mut keys, mut store): (Vec<Slice>, Vec<Slice>) = (Vec::new(), Vec::new());
        let mut read: HashMap<String, std::ops::Range<usize>> = HashMap::default();
        // (inline: `None` once the postings read pass the budget)
        let mut budget = if inline { INLINE_POSTING_BYTES } else { usize::MAX };
        let mut load = |term: String,
                        keys: &mut Vec<Slice>,
                        store: &mut Vec<Slice>|
         -> Result<Option<(DictTerm, std::ops::Range<usize>)>> {
            let range = match read.get(&term) {
                Some(r) => r.clone(),
                None => {
                    let start = store.len();
                    let Some(found) = self.term_blocks(&view, &def, &term, stop, &mut budget)? else { return Ok(None) };
                    for (k, v) in found.iter() {
                        keys.push(k.clone());
                        store.push(v.clone());
                    }
                    read.insert(term.clone(), start..store.len());
                    start..store.len()
                }
            };
            let df = store[range.clone()].iter().map(|b| block::len(b)).sum::<Result<u64>>()?;
            Ok(Some((DictTerm { term, df }, range)))
        };
        let mut plan = Vec::new();
        for clause in q.include.iter().chain(&q.exclude) {
            plan.push(match clause {
                Clause::Phrase(parts) => {
                    let mut terms = Vec::new();
                    for (t, _) in parts {
                        let Some(term) = load(t.clone(), &mut keys, &mut store)? else { return Ok(None) };
                        terms.push(term);
                    }
                    ClausePlan::Phrase { terms, offsets: parts.iter().map(|(_, o)| *o).collect() }
                }
                other => {
                    let mut terms = Vec::new();
                    for t in expand::expand(&view, table, &def.name, other, stop)? {
                        let Some(term) = load(t, &mut keys, &mut store)? else { return Ok(None) };
                        terms.push(term);
                    }
                    ClausePlan::Terms(terms)
                }
            });
        }
        let options = super::options::FulltextOptions::stored(&def.options, &def.fields);
        let weights: Vec<f64> = def.fields.iter().map(|f| options.weight(f)).collect();
        let dict = self.core.catalog.dict();
        // Expired documents not yet swept are no hits, and not in `total`: their expiry entries
        // name them (one range scan, empty once the sweep has run).
        let rules = Expiry::of(&self.core.catalog, &dict, table);
        let now = now_ms();
        let mut gone: HashSet<u64> = HashSet::default();
        if rules.is_some() {
            for id in crate::service::core::expiry::expired_ids(&view, table, now, stop)? {
                gone.extend(doc_num(&view, &def, &id)?);
            }
        }
        let depth = offset + limit;
        let phrase = plan.iter().any(|c| matches!(c, ClausePlan::Phrase { .. }));
        let (ranked, total, exact, terms) = if filter.is_none() && !phrase {
            let mut include = Vec::new();
            let mut exclude = Vec::new();
            for (i, cp) in plan.iter().enumerate() {
                let ClausePlan::Terms(list) = cp else { continue };
                let into = if i < q.include.len() { &mut include } else { &mut exclude };
                for (t, range) in list {
                    into.push(cursor::term(&keys, &store, &t.term, t.df, range.clone(), i, stats)?);
                }
            }
            let terms: HashSet<String> = include.iter().map(|t| t.name.to_owned()).collect();
            let is_gone = |num: u64| gone.contains(&num);
            let ask = Ask {
                all: req.mode == Mode::All,
                clauses: q.include.len(),
                weights: &weights,
                stats,
                depth,
                threshold: match req.total {
                    Some(TotalMode::Every(_)) => u64::MAX,
                    Some(TotalMode::UpTo(n)) => n,
                    None => TOTAL_THRESHOLD,
                },
                gone: if gone.is_empty() { None } else { Some(&is_gone) },
            };
            let found = daat::top_k(&include, &exclude, &ask, stop)?;
            (found.hits, found.total, found.exact, terms)
        } else {
            let exhaustive::Scored { mut accs, terms } =
                exhaustive::score_all(&weights, &q, stats, &keys, &store, &plan, stop)?;
            let all = if q.include.len() >= 64 { u64::MAX } else { (1u64 << q.include.len()) - 1 };
            accs.retain(|_, a| if req.mode == Mode::All { a.matched == all } else { a.matched != 0 });
            if !gone.is_empty() {
                accs.retain(|num, _| !gone.contains(num));
            }
            if let Some(filter) = filter {
                self.apply_filter(&view, &def, filter, &mut accs, stop)?;
            }
            let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(depth + 1);
            for (&num, acc) in &accs {
                ranked::offer(&mut heap, depth, Ranked { score: acc.score, num });
            }
            (heap.into_sorted_vec(), accs.len() as u64, true, terms)
        };
        let matched: HashSet<&str> = terms.iter().map(String::as_str).collect();
        let mut out = Vec::with_capacity(256 * ranked.len().saturating_sub(offset) + 64);
        out.extend_from_slice(b"{\"hits\":[");
        let mut first = true;
        // Only `_id` asked for, no expiry to check and no highlights: the hits' documents are not
        // read (the postings are exact with the documents of this snapshot, so each exists).
        // Reading them took 16% of a 1-term search's samples on the peers bench.
        let ids_only = rules.is_none()
            && req.highlight.is_none()
            && req.fields.as_deref().is_some_and(|f| f.iter().all(|f| f == ID_FIELD));
        let ids = self.doc_ids.of(&def);
        for r in ranked.iter().skip(offset) {
            let id = &*super::ids::id_of(&ids, r.num, || doc_id(&view, &def, r.num))?;
            let blob = if ids_only {
                None
            } else {
                let Some(blob) = view.get(Space::Entity, &EntityKey::new(table, id).encode())? else { continue };
                // one whose entry a building TTL index has not moved yet
                if rules.as_ref().map(|r| r.expired(&blob, &dict, now)).transpose()? == Some(true) {
                    continue;
                }
                Some(blob)
            };
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(b"{\"_id\":");
            serde_json::to_writer(&mut out, id).map_err(|e| ServiceError::Internal(e.to_string()))?;
            out.extend_from_slice(b",\"score\":");
            serde_json::to_writer(&mut out, &r.score).map_err(|e| ServiceError::Internal(e.to_string()))?;
            out.extend_from_slice(b",\"document\":");
            match &blob {
                Some(blob) => out.extend_from_slice(&crate::service::core::filter::project(
                    blob,
                    &dict,
                    id,
                    req.fields.as_deref(),
                )?),
                None => {
                    out.extend_from_slice(b"{\"_id\":");
                    serde_json::to_writer(&mut out, id).map_err(|e| ServiceError::Internal(e.to_string()))?;
                    out.push(b'}');
                }
            }
            if let (Some(h), Some(blob)) = (&req.highlight, &blob) {
                let marks = highlight::highlights(&def, &analyzer, blob, &dict, &matched, h)?;
                out.extend_from_slice(b",\"highlights\":");
                serde_json::to_writer(&mut out, &marks).map_err(|e| ServiceError::Internal(e.to_string()))?;
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"total\":{\"value\":");
        out.extend_from_slice(total.to_string().as_bytes());
        out.extend_from_slice(if exact { b",\"relation\":\"eq\"}}" } else { b",\"relation\":\"gte\"}}" });
        Ok(Some(out))
    }

    /// Keeps the matches the filter takes: through an index scan where one narrows it to fewer
    /// documents than there are matches, else document by document.
    fn apply_filter(
        &self,
        view: &ReadView,
        def: &IndexDef,
        filter: &Filter,
        accs: &mut HashMap<u64, exhaustive::Acc>,
        stop: &Stop,
    ) -> Result<()> {
        let table = def.table.as_str();
        let by_index = if accs.len() > FILTER_BY_INDEX_ABOVE {
            query::indexed_matches(view, &self.core.catalog, table, filter, accs.len() as u64, stop)?
        } else {
            None
        };
        let mut keep = HashSet::default();
        match by_index {
            // the index's matches are the fewer: their numbers, not every match's id
            Some(found) => {
                for (steps, id) in found.iter().enumerate() {
                    if steps % 256 == 255 {
                        stop.check()?;
                    }
                    keep.extend(doc_num(view, def, id)?);
                }
            }
            None => {
                let dict = self.core.catalog.dict();
                let ids = self.doc_ids.of(def);
                for (steps, &num) in accs.keys().enumerate() {
                    if steps % 256 == 255 {
                        stop.check()?;
                    }
                    let id = super::ids::id_of(&ids, num, || doc_id(view, def, num))?;
                    if let Some(blob) = view.get(Space::Entity, &EntityKey::new(table, &id).encode())?
                        && filter.matches(&id, &blob, &dict)?
                    {
                        keep.insert(num);
                    }
                }
            }
        }
        accs.retain(|num, _| keep.contains(num));
        Ok(())
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
        self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let def = self
            .core
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

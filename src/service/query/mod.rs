//! `POST /v1/tables/{table}/query`: filter, sort, projection, limit and cursor, with a planner
//! whose choice `explain` shows.

mod covered;
mod cursor;
mod exec;
mod explain;
mod ids;
mod matcher;
mod ngram;
pub mod plan;
mod request;
mod shape;
pub(crate) mod stream;
mod viewscan;

use super::core::Core;
use super::{Result, ServiceError};
use crate::catalog::IndexDef;
use crate::entity::FieldDict;
use crate::keys::EntityKey;
use crate::service::core::Handle;
use crate::service::core::cancel::Stop;
use crate::service::core::cursor::Binding;
use crate::service::core::expiry::{Expiry, now_ms};
use crate::service::core::filter::{Filter, MAX_FIELDS};
use crate::service::core::render::RawPage;
use crate::storage::Space;
use cursor::{Cursor, Order};
pub use explain::ScanExplain;
use matcher::{Hit, Matcher};
use plan::{Access, Plan, SortKey};
pub(crate) use request::required_time_text;
pub use request::{Explain, QueryExplain, QueryRequest, QueryResponse, QueryResult};
use serde_json::Value;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;
pub use stream::QueryStream;

/// Most documents one query returns.
pub const MAX_LIMIT: usize = 1000;

/// The query model: filters, sorts and pages planned over the indexes, the views and the
/// history, over the shared [`Core`].
pub struct Query {
    core: Arc<Core>,
}

impl Handle for Query {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Query {
    /// The model over `core`.
    pub(crate) fn new(core: Arc<Core>) -> Query {
        Query { core }
    }
}

/// The ready indexes of `table` as the snapshot has them, so plan and data agree: an index
/// counts as ready (and as multikey or not) only as of the snapshot. The names come from the
/// catalog cache, the definitions from point reads of the snapshot (an index created after the
/// cache read is simply not used by this query).
pub(crate) fn ready_indexes(
    view: &crate::storage::ReadView,
    catalog: &crate::catalog::Catalog,
    table: &str,
) -> Result<Vec<IndexDef>> {
    let mut out = Vec::new();
    for cached in catalog.indexes(table) {
        let Some(def) = crate::catalog::stored_index(view, table, &cached.name)? else { continue };
        if def.is_ready() {
            out.push(def);
        }
    }
    Ok(out)
}

/// The ids of the documents of `table` that match `filter`, when an index scan narrows them
/// down to about `max` candidates or fewer (as the planner estimates); `None` when only a full
/// scan (or a larger one) would find them: checking documents one by one is then cheaper.
pub(crate) fn indexed_matches(
    view: &crate::storage::ReadView,
    catalog: &crate::catalog::Catalog,
    table: &str,
    filter: &Filter,
    max: u64,
    stop: &Stop,
) -> Result<Option<HashSet<String>>> {
    let defs = ready_indexes(view, catalog, table)?;
    let Plan { access, .. } = plan::choose(view, filter, &[], table, &defs, MAX_LIMIT, true)?;
    let Some(estimate) = plan::estimate_of(&access) else { return Ok(None) };
    if estimate > max || estimate >= plan::ESTIMATE_CAP {
        return Ok(None);
    }
    let dict = catalog.dict();
    let (rules, now) = (Expiry::of(catalog, &dict, table), now_ms());
    let mut out = HashSet::new();
    for cand in exec::candidates(view, table, &access, None, stop) {
        let cand = cand?;
        if out.contains(&cand.id) {
            continue;
        }
        let blob = match cand.blob {
            Some(b) => b,
            None => match view.get(Space::Entity, &EntityKey::new(table, &cand.id).encode())? {
                Some(b) => b,
                None => continue,
            },
        };
        if rules.as_ref().map(|r| r.expired(&blob, &dict, now)).transpose()? == Some(true) {
            continue;
        }
        if filter.matches(&cand.id, &blob, &dict)? {
            out.insert(cand.id);
        }
    }
    Ok(Some(out))
}

impl Query {
    /// The access path the planner chooses for `filter` on `table` as the store is now, as
    /// `explain` names it (`full_scan`, `index_scan`, `id_lookup` …) with its scans; nothing is
    /// read but the index keys the estimates count. For the SQL engine's `EXPLAIN`.
    pub async fn plan_of(self: &Arc<Self>, table: String, filter: &Value) -> Result<PlanSummary> {
        let filter = Filter::parse(filter)?;
        self.read(move |query| {
            let view = query.core.store.snapshot();
            let defs = ready_indexes(&view, &query.core.catalog, &table)?;
            let Plan { access, .. } = plan::choose(&view, &filter, &[], &table, &defs, MAX_LIMIT, true)?;
            let (strategy, scans) = explain::describe(&access);
            Ok(PlanSummary { strategy, scans, estimated_rows: plan::estimate_of(&access) })
        })
        .await
    }
}

/// What [`Query::plan_of`] answers.
#[derive(Debug, Clone)]
pub struct PlanSummary {
    /// the strategy, as `explain` names it
    pub strategy: &'static str,
    /// its scans
    pub scans: Vec<ScanExplain>,
    /// the index keys counted (capped at 1000); `None` for a full scan
    pub estimated_rows: Option<u64>,
}

/// Takes `$view` out of the top level of a query's filter: the view's name, and the rest.
fn split_view(filter: Option<&Value>) -> Result<(Option<String>, Option<Value>)> {
    let Some(Value::Object(map)) = filter else { return Ok((None, filter.cloned())) };
    let Some(name) = map.get("$view") else { return Ok((None, filter.cloned())) };
    let Some(name) = name.as_str() else {
        return Err(ServiceError::InvalidFilter("$view takes the name of a filter view".into()));
    };
    let mut rest = map.clone();
    rest.remove("$view");
    Ok((Some(name.to_owned()), Some(Value::Object(rest))))
}

/// Refuses a projection over the limit or with an empty path.
fn check_fields(fields: Option<&[String]>) -> Result<()> {
    if let Some(fields) = fields {
        if fields.len() > MAX_FIELDS {
            return Err(ServiceError::QueryTooComplex(format!("a query returns at most {MAX_FIELDS} fields")));
        }
        if fields.iter().any(|f| f.is_empty() || f.split('.').any(str::is_empty)) {
            return Err(ServiceError::InvalidRequest("fields are non-empty dotted paths".into()));
        }
    }
    Ok(())
}

/// A query planned on its snapshot (see `Query::prepare`).
struct Prepared {
    view: crate::storage::ReadView,
    /// with `$view`: the view's own filter and the query's, which every candidate must match
    /// (the query's filter alone otherwise)
    combined: Option<Filter>,
    dict: Arc<FieldDict>,
    access: Access,
    /// the result order: the requested sort, or the natural order of a range scan
    sort: Vec<SortKey>,
    /// candidates arrive in the order of the first sort key
    sort_by_index: bool,
    /// candidates arrive in `_id` order (no sort)
    id_ordered: bool,
    /// the table's document count
    count: u64,
    covered: Option<covered::Covered>,
    /// the table's expiry rules and the time the query runs at, taken once: the matcher and the
    /// covered plan's expiry set decide with the same
    expiry: Option<Expiry>,
    now: i64,
}

/// Which page of a query to produce: its order, size, and where the previous page ended.
struct Paging {
    /// `$view`: the filter view whose members the query starts from
    view: Option<String>,
    /// run on the calling thread (a unique point lookup): not covered, which may read expiry
    /// entries
    inline: bool,
    sort: Vec<SortKey>,
    limit: usize,
    cursor: Option<Cursor>,
    binding: Binding,
}

impl Query {
    /// Runs a query (or explains it).
    pub async fn query(self: &Arc<Self>, table: String, req: QueryRequest) -> Result<QueryResult> {
        let (view, rest) = split_view(req.filter.as_ref())?;
        let filter = match &rest {
            Some(f) => Filter::parse(f)?,
            None => Filter::And(Vec::new()),
        };
        let requested = plan::parse_sort(&req.sort)?;
        let limit = req.limit.unwrap_or(100);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_LIMIT}")));
        }
        let def = self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let as_of = req.as_of_us()?;
        if as_of.is_some() && def.history.is_none() {
            return Err(super::history::no_history(&table));
        }
        let binding = cursor::binding(&table, def.created_at, req.filter.as_ref(), &requested, as_of);
        let cursor = req.cursor.as_deref().map(|c| cursor::decode(binding, c, &requested)).transpose()?;
        // A cursor keeps the order of its first page (which may be an index's natural order).
        let sort = match &cursor {
            Some(c) => c.order.keys().to_vec(),
            None => requested,
        };
        check_fields(req.fields.as_deref())?;
        let mut paging = Paging { view, inline: false, sort, limit, cursor, binding };
        // The scan stops at the request timeout, or (on the blocking pool) as soon as this future
        // is dropped (the timeout layer answered 408, or the client went away): `_abandon` drops
        // with it.
        let (stop, _abandon) = self.core.request_stop();
        if paging.view.is_none() && as_of.is_none() && plan::unique_point(&filter, &self.core.catalog.indexes(&table)) {
            // a unique lookup reads a few keys: not worth the hand-off to the blocking pool (the
            // deadline still bounds it, should the plan not be the point it looks like)
            paging.inline = true;
            return self.read_point(|query| query.run_query(&table, &filter, paging, &req, &stop));
        }
        self.read(move |query| query.run_query(&table, &filter, paging, &req, &stop)).await
    }

    /// Takes the snapshot and plans the query on it: the access path, the result order (the
    /// requested sort, or a range scan's natural order), and the covered form if there is one.
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &self,
        table: &str,
        filter: &Filter,
        view_name: Option<&str>,
        sort: &[SortKey],
        order_fixed: bool,
        limit: usize,
        req: &QueryRequest,
        may_cover: bool,
        stop: &Stop,
    ) -> Result<Prepared> {
        let def = self.core.catalog.table(table).ok_or_else(|| ServiceError::TableNotFound(table.to_owned()))?;
        // `as_of`: the table as it was then, walked from its history (indexes describe it now)
        let as_of = req.as_of_us()?;
        if as_of.is_some() && def.history.is_none() {
            return Err(super::history::no_history(table));
        }
        let view = self.core.store.snapshot();
        // after the snapshot: it names every field the snapshot's documents use
        let dict = self.core.catalog.dict();
        let defs = ready_indexes(&view, &self.core.catalog, table)?;
        // `$view`: the view's members are exactly the documents its filter matches, so the query's
        // filter is the view's and the rest; the member keys are one more access path.
        let (combined, members) = match view_name {
            Some(name) => {
                let (def, prefix) = super::views::member_scan(&view, table, name)?;
                let own = super::views::def::compile(&def)?.filter.unwrap_or(Filter::And(Vec::new()));
                // (as of a time, the view's filter applies to the documents then: its members,
                // which are today's, are not read)
                let members = match as_of {
                    Some(_) => None,
                    None => Some(plan::ViewScan::new(&view, table, name, prefix)?),
                };
                (Some(Filter::And(vec![own, filter.clone()])), members)
            }
            None => (None, None),
        };
        let filter = combined.as_ref().unwrap_or(filter);
        let Plan { access, mut sort_by_index } = match (as_of, members) {
            (Some(at), _) => Plan { access: Access::AsOf(at), sort_by_index: false },
            (None, members) => {
                let chosen = plan::choose(&view, filter, sort, table, &defs, limit, req.explain || members.is_some())?;
                match members {
                    Some(scan) => plan::with_view(chosen, scan),
                    None => chosen,
                }
            }
        };
        // Without a sort, a range scan's natural order (its field, then `_id`) is the result order,
        // so `limit` stops the scan early; other plans return `_id` order. The cursor records
        // which one the first page had.
        let sort = match &access {
            Access::Index(s) if sort.is_empty() && !order_fixed && s.natural_order() => {
                sort_by_index = true;
                vec![SortKey { field: s.def.fields[0].clone(), desc: false }]
            }
            _ => sort.to_vec(),
        };
        let count = crate::service::core::counts::decode(
            view.get(Space::Meta, &crate::service::core::counts::key(table))?.as_deref(),
        );
        if matches!(access, Access::FullScan | Access::AsOf(_))
            && req.allow_scan == Some(false)
            && count > self.core.scan_threshold
        {
            return Err(ServiceError::ScanRefused {
                table: table.to_owned(),
                documents: count,
                threshold: self.core.scan_threshold,
            });
        }
        // Candidates that arrive in result order allow stopping at `limit`; a sort of `_id`
        // ascending alone is that order too.
        let by_id = matches!(sort.as_slice(), [SortKey { field, desc: false }] if field == crate::service::core::fields::ID_FIELD);
        let id_ordered = (sort.is_empty() || by_id)
            && match &access {
                Access::FullScan | Access::AsOf(_) | Access::Intersect(_) | Access::Ids(_) | Access::View(_) => true,
                Access::Index(s) => s.id_ordered(),
                Access::Union(_) => false,
            };
        // as of a time, a document expired then was hidden then
        let now = as_of.map_or_else(now_ms, |us| us.div_euclid(1000));
        let expiry = Expiry::of(&self.core.catalog, &dict, table);
        let covered = match may_cover && as_of.is_none() {
            true => covered::cover(
                &view,
                &self.core.catalog,
                (expiry.as_ref(), now),
                &dict,
                table,
                filter,
                &access,
                req.fields.as_deref(),
                &sort,
                stop,
            )?,
            false => None,
        };
        Ok(Prepared { view, combined, dict, access, sort, sort_by_index, id_ordered, count, covered, expiry, now })
    }

    fn run_query(
        &self,
        table: &str,
        filter: &Filter,
        paging: Paging,
        req: &QueryRequest,
        stop: &Stop,
    ) -> Result<QueryResult> {
        let Paging { view: view_name, inline, sort, limit, cursor, binding } = paging;
        // A later page keeps the first page's order, whatever this page's plan is.
        let order_fixed = cursor.is_some();
        let cursor = cursor.map(|c| c.after);
        let Prepared { view, combined, dict, mut access, sort, sort_by_index, id_ordered, count, covered, expiry, now } =
            self.prepare(table, filter, view_name.as_deref(), &sort, order_fixed, limit, req, !inline, stop)?;
        let filter = combined.as_ref().unwrap_or(filter);
        let sort = sort.as_slice();
        let after_id = if id_ordered { cursor.as_ref().map(|c| c.id.as_str()) } else { None };
        // A later page of an `_id`-ordered plan starts after the cursor's id: the keys before it
        // hold only what earlier pages returned, and reading them again would make page N cost N
        // pages.
        if let Some(id) = after_id {
            match &mut access {
                Access::Ids(s) => s.seek_after(id),
                Access::View(s) => s.seek_after(id),
                Access::Index(s) => s.seek_after_id(id),
                Access::Intersect(scans) => scans.iter_mut().for_each(|s| s.seek_after_id(id)),
                Access::FullScan | Access::AsOf(_) | Access::Union(_) => {}
            }
        }
        // A later page of an index-ordered scan starts at the cursor's value, not at the start.
        if sort_by_index
            && let (Access::Index(scan), Some((value, _))) =
                (&mut access, cursor.as_ref().and_then(|c| c.values.first()))
        {
            scan.seek(value);
        }
        let capacity = limit + 1;
        let (mut matched, mut stopped_early) = (0u64, false);
        // A one-key sort served by the scan of that key's index arrives in exact result order
        // (value, then `_id` in the same direction): the hits are kept as they come, and the
        // scan stops as soon as the page is full. Any other order keeps the best in a heap.
        let exact_order = id_ordered || (sort_by_index && sort.len() == 1);
        let mut heap: BinaryHeap<Hit> = BinaryHeap::with_capacity(if exact_order { 0 } else { capacity + 1 });
        let mut in_order: Vec<Hit> = Vec::with_capacity(if exact_order { capacity.min(1 << 12) } else { 0 });
        let mut matcher =
            Matcher::new(&view, (expiry.as_ref(), now), &dict, table, &access, filter, sort, covered.as_ref());
        for cand in exec::candidates(&view, table, &access, after_id, stop) {
            let cand = cand?;
            if in_order.len() >= capacity {
                stopped_early = true;
                break;
            }
            if heap.len() >= capacity {
                let worst = heap.peek().map(|h| &h.key);
                let beyond = match (worst, id_ordered, sort_by_index, &cand.scan_value) {
                    (Some(w), true, _, _) => cand.id > w.id,
                    (Some(w), _, true, Some(v)) => match w.values.first() {
                        Some((wv, desc)) => {
                            let o = v.cmp(wv);
                            if *desc { o.is_lt() } else { o.is_gt() }
                        }
                        None => false,
                    },
                    _ => false,
                };
                if beyond {
                    stopped_early = true;
                    break;
                }
            }
            let Some(hit) = matcher.accept(cand)? else { continue };
            if cursor.as_ref().is_some_and(|c| hit.key <= *c) {
                continue;
            }
            matched += 1;
            if exact_order {
                debug_assert!(in_order.last().is_none_or(|last| *last <= hit), "a scan in result order went back");
                in_order.push(hit);
                continue;
            }
            heap.push(hit);
            if heap.len() > capacity {
                heap.pop();
            }
        }
        let mut hits = if exact_order { in_order } else { heap.into_sorted_vec() };
        let more = hits.len() > limit;
        hits.truncate(limit);
        if req.explain {
            let (strategy, scans) = explain::describe(&access);
            let estimated_rows = plan::estimate_of(&access).unwrap_or(count);
            let order = if sort_by_index {
                "index"
            } else if sort.is_empty() {
                "id"
            } else {
                "in_memory"
            };
            return Ok(QueryResult::Explain(QueryExplain {
                plan: Explain {
                    strategy,
                    scans,
                    order,
                    estimated_rows,
                    examined_rows: matcher.examined,
                    matched_rows: matched,
                    returned_rows: hits.len() as u64,
                    stopped_early,
                    covered: covered.is_some(),
                    documents_read: matcher.documents_read,
                },
            }));
        }
        let next = if more { hits.last().map(|h| cursor::encode(binding, &Order::of(sort), &h.key)) } else { None };
        let mut documents = Vec::with_capacity(hits.len());
        for h in &hits {
            documents.extend(matcher.render(h, req.fields.as_deref())?);
        }
        Ok(QueryResult::Page(RawPage { documents, cursor: next }))
    }
}

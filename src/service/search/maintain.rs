//! Keeping fulltext indexes exact inside every document write.
//!
//! The family's three steps (see `service::pipeline::write`): [`prepare`] analyzes a new document before
//! the committer; [`stage`] logs each document change in the write's fulltext log
//! (`Write::fulltext`) as an [`FtOp`]: the postings to remove (read from the document's length
//! record, so the old document is not analyzed again) and the new document's terms; at the end
//! of the write, [`finish`] merges every logged change of the write:
//! its new documents get the index's next numbers (in id order) and their postings become
//! blocks (one per token and at most [`BLOCK_DOCS`] documents), the removed ones are cut out of
//! their blocks, the term dictionary gains the new tokens and loses those left without postings,
//! and `N`, the total length and the next number change by the write's net amounts — all in the
//! same atomic batch as the documents. (A term's document frequency is the sum of its blocks'
//! counts, read with its postings.) An import chunk of 2000 documents writes each token's
//! postings once, not once per document.

use super::analyzer::Analyzer;
use super::block::{self, BLOCK_DOCS, Decoded, PostingIn};
pub use super::known::KnownTerms;
use super::known::{Added, Tail};
use super::options::FulltextOptions;
use super::postings::{self, DocPostings, LenRecord, Stat};
use crate::catalog::{Catalog, IndexDef, IndexKind};
use crate::entity::FieldDict;
use crate::keys::{FtStatKey, FtidxKey};
use crate::service::core::change::Change;
use crate::service::search::oplog::{FtOp, Removed};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Space, WriteTx};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

type Cache = Mutex<std::collections::HashMap<(String, String, i64), Arc<Analyzer>>>;

/// The analyzer of an index (built once per index and cached: stop-word sets are not free).
pub fn analyzer(def: &IndexDef) -> Arc<Analyzer> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (def.table.clone(), def.name.clone(), def.created_at);
    let mut map = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(a) = map.get(&key) {
        return a.clone();
    }
    if map.len() >= 1024 {
        map.clear();
    }
    let a = Arc::new(Analyzer::new(&FulltextOptions::stored(&def.options, &def.fields)));
    map.insert(key, a.clone());
    a
}

/// A document's terms for one index, computed before the write.
#[derive(Debug, Clone)]
pub struct PreparedText {
    index: String,
    created_at: i64,
    postings: DocPostings,
}

/// Analyzes a new document for every maintained fulltext index of `table` (outside the
/// committer). `dict` must know every field name of the blob.
pub fn prepare(catalog: &Catalog, table: &str, blob: &[u8]) -> Result<Vec<PreparedText>> {
    let defs = catalog.indexes(table);
    let mut out = Vec::new();
    let mut dict = None;
    for def in defs.iter().filter(|d| d.kind == IndexKind::Fulltext && d.is_maintained()) {
        let dict: &Arc<FieldDict> = dict.get_or_insert_with(|| catalog.dict());
        let terms = postings::analyze(def, &analyzer(def), blob, dict)?;
        let postings = DocPostings::encode(terms);
        out.push(PreparedText { index: def.name.clone(), created_at: def.created_at, postings });
    }
    Ok(out)
}

/// True when both versions hold the same text in every indexed field.
fn same_text(def: &IndexDef, old: &[u8], new: &[u8], dict: &FieldDict) -> Result<bool> {
    for f in &def.fields {
        if postings::texts(old, dict, f)? != postings::texts(new, dict, f)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The fulltext step of a document change: every maintained fulltext index of its table gets
/// the change logged. `prepared` holds the terms computed before the write (each index's are
/// taken from it; the rest are analyzed here).
pub(crate) fn stage(
    tx: &mut WriteTx<'_>,
    catalog: &Catalog,
    c: &Change<'_>,
    prepared: &mut Vec<PreparedText>,
    log: &mut Vec<FtOp>,
) -> Result<()> {
    let defs = catalog.indexes(&c.table.name);
    let mut dict = None;
    for def in defs.iter().filter(|d| d.is_maintained() && d.kind == IndexKind::Fulltext) {
        let dict: &Arc<FieldDict> = dict.get_or_insert_with(|| catalog.dict());
        stage_index(tx, log, def, c.id, c.old, c.new, dict, prepared)?;
    }
    Ok(())
}

/// Changes the postings of document `id` in fulltext index `def` from `old` to `new` in the
/// write. `prepared` holds terms computed before the write (this index's are taken from it).
#[allow(clippy::too_many_arguments)]
fn stage_index(
    tx: &mut WriteTx<'_>,
    log: &mut Vec<FtOp>,
    def: &IndexDef,
    id: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
    dict: &FieldDict,
    prepared: &mut Vec<PreparedText>,
) -> Result<()> {
    // Unchanged text needs no work — if the document is indexed: while the index builds, one the
    // backfill has not reached yet is indexed now (the backfill skips a changed document).
    if let (Some(old), Some(new)) = (old, new)
        && same_text(def, old, new, dict)?
        && tx.get(Space::Ftstat, &FtStatKey::doc_len(&def.table, &def.name, id).encode())?.is_some()
    {
        return Ok(());
    }
    let added = match new {
        None => None,
        Some(blob) => Some(match prepared.iter().position(|p| p.index == def.name && p.created_at == def.created_at) {
            Some(i) => prepared.swap_remove(i).postings,
            None => DocPostings::encode(postings::analyze(def, &analyzer(def), blob, dict)?),
        }),
    };
    change(tx, log, def, id, old.map(|o| (o, dict)), added)
}

/// Logs the new terms of a document, removing what it had: `old` is its stored version (with
/// the field names), analyzed again for the tokens whose postings go — the length record keeps
/// only the length and number, and the analyzer is deterministic for an index's options.
fn change(
    tx: &mut WriteTx<'_>,
    log: &mut Vec<FtOp>,
    def: &IndexDef,
    id: &str,
    old: Option<(&[u8], &FieldDict)>,
    added: Option<DocPostings>,
) -> Result<()> {
    let added = added.filter(|t| t.len > 0);
    let key = FtStatKey::doc_len(&def.table, &def.name, id).encode();
    let record = tx.get(Space::Ftstat, &key)?.map(|v| LenRecord::decode(&v)).transpose()?;
    let removed = match record {
        None => None,
        // added earlier in this write: its postings are among the write's own
        Some(r) if r.num == 0 => Some(Removed { len: r.len, num: 0, tokens: Vec::new() }),
        Some(r) => {
            let (blob, dict) =
                old.ok_or_else(|| corrupt(format!("document {id:?} is indexed but has no stored version")))?;
            let terms = postings::analyze(def, &analyzer(def), blob, dict)?;
            Some(Removed { len: r.len, num: r.num, tokens: terms.terms.into_iter().map(|(t, _)| t).collect() })
        }
    };
    if removed.is_none() && added.is_none() {
        return Ok(());
    }
    // Marks the document as added by this write (number 0) until `finish` numbers it, so a later
    // change of it in the same write finds its postings among the write's own.
    match &added {
        Some(t) => tx.put(Space::Ftstat, key, LenRecord { len: t.len, num: 0 }.encode()),
        None => tx.delete(Space::Ftstat, key),
    }
    log.push(FtOp {
        table: def.table.clone(),
        index: def.name.clone(),
        created_at: def.created_at,
        id: id.to_owned(),
        removed,
        added,
    });
    Ok(())
}

/// Indexes a document for a backfill, unless a write indexed it already.
pub(crate) fn backfill(
    tx: &mut WriteTx<'_>,
    log: &mut Vec<FtOp>,
    def: &IndexDef,
    id: &str,
    terms: DocPostings,
) -> Result<()> {
    if tx.get(Space::Ftstat, &FtStatKey::doc_len(&def.table, &def.name, id).encode())?.is_some() {
        return Ok(());
    }
    change(tx, log, def, id, None, Some(terms))
}

/// The net change of one index in one write.
#[derive(Default)]
struct Net {
    /// documents added by the write (what is left of them at its end)
    added: BTreeMap<String, DocPostings>,
    /// postings to cut: token → document numbers
    cut: BTreeMap<String, Vec<u64>>,
    /// the numbers of the removed documents
    removed_nums: Vec<u64>,
    /// removed stored documents and their total length
    removed_docs: u64,
    removed_len: u64,
}

/// Merges every fulltext change the write logged (see the module doc): the family's finish step,
/// at the end of every write, on the committer.
pub(crate) fn finish(tx: &mut WriteTx<'_>, catalog: &Catalog, ops: Vec<FtOp>, known: &KnownTerms) -> Result<()> {
    if ops.is_empty() {
        return Ok(());
    }
    let mut nets: BTreeMap<(String, String, i64), Net> = BTreeMap::new();
    for op in ops {
        let FtOp { table, index, created_at, id, removed, added } = op;
        let net = nets.entry((table, index, created_at)).or_default();
        match removed {
            Some(r) if r.num == 0 => {
                net.added.remove(&id);
            }
            Some(r) => {
                net.removed_docs += 1;
                net.removed_len += r.len;
                net.removed_nums.push(r.num);
                for token in r.tokens {
                    net.cut.entry(token).or_default().push(r.num);
                }
            }
            None => {}
        }
        if let Some(terms) = added {
            net.added.insert(id, terms);
        }
    }
    for ((table, index, created_at), net) in nets {
        // The index is gone only if this same write dropped it: its purge removes everything.
        if catalog.index(&table, &index).is_none_or(|d| d.created_at != created_at) {
            continue;
        }
        let key = (table, index, created_at);
        let added = apply_net(tx, &key.0, &key.1, net, known, &key)?;
        if !added.terms.is_empty() || !added.tails.is_empty() {
            let known = known.clone();
            tx.on_commit(move || known.record(key, added));
        }
    }
    Ok(())
}

/// Indexes `docs` into an index that holds nothing (the format upgrade's rebuild), as one
/// write's additions: numbered in id order, in full blocks.
pub(crate) fn rebuild(
    tx: &mut WriteTx<'_>,
    def: &IndexDef,
    docs: Vec<(String, DocPostings)>,
    known: &KnownTerms,
) -> Result<()> {
    let added = docs.into_iter().filter(|(_, d)| d.len > 0).collect();
    let net = Net { added, ..Net::default() };
    let key = (def.table.clone(), def.name.clone(), def.created_at);
    apply_net(tx, &def.table, &def.name, net, known, &key)?;
    Ok(())
}

fn corrupt(what: String) -> ServiceError {
    ServiceError::damaged("ftidx", what)
}

/// Applies one index's net change; returns what the known state gains once it commits.
fn apply_net(
    tx: &mut WriteTx<'_>,
    table: &str,
    index: &str,
    net: Net,
    known: &KnownTerms,
    key: &(String, String, i64),
) -> Result<Added> {
    let mut added = Added::default();
    let stat_key = FtStatKey::stat(table, index).encode();
    let mut stat = Stat::decode(tx.get(Space::Ftstat, &stat_key)?.as_deref())?;
    if let Some(k) = known.lock().get_mut(key) {
        // their blocks change: forgotten now, before the write commits
        for token in net.cut.keys() {
            k.forget_tail(token);
        }
    }
    let emptied = cut_postings(tx, table, index, &net.cut)?;
    for num in &net.removed_nums {
        tx.delete(Space::Ftstat, FtStatKey::doc(table, index, *num).encode());
    }
    let (mut n, mut total) = (0u64, 0u64);
    if !net.added.is_empty() {
        // the write's documents take the next numbers, in id order (`added` is ordered by id)
        let base = stat.next.max(1);
        stat.next = base + net.added.len() as u64;
        // token → its postings in number order; a hash map, as an import chunk has some 400 000
        // postings over 25 000 tokens
        let mut by_token: foldhash::HashMap<&str, Vec<PostingIn<'_>>> = Default::default();
        for (num, (id, doc)) in (base..).zip(&net.added) {
            n += 1;
            total += doc.len;
            for (i, token) in doc.tokens.iter().enumerate() {
                by_token.entry(token).or_default().push(doc.posting(i, num));
            }
            tx.put(Space::Ftstat, FtStatKey::doc(table, index, num).encode(), id.as_bytes().to_vec());
            tx.put(
                Space::Ftstat,
                FtStatKey::doc_len(table, index, id).encode(),
                LenRecord { len: doc.len, num }.encode(),
            );
        }
        let tails: Vec<Option<Tail>>;
        {
            let map = known.lock();
            let have = map.get(key);
            for token in by_token.keys() {
                if have.is_none_or(|h| !h.has_term(token)) {
                    tx.put(Space::Ftstat, FtStatKey::term(table, index, token).encode(), Vec::new());
                    added.terms.push((*token).to_owned());
                }
            }
            tails = by_token.keys().map(|t| have.and_then(|h| h.tail(t))).collect();
        }
        for ((token, list), tail) in by_token.iter().zip(&tails) {
            let last = write_postings(tx, table, index, token, list, tail.as_ref())?;
            added.tails.push(((*token).to_owned(), last));
        }
        drop_dead_terms(tx, table, index, &emptied, |t| by_token.contains_key(t), known, key)?;
    } else {
        drop_dead_terms(tx, table, index, &emptied, |_| false, known, key)?;
    }
    // kept even with no document left: a number is never given twice (see `search::ids`)
    match ((stat.n + n).checked_sub(net.removed_docs), (stat.total + total).checked_sub(net.removed_len)) {
        (Some(n), Some(t)) => tx.put(Space::Ftstat, stat_key, Stat { n, total: t, next: stat.next }.encode()),
        _ => return Err(corrupt(format!("ftstat:{table}:{index} would go below 0"))),
    }
    Ok(added)
}

/// Writes a token's new postings (numbers above all it holds, in order): into its last block
/// while that has room (`tail`, when known), then in new blocks of [`BLOCK_DOCS`]. Returns its
/// last block now, if not full.
fn write_postings(
    tx: &mut WriteTx<'_>,
    table: &str,
    index: &str,
    token: &str,
    list: &[PostingIn<'_>],
    tail: Option<&Tail>,
) -> Result<Option<Tail>> {
    let mut rest = list;
    let mut last = None;
    if let Some((first, bytes)) = tail {
        let mut d = Decoded::default();
        d.load(*first, bytes)?;
        d.locate_positions()?;
        let take = BLOCK_DOCS.saturating_sub(d.len()).min(rest.len());
        if take > 0 {
            let mut all: Vec<PostingIn<'_>> = (0..d.len()).map(|i| d.posting_in(i)).collect();
            all.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            let value: Arc<[u8]> = block::encode(*first, &all).into();
            tx.put(Space::Ftidx, FtidxKey::new(table, index, token, *first).encode(), value.to_vec());
            last = (all.len() < BLOCK_DOCS).then_some((*first, value));
        }
    }
    for chunk in rest.chunks(BLOCK_DOCS) {
        let first = chunk.first().map_or(0, |p| p.num);
        let value = block::encode(first, chunk);
        last = (chunk.len() < BLOCK_DOCS).then(|| (first, Arc::from(value.as_slice())));
        // new numbers: no other key of this write is this one
        tx.put_new(Space::Ftidx, FtidxKey::new(table, index, token, first).encode(), value);
    }
    Ok(last)
}

/// Removes the dictionary entries of tokens left without postings: those whose blocks this write
/// emptied, that it adds no posting of, and that have no other block.
fn drop_dead_terms(
    tx: &mut WriteTx<'_>,
    table: &str,
    index: &str,
    emptied: &BTreeMap<String, Vec<Vec<u8>>>,
    added: impl Fn(&str) -> bool,
    known: &KnownTerms,
    key: &(String, String, i64),
) -> Result<()> {
    for (token, gone) in emptied {
        if added(token) {
            continue;
        }
        let prefix = FtidxKey::token_prefix(table, index, token);
        let mut alive = false;
        for item in tx.scan(Space::Ftidx, KeyRange::Prefix(prefix)) {
            let (key, _) = item?;
            if !gone.iter().any(|g| *g == *key) {
                alive = true;
                break;
            }
        }
        if !alive {
            // forgotten now, before the write commits: the cache may lack a term, never claim one
            if let Some(k) = known.lock().get_mut(key) {
                k.forget_term(token);
            }
            tx.delete(Space::Ftstat, FtStatKey::term(table, index, token).encode());
        }
    }
    Ok(())
}

/// Cuts documents out of their blocks: a token's posting of document `num` is in the block with
/// the greatest first number not above `num` (see `keys::ftidx`). Returns the blocks it emptied
/// (and so deleted), by token.
fn cut_postings(
    tx: &mut WriteTx<'_>,
    table: &str,
    index: &str,
    cut: &BTreeMap<String, Vec<u64>>,
) -> Result<BTreeMap<String, Vec<Vec<u8>>>> {
    let mut emptied: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    let mut per_block: BTreeMap<Vec<u8>, Vec<u64>> = BTreeMap::new();
    for (token, nums) in cut {
        let lower = FtidxKey::token_prefix(table, index, token);
        for &num in nums {
            let upper = FtidxKey::new(table, index, token, num).encode();
            let Some((key, _)) = tx.last_in(Space::Ftidx, &lower, &upper)? else {
                return Err(corrupt(format!("no block of {token:?} holds document number {num}")));
            };
            per_block.entry(key.to_vec()).or_default().push(num);
        }
    }
    for (key, nums) in per_block {
        let value = tx.get(Space::Ftidx, &key)?.ok_or_else(|| corrupt("a block vanished".into()))?;
        let parsed = FtidxKey::decode(&key).map_err(|e| corrupt(e.to_string()))?;
        let mut d = Decoded::default();
        d.load(parsed.first, &value)?;
        d.locate_positions()?;
        let kept: Vec<PostingIn<'_>> =
            (0..d.len()).filter(|&i| !nums.contains(&d.docs[i])).map(|i| d.posting_in(i)).collect();
        if kept.len() + nums.len() != d.len() {
            return Err(corrupt(format!("{} misses a document it should hold", crate::keys::display("ftidx", &key))));
        }
        if kept.is_empty() {
            emptied.entry(parsed.token.into_owned()).or_default().push(key.clone());
            tx.delete(Space::Ftidx, key);
        } else {
            let block = block::encode(parsed.first, &kept);
            tx.put(Space::Ftidx, key, block);
        }
    }
    Ok(emptied)
}

//! Keeping fulltext indexes exact inside every document write.
//!
//! The family's three steps (see `service::write`): [`prepare`] analyzes a new document before
//! the committer; [`stage`] logs each document change in the write's fulltext log
//! (`Write::fulltext`) as an [`FtOp`]: the postings to remove (read from the document's length
//! record, so the old document is not analyzed again) and the new document's terms; at the end
//! of the write, [`finish`] merges every logged change of the write:
//! the new postings of all its documents become blocks (one per token and at most
//! [`BLOCK_DOCS`] documents), the removed ones are cut out of their blocks, the term dictionary
//! gains the new tokens and loses those left without postings, and `N` and the total length
//! change by the write's net amounts — all in the same atomic batch as the documents. (A term's
//! document frequency is the sum of its blocks' counts, read with its postings.) An import chunk of 2000 documents writes each token's
//! postings once, not once per document.

use super::analyzer::Analyzer;
use super::log::FtOp;
use super::options::FulltextOptions;
use super::postings::{self, DocPostings, LenRecord};
use crate::catalog::{Catalog, IndexDef, IndexKind};
use crate::entity::FieldDict;
use crate::keys::{FtStatKey, FtidxKey, MetaKey};
use crate::service::write::{Change, Write};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Space, WriteTx};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Most documents in one posting block: removing a document rewrites one block per token, so
/// small blocks keep that cheap; large ones make reading a common token cheaper.
pub const BLOCK_DOCS: usize = 64;
/// Most terms [`KnownTerms`] remembers per index.
const MAX_KNOWN_TERMS: usize = 2_000_000;

/// The terms each fulltext index's committed dictionary is known to hold, so that a write adds
/// the dictionary entry of a term only when it is new — a blind put of every term of every write
/// left a version per write in the LSM tree, which each dictionary scan (prefixes, typo-tolerant
/// terms) then walked. Only the committer reads and changes it: a term is added once the write
/// that put it has committed, and removed when a write stages its removal, so it never claims a
/// term the store lacks (at worst it lacks one, and a write puts that entry again). An index's
/// terms are keyed by its creation time, so a dropped and re-created index starts afresh.
#[derive(Default)]
pub struct KnownTerms(Arc<Mutex<TermSets>>);

/// Per index (table, name, created_at): its known terms.
type TermSets = std::collections::HashMap<(String, String, i64), foldhash::HashSet<String>>;

impl KnownTerms {
    fn lock(&self) -> std::sync::MutexGuard<'_, TermSets> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The sequence numbering posting blocks (`meta:seq:ftblock`).
const BLOCK_SEQ: &str = "ftblock";

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
pub fn prepare(catalog: &Catalog, table: &str, id: &str, blob: &[u8]) -> Result<Vec<PreparedText>> {
    let defs = catalog.indexes(table);
    let mut out = Vec::new();
    let mut dict = None;
    for def in defs.iter().filter(|d| d.kind == IndexKind::Fulltext && d.is_maintained()) {
        let dict: &Arc<FieldDict> = dict.get_or_insert_with(|| catalog.dict());
        let terms = postings::analyze(def, &analyzer(def), blob, dict)?;
        let postings = DocPostings::encode(id, terms);
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
pub(crate) fn stage(w: &mut Write<'_, '_>, c: &Change<'_>, prepared: &mut Vec<PreparedText>) -> Result<()> {
    let defs = w.catalog().indexes(&c.table.name);
    let mut dict = None;
    for def in defs.iter().filter(|d| d.is_maintained() && d.kind == IndexKind::Fulltext) {
        let dict: &Arc<FieldDict> = dict.get_or_insert_with(|| w.catalog().dict());
        stage_index(w, def, c.id, c.old, c.new, dict, prepared)?;
    }
    Ok(())
}

/// Changes the postings of document `id` in fulltext index `def` from `old` to `new` in the
/// write. `prepared` holds terms computed before the write (this index's are taken from it).
fn stage_index(
    tx: &mut Write<'_, '_>,
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
            None => DocPostings::encode(id, postings::analyze(def, &analyzer(def), blob, dict)?),
        }),
    };
    change(tx, def, id, added)
}

/// Logs the new terms of a document, removing what it had.
fn change(tx: &mut Write<'_, '_>, def: &IndexDef, id: &str, added: Option<DocPostings>) -> Result<()> {
    let added = added.filter(|t| t.len > 0);
    let key = FtStatKey::doc_len(&def.table, &def.name, id).encode();
    let removed = tx.get(Space::Ftstat, &key)?.map(|v| LenRecord::decode(&v)).transpose()?;
    if removed.is_none() && added.is_none() {
        return Ok(());
    }
    // Marks the document as added by this write (block 0) until `apply` numbers its block, so a
    // later change of it in the same write finds its postings among the write's own.
    match &added {
        Some(t) => tx.put(Space::Ftstat, key, LenRecord { len: t.len, block: 0, tokens: Vec::new() }.encode()),
        None => tx.delete(Space::Ftstat, key),
    }
    tx.fulltext.push(FtOp {
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
pub(crate) fn backfill(tx: &mut Write<'_, '_>, def: &IndexDef, id: &str, terms: DocPostings) -> Result<()> {
    if tx.get(Space::Ftstat, &FtStatKey::doc_len(&def.table, &def.name, id).encode())?.is_some() {
        return Ok(());
    }
    change(tx, def, id, Some(terms))
}

/// The net change of one index in one write.
#[derive(Default)]
struct Net {
    /// documents added by the write (what is left of them at its end)
    added: BTreeMap<String, DocPostings>,
    /// postings to cut: `(token, block) → ids`
    cut: BTreeMap<(String, u64), Vec<String>>,
    /// removed stored documents and their total length
    removed_docs: u64,
    removed_len: u64,
}

/// Merges every fulltext change the write logged (see the module doc): the family's finish step,
/// at the end of every write, on the committer.
pub(crate) fn finish(w: &mut Write<'_, '_>, known: &KnownTerms) -> Result<()> {
    let ops = std::mem::take(&mut w.fulltext);
    if ops.is_empty() {
        return Ok(());
    }
    let catalog = w.catalog();
    let tx: &mut WriteTx<'_> = w;
    let mut nets: BTreeMap<(String, String, i64), Net> = BTreeMap::new();
    for op in ops {
        let FtOp { table, index, created_at, id, removed, added } = op;
        let net = nets.entry((table, index, created_at)).or_default();
        match removed {
            Some(r) if r.block == 0 => {
                net.added.remove(&id);
            }
            Some(r) => {
                net.removed_docs += 1;
                net.removed_len += r.len;
                for token in r.tokens {
                    net.cut.entry((token, r.block)).or_default().push(id.clone());
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
        let new_terms = apply_net(tx, &key.0, &key.1, net, known, &key)?;
        if !new_terms.is_empty() {
            let known = known.0.clone();
            tx.on_commit(move || {
                let mut map = known.lock().unwrap_or_else(PoisonError::into_inner);
                let set = map.entry(key).or_default();
                if set.len() + new_terms.len() <= MAX_KNOWN_TERMS {
                    set.extend(new_terms);
                }
            });
        }
    }
    Ok(())
}

fn corrupt(what: String) -> ServiceError {
    ServiceError::Internal(format!("damaged full-text entry: {what}"))
}

/// A posting a write adds: document id, encoded entry, and its `(tf, length)` pair.
type NewPosting<'a> = (&'a str, &'a [u8], (u32, u64));

/// Applies one index's net change; returns the dictionary entries it put.
fn apply_net(
    tx: &mut WriteTx<'_>,
    table: &str,
    index: &str,
    net: Net,
    known: &KnownTerms,
    key: &(String, String, i64),
) -> Result<Vec<String>> {
    let mut new_terms = Vec::new();
    let emptied = cut_postings(tx, table, index, &net.cut)?;
    let (mut n, mut total) = (0u64, 0u64);
    if !net.added.is_empty() {
        let block = next_block(tx)?;
        // token → its documents in id order (`added` is ordered by id); a hash map, as an
        // import chunk has some 400 000 postings over 25 000 tokens
        // (each posting with its `(tf, length)` pair for the block heads)
        let mut by_token: foldhash::HashMap<&str, Vec<NewPosting<'_>>> = Default::default();
        for (id, doc) in &net.added {
            n += 1;
            total += doc.len;
            for (i, (token, entry)) in doc.entries.iter().enumerate() {
                let tf = doc
                    .tfs
                    .get(i)
                    .copied()
                    .ok_or_else(|| corrupt(format!("{id:?}: a posting without its frequency")))?;
                by_token.entry(token).or_default().push((id, entry, (tf, doc.len)));
            }
        }
        {
            let map = known.lock();
            let have = map.get(key);
            for token in by_token.keys() {
                if have.is_none_or(|h| !h.contains(*token)) {
                    tx.put(Space::Ftstat, FtStatKey::term(table, index, token).encode(), Vec::new());
                    new_terms.push((*token).to_owned());
                }
            }
        }
        for (token, docs) in &by_token {
            for chunk in docs.chunks(BLOCK_DOCS) {
                let first = chunk.first().map_or("", |(id, _, _)| id);
                let key = FtidxKey::new(table, index, token, block, first).encode();
                let pairs = chunk.iter().map(|(_, _, pair)| *pair).collect();
                let value = postings::encode_block_with_pairs(chunk.iter().map(|(_, e, _)| *e), pairs);
                // a new block number: no other key of this write is this one
                tx.put_new(Space::Ftidx, key, value);
            }
        }
        let mut tokens: Vec<&str> = Vec::new();
        for (id, doc) in &net.added {
            tokens.clear();
            tokens.extend(doc.entries.iter().map(|(t, _)| t.as_str()));
            let record = LenRecord::encode_parts(doc.len, block, &tokens);
            tx.put(Space::Ftstat, FtStatKey::doc_len(table, index, id).encode(), record);
        }
        drop_dead_terms(tx, table, index, &emptied, |t| by_token.contains_key(t), known, key)?;
    } else {
        drop_dead_terms(tx, table, index, &emptied, |_| false, known, key)?;
    }
    let key = FtStatKey::stat(table, index).encode();
    let (old_n, old_total) = postings::decode_stat(tx.get(Space::Ftstat, &key)?.as_deref());
    let next_n = (old_n + n).checked_sub(net.removed_docs);
    let next_total = (old_total + total).checked_sub(net.removed_len);
    match (next_n, next_total) {
        (Some(0), Some(0)) => tx.delete(Space::Ftstat, key),
        (Some(n), Some(t)) => tx.put(Space::Ftstat, key, postings::encode_stat(n, t)),
        _ => return Err(corrupt(format!("ftstat:{table}:{index} would go below 0"))),
    }
    Ok(new_terms)
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
            if let Some(set) = known.lock().get_mut(key) {
                set.remove(token);
            }
            tx.delete(Space::Ftstat, FtStatKey::term(table, index, token).encode());
        }
    }
    Ok(())
}

/// Cuts documents out of their blocks: a block holding `id` of write `block` is the one with the
/// greatest first id not above `id` (see `keys::ftidx`). Returns the blocks it emptied (and so
/// deleted), by token.
fn cut_postings(
    tx: &mut WriteTx<'_>,
    table: &str,
    index: &str,
    cut: &BTreeMap<(String, u64), Vec<String>>,
) -> Result<BTreeMap<String, Vec<Vec<u8>>>> {
    let mut emptied: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    let mut per_block: BTreeMap<Vec<u8>, Vec<&str>> = BTreeMap::new();
    for ((token, block), ids) in cut {
        let lower = FtidxKey::block_prefix(table, index, token, *block);
        for id in ids {
            let upper = FtidxKey::new(table, index, token, *block, id).encode();
            let Some((key, _)) = tx.last_in(Space::Ftidx, &lower, &upper)? else {
                return Err(corrupt(format!("no block of {token:?} holds document {id:?}")));
            };
            per_block.entry(key.to_vec()).or_default().push(id);
        }
    }
    for (key, ids) in per_block {
        let value = tx.get(Space::Ftidx, &key)?.ok_or_else(|| corrupt("a block vanished".into()))?;
        let entries = postings::decode_block(&value)?;
        let kept: Vec<&[u8]> =
            entries.iter().filter(|p| !ids.iter().any(|id| id.as_bytes() == p.id)).map(|p| p.raw).collect();
        if kept.len() + ids.len() != entries.len() {
            return Err(corrupt(format!("{} misses a document it should hold", crate::keys::display("ftidx", &key))));
        }
        if kept.is_empty() {
            let token = FtidxKey::decode(&key).map_err(|e| corrupt(e.to_string()))?.token.into_owned();
            emptied.entry(token).or_default().push(key.clone());
            tx.delete(Space::Ftidx, key);
        } else {
            tx.put(Space::Ftidx, key, postings::encode_block(kept.into_iter())?);
        }
    }
    Ok(emptied)
}

/// A big-endian u64 value, 0 when absent or malformed.
pub fn decode_u64(v: Option<&[u8]>) -> u64 {
    v.and_then(|b| <[u8; 8]>::try_from(b).ok()).map_or(0, u64::from_be_bytes)
}

/// The next block number (from 1).
fn next_block(tx: &mut WriteTx<'_>) -> Result<u64> {
    let key = MetaKey::Seq(BLOCK_SEQ.into()).encode();
    let next = decode_u64(tx.get(Space::Meta, &key)?.as_deref()) + 1;
    tx.put(Space::Meta, key, next.to_be_bytes().to_vec());
    Ok(next)
}

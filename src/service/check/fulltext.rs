//! `check` for fulltext indexes: every document's postings, length record, and the index's
//! document frequencies, `N` and total length, against the stored documents.
//!
//! Forward, document by document: the document is analyzed, and its length record and each of
//! its postings (found in the block the record names) must say exactly that. Backward, key by
//! key: every block must decode with its entries in id order, the postings must number exactly
//! what the documents account for (so there is none without its document), each term's stored
//! document frequency must equal its postings, each length record must have its document, and
//! `N` and the total length must be the documents' sums.

use super::report::CheckReport;
use crate::catalog::IndexDef;
use crate::entity::FieldDict;
use crate::keys::{EntityKey, FtStatKey, FtidxKey};
use crate::service::search::maintain;
use crate::service::search::postings::{self, LenRecord};
use crate::service::stop::{Stop, Watched};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};
use std::collections::BTreeMap;
use std::ops::Bound;

/// What the documents of one index account for.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// documents with at least one token
    docs: u64,
    /// their total length
    total: u64,
    /// their postings (distinct tokens per document)
    postings: u64,
}

fn show(space: Space, key: &[u8]) -> String {
    crate::keys::display(space.name(), key)
}

/// Checks one document's length record and postings.
pub(super) fn check_document(
    view: &ReadView,
    dict: &FieldDict,
    def: &IndexDef,
    id: &str,
    blob: &[u8],
    tally: &mut Tally,
    report: &mut CheckReport,
) -> Result<()> {
    let (table, index) = (def.table.as_str(), def.name.as_str());
    let terms = postings::analyze(def, &maintain::analyzer(def), blob, dict)?;
    let dkey = FtStatKey::doc_len(table, index, id).encode();
    let stored = view.get(Space::Ftstat, &dkey)?;
    if terms.len == 0 {
        if stored.is_some() {
            report.problem("stale_entry", show(Space::Ftstat, &dkey), format!("document {id:?} has no indexed text"));
        }
        return Ok(());
    }
    tally.docs += 1;
    tally.total += terms.len;
    tally.postings += terms.terms.len() as u64;
    let Some(stored) = stored else {
        report.problem("missing_entry", show(Space::Ftstat, &dkey), format!("document {id:?} lacks it"));
        return Ok(());
    };
    let record = match LenRecord::decode(&stored) {
        Ok(r) => r,
        Err(e) => {
            report.problem("stale_entry", show(Space::Ftstat, &dkey), e.to_string());
            return Ok(());
        }
    };
    let tokens: Vec<&String> = terms.terms.iter().map(|(t, _)| t).collect();
    if record.len != terms.len || record.block == 0 || record.tokens.iter().collect::<Vec<_>>() != tokens {
        report.problem(
            "stale_entry",
            show(Space::Ftstat, &dkey),
            format!(
                "says length {} and {} tokens; the document has {} and {}",
                record.len,
                record.tokens.len(),
                terms.len,
                tokens.len()
            ),
        );
    }
    for (token, hits) in &terms.terms {
        let lower = FtidxKey::block_prefix(table, index, token, record.block);
        let upper = FtidxKey::new(table, index, token, record.block, id).encode();
        let block = view
            .scan(Space::Ftidx, KeyRange::Between(Bound::Included(lower), Bound::Included(upper.clone())), true)
            .next()
            .transpose()?;
        let found = match &block {
            Some((_, value)) => postings::decode_block(value)
                .ok()
                .and_then(|entries| {
                    entries.into_iter().find(|p| p.id == id.as_bytes()).map(|p| (p.len, p.field_list()))
                })
                .map(|(len, fields)| -> Result<_> {
                    let mut got = Vec::new();
                    for f in fields? {
                        got.push((f.field, f.positions()?));
                    }
                    Ok((len, got))
                })
                .transpose()?,
            None => None,
        };
        match found {
            None => report.problem(
                "missing_entry",
                show(Space::Ftidx, &upper),
                format!("document {id:?} lacks its posting of {token:?}"),
            ),
            Some((len, got)) if len != terms.len || got != *hits => report.problem(
                "stale_entry",
                show(Space::Ftidx, &upper),
                format!("the posting of {token:?} in {id:?} differs from the document's"),
            ),
            Some(_) => {}
        }
    }
    Ok(())
}

/// Checks an index's blocks, dictionary, length records and statistics against the tally.
pub(super) fn check_index(
    view: &ReadView,
    def: &IndexDef,
    tally: &Tally,
    report: &mut CheckReport,
    stop: &Stop,
) -> Result<u64> {
    let (table, index) = (def.table.as_str(), def.name.as_str());
    let mut df: BTreeMap<String, u64> = BTreeMap::new();
    let mut postings_seen = 0u64;
    let scan = view.scan(Space::Ftidx, KeyRange::Prefix(FtidxKey::index_prefix(table, index)), false);
    for item in Watched::new(scan.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, value) = item?;
        let k = match FtidxKey::decode(&key) {
            Ok(k) => k,
            Err(e) => {
                report.problem("stale_entry", show(Space::Ftidx, &key), format!("the key does not decode: {e}"));
                continue;
            }
        };
        let entries = match postings::decode_block(&value) {
            Ok(e) => e,
            Err(e) => {
                report.problem("stale_entry", show(Space::Ftidx, &key), e.to_string());
                continue;
            }
        };
        let ordered = entries.windows(2).all(|w| w[0].id < w[1].id);
        let valid = entries.iter().all(|p| p.id_str().is_ok());
        if !valid || entries.is_empty() || !ordered || entries.first().is_some_and(|p| p.id < k.first.as_bytes()) {
            report.problem(
                "stale_entry",
                show(Space::Ftidx, &key),
                "a block holds documents in id order, from its first id",
            );
        }
        if !postings::head_is_exact(&value)? {
            report.problem(
                "stale_entry",
                show(Space::Ftidx, &key),
                "the block's head does not state its entries' (frequency, length) front exactly",
            );
        }
        postings_seen += entries.len() as u64;
        *df.entry(k.token.into_owned()).or_default() += entries.len() as u64;
    }
    let index_shown = show(Space::Ftidx, &FtidxKey::index_prefix(table, index));
    if postings_seen != tally.postings {
        report.problem(
            "count_mismatch",
            index_shown,
            format!("{postings_seen} postings are stored; the documents account for {}", tally.postings),
        );
    }
    // the dictionary: exactly one key per term with postings
    let scan = view.scan(Space::Ftstat, KeyRange::Prefix(FtStatKey::term_prefix(table, index, "")), false);
    let mut terms_seen = BTreeMap::new();
    for item in Watched::new(scan.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, value) = item?;
        if let Ok(FtStatKey::Term { token, .. }) = FtStatKey::decode(&key) {
            if !value.is_empty() {
                report.problem("stale_entry", show(Space::Ftstat, &key), "a dictionary entry has no value");
            }
            terms_seen.insert(token.into_owned(), key.to_vec());
        }
    }
    for (token, count) in &df {
        if !terms_seen.contains_key(token) {
            report.problem(
                "stat_mismatch",
                show(Space::Ftstat, &FtStatKey::term(table, index, token).encode()),
                format!("{count} documents hold {token:?}, the dictionary lacks it"),
            );
        }
    }
    for (token, key) in &terms_seen {
        if !df.contains_key(token) {
            report.problem("stat_mismatch", show(Space::Ftstat, key), "no document holds this term");
        }
    }
    // length records: each has its document, and the documents account for all of them
    let scan = view.scan(Space::Ftstat, KeyRange::Prefix(FtStatKey::doc_len_prefix(table, index)), false);
    let mut records = 0u64;
    for item in Watched::new(scan.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, _) = item?;
        records += 1;
        if let Ok(FtStatKey::DocLen { id, .. }) = FtStatKey::decode(&key)
            && view.get(Space::Entity, &EntityKey::new(table, &id).encode())?.is_none()
        {
            report.problem("orphan_entry", show(Space::Ftstat, &key), format!("document {id:?} does not exist"));
        }
    }
    let skey = FtStatKey::stat(table, index).encode();
    let (n, total) = postings::decode_stat(view.get(Space::Ftstat, &skey)?.as_deref());
    if (n, total) != (tally.docs, tally.total) || records != tally.docs {
        report.problem(
            "stat_mismatch",
            show(Space::Ftstat, &skey),
            format!(
                "says N = {n}, total length {total}; {records} length records; the documents: N = {}, total {}",
                tally.docs, tally.total
            ),
        );
    }
    Ok(postings_seen)
}

#[cfg(test)]
mod tests {
    use crate::keys::{FtStatKey, FtidxKey};
    use crate::service::search::postings;
    use crate::service::{CreateIndex, CreateTable, Db, DbOptions, Preconditions};
    use crate::storage::{KeyRange, Space, StorageConfig};
    use serde_json::json;
    use std::sync::Arc;

    async fn db(dir: &std::path::Path) -> Arc<Db> {
        let db =
            Db::open(StorageConfig::new(dir), DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
        db.create_table(serde_json::from_value::<CreateTable>(json!({"name": "t"})).unwrap()).await.unwrap();
        let req: CreateIndex = serde_json::from_value(json!({"name": "ft", "kind": "fulltext",
            "fields": ["title", "tags"], "options": {"language": "none"}}))
        .unwrap();
        db.create_index("t".into(), req).await.unwrap();
        for (id, doc) in [
            ("a", json!({"title": "graph data", "tags": ["graph", "x y"]})),
            ("b", json!({"title": "data data", "n": 1})),
            ("c", json!({"n": 2})),
        ] {
            let doc = doc.as_object().unwrap().clone();
            db.put_document("t".into(), id.into(), doc, Preconditions::default()).await.unwrap();
        }
        let report = db.check().await.unwrap();
        assert!(report.ok, "{report:?}");
        assert_eq!(report.checked.postings, 5, "a: graph data x y, b: data");
        db
    }

    fn kinds(report: &crate::service::CheckReport) -> Vec<&'static str> {
        let mut k: Vec<_> = report.problems.iter().map(|p| p.kind).collect();
        k.sort();
        k
    }

    async fn raw(db: &Arc<Db>, f: impl FnOnce(&mut crate::storage::WriteTx<'_>) + Send + 'static) {
        db.store()
            .write(move |tx| {
                f(tx);
                Ok::<_, crate::storage::StorageError>(())
            })
            .await
            .unwrap();
    }

    /// The block of `token` holding document `id`.
    fn block_of(db: &Arc<Db>, token: &str, id: &str) -> (Vec<u8>, Vec<u8>) {
        let view = db.store().snapshot();
        let found = view
            .scan(Space::Ftidx, KeyRange::Prefix(FtidxKey::token_prefix("t", "ft", token)), false)
            .map(Result::unwrap)
            .find(|(_, v)| postings::decode_block(v).unwrap().iter().any(|p| p.id == id.as_bytes()));
        let (k, v) = found.unwrap();
        (k.to_vec(), v.to_vec())
    }

    #[tokio::test]
    async fn check_reports_postings_and_statistics_the_documents_do_not_support() {
        // a block gone: the posting is missing, and the counts no longer add up
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let (key, _) = block_of(&d, "x", "a");
        raw(&d, move |tx| tx.delete(Space::Ftidx, key)).await;
        let report = d.check().await.unwrap();
        assert_eq!(kinds(&report), ["count_mismatch", "missing_entry", "stat_mismatch"], "{report:?}");

        // a posting whose positions were changed
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let (key, value) = block_of(&d, "data", "b");
        let entries = postings::decode_block(&value).unwrap();
        let mut changed = Vec::new();
        postings::encode_entry(&mut changed, "b", 2, &vec![(0, vec![0, 5])]);
        let rebuilt: Vec<&[u8]> =
            entries.iter().map(|p| if p.id == b"b" { changed.as_slice() } else { p.raw }).collect();
        let block = postings::encode_block(rebuilt.into_iter()).unwrap();
        raw(&d, move |tx| tx.put(Space::Ftidx, key, block)).await;
        assert_eq!(kinds(&d.check().await.unwrap()), ["stale_entry"]);

        // a block whose head claims a larger frequency than its entries hold
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let (key, value) = block_of(&d, "data", "b");
        let (_, n, entries) = postings::block_head(&value).unwrap();
        let mut wrong = vec![0, 1, 99, 1, u8::try_from(n).unwrap()];
        wrong.extend_from_slice(entries);
        raw(&d, move |tx| tx.put(Space::Ftidx, key, wrong)).await;
        assert_eq!(kinds(&d.check().await.unwrap()), ["stale_entry"]);

        // statistics off by one, and a length record of a document that does not exist
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        raw(&d, |tx| {
            tx.put(Space::Ftstat, FtStatKey::stat("t", "ft").encode(), postings::encode_stat(3, 6));
            tx.put(Space::Ftstat, FtStatKey::term("t", "ft", "ghost").encode(), Vec::new());
            let record = postings::LenRecord { len: 1, block: 1, tokens: vec!["ghost".into()] };
            tx.put(Space::Ftstat, FtStatKey::doc_len("t", "ft", "zz").encode(), record.encode());
        })
        .await;
        let report = d.check().await.unwrap();
        assert_eq!(kinds(&report), ["orphan_entry", "stat_mismatch", "stat_mismatch"], "{report:?}");
    }
}

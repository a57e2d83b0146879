//! `check` for fulltext indexes: every document's postings, length record, and the index's
//! document frequencies, `N` and total length, against the stored documents.
//!
//! Forward, document by document: the document is analyzed, and its length record, its number's
//! `ftdoc` entry and each of its postings (found in the block its number falls in) must say
//! exactly that. Backward, key by key: every block must decode with its documents in number
//! order (after the token's block before it, from its key's number) and a head that states its
//! front exactly, every posting must name a numbered document, the postings must number exactly
//! what the documents account for (so there is none without its document), each term must be in
//! the dictionary, each length record and number entry must have its document, and `N`, the
//! total length and the next number must agree with the documents.

use crate::catalog::IndexDef;
use crate::entity::FieldDict;
use crate::keys::{EntityKey, FtStatKey, FtidxKey};
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::check_report::CheckReport;
use crate::service::search::block::{self, BlockBound, Decoded};
use crate::service::search::maintain;
use crate::service::search::postings::{self, LenRecord, Stat};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

/// What the documents of one index account for.
#[derive(Debug, Default)]
pub(crate) struct Tally {
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
pub(crate) fn check_document(
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
    if record.len != terms.len || record.num == 0 {
        report.problem(
            "stale_entry",
            show(Space::Ftstat, &dkey),
            format!("says length {} (number {}); the document has {}", record.len, record.num, terms.len),
        );
    }
    let nkey = FtStatKey::doc(table, index, record.num).encode();
    match view.get(Space::Ftstat, &nkey)? {
        None => report.problem("missing_entry", show(Space::Ftstat, &nkey), format!("document {id:?} has this number")),
        Some(named) if *named != *id.as_bytes() => report.problem(
            "stale_entry",
            show(Space::Ftstat, &nkey),
            format!("names {:?}; document {id:?} has this number", String::from_utf8_lossy(&named)),
        ),
        Some(_) => {}
    }
    let mut lists: Vec<Vec<u32>> = Vec::new();
    for (token, hits) in &terms.terms {
        let lower = FtidxKey::token_prefix(table, index, token);
        let upper = FtidxKey::new(table, index, token, record.num).encode();
        let block = view
            .scan(Space::Ftidx, KeyRange::Between(Bound::Included(lower), Bound::Included(upper.clone())), true)
            .next()
            .transpose()?;
        let mut found = None;
        if let Some((key, value)) = &block
            && let Ok(k) = FtidxKey::decode(key)
        {
            let mut d = Decoded::default();
            if d.load(k.first, value).is_ok()
                && d.locate_positions().is_ok()
                && let Some(i) = d.docs.iter().position(|&n| n == record.num)
            {
                let pairs = d.pairs_of(i);
                lists.resize_with(pairs.len(), Vec::new);
                let got = match block::field_positions(d.positions_of(i), pairs, &mut lists) {
                    Ok(()) => pairs.iter().zip(&lists).map(|(p, l)| (p.0, l.clone())).collect::<Vec<_>>(),
                    Err(_) => Vec::new(),
                };
                found = Some((d.lens[i], got));
            }
        }
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
pub(crate) fn check_index(
    view: &ReadView,
    def: &IndexDef,
    tally: &Tally,
    report: &mut CheckReport,
    stop: &Stop,
) -> Result<u64> {
    let (table, index) = (def.table.as_str(), def.name.as_str());
    // the numbered documents: each named document's length record gives it that number
    let mut numbered: HashMap<u64, ()> = HashMap::new();
    let scan = view.scan(Space::Ftstat, KeyRange::Prefix(FtStatKey::doc_prefix(table, index)), false);
    for item in Watched::new(scan.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, value) = item?;
        let Ok(FtStatKey::Doc { num, .. }) = FtStatKey::decode(&key) else { continue };
        numbered.insert(num, ());
        let id = String::from_utf8_lossy(&value);
        let record = view.get(Space::Ftstat, &FtStatKey::doc_len(table, index, &id).encode())?;
        match record.map(|r| LenRecord::decode(&r)).transpose() {
            Ok(Some(r)) if r.num == num => {}
            Ok(None) => {
                report.problem("orphan_entry", show(Space::Ftstat, &key), format!("document {id:?} is not indexed"))
            }
            _ => {
                report.problem("stale_entry", show(Space::Ftstat, &key), format!("document {id:?} has another number"))
            }
        }
    }
    let mut df: BTreeMap<String, u64> = BTreeMap::new();
    let mut postings_seen = 0u64;
    let mut highest = 0u64;
    // the token of the block before, and its last document
    let mut before: Option<(String, u64)> = None;
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
        let mut d = Decoded::default();
        if let Err(e) = d.load(k.first, &value).and_then(|()| d.locate_positions()) {
            report.problem("stale_entry", show(Space::Ftidx, &key), e.to_string());
            continue;
        }
        let after = match &before {
            Some((token, last)) if *token == *k.token => Some(*last),
            _ => None,
        };
        let ordered = d.docs.windows(2).all(|w| w[0] < w[1]);
        let placed = d.docs.first().is_some_and(|&f| f >= k.first && after.is_none_or(|a| f > a));
        if !ordered || !placed {
            report.problem(
                "stale_entry",
                show(Space::Ftidx, &key),
                "a block holds documents in number order, from its key's number, after the block before",
            );
        }
        let (head, _, _) = block::head(&value)?;
        let pairs = (0..d.len()).map(|i| (d.pairs_of(i).iter().map(|p| p.1).max().unwrap_or(0), d.lens[i])).collect();
        if BlockBound::of(pairs) != head {
            report.problem(
                "stale_entry",
                show(Space::Ftidx, &key),
                "the block's head does not state its postings' (frequency, length) front exactly",
            );
        }
        if let Some(&num) = d.docs.iter().find(|n| !numbered.contains_key(n)) {
            report.problem("orphan_entry", show(Space::Ftidx, &key), format!("no document has number {num}"));
        }
        if let Some(&last) = d.docs.last() {
            highest = highest.max(last);
            before = Some((k.token.to_string(), last));
        }
        postings_seen += d.len() as u64;
        *df.entry(k.token.into_owned()).or_default() += d.len() as u64;
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
    let stat = match Stat::decode(view.get(Space::Ftstat, &skey)?.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            report.problem("stale_entry", show(Space::Ftstat, &skey), e.to_string());
            Stat::default()
        }
    };
    let numbers = numbered.len() as u64;
    let next_ok = numbered.keys().chain([&highest]).all(|&n| n < stat.next || n == 0);
    if (stat.n, stat.total) != (tally.docs, tally.total) || records != tally.docs || numbers != tally.docs || !next_ok {
        report.problem(
            "stat_mismatch",
            show(Space::Ftstat, &skey),
            format!(
                "says N = {}, total length {}, next number {}; {records} length records, {numbers} numbered; the documents: N = {}, total {}",
                stat.n, stat.total, stat.next, tally.docs, tally.total
            ),
        );
    }
    Ok(postings_seen)
}

//! Format 5 (see `service::core::data_format`): postings name documents by their number in the index, in
//! blocks of columns (`block.rs`), where format 4 named them by id in blocks of entries keyed by
//! the writing write. Nothing of the old layout carries over, so the stamping write rebuilds every
//! fulltext index from its documents: it removes the index's keys and indexes every document
//! again, numbering them in id order. The one write holds every posting of the directory's
//! fulltext indexes (about what an import of the same documents writes); a crash before it
//! commits leaves format 4, upgraded at the next open.

use super::maintain::{self, KnownTerms};
use super::postings::{self, DocPostings};
use crate::catalog::{Catalog, IndexKind};
use crate::keys::{EntityKey, FtStatKey, FtidxKey, MetaKey};
use crate::storage::{KeyRange, Space, StorageError, WriteTx};

/// Rebuilds every fulltext index of a directory of a format before 5 (in the stamping write).
pub(crate) fn upgrade(tx: &mut WriteTx<'_>, found: u32, catalog: &Catalog) -> crate::storage::Result<()> {
    if found >= 5 {
        return Ok(());
    }
    let damaged = |e: crate::service::ServiceError| StorageError::Corrupt(e.to_string());
    // format 4 numbered its blocks by write
    tx.delete(Space::Meta, MetaKey::Seq("ftblock".into()).encode());
    let dict = catalog.dict();
    for table in catalog.tables() {
        for def in catalog.indexes(&table.name).iter().filter(|d| d.kind == IndexKind::Fulltext) {
            let (t, i) = (def.table.as_str(), def.name.as_str());
            let mut prefixes = vec![(Space::Ftidx, FtidxKey::index_prefix(t, i))];
            prefixes.extend(FtStatKey::index_prefixes(t, i).into_iter().map(|p| (Space::Ftstat, p)));
            for (space, prefix) in prefixes {
                let old: Vec<_> = tx.scan(space, KeyRange::Prefix(prefix)).map(|i| i.map(|(k, _)| k)).collect();
                for key in old {
                    tx.delete(space, key?.to_vec());
                }
            }
            // a failed index is purged at the open; a building one's backfill starts again
            if !def.is_ready() {
                continue;
            }
            let analyzer = maintain::analyzer(def);
            let mut docs = Vec::new();
            for item in tx.scan(Space::Entity, KeyRange::Prefix(crate::keys::table_prefix(t))) {
                let (key, blob) = item?;
                let id = EntityKey::decode(&key).map_err(|e| StorageError::Corrupt(e.to_string()))?.id.into_owned();
                let terms = postings::analyze(def, &analyzer, &blob, &dict).map_err(damaged)?;
                docs.push((id, DocPostings::encode(terms)));
            }
            maintain::rebuild(tx, def, docs, &KnownTerms::default()).map_err(damaged)?;
        }
    }
    Ok(())
}

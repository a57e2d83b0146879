//! Removing every key under some prefixes — a dropped table's, a dropped index's, a failed
//! build's entries — in small writes that resume after the last key removed.
//!
//! Each chunk is one write on the committer, so writes queued behind a purge wait for one short
//! batch at most. A chunk starts after the last key the previous one removed rather than at the
//! prefix: the removed keys are tombstones until compaction, and walking them again in every
//! chunk made a purge quadratic.

use crate::keys::prefix_successor;
use crate::service::Result;
use crate::service::pipeline::Pipeline;
use crate::storage::{KeyRange, Space, WriteTx};
use std::ops::Bound;
use std::sync::Arc;

/// A check run in every chunk's write: false stops the purge (what it removes is gone or reused).
pub(super) type Live = Box<dyn Fn(&Pipeline) -> bool + Send + Sync>;
/// Staged in the write that removes the last keys (e.g. the removal of a drop mark).
pub(super) type Finish = Box<dyn Fn(&mut WriteTx<'_>, &Pipeline) -> Result<()> + Send + Sync>;

/// What a purge removes, while it may go on, and how it ends.
pub(super) struct Purge {
    /// the key prefixes, removed in this order
    pub prefixes: Vec<(Space, Vec<u8>)>,
    /// see [`Live`]
    pub live: Live,
    /// see [`Finish`]
    pub finish: Finish,
    /// a dropped table: each of its documents removed gets a delete event in the changefeed (as
    /// the drop mark's mode says), in the chunk that removes it
    pub feed: Option<String>,
}

/// Where the next chunk starts: a prefix, and the last key removed under it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Cursor {
    prefix: usize,
    after: Option<Vec<u8>>,
}

/// What one chunk did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Chunk {
    /// removed `limit` keys; more may follow the cursor
    More(Cursor),
    /// removed the last keys and staged the finish
    Done,
    /// `live` said no; nothing staged
    Stopped,
}

/// Stages the removal of up to `limit` keys after `cursor`.
pub(super) fn chunk(
    tx: &mut WriteTx<'_>,
    db: &Pipeline,
    purge: &Purge,
    mut cursor: Cursor,
    limit: usize,
) -> Result<Chunk> {
    if !(purge.live)(db) {
        return Ok(Chunk::Stopped);
    }
    let mut removed = 0;
    while let Some((space, prefix)) = purge.prefixes.get(cursor.prefix) {
        let lower = cursor.after.take().map_or_else(|| Bound::Included(prefix.clone()), Bound::Excluded);
        let upper = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        let keys = tx
            .scan(*space, KeyRange::Between(lower, upper))
            .take(limit - removed)
            .map(|r| r.map(|(k, _)| k.to_vec()))
            .collect::<Result<Vec<_>, _>>()?;
        removed += keys.len();
        if *space == Space::Entity
            && let Some(table) = &purge.feed
        {
            log_deletes(tx, db, table, &keys)?;
        }
        let last = keys.last().cloned();
        for k in keys {
            tx.delete(*space, k);
        }
        if removed >= limit {
            return Ok(Chunk::More(Cursor { prefix: cursor.prefix, after: last }));
        }
        cursor = Cursor { prefix: cursor.prefix + 1, after: None };
    }
    (purge.finish)(tx, db)?;
    Ok(Chunk::Done)
}

/// The delete events of a dropped table's documents under `keys`.
fn log_deletes(tx: &mut WriteTx<'_>, db: &Pipeline, table: &str, keys: &[Vec<u8>]) -> Result<()> {
    let mode = db.core.catalog.dropped_changefeed_mode(tx, table)?;
    for key in keys {
        let id = crate::keys::EntityKey::decode(key)
            .map_err(|e| crate::service::ServiceError::Internal(format!("bad entity key: {e}")))?
            .id;
        crate::service::changefeed::append::record_as(
            tx,
            &db.core.catalog,
            table,
            mode,
            &id,
            crate::service::changefeed::Op::Delete,
            None,
        )?;
    }
    Ok(())
}

impl Pipeline {
    /// Runs a purge to its end (or until `live` stops it), a chunk per write.
    pub(super) async fn purge(self: &Arc<Self>, purge: Purge) -> Result<()> {
        let (purge, limit) = (Arc::new(purge), self.core.purge_chunk.max(1));
        let mut cursor = Cursor::default();
        loop {
            // Closing: the drop mark stays, and the purge resumes at the next open.
            if self.core.closing() {
                return Ok(());
            }
            let p = purge.clone();
            match self.write(move |tx, db| chunk(tx, db, &p, cursor, limit)).await? {
                Chunk::More(next) => cursor = next,
                Chunk::Done | Chunk::Stopped => return Ok(()),
            }
        }
    }

    /// Starts a purge in the background, logging how it ended; the returned handle may be awaited
    /// (a request that does and goes away leaves the purge running).
    pub(super) fn spawn_purge(self: &Arc<Self>, what: String, purge: Purge) -> tokio::task::JoinHandle<Result<()>> {
        let db = self.clone();
        self.core.spawn_job(async move {
            let r = db.purge(purge).await;
            if let Err(e) = &r {
                tracing::error!(what, error = %e, "purge stopped; it resumes at the next start");
            }
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Durability, StorageConfig};

    fn purge_of(prefixes: Vec<(Space, Vec<u8>)>) -> Arc<Purge> {
        Arc::new(Purge {
            prefixes,
            live: Box::new(|_| true),
            finish: Box::new(|tx, _| {
                tx.put(Space::Meta, b"finished".to_vec(), vec![]);
                Ok(())
            }),
            feed: None,
        })
    }

    /// Each chunk starts after the last key the previous one removed (not at the prefix, walking
    /// the tombstones again), moves on to the next prefix, and the finish commits with the last.
    #[tokio::test]
    async fn chunks_resume_after_the_last_removed_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = StorageConfig::new(dir.path());
        cfg.durability = Durability::Buffered;
        let db = Pipeline::open_for_test(cfg);
        db.write(|tx, _| {
            for k in ["a1", "a2", "a3", "b1", "c1"] {
                tx.put(Space::Idx, k.as_bytes().to_vec(), vec![]);
            }
            Ok(())
        })
        .await
        .unwrap();
        let purge = purge_of(vec![(Space::Idx, b"a".to_vec()), (Space::Idx, b"b".to_vec())]);
        let run = |cursor: Cursor, limit: usize| {
            let p = purge.clone();
            db.write(move |tx, db| chunk(tx, db, &p, cursor, limit))
        };
        let first = run(Cursor::default(), 2).await.unwrap();
        let Chunk::More(cursor) = first else { panic!("{first:?}") };
        assert_eq!(cursor, Cursor { prefix: 0, after: Some(b"a2".to_vec()) });
        // A key before the cursor is not looked at again: the next chunk starts after "a2".
        db.write(|tx, _| {
            tx.put(Space::Idx, b"a0".to_vec(), vec![]);
            Ok(())
        })
        .await
        .unwrap();
        let second = run(cursor, 2).await.unwrap();
        let Chunk::More(cursor) = second else { panic!("{second:?}") };
        assert_eq!(cursor, Cursor { prefix: 1, after: Some(b"b1".to_vec()) });
        assert!(db.core.store.get(Space::Meta, b"finished").unwrap().is_none());
        assert_eq!(run(cursor, 2).await.unwrap(), Chunk::Done);
        let left: Vec<_> = ["a0", "a1", "a2", "a3", "b1", "c1"]
            .into_iter()
            .filter(|k| db.core.store.get(Space::Idx, k.as_bytes()).unwrap().is_some())
            .collect();
        assert_eq!(left, ["a0", "c1"]);
        assert!(db.core.store.get(Space::Meta, b"finished").unwrap().is_some());
    }

    #[tokio::test]
    async fn a_purge_that_is_no_longer_live_stages_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = StorageConfig::new(dir.path());
        cfg.durability = Durability::Buffered;
        let db = Pipeline::open_for_test(cfg);
        db.write(|tx, _| {
            tx.put(Space::Idx, b"a1".to_vec(), vec![]);
            Ok(())
        })
        .await
        .unwrap();
        let purge = Purge {
            prefixes: vec![(Space::Idx, b"a".to_vec())],
            live: Box::new(|_| false),
            finish: Box::new(|_, _| Ok(())),
            feed: None,
        };
        db.purge(purge).await.unwrap();
        assert!(db.core.store.get(Space::Idx, b"a1").unwrap().is_some());
    }
}

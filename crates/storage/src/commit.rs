//! The committer's commits: one write's keys as one batch of the backend, and, on a backend that
//! commits by group (PostgreSQL), the end of the group.

use super::Space;
use super::error::{Result, StorageError};
use super::staged::Staged;
use super::sync::Completion;
use super::write::Committer;

impl Committer {
    /// Commits one write's keys as one batch. The hashes of its entity keys are evicted from the
    /// document cache around the commit in buffered mode (reads see the commit at once); in sync
    /// mode they are added to `deferred`, for the fsync thread to evict when reads see them.
    pub(super) fn commit_one(
        &self,
        staged: Staged,
        fresh: Vec<(Space, Vec<u8>, Vec<u8>)>,
        deferred: &mut Vec<u64>,
    ) -> Result<()> {
        if staged.is_empty() && fresh.is_empty() {
            return Ok(());
        }
        // Handed to the OS as it commits: the fsync thread relies on it.
        let mut batch = self.engine.batch()?;
        let mut present = self.present.borrow_mut();
        let mut values = self.values.borrow_mut();
        let tracking = !present.is_empty();
        let caching = !values.is_empty();
        // the hashes of the entity keys, evicted from the document cache around the commit
        let mut documents = Vec::new();
        let cached = !self.rows.is_off();
        for (space, key, value) in fresh {
            if cached && space == Space::Entity {
                documents.push(self.rows.hash(&key));
            }
            if tracking || caching {
                let k = (space, key);
                if tracking && let Some(known) = present.get_mut(&k) {
                    *known = true;
                }
                if caching {
                    values.committed(&k, Some(&value));
                }
                batch.insert(space, k.1, value);
                continue;
            }
            batch.insert(space, key, value);
        }
        for (k, value) in staged.into_keys() {
            if tracking && let Some(known) = present.get_mut(&k) {
                *known = value.is_some();
            }
            if caching {
                values.committed(&k, value.as_ref());
            }
            let (space, key) = k;
            if cached && space == Space::Entity {
                documents.push(self.rows.hash(&key));
            }
            match value {
                Some(v) => batch.insert(space, key, v),
                None => batch.remove(space, key),
            }
        }
        // PostgreSQL: evicted around the group's commit instead (see `Committer::end_group`)
        let now = self.syncer.is_none() && !self.engine.commits_by_group();
        if now {
            documents.iter().for_each(|&hash| self.rows.committing(hash));
        }
        let committed = batch.commit();
        if now {
            documents.iter().for_each(|&hash| self.rows.committed(hash));
        } else if committed.is_ok() {
            deferred.extend(documents);
        }
        committed.map_err(|e| {
            present.clear();
            values.clear();
            if matches!(e, StorageError::Poisoned) && self.engine.embedded().is_some() {
                // fjall refused the batch before writing any of it: its background work stopped
                // (`recover.rs` tells whether for a cause that passes)
                return self.engine_stopped();
            }
            // The write's outcome is unknown (part of it may have reached the journal, and
            // fjall's buffer may still write it out): it is answered as the store's failure.
            self.poison(e);
            self.poisoned.refusal()
        })
    }

    /// Ends a group on a backend that commits by group (PostgreSQL): the group's documents are
    /// evicted from the document cache around the commit (as around a fjall batch's, `rows.rs`).
    /// A group that failed — a statement failed, or the commit did — commits nothing: every
    /// write of it is answered with the store's failure (its outcome is unknown when the
    /// connection was lost at the commit), and the store is poisoned.
    pub(super) fn end_group(&self, state: Option<u64>, documents: &[u64], done: &mut [(Completion, Result<()>)]) {
        documents.iter().for_each(|&hash| self.rows.committing(hash));
        let started = std::time::Instant::now();
        let ended = self.engine.end_group(state);
        documents.iter().for_each(|&hash| self.rows.committed(hash));
        let failed = match ended {
            Err(e) => {
                self.poison(e);
                true
            }
            Ok(committed) => {
                if committed {
                    // the commit is the group's flush to disk (PostgreSQL's WAL)
                    self.counters.synced(started.elapsed());
                }
                self.poisoned.is_set()
            }
        };
        if failed {
            self.present.borrow_mut().clear();
            self.values.borrow_mut().clear();
            for (_, result) in done.iter_mut() {
                if result.is_ok() {
                    *result = Err(self.poisoned.refusal());
                }
            }
        }
    }
}

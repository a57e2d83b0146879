//! The backends behind one interface: the store's committer, views and reads call these, and
//! each call goes to fjall (`embedded.rs`) or PostgreSQL (`postgres/`). An enum, not a trait
//! object: two backends, known here, and no virtual call on the hot paths.

use super::config::{Backend, StorageConfig};
use super::embedded::{self, Embedded, EmbeddedBatch, EmbeddedIter, EmbeddedView};
use super::error::{Result, StorageError};
use super::limits::Limits;
use super::postgres::{self, Lease, PgBatch, PgIter, Postgres};
use super::range::KeyRange;
use super::slice::Slice;
use super::space::Space;
use super::stats::StoreStats;
use std::sync::Arc;

/// An open backend.
#[derive(Clone)]
pub(super) enum Engine {
    Embedded(Embedded),
    Postgres(Postgres),
}

/// What reads go through: the latest committed state (fjall's keyspaces; PostgreSQL's committer
/// connection, inside its group), or one snapshot of every keyspace.
pub(super) enum View {
    /// fjall's latest committed state
    Latest(Embedded),
    /// a fjall snapshot
    Snapshot(EmbeddedView),
    /// a PostgreSQL connection: a read view's transaction, or the committer's own
    Postgres(Arc<Lease>),
    /// a view that could not be begun: each read fails with this
    Broken(String),
    /// fjall's, while the store is being opened again (see `recover.rs`): each read fails with
    /// [`StorageError::Recovering`]
    Reopening,
}

/// A scan's pairs, in key order from either end.
pub(super) enum Iter {
    Embedded(EmbeddedIter),
    Postgres(PgIter),
    /// the error a broken view's scan yields once
    Failed(Option<String>),
}

/// One write's keys, committed together.
pub(super) enum Batch {
    Embedded(EmbeddedBatch),
    Postgres(PgBatch),
}

impl Engine {
    /// Opens the backend `config` names.
    pub(super) fn open(config: &StorageConfig) -> Result<Engine> {
        Ok(match &config.backend {
            Backend::Embedded => Engine::Embedded(Embedded::open(config)?),
            Backend::Postgres { url } => {
                Engine::Postgres(Postgres::open(url, config.durability, config.advertise.as_deref(), config.database)?)
            }
        })
    }

    /// The largest key, value and commit the backend takes.
    pub(super) fn limits(&self) -> Limits {
        match self {
            Engine::Embedded(_) => Embedded::LIMITS,
            Engine::Postgres(_) => Postgres::LIMITS,
        }
    }

    /// Whether a group's writes become visible (and durable) only when the group ends
    /// ([`Engine::end_group`]), not write by write.
    pub(super) fn commits_by_group(&self) -> bool {
        matches!(self, Engine::Postgres(_))
    }

    /// Before a group (PostgreSQL: reconnects a committer connection the server closed).
    pub(super) fn start_group(&self) {
        if let Engine::Postgres(pg) = self {
            pg.heal();
        }
    }

    /// Says which thread is the committer's.
    pub(super) fn set_committer(&self, thread: std::thread::ThreadId) {
        if let Engine::Postgres(pg) = self {
            pg.set_committer(thread);
        }
    }

    /// The latest committed value of `key` (outside the committer).
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        match self {
            Engine::Embedded(e) => e.get(space, key),
            Engine::Postgres(pg) => pg.get(space, key),
        }
    }

    /// What the committer reads through.
    pub(super) fn writer_view(&self) -> View {
        match self {
            Engine::Embedded(e) => View::Latest(e.clone()),
            Engine::Postgres(pg) => View::Postgres(pg.writer()),
        }
    }

    /// The snapshot a published state carries for every reader to share (fjall's); `None` where
    /// each reader begins its own (PostgreSQL's, see `Store::snapshot`).
    pub(super) fn shared_snapshot(&self) -> Option<View> {
        match self {
            Engine::Embedded(e) => Some(e.snapshot().map_or(View::Reopening, View::Snapshot)),
            Engine::Postgres(_) => None,
        }
    }

    /// A snapshot as committed now: on the committer's thread, PostgreSQL's committer connection
    /// (it sees the group's earlier writes, as fjall's snapshot does).
    pub(super) fn committed_view(&self) -> View {
        match self {
            Engine::Embedded(e) => e.snapshot().map_or(View::Reopening, View::Snapshot),
            Engine::Postgres(pg) if pg.on_committer() => View::Postgres(pg.writer()),
            Engine::Postgres(pg) => match pg.begin_view() {
                Ok((lease, _, _)) => View::Postgres(lease),
                Err(e) => View::Broken(e.to_string()),
            },
        }
    }

    /// An empty batch.
    pub(super) fn batch(&self) -> Result<Batch> {
        Ok(match self {
            Engine::Embedded(e) => Batch::Embedded(e.batch()?),
            Engine::Postgres(pg) => Batch::Postgres(pg.batch()),
        })
    }

    /// Makes everything committed so far durable (fjall: an fsync, `all` with the journal's
    /// metadata; PostgreSQL: each commit already is).
    pub(super) fn persist(&self, all: bool) -> Result<()> {
        match self {
            Engine::Embedded(e) => e.persist(all),
            Engine::Postgres(_) => Ok(()),
        }
    }

    /// Ends the committer's group (see [`Engine::commits_by_group`]), setting the number of the
    /// state it publishes; says whether it committed anything.
    pub(super) fn end_group(&self, state: Option<u64>) -> Result<bool> {
        match self {
            Engine::Embedded(_) => Ok(false),
            Engine::Postgres(pg) => pg.end_group(state),
        }
    }

    /// The bytes the store holds: every keyspace's table files and memtables (embedded), tables
    /// with their TOAST and indexes (PostgreSQL).
    pub(super) fn stored_bytes(&self) -> Result<u64> {
        match self {
            Engine::Embedded(e) => {
                Ok(Space::ALL.iter().map(|s| e.disk_space(*s)).sum::<u64>() + e.write_buffer_bytes())
            }
            Engine::Postgres(pg) => pg.stored_bytes(),
        }
    }

    /// The bytes a keyspace takes.
    pub(super) fn disk_space(&self, space: Space) -> u64 {
        match self {
            Engine::Embedded(e) => e.disk_space(space),
            Engine::Postgres(pg) => pg.disk_space(space),
        }
    }

    /// A cheap estimate of a keyspace's key count.
    pub(super) fn approximate_len(&self, space: Space) -> usize {
        match self {
            Engine::Embedded(e) => e.approximate_len(space),
            Engine::Postgres(pg) => pg.approximate_len(space),
        }
    }

    /// Rewrites a keyspace without what nothing can read any more.
    pub(super) fn compact(&self, space: Space) -> Result<()> {
        match self {
            Engine::Embedded(e) => e.compact(space),
            Engine::Postgres(pg) => pg.compact(space),
        }
    }

    /// fjall: writes the memtables of `spaces` to table files (PostgreSQL has none).
    pub(super) fn flush_memtables(&self, spaces: &[Space]) -> Result<()> {
        match self {
            Engine::Embedded(e) => e.flush_memtables(spaces),
            Engine::Postgres(_) => Ok(()),
        }
    }

    /// The backend's own figures, added to the committer's.
    pub(super) fn stats(&self, stats: StoreStats) -> StoreStats {
        match self {
            Engine::Embedded(e) => e.stats(stats),
            Engine::Postgres(pg) => pg.stats(stats),
        }
    }

    /// The embedded backend, if this is it.
    pub(super) fn embedded(&self) -> Option<&Embedded> {
        match self {
            Engine::Embedded(e) => Some(e),
            Engine::Postgres(_) => None,
        }
    }

    /// The PostgreSQL backend, if this is it.
    pub(super) fn postgres(&self) -> Option<&Postgres> {
        match self {
            Engine::Postgres(pg) => Some(pg),
            Engine::Embedded(_) => None,
        }
    }
}

impl View {
    /// The value of `key`.
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        match self {
            View::Latest(e) => e.get(space, key),
            View::Snapshot(s) => s.get(space, key),
            View::Postgres(lease) => postgres::get(lease, space, key),
            View::Broken(why) => Err(StorageError::Backend(why.clone())),
            View::Reopening => Err(embedded::reopening()),
        }
    }

    /// Whether `key` exists.
    pub(super) fn contains(&self, space: Space, key: &[u8]) -> Result<bool> {
        match self {
            View::Latest(e) => e.contains(space, key),
            View::Snapshot(s) => Ok(s.get(space, key)?.is_some()),
            View::Postgres(lease) => postgres::contains(lease, space, key),
            View::Broken(why) => Err(StorageError::Backend(why.clone())),
            View::Reopening => Err(embedded::reopening()),
        }
    }

    /// The pairs in `range` (within the limits).
    pub(super) fn scan(&self, space: Space, range: KeyRange) -> Iter {
        match self {
            View::Latest(e) => Iter::Embedded(e.scan(space, range)),
            View::Snapshot(s) => Iter::Embedded(s.scan(space, range)),
            View::Postgres(lease) => Iter::Postgres(postgres::scan(lease, space, range)),
            View::Broken(why) => Iter::Failed(Some(why.clone())),
            View::Reopening => Iter::Embedded(EmbeddedIter::failed(embedded::reopening())),
        }
    }
}

impl Iterator for Iter {
    type Item = Result<(Slice, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Embedded(i) => i.next(),
            Iter::Postgres(i) => i.next(),
            Iter::Failed(why) => why.take().map(|w| Err(StorageError::Backend(w))),
        }
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Embedded(i) => i.next_back(),
            Iter::Postgres(i) => i.next_back(),
            Iter::Failed(why) => why.take().map(|w| Err(StorageError::Backend(w))),
        }
    }
}

impl Batch {
    /// Adds `key = value`.
    pub(super) fn insert(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        match self {
            Batch::Embedded(b) => b.insert(space, key, value),
            Batch::Postgres(b) => b.insert(space, key, value),
        }
    }

    /// Adds the removal of `key`.
    pub(super) fn remove(&mut self, space: Space, key: Vec<u8>) {
        match self {
            Batch::Embedded(b) => b.remove(space, key),
            Batch::Postgres(b) => b.remove(space, key),
        }
    }

    /// Commits the batch (fjall: atomically, handed to the OS; PostgreSQL: in the group's
    /// transaction).
    pub(super) fn commit(self) -> Result<()> {
        match self {
            Batch::Embedded(b) => b.commit(),
            Batch::Postgres(b) => b.commit(),
        }
    }
}

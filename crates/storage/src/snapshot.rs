//! The read views the store gives out: of the state reads may show ([`Store::snapshot`]), and of
//! the state as committed now ([`Store::committed`]).

use super::engine::View;
use super::read::{Published, ReadView};
use super::store::Store;

/// How long a PostgreSQL read view waits for the state its snapshot shows to be published.
const VIEW_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Store {
    /// A consistent view of every keyspace, as reads may show it. In sync mode that is the state
    /// as of the last fsync: a write is seen only once it is durable (and acknowledged), so no
    /// answer ever shows what a power cut could take back — as PostgreSQL shows a commit only
    /// after its WAL flush. Between the commit and its fsync (well under a millisecond to a few
    /// milliseconds), reads still see the state before it. In buffered mode, the state as of
    /// the last group committed (published before any of its writes is answered). The view
    /// carries the derived state as of its keys (see [`Store::set_derived_source`]).
    ///
    /// PostgreSQL: the view is a `REPEATABLE READ` transaction of its own (one round trip to
    /// begin, one to end), whose first statement reads the number of the state its snapshot is
    /// (each group's transaction sets it); the view carries that state's derived state. A group
    /// that committed but has not published yet is waited for; one published since the snapshot
    /// was taken makes the view begin again.
    pub fn snapshot(&self) -> ReadView {
        let limits = self.limits();
        let Some(pg) = self.inner.engine.postgres() else {
            return ReadView { published: self.inner.views.load_full(), own: None, limits };
        };
        let deadline = std::time::Instant::now() + VIEW_WAIT;
        let broken =
            |why: String| ReadView { published: self.inner.views.load_full(), own: Some(View::Broken(why)), limits };
        loop {
            let (lease, state, own_epoch) = match pg.begin_view() {
                Ok(begun) => begun,
                Err(e) => return broken(e.to_string()),
            };
            if pg.role() == super::Role::Follower || !own_epoch {
                if !own_epoch {
                    // another server leads: nothing this one remembers is of that state
                    self.deposed();
                }
                // the leader's state, under its number, with no derived state (this server
                // derives nothing from the leader's writes)
                return ReadView { published: Published::of_leader(state), own: Some(View::Postgres(lease)), limits };
            }
            loop {
                let published = self.inner.views.load_full();
                if published.state() == state {
                    return ReadView { published, own: Some(View::Postgres(lease)), limits };
                }
                if std::time::Instant::now() > deadline {
                    // Never seen while this server is the database's one writer (it holds the
                    // lock): the view is still one snapshot, shown as a state of its own (so
                    // nothing remembered for another state is used for it), with the derived
                    // state last published.
                    tracing::warn!(state, published = published.state(), "a PostgreSQL view shows no published state");
                    let own = Published::new(None, published.derived.clone());
                    return ReadView { published: own, own: Some(View::Postgres(lease)), limits };
                }
                if published.state() > state {
                    // published since the snapshot was taken: begin again
                    break;
                }
                std::thread::yield_now();
            }
        }
    }

    /// A consistent view of every keyspace as committed now, durable or not: for in-memory
    /// structures kept in step with the committer (loaded here, then changed by each commit) and
    /// for work the committer checks again. Never for an answer: use [`Store::snapshot`].
    pub fn committed(&self) -> ReadView {
        let engine = &self.inner.engine;
        let (shared, own) = match engine.postgres() {
            None => (engine.shared_snapshot(), None),
            Some(_) => (None, Some(engine.committed_view())),
        };
        ReadView { published: Published::new(shared, None), own, limits: self.limits() }
    }
}

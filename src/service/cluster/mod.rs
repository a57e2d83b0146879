//! Cluster mode (several servers on one PostgreSQL database; see `storage/cluster.rs`): this
//! server's role, a follower's following of the leader, and a leader's watch on its lead.
//!
//! **A follower** reads the backend directly, with no document cache and no derived state, so
//! its reads are the backend's. What it keeps in memory from the backend is brought up to date
//! by polling the leadership row every [`FOLLOW_EVERY`]: the catalog (definitions and field
//! names) is read again when the leader changed `meta`, the vector indexes' graphs are dropped
//! (read again from their keys on next use) when it changed `vec`, and the changefeed's waiters
//! are woken when it changed `changefeed`. Only then does the follower count the leader's state
//! as *applied*: a read asking for a state (`X-Mosaic-Min-Seq`) waits until it is.
//!
//! **A leader** reads the row every [`WATCH_EVERY`] too: another epoch there means it was
//! deposed, and a backend it cannot read for [`LOST_AFTER`] means it may be (its session gone,
//! the lock another's): either way it stops taking writes and asks to be reopened (the server
//! opens its database again, as leader or follower, whichever the lock makes it).

mod state;

use state::ClusterState;
pub use state::ClusterStatus;

use super::core::{Core, Handle};
use super::{Result, ServiceError, changefeed::Changefeed, vectors::Vectors};
use crate::storage::{Leadership, Role, Space};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

/// How often a follower reads the leadership row.
const FOLLOW_EVERY: Duration = Duration::from_millis(20);
/// How often a leader checks its lead.
const WATCH_EVERY: Duration = Duration::from_millis(100);
/// How long a leader that cannot read the backend keeps its lead.
const LOST_AFTER: Duration = Duration::from_secs(1);
/// How often a follower looks whether the lead is free (the leader gone).
const PROBE_EVERY: Duration = Duration::from_millis(200);

/// Cluster mode's handle: this server's role and what it knows of the leader, and the polling
/// that keeps a follower's memory (catalog, vector graphs, changefeed) up to date.
pub struct Cluster {
    core: Arc<Core>,
    state: ClusterState,
    /// a follower drops the graphs the leader changed
    vectors: Arc<Vectors>,
    /// a follower wakes the changefeed's waiters with the leader's events
    changefeed: Arc<Changefeed>,
}

impl Handle for Cluster {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Cluster {
    /// `leader`: the leader's URL and the epoch, as the open read them; `state` the state applied.
    pub(crate) fn new(
        core: Arc<Core>,
        role: Role,
        leader: (String, u64),
        state: u64,
        vectors: Arc<Vectors>,
        changefeed: Arc<Changefeed>,
    ) -> Cluster {
        Cluster { core, state: ClusterState::new(role, leader, state), vectors, changefeed }
    }
}

impl Cluster {
    /// This server's role among those sharing its backend.
    pub fn role(&self) -> Role {
        self.state.role
    }

    /// The cluster's state as this server knows it.
    pub fn cluster_status(&self) -> ClusterStatus {
        let c = &self.state;
        let (mut leader, epoch) = c.leader.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // a follower names no leader while the lead is free, nor itself (a leader it was, whose
        // URL the row still holds while it reopens)
        if c.role == Role::Follower
            && (!c.leader_alive() || Some(&leader) == self.core.store.config().advertise.as_ref())
        {
            leader.clear();
        }
        let applied = self.applied_state();
        let lag_ms = match c.role {
            Role::Follower if c.seen.load(Ordering::Acquire) > applied => c.caught_up().elapsed().as_millis() as u64,
            _ => 0,
        };
        ClusterStatus { role: c.role, leader, epoch, applied, lag_ms }
    }

    /// The last state this server has applied: on a leader (or a sole server) the state its
    /// reads see, at least that of every write acknowledged so far; on a follower, the leader's
    /// last state whose changes it has applied.
    pub fn applied_state(&self) -> u64 {
        match self.state.role {
            Role::Follower => *self.state.applied.borrow(),
            Role::Leader | Role::Sole => self.core.store.published_state(),
        }
    }

    /// Waits until this server has applied state `state` (see [`Cluster::applied_state`]), at most
    /// `wait`: [`ServiceError::Lagging`] past it.
    pub async fn wait_for_state(&self, state: u64, wait: Duration) -> Result<()> {
        if self.applied_state() >= state {
            return Ok(());
        }
        let lagging = || ServiceError::Lagging { wanted: state, applied: self.applied_state() };
        // Woken by each state as it is applied (a follower) or published (a leader or a sole
        // server): a state committed and not yet published (a follower saw its number in the
        // row first) comes within moments; a number no state reached yet is waited for as long.
        let mut states = match self.state.role {
            Role::Follower => self.state.applied.subscribe(),
            Role::Leader | Role::Sole => self.core.store.published_states(),
        };
        match tokio::time::timeout(wait, states.wait_for(|&a| a >= state)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(lagging()),
        }
    }

    /// Resolves once this server should open its database again: a follower that saw the lock
    /// free (it may lead now), a leader deposed or cut off from its backend. Never outside
    /// cluster mode.
    pub async fn reopen_wanted(&self) {
        let mut reopen = self.state.reopen.subscribe();
        let _ = reopen.wait_for(|&wanted| wanted).await;
    }

    /// Starts the follower's or the leader's polling (cluster mode only).
    pub(crate) fn start_cluster_task(self: &Arc<Self>) {
        let (role, every) = match self.state.role {
            Role::Sole => return,
            Role::Follower => (Role::Follower, FOLLOW_EVERY),
            Role::Leader => (Role::Leader, WATCH_EVERY),
        };
        let db = Arc::downgrade(self);
        let jobs = self.core.jobs.clone();
        drop(self.core.spawn_job(async move {
            let (mut last_read, mut last_probe) = (Instant::now(), Instant::now());
            while !jobs.closing() {
                tokio::time::sleep(every).await;
                let Some(db) = db.upgrade() else { return };
                // bounded: a read on a connection whose peer went silent must not hold the watch
                // (nor the shutdown that waits for this job)
                let store = db.core.store.clone();
                let read = tokio::time::timeout(LOST_AFTER, tokio::task::spawn_blocking(move || store.leadership()));
                match read.await {
                    Ok(Ok(Ok(Some(lead)))) => {
                        last_read = Instant::now();
                        match role {
                            Role::Follower => db.follow(&lead),
                            _ => db.watch_lead(&lead),
                        }
                    }
                    Ok(Ok(Ok(None))) | Ok(Err(_)) => return,
                    Ok(Ok(Err(e))) => tracing::debug!(error = %e, "reading the leadership row failed"),
                    Err(_) => tracing::debug!("reading the leadership row did not end within a second"),
                }
                if role == Role::Leader && last_read.elapsed() > LOST_AFTER {
                    db.core.store.deposed();
                    db.state.wants_reopen("the backend has not answered for a second");
                }
                if role == Role::Follower && last_probe.elapsed() >= PROBE_EVERY {
                    last_probe = Instant::now();
                    let store = db.core.store.clone();
                    let probe =
                        tokio::time::timeout(LOST_AFTER, tokio::task::spawn_blocking(move || store.lead_is_free()));
                    let free = matches!(probe.await, Ok(Ok(Ok(true))));
                    db.state.set_leader_alive(!free);
                    if free {
                        // the lead is there to take: the open tries for it
                        db.state.wants_reopen("no server holds the database's lock");
                    }
                }
            }
        }));
    }

    /// A follower's step: applies what the leader changed since the last step.
    fn follow(&self, lead: &Leadership) {
        let c = &self.state;
        *c.leader.lock().unwrap_or_else(PoisonError::into_inner) = (lead.leader.clone(), lead.epoch);
        c.seen.fetch_max(lead.state, Ordering::AcqRel);
        let applied = *c.applied.borrow();
        if lead.state == applied {
            *c.caught_up() = Instant::now();
            return;
        }
        if lead.changed(Space::Entity) > applied
            && let Err(e) = self.core.store.follow_documents(applied, lead.state)
        {
            tracing::warn!(error = %e, "reading the leader's document log failed: tried again at the next step");
            return;
        }
        if lead.changed(Space::Meta) > applied
            && let Err(e) = self.core.catalog.reload(&self.core.store)
        {
            tracing::warn!(error = %e, "reading the leader's catalog failed: tried again at the next step");
            return;
        }
        if lead.changed(Space::Vec) > applied {
            self.vectors.graphs.forget_all();
        }
        if lead.changed(Space::Changefeed) > applied
            && let Err(e) = self.follow_changefeed()
        {
            tracing::warn!(error = %e, "reading the leader's changefeed failed: tried again at the next step");
            return;
        }
        c.applied.send_replace(lead.state);
        *c.caught_up() = Instant::now();
    }

    /// A leader's step: another epoch in the row means another server leads now.
    fn watch_lead(&self, lead: &Leadership) {
        let c = &self.state;
        *c.leader.lock().unwrap_or_else(PoisonError::into_inner) = (lead.leader.clone(), lead.epoch);
        if lead.epoch != self.core.store.epoch() {
            self.core.store.deposed();
            c.wants_reopen("another server took the lead");
        } else if self.core.store.is_poisoned() {
            // a group failed (its connection lost at the commit, say): what this server keeps
            // in memory may not be what the database has; a fresh open reads it again
            c.wants_reopen("a write failed: the store takes no more writes");
        }
    }
}

impl Cluster {
    /// A follower's: the changefeed's last event, as the leader wrote it, wakes its waiters.
    fn follow_changefeed(&self) -> Result<()> {
        let view = self.core.store.snapshot();
        let seq_of = |item: Option<crate::storage::Result<(crate::storage::Slice, crate::storage::Slice)>>| {
            let Some((key, _)) = item.transpose()? else { return Ok(None) };
            crate::keys::ChangeKey::decode(&key)
                .map(|k| Some(k.seq))
                .map_err(|e| ServiceError::Internal(format!("bad changefeed key: {e}")))
        };
        let all = || crate::storage::KeyRange::Prefix(Vec::new());
        let first = seq_of(view.scan(Space::Changefeed, all(), false).next())?;
        let last = seq_of(view.scan(Space::Changefeed, all(), true).next())?;
        if let Some(last) = last {
            self.core.store.follow_changes(last);
        }
        // what the leader's retention left (none kept: the next event is the first)
        let durable = *self.core.store.durable_seq().borrow();
        self.changefeed.feed.follow_first(first.unwrap_or(durable + 1));
        Ok(())
    }
}

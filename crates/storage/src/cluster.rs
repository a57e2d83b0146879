//! Several servers on one backend (cluster mode, PostgreSQL only): which of them writes, and
//! what a follower learns from the backend about the leader's writes.
//!
//! **One writer, fenced.** The server that takes the database's lock leads; taking it moves the
//! backend's *epoch* on by one, and every group the leader commits checks, in its own
//! transaction, that the epoch is still the one it took (holding the row from then until its
//! commit). A deposed leader (its session lost, the lock taken by another) can therefore never
//! commit: its next group fails, and the store stops taking writes.
//!
//! **Followers** read the backend directly (each view a snapshot of it, with no in-memory state
//! derived from the leader's writes) and poll its [`Leadership`] row: the state the leader last
//! published, the epoch, the leader's address, and, per keyspace, the last state that changed it
//! (what a follower's caches over a keyspace need to know).

use super::space::Space;

/// What a store is among the servers sharing its backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// the only server on its backend (not in cluster mode): it writes
    Sole,
    /// cluster mode: the one server that writes
    Leader,
    /// cluster mode: reads here, writes go to the leader
    Follower,
}

/// The backend's word on its leadership, as of one read of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leadership {
    /// the number of the last state the leader published
    pub state: u64,
    /// moved on by one each time a server takes the lead
    pub epoch: u64,
    /// the leader's advertised URL (empty: none advertised)
    pub leader: String,
    /// per keyspace (`Space as usize`), the last state whose group changed it
    pub changed: Vec<u64>,
}

impl Leadership {
    /// The last state whose group changed `space` (0: none since the cluster columns exist).
    pub fn changed(&self, space: Space) -> u64 {
        self.changed.get(space as usize).copied().unwrap_or(0)
    }
}

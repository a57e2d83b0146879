//! What cluster mode keeps of this server's role and of what it applied (see the parent).

use crate::storage::Role;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// What this server is, and what it has applied of the leader's writes.
pub struct ClusterState {
    pub(super) role: Role,
    /// the leader's advertised URL and the backend's epoch, as last read
    pub(super) leader: Mutex<(String, u64)>,
    /// the last state whose changes this server has applied (a leader: the one it published)
    pub(super) applied: tokio::sync::watch::Sender<u64>,
    /// the backend's state, as last read
    pub(super) seen: AtomicU64,
    /// when the follower last had applied every state it had seen
    pub(super) caught_up: Mutex<Instant>,
    /// set when this server should open its database again (see [`Cluster::reopen_wanted`](super::Cluster::reopen_wanted))
    pub(super) reopen: tokio::sync::watch::Sender<bool>,
    /// a follower's: whether a server held the lead when it last looked
    leader_alive: std::sync::atomic::AtomicBool,
}

/// What `/ready`, `/v1/info` and `/metrics` say of the cluster.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ClusterStatus {
    /// `sole` (no cluster mode), `leader` or `follower`
    pub role: Role,
    /// the leader's advertised URL (empty: none known)
    pub leader: String,
    /// the backend's epoch (moved on by one each time a server took the lead)
    pub epoch: u64,
    /// the last state this server has applied: a read with `X-Mosaic-Min-Seq` at or below it
    /// is answered at once
    pub applied: u64,
    /// how far behind the leader's last state the follower is, in milliseconds (0: caught up)
    pub lag_ms: u64,
}

impl ClusterState {
    /// `leader`: the leader's URL and the epoch, as the open read them.
    pub(crate) fn new(role: Role, leader: (String, u64), state: u64) -> ClusterState {
        ClusterState {
            role,
            leader: Mutex::new(leader),
            applied: tokio::sync::watch::Sender::new(state),
            seen: AtomicU64::new(state),
            caught_up: Mutex::new(Instant::now()),
            reopen: tokio::sync::watch::Sender::new(false),
            leader_alive: std::sync::atomic::AtomicBool::new(true),
        }
    }

    pub(super) fn leader_alive(&self) -> bool {
        self.leader_alive.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(super) fn set_leader_alive(&self, alive: bool) {
        self.leader_alive.store(alive, std::sync::atomic::Ordering::Release);
    }

    pub(super) fn caught_up(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.caught_up.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn wants_reopen(&self, why: &str) {
        if !*self.reopen.borrow() {
            tracing::info!(role = ?self.role, why, "the database will be opened again");
            self.reopen.send_replace(true);
        }
    }
}

//! What the wire listener's connections share: the server's databases, SQL engine, admission
//! places and keys ([`PgShared`]), the cancel signals by connection, and each connection's
//! [`Session`] once it is in.

use crate::api::admission::Admission;
use crate::api::auth::Access;
use crate::service::databases::Databases;
use crate::service::sql::SqlEngine;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// What the wire listener shares with the HTTP API.
pub struct PgShared {
    /// every database of the server
    pub databases: Arc<Databases>,
    /// the SQL engine `POST /v1/sql` runs on
    pub sql: Arc<SqlEngine>,
    /// the places of heavy reads (SQL statements take the `sql` class's)
    pub(crate) admission: Arc<Admission>,
    /// the keys and the rules around them
    pub access: Access,
}

/// The listener's own state, shared by its connections.
pub(super) struct PgState {
    pub(super) shared: PgShared,
    /// the connections' cancel signals, by the (process id, secret key) each was given
    pub(super) cancels: Arc<Cancels>,
}

/// What names a connection to a CancelRequest: its process id and secret key.
type CancelKey = (i32, Bytes);
/// A connection's cancel signal: a count a CancelRequest bumps.
type Signal = Arc<watch::Sender<u64>>;

/// Cancel signals: each connection's statement watches its own; a CancelRequest bumps it.
#[derive(Default)]
pub(super) struct Cancels {
    map: Mutex<HashMap<CancelKey, Signal>>,
}

impl Cancels {
    pub(super) fn register(self: &Arc<Self>, key: CancelKey) -> (Signal, Registered) {
        let signal = Arc::new(watch::Sender::new(0));
        self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.clone(), signal.clone());
        (signal, Registered { cancels: self.clone(), key })
    }

    pub(super) fn cancel(&self, key: &CancelKey) {
        let map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(signal) = map.get(key) {
            signal.send_modify(|n| *n += 1);
        }
    }
}

/// A connection's place among the cancel signals, given up when the connection ends.
pub(super) struct Registered {
    cancels: Arc<Cancels>,
    key: CancelKey,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.cancels.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.key);
    }
}

/// What a connection knows once it is in: its database and its cancel signal.
pub(super) struct Session {
    /// the database the startup named
    pub(super) db: String,
    /// bumped by a CancelRequest for this connection
    pub(super) cancel: Signal,
    pub(super) _registered: Registered,
}

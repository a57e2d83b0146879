//! Reads: point gets and forward/reverse scans over one consistent snapshot.

use super::engine::{Iter, View};
use super::limits::Limits;
use super::range::KeyRange;
use super::slice::Slice;
use super::{Result, Space};
use std::any::Any;
use std::sync::Arc;

/// In-memory state that the layers above derive from the keys (the graph's adjacency), published
/// with each view: a read sees it exactly as of the keys it reads. Opaque here; its owner
/// downcasts it (see [`ReadView::derived`]).
pub type Derived = Arc<dyn Any + Send + Sync>;

/// Where the committer takes the derived state from at the end of each group (on its thread,
/// after every hook of the group ran): see [`super::Store::set_derived_source`].
pub type DerivedSource = Arc<dyn Fn() -> Option<Derived> + Send + Sync>;

/// A state reads may show: a snapshot of every keyspace and the derived state as of it.
pub(super) struct Published {
    /// the backend's snapshot every reader of the state shares (fjall's); `None` where each
    /// [`ReadView`] begins its own ([`ReadView::own`])
    pub(super) snapshot: Option<View>,
    pub(super) derived: Option<Derived>,
    /// see [`ReadView::state`]
    state: u64,
}

/// The last [`Published::state`] given out.
static LAST_STATE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Published {
    pub(super) fn new(snapshot: Option<View>, derived: Option<Derived>) -> Arc<Published> {
        Arc::new(Published { snapshot, derived, state: next_state() })
    }

    /// A state another server published, under the number it gave it (a follower's view of the
    /// backend; see `Store::snapshot`): numbers given out here from now on are above it.
    pub(super) fn of_leader(state: u64) -> Arc<Published> {
        raise_states(state);
        Arc::new(Published { snapshot: None, derived: None, state })
    }

    /// This state's number (see [`ReadView::state`]).
    pub(super) fn state(&self) -> u64 {
        self.state
    }
}

/// Numbers given out from now on are above `state` (a state a leader before this one, in this
/// process or another, published on the same backend).
pub(super) fn raise_states(state: u64) {
    LAST_STATE.fetch_max(state, std::sync::atomic::Ordering::Relaxed);
}

/// A state number no state has had.
pub(super) fn next_state() -> u64 {
    LAST_STATE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

/// One consistent view of every keyspace: a request that reads several keys reads them here, so
/// its answer never mixes two states. Keep it short-lived: it pins old versions.
pub struct ReadView {
    pub(super) published: Arc<Published>,
    /// the view's own snapshot, where it has one (PostgreSQL's transaction): else the shared one
    pub(super) own: Option<View>,
    /// the backend's: a key longer than it takes is in no keyspace
    pub(super) limits: Limits,
}

impl ReadView {
    /// The derived state published with this view, if it is a `T` (none in a view of
    /// [`super::Store::committed`], or before the owner set its source).
    pub fn derived<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.published.derived.as_deref().and_then(|d| d.downcast_ref::<T>())
    }

    /// The state this view shows, by a number no other state has: two views with the same
    /// number read the same keys and values (and the same derived state), so what was read from
    /// one may be remembered for the other. The views [`super::Store::snapshot`] gives out show
    /// their states in increasing numbers.
    pub fn state(&self) -> u64 {
        self.published.state
    }

    /// The value under `key`, if any.
    pub fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        if !self.limits.readable(key) {
            return Ok(None);
        }
        self.view().get(space, key)
    }

    fn view(&self) -> &View {
        const NONE: &View = &View::Broken(String::new());
        self.own.as_ref().or(self.published.snapshot.as_ref()).unwrap_or(NONE)
    }

    /// Key-value pairs in `range`, in key order (or reversed).
    pub fn scan(&self, space: Space, range: KeyRange, reverse: bool) -> Scan {
        let iter = self.limits.clamp(range).map(|range| self.view().scan(space, range));
        Scan { iter, reverse }
    }
}

/// An iterator over key-value pairs; stop early whenever you like.
pub struct Scan {
    /// `None`: a range no stored key can be in
    pub(super) iter: Option<Iter>,
    reverse: bool,
}

impl Iterator for Scan {
    type Item = Result<(Slice, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        let iter = self.iter.as_mut()?;
        if self.reverse { iter.next_back() } else { iter.next() }
    }
}

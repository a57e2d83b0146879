//! Document history: the versions writes replace (and deletions), kept in the `hist` family
//! while the table's `history` policy keeps them (see `keys::hist` for the layout).
//!
//! The step of the write pipeline (`stage`, in `write::derived`, so every write path keeps it:
//! PUT, POST, PATCH, DELETE, batch, import, TTL expiry, cascades) runs on the committer, in
//! commit order. A document of a table with history has a head, `hist:{table}:{id}`, holding
//! when its current version started and how it was written. A write that replaces or deletes the
//! document stages the old version under `hist:{table}:{id}:{start}` (its own start), moves the
//! head on, and for a deletion adds a tombstone version at the deletion's time; all in the
//! write's atomic batch. So a document's versions tile time: each holds from its start to the
//! next one's (or the head's), and reading it as of a time is one seek.
//!
//! **Clocks.** Times are microseconds from [`Clock`], which never goes back within the process
//! (a wall clock stepped back gives the last time + 1), and a version always starts after the
//! one before it of the same document (the head's start + 1 at least), restarts included: the
//! versions of a document are in commit order whatever the wall clock did. `as_of` reads are
//! against these commit times. The clock follows a document's start only up to a minute past
//! the wall clock ([`AHEAD_US`]): a far-future start (a restored archive's) moves that document
//! on, not the clock of every write.

pub(crate) mod check;
pub mod read;
mod retention;
pub mod scan;

use super::core::{Core, Handle};
use super::{Result, ServiceError};
use crate::catalog::HistoryPolicy;
use crate::keys::HistKey;
use crate::service::core::change::Change;
use crate::storage::{Space, WriteTx};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// The history model: the versions under `hist:` and their retention, over the shared [`Core`].
pub struct History {
    core: Arc<Core>,
}

impl Handle for History {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl History {
    /// The model over `core`.
    pub(crate) fn new(core: Arc<Core>) -> History {
        History { core }
    }
}

/// How a version came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum How {
    /// written before the table kept history: its start is not known (0)
    Unknown = 0,
    /// created
    Created = 1,
    /// replaced a version (PUT, PATCH, a batch or import put)
    Updated = 2,
    /// the document was deleted (a tombstone: no document)
    Deleted = 3,
}

impl How {
    fn from_byte(b: u8) -> Option<How> {
        [How::Unknown, How::Created, How::Updated, How::Deleted].into_iter().find(|h| *h as u8 == b)
    }

    /// `unknown`, `create`, `update` or `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            How::Unknown => "unknown",
            How::Created => "create",
            How::Updated => "update",
            How::Deleted => "delete",
        }
    }
}

/// The head's value: how the current version was written (1 byte), then its start (i64 BE).
pub fn encode_head(how: How, start: i64) -> Vec<u8> {
    let mut v = Vec::with_capacity(9);
    v.push(how as u8);
    v.extend_from_slice(&start.to_be_bytes());
    v
}

/// Parses a head's value.
pub fn decode_head(value: &[u8]) -> Option<(How, i64)> {
    let how = How::from_byte(*value.first()?)?;
    let start = i64::from_be_bytes(value.get(1..9)?.try_into().ok()?);
    (value.len() == 9).then_some((how, start))
}

/// A version's value: how it was written (1 byte), then its entity blob (none for a deletion).
pub fn encode_version(how: How, blob: Option<&[u8]>) -> Vec<u8> {
    let blob = blob.unwrap_or_default();
    let mut v = Vec::with_capacity(1 + blob.len());
    v.push(how as u8);
    v.extend_from_slice(blob);
    v
}

/// Parses a version's value: how it was written, and its blob (`None`: a deletion).
pub fn decode_version(value: &[u8]) -> Option<(How, Option<&[u8]>)> {
    let how = How::from_byte(*value.first()?)?;
    match how {
        How::Deleted => (value.len() == 1).then_some((how, None)),
        _ => (value.len() > 1).then(|| (how, Some(&value[1..]))),
    }
}

/// The committer's clock for versions: microseconds since the Unix epoch, never going back.
pub struct Clock(AtomicI64);

/// The process's clock of versions (the committers run on it in turn).
pub static CLOCK: Clock = Clock(AtomicI64::new(0));

/// How far ahead of the wall clock the clock follows a start it is told of (µs): a minute covers
/// a clock stepped back a little across a restart. A start further ahead (a clock once set far
/// forward; a restored archive from one, or a forged one) is passed for its own document only.
pub const AHEAD_US: i64 = 60_000_000;

impl Clock {
    /// A time after every one given out before, and not before `after + 1`. The clock itself
    /// moves on to it only while it is at most [`AHEAD_US`] past the wall clock: one document
    /// whose head starts in the far future gets a time after it, every other write keeps the
    /// wall clock's (rather than the clock jumping ahead for good, up to where it saturates).
    pub fn next(&self, after: i64) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        let mut last = self.0.load(Ordering::Relaxed);
        loop {
            let floor = now.max(last.saturating_add(1));
            if after >= floor && after > now.saturating_add(AHEAD_US) {
                return after.saturating_add(1);
            }
            let t = floor.max(after.saturating_add(1));
            match self.0.compare_exchange_weak(last, t, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return t,
                Err(seen) => last = seen,
            }
        }
    }
}

/// A time of a history read (`as_of`, `from`, `to`): ms since the epoch or RFC 3339, in the
/// versions' microseconds.
pub fn parse_time(name: &str, text: &str) -> Result<i64> {
    Ok(crate::service::core::clock::parse_bound(name, text)?.div_euclid(1000))
}

/// The refusal of a history read on a table that keeps none.
pub(crate) fn no_history(table: &str) -> ServiceError {
    ServiceError::InvalidRequest(format!(
        "table {table:?} keeps no history: set one with PATCH /v1/tables/{table} {{\"history\": {{\"max_age\": \"30d\"}}}}"
    ))
}

/// Checks a history policy: at least one bound, a duration `max_age`, `max_versions` >= 1.
pub fn check_policy(policy: &HistoryPolicy) -> Result<()> {
    if policy.max_age.is_none() && policy.max_versions.is_none() {
        return Err(ServiceError::InvalidRequest("history needs max_age, max_versions or both".into()));
    }
    if let Some(age) = &policy.max_age {
        let ok = crate::service::core::duration::parse_duration_ms(age).is_some_and(|ms| ms > 0);
        if !ok {
            return Err(ServiceError::InvalidRequest(format!(
                "history.max_age {age:?} is not a duration such as 30d, 12h or 90m"
            )));
        }
    }
    if policy.max_versions.is_some_and(|n| !(1..=1_000_000).contains(&n)) {
        return Err(ServiceError::InvalidRequest("history.max_versions must be 1-1000000".into()));
    }
    Ok(())
}

/// The history step of a document change (see `service::pipeline::write`): the replaced version kept, the
/// head moved. Nothing for a table without history.
///
/// Every change of one write gets the write's time (`history_at`, the write's), so an as-of read sees
/// the whole write or none of it; only a document whose last version starts at or after that
/// time (the clock set back across a restart) gets a later one of its own. A document changed
/// twice in one write keeps no version from between the two: the write replaced what it had
/// before with what it has after.
pub(crate) fn stage(w: &mut WriteTx<'_>, c: &Change<'_>, history_at: &mut Option<i64>) -> Result<()> {
    if c.table.history.is_none() {
        return Ok(());
    }
    let (table, id) = (c.table.name.as_str(), c.id);
    let write_at = *history_at.get_or_insert_with(|| CLOCK.next(0));
    // the write's time, unless the document's last version is not older
    let after = |start: i64| if write_at > start { write_at } else { CLOCK.next(start) };
    let head_key = HistKey::head(table, id).encode();
    let head = w.get(Space::Hist, &head_key)?;
    let head = match head.as_deref().map(decode_head) {
        // a start no later time can follow (a damaged or forged archive's) would make two
        // versions one key
        Some(Some((_, i64::MAX)) | None) => {
            return Err(ServiceError::damaged("hist", format!("the history head of {table}/{id}")));
        }
        Some(Some(head)) => Some(head),
        None => None,
    };
    match (c.old, c.new) {
        (None, None) => {}
        (None, Some(_)) => {
            // created (again, after a deletion whose tombstone is the last version)
            let tombstone = HistKey::version(table, id, write_at).encode();
            if head.is_none() && w.get(Space::Hist, &tombstone)?.is_some() {
                // deleted earlier in this write, having existed before it: the write replaced it
                w.delete(Space::Hist, tombstone);
                w.put(Space::Hist, head_key, encode_head(How::Updated, write_at));
            } else {
                let last = match head {
                    Some((_, start)) => Some(start),
                    None => last_start(w, table, id)?,
                };
                w.put(Space::Hist, head_key, encode_head(How::Created, after(last.unwrap_or(0))));
            }
        }
        (Some(_), Some(_)) if head.is_some_and(|(_, start)| start == write_at) => {
            // changed earlier in this write: the head already says when and how
        }
        (Some(_), None) if head.is_some_and(|(_, start)| start == write_at) => {
            // changed earlier in this write, deleted now: a tombstone only if it existed before
            w.delete(Space::Hist, head_key);
            if head.is_some_and(|(how, _)| how != How::Created) {
                w.put(Space::Hist, HistKey::version(table, id, write_at).encode(), encode_version(How::Deleted, None));
            }
        }
        (Some(old), new) => {
            let (how, start) = head.unwrap_or((How::Unknown, 0));
            let at = after(start);
            w.put(Space::Hist, HistKey::version(table, id, start).encode(), encode_version(how, Some(old)));
            match new {
                Some(_) => w.put(Space::Hist, head_key, encode_head(How::Updated, at)),
                None => {
                    w.delete(Space::Hist, head_key);
                    w.put(Space::Hist, HistKey::version(table, id, at).encode(), encode_version(How::Deleted, None));
                }
            }
        }
    }
    Ok(())
}

/// The start of the last version kept of a document (its tombstone, after a deletion).
fn last_start(w: &WriteTx<'_>, table: &str, id: &str) -> Result<Option<i64>> {
    let lower = HistKey::version(table, id, i64::MIN).encode();
    let upper = HistKey::version(table, id, i64::MAX).encode();
    let Some((key, _)) = w.last_in(Space::Hist, &lower, &upper)? else { return Ok(None) };
    Ok(HistKey::decode(&key).ok().and_then(|k| k.start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_damage_is_refused() {
        assert_eq!(decode_head(&encode_head(How::Updated, -7)), Some((How::Updated, -7)));
        assert_eq!(decode_head(&[2, 0]), None);
        assert_eq!(
            decode_version(&encode_version(How::Created, Some(b"blob"))),
            Some((How::Created, Some(&b"blob"[..])))
        );
        assert_eq!(decode_version(&encode_version(How::Deleted, None)), Some((How::Deleted, None)));
        assert_eq!(decode_version(&[9, 1]), None);
        assert_eq!(decode_version(&[1]), None);
    }

    #[test]
    fn the_clock_never_goes_back_and_passes_what_it_is_told() {
        let clock = Clock(AtomicI64::new(0));
        let a = clock.next(0);
        let b = clock.next(0);
        assert!(b > a);
        // a start a little ahead (a clock stepped back across a restart): the clock follows it
        let soon = b + AHEAD_US / 2;
        assert_eq!(clock.next(soon), soon + 1);
        assert!(clock.next(0) > soon + 1);
        // one far ahead (a restored archive's): passed for its document, the clock stays put
        let far = i64::MAX / 2;
        assert_eq!(clock.next(far), far + 1);
        let then = clock.next(0);
        assert!(then > soon && then < far / 2, "{then}");
        // nor does it saturate
        assert_eq!(clock.next(i64::MAX - 1), i64::MAX);
        assert!(clock.next(0) < far / 2);
    }
}

//! The process's open-file limit (`RLIMIT_NOFILE`, `ulimit -n`) and the connection cap kept
//! under it.
//!
//! Every connection holds a descriptor, and so does every file the store has open: a journal, a
//! table it reads, the table a flush or compaction writes. Were connections free to take every
//! descriptor, a flood of them (or only a busy server under a low `ulimit -n`) would leave the
//! store unable to open the file of its next flush. So the cap on connections leaves a reserve:
//! a quarter of the limit, at least [`MIN_RESERVE`], part of which bounds the tables the store
//! keeps open ([`table_files`]).

/// The fewest descriptors kept for everything but connections.
pub const MIN_RESERVE: u64 = 256;

/// The default cap never goes above this, however high the limit: each connection also costs
/// memory (its buffers, ~20 KiB when busy), and a limit of a million is common.
pub const DEFAULT_MAX_CONNECTIONS_CEILING: usize = 16_384;

/// The cap when the limit is unknown or unlimited (not Unix, `RLIM_INFINITY`).
const UNLIMITED_DEFAULT: usize = 4_096;

/// The soft open-file limit, raised to the hard one (the most an unprivileged process may
/// take); `(before, after)`, or `None` where it cannot be read (not Unix). `u64::MAX` stands
/// for unlimited.
pub fn raise_open_file_limit() -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let now = getrlimit(Resource::Nofile);
        let before = now.current.unwrap_or(u64::MAX);
        let hard = now.maximum.unwrap_or(u64::MAX);
        if before >= hard {
            return Some((before, before));
        }
        let raised = Rlimit { current: now.maximum, maximum: now.maximum };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => Some((before, hard)),
            Err(e) => {
                tracing::warn!(error = %e, soft = before, hard, "cannot raise the open-file limit to the hard limit");
                Some((before, before))
            }
        }
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The soft open-file limit in force (`None`: unknown, or unlimited).
pub fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The descriptors kept out of the connections' reach under `limit`.
pub fn reserve(limit: u64) -> u64 {
    (limit / 4).max(MIN_RESERVE)
}

/// The most table files each database's store keeps open under `limit` (fjall's own default,
/// 900, when there is room): half the reserve, the rest left to journals, flushes, compactions,
/// the duplicated sockets of imports and streams, and the process's own files.
pub fn table_files(limit: Option<u64>) -> usize {
    const FJALL_DEFAULT: usize = 900;
    // (under a tiny limit the reserve is more than half of it: half of that half, then; fjall
    // takes no fewer than 10)
    let files = |l: u64| usize::try_from(reserve(l).min(l / 2) / 2).unwrap_or(FJALL_DEFAULT);
    limit.map_or(FJALL_DEFAULT, |l| files(l).clamp(10, FJALL_DEFAULT))
}

/// The connection cap: the `asked` one (`--max-connections`; `None`: the default), within what
/// `limit` leaves after the reserve; and a note when the asked cap did not fit.
pub fn connection_cap(asked: Option<usize>, limit: Option<u64>) -> (usize, Option<String>) {
    let Some(limit) = limit else {
        return (asked.unwrap_or(UNLIMITED_DEFAULT).max(1), None);
    };
    // under a tiny limit the reserve is all of it: half then, whatever is left
    let fits = limit.saturating_sub(reserve(limit)).max(limit / 2).max(1);
    let fits = usize::try_from(fits).unwrap_or(usize::MAX);
    match asked {
        None => (fits.min(DEFAULT_MAX_CONNECTIONS_CEILING), None),
        Some(asked) if asked > fits => (
            fits,
            Some(format!(
                "--max-connections {asked} does not fit the open-file limit {limit} with {} descriptors \
                 kept for the store: {fits} instead (raise `ulimit -n` for more)",
                limit - u64::try_from(fits).unwrap_or(limit)
            )),
        ),
        Some(asked) => (asked.max(1), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_reserve_free() {
        // a common soft limit: 256 kept, 768 for connections
        assert_eq!(connection_cap(None, Some(1024)), (768, None));
        assert_eq!(connection_cap(Some(100), Some(1024)), (100, None));
        let (cap, note) = connection_cap(Some(5000), Some(1024));
        assert_eq!(cap, 768);
        assert!(note.is_some_and(|n| n.contains("768 instead")));
        // a high limit: a quarter kept, and the default stays at its ceiling
        assert_eq!(connection_cap(None, Some(1 << 20)), (DEFAULT_MAX_CONNECTIONS_CEILING, None));
        assert_eq!(connection_cap(Some(100_000), Some(1 << 20)), (100_000, None));
        // a tiny limit still serves
        assert_eq!(connection_cap(None, Some(200)), (100, None));
        assert_eq!(connection_cap(None, None).0, UNLIMITED_DEFAULT);
        assert_eq!(table_files(Some(1024)), 128);
        assert_eq!(table_files(Some(1 << 20)), 900);
        assert_eq!(table_files(Some(64)), 16);
        assert_eq!(table_files(Some(16)), 10);
    }
}

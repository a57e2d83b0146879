//! fjall's log records: forwarded to `tracing`, and its errors kept for the recovery to read.
//!
//! fjall logs through the `log` crate, which the server's `tracing` subscriber does not read by
//! itself: a background worker that crashed ("Worker #0 crashed: Io(Os { code: 24, … })") and
//! took the database down with it left no line in the log. [`install`] sets a `log` logger that
//! hands every record to `tracing` (tracing-log's `LogTracer`, so a record keeps its level and
//! target, e.g. `fjall::worker_pool`) and keeps the text of the engine's error records (fjall's
//! and its LSM tree's) in a ring, numbered. A fjall database whose worker crashed refuses every
//! write from then on and says only `Poisoned`: the recovery (`recover.rs`) reads the errors
//! logged since it last saw the database sound ([`mark`], [`cause_since`]) to tell a cause that
//! passes (too many open files, out of memory) from one that must stop the store.
//!
//! The records carry no database: two stores of one process that fail together share the ring,
//! and one whose window holds an error that is not passing (another store's failed fsync, say)
//! stops, as the safe side.

use std::collections::VecDeque;
use std::sync::{Mutex, Once, PoisonError};

/// Error records kept: a crash logs two or three, and a store reads its window within a second.
const KEPT: usize = 256;

struct Ring {
    /// the number the next record gets
    next: u64,
    /// the last [`KEPT`] records, oldest first, with their numbers
    records: VecDeque<(u64, String)>,
}

static RING: Mutex<Ring> = Mutex::new(Ring { next: 0, records: VecDeque::new() });

static INSTALL: Once = Once::new();

/// What stopped a fjall database, as its log says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cause {
    /// every error logged says that a resource ran short for a while (descriptors, memory):
    /// the database may be opened again once it is back
    Passing(String),
    /// anything else (a failed fsync, damaged data, a panic, or nothing logged at all): the
    /// store stops
    Lasting(String),
}

/// A `log` logger that forwards to `tracing` and keeps the engine's errors.
struct Bridge(tracing_log::LogTracer);

fn from_engine(target: &str) -> bool {
    target.starts_with("fjall") || target.starts_with("lsm_tree")
}

impl log::Log for Bridge {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        (metadata.level() == log::Level::Error && from_engine(metadata.target())) || self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.level() == log::Level::Error && from_engine(record.target()) {
            keep(record.args().to_string());
        }
        self.0.log(record);
    }

    fn flush(&self) {}
}

/// Sets the bridge as the process's `log` logger (once; later calls do nothing). Records more
/// detailed than the `tracing` subscriber's most detailed level are not even formatted (fjall
/// logs a few per write at `trace`), except the engine's errors, which are always kept.
pub(super) fn install() {
    INSTALL.call_once(|| {
        use tracing_log::AsLog;
        match log::set_boxed_logger(Box::new(Bridge(tracing_log::LogTracer::new()))) {
            Ok(()) => {
                let level = tracing::level_filters::LevelFilter::current().as_log();
                log::set_max_level(level.max(log::LevelFilter::Error));
            }
            Err(_) => tracing::warn!(
                "another `log` logger is set: the storage engine's log is not read, and a store its \
                 background work stops is not reopened"
            ),
        }
    });
}

fn keep(text: String) {
    let mut ring = RING.lock().unwrap_or_else(PoisonError::into_inner);
    let n = ring.next;
    ring.next += 1;
    if ring.records.len() == KEPT {
        ring.records.pop_front();
    }
    ring.records.push_back((n, text));
}

/// The number the next error record gets: the records from here on are what a store that is
/// sound now reads if it is found stopped later.
pub(super) fn mark() -> u64 {
    RING.lock().unwrap_or_else(PoisonError::into_inner).next
}

/// Why a fjall database stopped, from the engine's errors logged since `mark`.
pub(super) fn cause_since(mark: u64) -> Cause {
    let ring = RING.lock().unwrap_or_else(PoisonError::into_inner);
    if ring.records.front().is_some_and(|(first, _)| *first > mark) {
        return Cause::Lasting("more storage engine errors than are kept were logged".into());
    }
    let window: Vec<&String> = ring.records.iter().filter(|(n, _)| *n >= mark).map(|(_, text)| text).collect();
    classify(&window)
}

/// [`Cause`] of a window of error records: passing only if some worker crashed and every record
/// names only passing OS errors.
fn classify(window: &[&String]) -> Cause {
    if let Some(lasting) = window.iter().find(|text| !passing(text)) {
        return Cause::Lasting((*lasting).clone());
    }
    match window.iter().find(|text| text.contains(" crashed: ")) {
        Some(crash) => Cause::Passing((*crash).clone()),
        None => Cause::Lasting("the storage engine stopped; no cause was logged".into()),
    }
}

/// Whether a record names OS errors, all of them passing ones. fjall formats its errors with
/// `{:?}`, an `io::Error` of the OS as `Os { code: 24, kind: …, message: … }`; with `{}`, as
/// `… (os error 24)`.
fn passing(text: &str) -> bool {
    let codes = os_codes(text);
    !codes.is_empty() && codes.into_iter().all(passing_code)
}

/// The errors that say a resource is short for now, not that the disk or the data is bad: out
/// of descriptors (the process's, the system's), of memory, of buffer space, or "try again".
/// None of them is what a failed fsync reports (EIO, ENOSPC, EDQUOT, EROFS): after one of those
/// the kernel may have dropped the data the fsync was to write, and nothing may be reopened.
pub(super) fn passing_code(code: i32) -> bool {
    use rustix::io::Errno;
    [Errno::MFILE, Errno::NFILE, Errno::NOMEM, Errno::AGAIN, Errno::NOBUFS].iter().any(|e| e.raw_os_error() == code)
}

/// Whether an I/O error is one of the passing ones ([`passing_code`]).
pub(super) fn passing_io(e: &std::io::Error) -> bool {
    e.raw_os_error().is_some_and(passing_code)
}

fn os_codes(text: &str) -> Vec<i32> {
    let mut codes = Vec::new();
    for marker in ["code: ", "os error "] {
        let mut rest = text;
        while let Some(at) = rest.find(marker) {
            rest = &rest[at + marker.len()..];
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(code) = digits.parse() {
                codes.push(code);
            }
        }
    }
    codes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crash(e: fjall::Error) -> String {
        // the words of fjall 3.1.13's worker_pool.rs
        format!("Worker #0 crashed: {e:?}")
    }

    fn os(code: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(code)
    }

    #[test]
    fn descriptors_and_memory_pass_fsync_and_damage_do_not() {
        let emfile = crash(fjall::Error::Io(os(24)));
        let nested = crash(fjall::Error::Storage(fjall::LsmError::Io(os(23))));
        let create = format!("Failed to create journal file at /d/2.jnl: {:?}", os(24));
        assert_eq!(classify(&[&create, &emfile]), Cause::Passing(emfile.clone()));
        assert!(matches!(classify(&[&nested]), Cause::Passing(_)));
        assert!(matches!(classify(&[&crash(fjall::Error::Io(os(12)))]), Cause::Passing(_)));
        // a failed fsync (EIO, ENOSPC), even beside passing ones, stops the store
        let fsync = format!("Failed to fsync journal file at /d/2.jnl: {:?}", os(5));
        assert_eq!(classify(&[&emfile, &fsync]), Cause::Lasting(fsync.clone()));
        assert!(matches!(classify(&[&crash(fjall::Error::Io(os(28)))]), Cause::Lasting(_)));
        // no OS error named, or nothing logged: stop
        let panic = "Poisoning database because of panic in background worker".to_string();
        assert!(matches!(classify(&[&panic]), Cause::Lasting(_)));
        assert!(matches!(classify(&[&crash(fjall::Error::Unrecoverable)]), Cause::Lasting(_)));
        assert!(matches!(classify(&[]), Cause::Lasting(_)));
        // errors that pass but no crash: nothing says why the database stopped
        assert!(matches!(classify(&[&create]), Cause::Lasting(_)));
    }

    #[test]
    fn both_forms_of_an_os_error_are_read() {
        assert_eq!(os_codes(&format!("{:?} then {}", os(24), os(12))), vec![24, 12]);
        assert!(os_codes("no code here").is_empty());
    }

    #[test]
    fn the_window_starts_at_the_mark() {
        install();
        keep("Failed to fsync journal file: Os { code: 5 }".into());
        let mark = mark();
        let crashed = crash(fjall::Error::Io(os(24)));
        keep(crashed.clone());
        // other tests of the process may log their own errors into the window meanwhile
        match cause_since(mark) {
            Cause::Passing(text) => assert_eq!(text, crashed),
            Cause::Lasting(text) => assert!(!text.contains("code: 5 }"), "{text}"),
        }
    }
}

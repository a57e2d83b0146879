//! Directory entries made durable: a file or folder that was created (or renamed, or removed) is
//! on disk after a power cut only once the directory holding its entry is fsynced (POSIX; ext4
//! and XFS commit such entries with their journal, but nothing promises when). fjall fsyncs the
//! folders it fills, with two gaps this module closes at every open:
//!
//! - **`keyspaces/`.** fjall 3.1.13 creates each keyspace in `keyspaces/{id}`
//!   (`src/keyspace/mod.rs`, `Keyspace::create_new`), and lsm-tree 3.1.10 fsyncs that folder and
//!   its `tables/` (`src/tree/mod.rs`, `Tree::create_new`), but nothing fsyncs `keyspaces/`
//!   itself after the entry is added (`db.rs`, `Database::create_new`, fsyncs it once, before any
//!   keyspace exists). A power cut then loses every keyspace folder; recovery skips the journal's
//!   items for keyspace ids it does not know, and the open creates fresh, empty keyspaces: a
//!   whole database gone without an error.
//! - **The data directory's own entry.** fjall creates the data directory (`create_dir_all`) and
//!   fsyncs it, but not the folder above it, nor any folder `create_dir_all` made on the way.
//!
//! Both are fixed by fsyncs after the open and before the first write, so they cost nothing per
//! write. When fjall fsyncs these folders itself, this module can go.

use std::io;
use std::path::{Path, PathBuf};

/// The folders of `path` (itself included) that do not exist yet, deepest first: what
/// `create_dir_all(path)` is about to create.
pub(super) fn missing(path: &Path) -> Vec<PathBuf> {
    let mut missing = Vec::new();
    let mut at = Some(path);
    while let Some(dir) = at {
        if dir.as_os_str().is_empty() || dir.exists() {
            break;
        }
        missing.push(dir.to_path_buf());
        at = dir.parent();
    }
    missing
}

/// Makes durable the entries of the data directory `path` that fjall leaves unsynced (see the
/// module's comment), and the entries of the folders in `created` (the data directory among
/// them, when the open made it) in their parents.
pub(super) fn sync_after_open(path: &Path, created: &[PathBuf]) -> io::Result<()> {
    sync_dir(&path.join("keyspaces"))?;
    sync_dir(path)?;
    for dir in created {
        sync_dir(dir)?;
        sync_dir(parent_of(dir))?;
    }
    Ok(())
}

/// The folder holding `path`'s entry (`.` for a bare relative name).
pub(super) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// fsyncs a directory, which makes the entries added to or removed from it durable.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_lists_what_create_dir_all_makes_deepest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a").join("b").join("c");
        assert_eq!(missing(&deep), vec![deep.clone(), tmp.path().join("a/b"), tmp.path().join("a")]);
        std::fs::create_dir_all(&deep).unwrap();
        assert!(missing(&deep).is_empty());
        assert_eq!(parent_of(Path::new("data")), Path::new("."));
        assert_eq!(parent_of(&deep), tmp.path().join("a/b"));
    }
}

//! The in-memory namespace: inodes with a current and a durable state.
//!
//! Files keep current and durable `Content`; directories keep current and
//! durable entry maps. A power cut keeps exactly what is reachable from the
//! root through durable entries, each with its durable state. Errors are raw
//! errno values so this module does not depend on the FUSE binding.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::time::SystemTime;

use crate::content::{Content, Snapshot};

pub const ROOT: u64 = 1;
/// The control file's inode; never part of the namespace maps.
pub const CONTROL: u64 = 2;
pub const CONTROL_NAME: &str = ".powerfs";

pub type Res<T> = Result<T, i32>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Namespace changes are durable at once; only unsynced file data is lost.
    Data,
    /// A namespace change is durable once its directory is fsynced.
    Dirs,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Data => "data",
            Mode::Dirs => "dirs",
        }
    }
}

pub struct FileData {
    pub cur: Content,
    pub dur: Content,
    /// Pages changed since the last fsync: what the next fsync must copy.
    pub dirty: BTreeSet<u64>,
}

pub struct DirData {
    pub cur: BTreeMap<OsString, u64>,
    pub dur: BTreeMap<OsString, u64>,
}

pub enum Kind {
    File(FileData),
    Dir(DirData),
}

pub struct Inode {
    pub kind: Kind,
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    /// Current entries naming this inode.
    pub links: u32,
    /// Durable entries naming this inode; it must outlive them for a cut.
    pub dlinks: u32,
    /// Open handles; an unlinked open file stays readable.
    pub opens: u32,
    /// One current name (parent, name), for paths in fault matching.
    pub parent: u64,
    pub name: OsString,
}

impl Inode {
    fn new(kind: Kind, perm: u16, uid: u32, gid: u32, parent: u64, name: &OsStr) -> Inode {
        let now = SystemTime::now();
        Inode {
            kind,
            perm,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
            links: 0,
            dlinks: 0,
            opens: 0,
            parent,
            name: name.to_owned(),
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir(_))
    }

    pub fn size(&self) -> u64 {
        match &self.kind {
            Kind::File(f) => f.cur.size,
            Kind::Dir(d) => d.cur.len() as u64,
        }
    }

    pub fn touch(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }
}

/// What one fsync/fsyncdir makes durable, captured when it was called.
pub enum SyncJob {
    File(u64, Snapshot),
    Dir(u64, BTreeMap<OsString, u64>),
}

pub struct State {
    pub mode: Mode,
    pub inodes: HashMap<u64, Inode>,
    next_ino: u64,
    /// Sum of the current sizes of all live files: what capacity limits.
    pub used: u64,
}

fn dir_of(ino: &mut Inode) -> Res<&mut DirData> {
    match &mut ino.kind {
        Kind::Dir(d) => Ok(d),
        Kind::File(_) => Err(libc::ENOTDIR),
    }
}

fn file_of(ino: &mut Inode) -> Res<&mut FileData> {
    match &mut ino.kind {
        Kind::File(f) => Ok(f),
        Kind::Dir(_) => Err(libc::EISDIR),
    }
}

impl State {
    pub fn new(mode: Mode) -> State {
        let mut root = Inode::new(
            Kind::Dir(DirData { cur: BTreeMap::new(), dur: BTreeMap::new() }),
            0o755,
            0,
            0,
            ROOT,
            OsStr::new(""),
        );
        root.links = 1;
        root.dlinks = 1;
        State { mode, inodes: HashMap::from([(ROOT, root)]), next_ino: CONTROL + 1, used: 0 }
    }

    pub fn get(&self, ino: u64) -> Res<&Inode> {
        self.inodes.get(&ino).ok_or(libc::ENOENT)
    }

    pub fn get_mut(&mut self, ino: u64) -> Res<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(libc::ENOENT)
    }

    pub fn dir(&self, ino: u64) -> Res<&DirData> {
        match &self.get(ino)?.kind {
            Kind::Dir(d) => Ok(d),
            Kind::File(_) => Err(libc::ENOTDIR),
        }
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> Res<u64> {
        self.dir(parent)?.cur.get(name).copied().ok_or(libc::ENOENT)
    }

    /// Number of subdirectories, for a directory's link count.
    pub fn subdirs(&self, ino: u64) -> u32 {
        self.dir(ino)
            .map_or(0, |d| d.cur.values().filter(|c| self.inodes.get(c).is_some_and(Inode::is_dir)).count() as u32)
    }

    fn check_name(parent: u64, name: &OsStr) -> Res<()> {
        if parent == ROOT && name == CONTROL_NAME {
            return Err(libc::EEXIST);
        }
        if name.len() > 255 {
            return Err(libc::ENAMETOOLONG);
        }
        Ok(())
    }

    /// Adds a current entry; the caller has checked the name is free.
    fn add_entry(&mut self, parent: u64, name: &OsStr, ino: u64) -> Res<()> {
        dir_of(self.get_mut(parent)?)?.cur.insert(name.to_owned(), ino);
        self.get_mut(parent)?.touch();
        let node = self.get_mut(ino)?;
        node.links += 1;
        node.parent = parent;
        node.name = name.to_owned();
        Ok(())
    }

    /// Removes a current entry and frees its inode if nothing holds it.
    fn remove_entry(&mut self, parent: u64, name: &OsStr) -> Res<u64> {
        let ino = dir_of(self.get_mut(parent)?)?.cur.remove(name).ok_or(libc::ENOENT)?;
        self.get_mut(parent)?.touch();
        let node = self.get_mut(ino)?;
        node.links -= 1;
        node.ctime = SystemTime::now();
        self.maybe_free(ino);
        Ok(ino)
    }

    /// In `data` mode a namespace change is durable at once.
    fn ns_changed(&mut self, dirs: &[u64]) {
        if self.mode == Mode::Data {
            for &d in dirs {
                if let Ok(map) = self.dir(d).map(|d| d.cur.clone()) {
                    self.apply(SyncJob::Dir(d, map));
                }
            }
        }
    }

    pub fn mknode(&mut self, parent: u64, name: &OsStr, dir: bool, perm: u16, uid: u32, gid: u32) -> Res<u64> {
        Self::check_name(parent, name)?;
        if self.dir(parent)?.cur.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let kind = if dir {
            Kind::Dir(DirData { cur: BTreeMap::new(), dur: BTreeMap::new() })
        } else {
            Kind::File(FileData { cur: Content::default(), dur: Content::default(), dirty: BTreeSet::new() })
        };
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, Inode::new(kind, perm, uid, gid, parent, name));
        self.add_entry(parent, name, ino)?;
        self.ns_changed(&[parent]);
        Ok(ino)
    }

    pub fn unlink(&mut self, parent: u64, name: &OsStr, dir: bool) -> Res<()> {
        let ino = self.lookup(parent, name)?;
        let node = self.get(ino)?;
        match (&node.kind, dir) {
            (Kind::Dir(_), false) => return Err(libc::EISDIR),
            (Kind::File(_), true) => return Err(libc::ENOTDIR),
            (Kind::Dir(d), true) if !d.cur.is_empty() => return Err(libc::ENOTEMPTY),
            _ => {}
        }
        self.remove_entry(parent, name)?;
        self.ns_changed(&[parent]);
        Ok(())
    }

    pub fn link(&mut self, ino: u64, parent: u64, name: &OsStr) -> Res<()> {
        Self::check_name(parent, name)?;
        if self.get(ino)?.is_dir() {
            return Err(libc::EPERM);
        }
        if self.dir(parent)?.cur.contains_key(name) {
            return Err(libc::EEXIST);
        }
        self.add_entry(parent, name, ino)?;
        self.get_mut(ino)?.ctime = SystemTime::now();
        self.ns_changed(&[parent]);
        Ok(())
    }

    pub fn rename(&mut self, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr, noreplace: bool) -> Res<()> {
        Self::check_name(newparent, newname)?;
        let ino = self.lookup(parent, name)?;
        if parent == newparent && name == newname {
            return Ok(());
        }
        if let Ok(target) = self.lookup(newparent, newname) {
            if noreplace {
                return Err(libc::EEXIST);
            }
            let src_dir = self.get(ino)?.is_dir();
            let target_empty = self.dir(target).map(|d| d.cur.is_empty());
            match (src_dir, target_empty) {
                (false, Ok(_)) => return Err(libc::EISDIR),
                (true, Err(_)) => return Err(libc::ENOTDIR),
                (true, Ok(false)) => return Err(libc::ENOTEMPTY),
                _ => {}
            }
            if target == ino {
                // Two names of one file: POSIX says do nothing.
                return Ok(());
            }
            // Take the source out first so freeing the target cannot see a
            // half-moved namespace.
            self.remove_entry(newparent, newname)?;
        }
        // Keep the inode alive between removing and adding its entry.
        self.get_mut(ino)?.opens += 1;
        self.remove_entry(parent, name)?;
        self.add_entry(newparent, newname, ino)?;
        self.get_mut(ino)?.opens -= 1;
        self.ns_changed(&[parent, newparent]);
        Ok(())
    }

    /// Frees an inode that no current entry, durable entry or handle holds.
    pub fn maybe_free(&mut self, ino: u64) {
        let Some(node) = self.inodes.get(&ino) else {
            return;
        };
        if ino == ROOT || node.links > 0 || node.dlinks > 0 || node.opens > 0 {
            return;
        }
        let node = self.inodes.remove(&ino).expect("checked above");
        match node.kind {
            Kind::File(f) => self.used -= f.cur.size,
            Kind::Dir(d) => {
                // Its entries no longer name their inodes, in either state.
                for child in d.cur.values() {
                    if let Some(c) = self.inodes.get_mut(child) {
                        c.links -= 1;
                    }
                }
                for child in d.dur.values() {
                    if let Some(c) = self.inodes.get_mut(child) {
                        c.dlinks -= 1;
                    }
                }
                for child in d.cur.values().chain(d.dur.values()) {
                    self.maybe_free(*child);
                }
            }
        }
    }

    /// Captures what an fsync(dir) called now makes durable; the file's
    /// dirty set is taken, since the job (or a cut) accounts for it.
    pub fn sync_job(&mut self, ino: u64) -> Res<SyncJob> {
        match &mut self.get_mut(ino)?.kind {
            Kind::File(f) => {
                let snap = f.cur.snapshot(&f.dirty);
                f.dirty.clear();
                Ok(SyncJob::File(ino, snap))
            }
            Kind::Dir(d) => Ok(SyncJob::Dir(ino, d.cur.clone())),
        }
    }

    /// Makes a captured state durable. A vanished inode is skipped: nothing
    /// durable names it, so a cut would drop it anyway.
    pub fn apply(&mut self, job: SyncJob) {
        match job {
            SyncJob::File(ino, snap) => {
                if let Some(Inode { kind: Kind::File(f), .. }) = self.inodes.get_mut(&ino) {
                    f.dur.apply(&snap);
                }
            }
            SyncJob::Dir(ino, map) => {
                let Some(Inode { kind: Kind::Dir(d), .. }) = self.inodes.get_mut(&ino) else {
                    return;
                };
                let old = std::mem::take(&mut d.dur);
                // Entries naming freed inodes cannot be made durable.
                let map: BTreeMap<OsString, u64> =
                    map.into_iter().filter(|(_, c)| self.inodes.contains_key(c)).collect();
                for c in map.values() {
                    self.inodes.get_mut(c).expect("filtered").dlinks += 1;
                }
                for c in old.values() {
                    if let Some(n) = self.inodes.get_mut(c) {
                        n.dlinks -= 1;
                    }
                }
                if let Some(Inode { kind: Kind::Dir(d), .. }) = self.inodes.get_mut(&ino) {
                    d.dur = map;
                }
                for c in old.values() {
                    self.maybe_free(*c);
                }
            }
        }
    }

    /// Changes a file's size, within `capacity` when it grows.
    pub fn set_size(&mut self, ino: u64, size: u64, capacity: Option<u64>) -> Res<()> {
        let used = self.used;
        let f = file_of(self.get_mut(ino)?)?;
        let old = f.cur.size;
        if size > old && capacity.is_some_and(|c| used + (size - old) > c) {
            return Err(libc::ENOSPC);
        }
        f.cur.set_size(size, &mut f.dirty);
        self.used = used + size - old;
        self.get_mut(ino)?.touch();
        Ok(())
    }

    pub fn write(&mut self, ino: u64, off: u64, data: &[u8], capacity: Option<u64>) -> Res<()> {
        let used = self.used;
        let f = file_of(self.get_mut(ino)?)?;
        let old = f.cur.size;
        let size = old.max(off + data.len() as u64);
        if size > old && capacity.is_some_and(|c| used + (size - old) > c) {
            return Err(libc::ENOSPC);
        }
        f.cur.write(off, data, &mut f.dirty);
        self.used = used + size - old;
        self.get_mut(ino)?.touch();
        Ok(())
    }

    pub fn punch(&mut self, ino: u64, off: u64, len: u64) -> Res<()> {
        let f = file_of(self.get_mut(ino)?)?;
        f.cur.zero_range(off, len, &mut f.dirty);
        self.get_mut(ino)?.touch();
        Ok(())
    }

    pub fn read(&mut self, ino: u64, off: u64, len: u64) -> Res<Vec<u8>> {
        let node = self.get_mut(ino)?;
        node.atime = SystemTime::now();
        Ok(file_of(node)?.cur.read(off, len))
    }

    /// The current path of an inode relative to the root, if it has one.
    pub fn path_of(&self, mut ino: u64) -> Option<String> {
        let mut parts = Vec::new();
        while ino != ROOT {
            let node = self.inodes.get(&ino)?;
            if node.links == 0 || self.dir(node.parent).ok()?.cur.get(&node.name) != Some(&ino) {
                return None;
            }
            parts.push(node.name.to_string_lossy().into_owned());
            ino = node.parent;
        }
        parts.reverse();
        Some(parts.join("/"))
    }

    /// Looks a path relative to the root up in the current namespace.
    pub fn resolve(&self, path: &str) -> Res<u64> {
        let mut ino = ROOT;
        for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
            ino = self.lookup(ino, OsStr::new(part))?;
        }
        Ok(ino)
    }

    /// XORs 0xFF into one byte of a file, current and durable alike.
    pub fn flip(&mut self, path: &str, off: u64) -> Res<()> {
        let ino = self.resolve(path)?;
        let f = file_of(self.get_mut(ino)?)?;
        if !f.cur.flip(off) {
            return Err(libc::EINVAL);
        }
        f.dur.flip(off);
        Ok(())
    }

    /// Whether the incrementally kept link counts and `used` match a
    /// recount: checked (in debug builds) at every cut, which recounts them.
    pub fn counts_consistent(&self) -> bool {
        let mut links: HashMap<u64, (u32, u32)> = HashMap::from([(ROOT, (1, 1))]);
        let mut used = 0;
        for node in self.inodes.values() {
            match &node.kind {
                Kind::Dir(d) => {
                    for c in d.cur.values() {
                        links.entry(*c).or_default().0 += 1;
                    }
                    for c in d.dur.values() {
                        links.entry(*c).or_default().1 += 1;
                    }
                }
                Kind::File(f) => used += f.cur.size,
            }
        }
        used == self.used
            && self.inodes.iter().all(|(ino, n)| {
                let (l, d) = links.get(ino).copied().unwrap_or_default();
                n.links == l && n.dlinks == d && (l > 0 || d > 0 || n.opens > 0)
            })
    }

    /// Power loss: keep what the durable namespace reaches, in its durable
    /// state; everything else is gone. Open handles are the caller's job.
    pub fn cut(&mut self) {
        debug_assert!(self.counts_consistent(), "link counts drifted");
        let mut reach = HashSet::from([ROOT]);
        let mut stack = vec![ROOT];
        while let Some(ino) = stack.pop() {
            if let Some(Inode { kind: Kind::Dir(d), .. }) = self.inodes.get(&ino) {
                for &c in d.dur.values() {
                    if reach.insert(c) {
                        stack.push(c);
                    }
                }
            }
        }
        self.inodes.retain(|ino, _| reach.contains(ino));
        let mut used = 0;
        let mut edges = Vec::new();
        for (&ino, node) in &mut self.inodes {
            node.links = 0;
            node.dlinks = 0;
            node.opens = 0;
            match &mut node.kind {
                Kind::File(f) => {
                    f.cur = f.dur.clone();
                    f.dirty.clear();
                    used += f.cur.size;
                }
                Kind::Dir(d) => {
                    d.cur = d.dur.clone();
                    edges.extend(d.cur.iter().map(|(n, &c)| (ino, n.clone(), c)));
                }
            }
        }
        for (parent, name, c) in edges {
            let node = self.inodes.get_mut(&c).expect("reachable");
            node.links += 1;
            node.dlinks += 1;
            node.parent = parent;
            node.name = name;
        }
        let root = self.inodes.get_mut(&ROOT).expect("root");
        root.links = 1;
        root.dlinks = 1;
        self.used = used;
        debug_assert!(self.counts_consistent(), "cut miscounted");
    }
}

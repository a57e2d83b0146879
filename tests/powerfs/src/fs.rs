//! The FUSE side: maps kernel requests onto the shared `Inner` state (see
//! inner.rs for the control commands and held fsyncs).
//!
//! fuser's session loop is one thread, so nothing here may block: a held
//! fsync keeps its reply object and is answered when `release-fsync` (or a
//! cut) arrives on the control file.

use std::ffi::OsStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::inner::{BLOCK, Inner, control_attr, errno};
use crate::state::{CONTROL, CONTROL_NAME, Mode, ROOT, Res};

/// Zero TTLs: the kernel asks again every time, so a cut is seen at once.
const TTL: Duration = Duration::ZERO;
/// What statfs reports with no capacity set: "plenty" (1 PiB).
const UNLIMITED: u64 = 1 << 50;

/// The filesystem; clones share one state, so the binary keeps a clone to
/// fail held fsyncs at shutdown after the session took the original.
#[derive(Clone)]
pub struct PowerFs {
    inner: Arc<Mutex<Inner>>,
}

fn to_system_time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl PowerFs {
    pub fn new(mode: Mode) -> PowerFs {
        PowerFs { inner: Arc::new(Mutex::new(Inner::new(mode))) }
    }

    /// Answers every held fsync with EIO. A process waiting in a FUSE fsync
    /// cannot be killed, so shutting down without this could leave it (and
    /// the mount) stuck.
    pub fn fail_held(&self) {
        for (reply, _) in self.lock().pending.drain(..) {
            reply.error(Errno::EIO);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic in one request must not wedge every later one.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mknode(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, dir: bool) -> Res<(u64, FileAttr)> {
        let mut g = self.lock();
        let ino = g.st.mknode(parent.0, name, dir, (mode & 0o7777) as u16, req.uid(), req.gid())?;
        Ok((ino, g.attr(ino)?))
    }
}

impl Filesystem for PowerFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let g = self.lock();
        if parent.0 == ROOT && name == CONTROL_NAME {
            return reply.entry(&TTL, &control_attr(), Generation(0));
        }
        match g.st.lookup(parent.0, name).and_then(|ino| g.attr(ino)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut g = self.lock();
        let ino = ino.0;
        let res = (|| {
            if ino == CONTROL {
                // `echo cut > .powerfs` truncates first; nothing to do.
                return g.attr(ino);
            }
            if let Some(fh) = fh {
                g.check(fh)?;
            }
            if let Some(size) = size {
                let cap = g.ctl.capacity;
                g.st.set_size(ino, size, cap)?;
            }
            let node = g.st.get_mut(ino)?;
            if let Some(m) = mode {
                node.perm = (m & 0o7777) as u16;
            }
            if let Some(u) = uid {
                node.uid = u;
            }
            if let Some(gid) = gid {
                node.gid = gid;
            }
            if let Some(t) = atime {
                node.atime = to_system_time(t);
            }
            if let Some(t) = mtime {
                node.mtime = to_system_time(t);
            }
            node.ctime = SystemTime::now();
            g.attr(ino)
        })();
        match res {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Only regular files: the database makes nothing else.
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::EPERM);
        }
        match self.mknode(req, parent, name, mode, false) {
            Ok((_, a)) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        match self.mknode(req, parent, name, mode, true) {
            Ok((_, a)) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if parent.0 == ROOT && name == CONTROL_NAME {
            return reply.error(Errno::EPERM);
        }
        match self.lock().st.unlink(parent.0, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.lock().st.unlink(parent.0, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if (parent.0 == ROOT && name == CONTROL_NAME)
            || flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT)
        {
            return reply.error(Errno::EINVAL);
        }
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        match self.lock().st.rename(parent.0, name, newparent.0, newname, noreplace) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let mut g = self.lock();
        if ino.0 == CONTROL {
            return reply.error(Errno::EPERM);
        }
        match g.st.link(ino.0, newparent.0, newname).and_then(|()| g.attr(ino.0)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut g = self.lock();
        if ino.0 != CONTROL {
            match g.st.get(ino.0) {
                Ok(n) if n.is_dir() => return reply.error(Errno::EISDIR),
                Ok(_) => {}
                Err(e) => return reply.error(errno(e)),
            }
        }
        let fh = g.open_handle(ino.0);
        // Direct I/O: every read and write reaches us, none sits in the
        // kernel's page cache where a cut could not reach it.
        reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let res = self.mknode(req, parent, name, mode, false);
        match res {
            Ok((ino, a)) => {
                let fh = self.lock().open_handle(ino);
                reply.created(&TTL, &a, Generation(0), FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut g = self.lock();
        let h = match g.check(fh) {
            Ok(h) => h,
            Err(e) => return reply.error(errno(e)),
        };
        if ino.0 == CONTROL {
            let s = &h.status;
            let from = (offset as usize).min(s.len());
            let to = (from + size as usize).min(s.len());
            return reply.data(&s[from..to]);
        }
        if let Some(sub) = &g.ctl.fail_read
            && g.st.path_of(ino.0).is_some_and(|p| p.contains(sub.as_str()))
        {
            g.ctl.injected += 1;
            return reply.error(Errno::EIO);
        }
        match g.st.read(ino.0, offset, size as u64) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut g = self.lock();
        if let Err(e) = g.check(fh) {
            return reply.error(errno(e));
        }
        let res = if ino.0 == CONTROL {
            g.command(data)
        } else if let Some(e) = g.ctl.fail_write {
            g.ctl.injected += 1;
            Err(e)
        } else {
            let cap = g.ctl.capacity;
            g.st.write(ino.0, offset, data, cap)
        };
        match res {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lo: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().release(fh);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let mut g = self.lock();
        g.ctl.fsyncs += 1;
        g.sync(ino.0, fh, reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut g = self.lock();
        match g.st.dir(ino.0) {
            Ok(_) => {
                let fh = g.open_handle(ino.0);
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let g = self.lock();
        if let Err(e) = g.check(fh) {
            return reply.error(errno(e));
        }
        let (dir, parent) = match (g.st.dir(ino.0), g.st.get(ino.0)) {
            (Ok(d), Ok(n)) => (d, n.parent),
            (Err(e), _) | (_, Err(e)) => return reply.error(errno(e)),
        };
        let mut entries: Vec<(u64, FileType, &OsStr)> =
            vec![(ino.0, FileType::Directory, OsStr::new(".")), (parent, FileType::Directory, OsStr::new(".."))];
        if ino.0 == ROOT {
            entries.push((CONTROL, FileType::RegularFile, OsStr::new(CONTROL_NAME)));
        }
        for (name, &c) in &dir.cur {
            let kind = match g.st.get(c) {
                Ok(n) if n.is_dir() => FileType::Directory,
                _ => FileType::RegularFile,
            };
            entries.push((c, kind, name.as_os_str()));
        }
        for (i, (c, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(c), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.lock().release(fh);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let mut g = self.lock();
        g.ctl.fsyncdirs += 1;
        g.sync(ino.0, fh, reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let g = self.lock();
        let total = g.ctl.capacity.unwrap_or(UNLIMITED);
        let free = total.saturating_sub(g.st.used);
        let files = g.st.inodes.len() as u64;
        reply.statfs(
            total / BLOCK,
            free / BLOCK,
            free / BLOCK,
            files + (1 << 20),
            1 << 20,
            BLOCK as u32,
            255,
            BLOCK as u32,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let mut g = self.lock();
        let res = (|| {
            g.check(fh)?;
            let cap = g.ctl.capacity;
            let size = g.st.get(ino.0)?.size();
            match mode {
                // Plain preallocation: grow the size (sparse; reads zeros).
                0 => {
                    let end = offset.checked_add(length).ok_or(libc::EFBIG)?;
                    if end > size {
                        g.st.set_size(ino.0, end, cap)?;
                    }
                    Ok(())
                }
                libc::FALLOC_FL_KEEP_SIZE => Ok(()),
                m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => g.st.punch(ino.0, offset, length),
                _ => Err(libc::EOPNOTSUPP),
            }
        })();
        match res {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }
}

//! The state behind the FUSE glue: the namespace, the control settings,
//! open handles and held fsyncs, and the control commands that act on them.
//! One mutex guards it all; fuser serves requests on one thread anyway.

use std::collections::HashMap;
use std::time::UNIX_EPOCH;

use fuser::{Errno, FileAttr, FileHandle, FileType, INodeNo, ReplyEmpty};

use crate::control::{self, Command, Control};
use crate::state::{CONTROL, Inode, Kind, Mode, Res, State, SyncJob};

pub(crate) const BLOCK: u64 = 4096;

pub(crate) struct Handle {
    pub(crate) ino: u64,
    /// The control file's status, taken at open so that a reader sees one
    /// consistent line however it splits its reads.
    pub(crate) status: Vec<u8>,
}

pub(crate) struct Inner {
    pub(crate) st: State,
    pub(crate) ctl: Control,
    /// Open handles; a cut empties it so pre-cut handles fail with EIO.
    pub(crate) handles: HashMap<u64, Handle>,
    pub(crate) next_fh: u64,
    /// Held fsyncs: the reply to send and the state to make durable.
    pub(crate) pending: Vec<(ReplyEmpty, SyncJob)>,
}

pub(crate) fn errno(e: i32) -> Errno {
    Errno::from_i32(e)
}

fn attr_of(ino: u64, node: &Inode, subdirs: u32) -> FileAttr {
    let (kind, nlink) = match node.kind {
        Kind::File(_) => (FileType::RegularFile, node.links),
        Kind::Dir(_) => (FileType::Directory, 2 + subdirs),
    };
    let size = node.size();
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: node.atime,
        mtime: node.mtime,
        ctime: node.ctime,
        crtime: node.ctime,
        kind,
        perm: node.perm,
        nlink,
        uid: node.uid,
        gid: node.gid,
        rdev: 0,
        blksize: BLOCK as u32,
        flags: 0,
    }
}

pub(crate) fn control_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(CONTROL),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0o600,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: BLOCK as u32,
        flags: 0,
    }
}

impl Inner {
    pub(crate) fn new(mode: Mode) -> Inner {
        Inner {
            st: State::new(mode),
            ctl: Control::default(),
            handles: HashMap::new(),
            next_fh: 1,
            pending: Vec::new(),
        }
    }

    pub(crate) fn attr(&self, ino: u64) -> Res<FileAttr> {
        if ino == CONTROL {
            return Ok(control_attr());
        }
        let node = self.st.get(ino)?;
        Ok(attr_of(ino, node, self.st.subdirs(ino)))
    }

    pub(crate) fn open_handle(&mut self, ino: u64) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        let status = if ino == CONTROL {
            self.status().into_bytes()
        } else {
            if let Ok(n) = self.st.get_mut(ino) {
                n.opens += 1;
            }
            Vec::new()
        };
        self.handles.insert(fh, Handle { ino, status });
        fh
    }

    /// A handle from before a cut (or never opened) is EIO: the "disk" it
    /// was reading went away.
    pub(crate) fn check(&self, fh: FileHandle) -> Res<&Handle> {
        self.handles.get(&fh.0).ok_or(libc::EIO)
    }

    pub(crate) fn status(&self) -> String {
        self.ctl.status(self.st.mode.name(), self.st.used, self.pending.len(), self.st.inodes.len())
    }

    /// Runs the commands in one write to the control file.
    pub(crate) fn command(&mut self, data: &[u8]) -> Res<()> {
        let text = std::str::from_utf8(data).map_err(|_| libc::EINVAL)?;
        let mut any = false;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            any = true;
            self.run(control::parse(line)?)?;
        }
        if any { Ok(()) } else { Err(libc::EINVAL) }
    }

    pub(crate) fn run(&mut self, cmd: Command) -> Res<()> {
        match cmd {
            Command::Cut => {
                self.ctl.cuts += 1;
                // Held fsyncs never reached the disk.
                for (reply, _) in self.pending.drain(..) {
                    reply.error(Errno::EIO);
                }
                self.st.cut();
                // Control handles survive: the driver keeps talking.
                self.handles.retain(|_, h| h.ino == CONTROL);
            }
            Command::HoldFsync => self.ctl.held = true,
            Command::ReleaseFsync => {
                self.ctl.held = false;
                for (reply, job) in std::mem::take(&mut self.pending) {
                    self.st.apply(job);
                    reply.ok();
                }
            }
            Command::Capacity(c) => self.ctl.capacity = c,
            Command::FailFsync(e) => self.ctl.fail_fsync = e,
            Command::FailWrite(e) => self.ctl.fail_write = e,
            Command::FailRead(s) => self.ctl.fail_read = s,
            Command::Flip(path, off) => self.st.flip(&path, off)?,
        }
        Ok(())
    }

    /// fsync and fsyncdir: fail if told to, defer if held, else apply now.
    pub(crate) fn sync(&mut self, ino: u64, fh: FileHandle, reply: ReplyEmpty) {
        if let Err(e) = self.check(fh) {
            return reply.error(errno(e));
        }
        if ino == CONTROL {
            return reply.ok();
        }
        if let Some(e) = self.ctl.fail_fsync {
            self.ctl.injected += 1;
            return reply.error(errno(e));
        }
        match self.st.sync_job(ino) {
            Err(e) => reply.error(errno(e)),
            Ok(job) if self.ctl.held => self.pending.push((reply, job)),
            Ok(job) => {
                self.st.apply(job);
                reply.ok();
            }
        }
    }

    pub(crate) fn release(&mut self, fh: FileHandle) {
        // An unknown handle was dropped by a cut, which already reset opens.
        if let Some(h) = self.handles.remove(&fh.0)
            && let Ok(n) = self.st.get_mut(h.ino)
        {
            n.opens -= 1;
            self.st.maybe_free(h.ino);
        }
    }
}

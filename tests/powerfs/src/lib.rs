//! powerfs: an in-memory FUSE filesystem that simulates power loss and disk
//! faults for durability tests (the LazyFS method).
//!
//! Every inode has a current and a durable state; `cut` written to the
//! `.powerfs` control file at the mount root throws the current state away.
//! See README.md for the modes and commands.

pub mod content;
pub mod control;
pub mod fs;
mod inner;
pub mod state;

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

pub use fs::PowerFs;
pub use state::Mode;

/// Mounts a fresh powerfs at `mountpoint` and serves it on a background
/// thread. The returned `PowerFs` shares the session's state, for `unmount`.
pub fn mount(mode: Mode, mountpoint: &Path) -> io::Result<(fuser::BackgroundSession, PowerFs)> {
    let mut config = fuser::Config::default();
    config.mount_options =
        vec![fuser::MountOption::FSName("powerfs".to_owned()), fuser::MountOption::Subtype("powerfs".to_owned())];
    let fs = PowerFs::new(mode);
    let session = fuser::spawn_mount(fs.clone(), mountpoint, &config)?;
    Ok((session, fs))
}

/// Unmounts without ever leaving a stale mount: held fsyncs are failed, the
/// mount is detached lazily (a plain umount is EBUSY while a client still has
/// a file open), and the session thread is given `wait` to finish. If a
/// client still holds the filesystem then, we return anyway: our process
/// exiting closes /dev/fuse, which aborts the (already detached) connection.
pub fn unmount(session: fuser::BackgroundSession, fs: &PowerFs, mountpoint: &Path, wait: Duration) -> io::Result<()> {
    fs.fail_held();
    let c = CString::new(mountpoint.as_os_str().as_bytes())?;
    // SAFETY: a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // The mount is gone, so fuser's own unmount finds nothing to do
        // (or fails harmlessly); what we want is the join.
        let _ = tx.send(session.umount_and_join());
    });
    match rx.recv_timeout(wait) {
        Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => Ok(()),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            Err(io::Error::new(io::ErrorKind::TimedOut, "detached, but a client still holds the filesystem"))
        }
    }
}

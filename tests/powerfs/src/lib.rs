//! powerfs: an in-memory FUSE filesystem that simulates power loss and disk
//! faults for durability tests (the LazyFS method).
//!
//! Every inode has a current and a durable state; `cut` written to the
//! `.powerfs` control file at the mount root throws the current state away.
//! See README.md for the modes and commands.

pub mod content;
pub mod control;
pub mod fs;
pub mod state;

use std::io;
use std::path::Path;

pub use fs::PowerFs;
pub use state::Mode;

/// Mounts a fresh powerfs at `mountpoint` and serves it on a background
/// thread until the returned session is unmounted or dropped.
pub fn mount(mode: Mode, mountpoint: &Path) -> io::Result<fuser::BackgroundSession> {
    let mut config = fuser::Config::default();
    config.mount_options =
        vec![fuser::MountOption::FSName("powerfs".to_owned()), fuser::MountOption::Subtype("powerfs".to_owned())];
    fuser::spawn_mount(PowerFs::new(mode), mountpoint, &config)
}

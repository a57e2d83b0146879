//! `powerfs --mode data|dirs MOUNTPOINT`: mounts, prints `ready`, serves
//! until stdin reaches EOF or SIGTERM/SIGINT arrives, then unmounts.
//!
//! Waiting on stdin means a parent that holds our stdin pipe and dies (even
//! by SIGKILL) still gets the mount cleaned up: its end closes, we see EOF.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use powerfs::Mode;

fn usage() -> ExitCode {
    eprintln!("usage: powerfs --mode data|dirs MOUNTPOINT");
    ExitCode::from(2)
}

/// Blocks SIGTERM and SIGINT in this thread (and the threads it spawns after)
/// so one thread can take them with sigwait instead of a handler.
fn block_signals() -> libc::sigset_t {
    // SAFETY: plain libc calls on a sigset we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, mountpoint) = match args.as_slice() {
        [flag, mode, mp] if flag == "--mode" => {
            let mode = match mode.as_str() {
                "data" => Mode::Data,
                "dirs" => Mode::Dirs,
                _ => return usage(),
            };
            (mode, PathBuf::from(mp))
        }
        _ => return usage(),
    };
    let set = block_signals();
    if let Err(e) = std::fs::create_dir_all(&mountpoint) {
        eprintln!("powerfs: cannot create {}: {e}", mountpoint.display());
        return ExitCode::FAILURE;
    }
    let (session, fs) = match powerfs::mount(mode, &mountpoint) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("powerfs: cannot mount {}: {e}", mountpoint.display());
            return ExitCode::FAILURE;
        }
    };
    println!("ready");
    let _ = std::io::stdout().flush();

    let (tx, rx) = mpsc::channel::<&'static str>();
    let stdin_tx = tx.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        let _ = stdin_tx.send("stdin closed");
    });
    std::thread::spawn(move || {
        let mut sig: libc::c_int = 0;
        // SAFETY: `set` holds the signals blocked above.
        unsafe { libc::sigwait(&set, &mut sig) };
        let _ = tx.send("signal");
    });
    let why = rx.recv().unwrap_or("channel closed");
    eprintln!("powerfs: {why}, unmounting {}", mountpoint.display());
    match powerfs::unmount(session, &fs, &mountpoint, Duration::from_secs(5)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            // Detached already: exiting closes /dev/fuse and ends it.
            eprintln!("powerfs: {e}; exiting anyway");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("powerfs: unmount: {e}");
            ExitCode::FAILURE
        }
    }
}

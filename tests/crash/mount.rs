//! powerfs (`tests/powerfs`) mounted for a test: a FUSE file system that keeps only what was
//! fsynced when told to `cut`, and injects disk faults. The tests that use it need
//! root, `/dev/fuse` and the powerfs binary (see [`PowerFs::binary`]; `.ci/run` builds it).
#![allow(dead_code)] // each test uses what it needs

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What the tests on powerfs need.
pub const NEEDS: &str = "needs root, /dev/fuse and the powerfs binary (MOSAIC_POWERFS or tests/powerfs/target/release)";
/// No wait for powerfs lasts longer.
const WAIT: Duration = Duration::from_secs(20);

/// powerfs mounted on a temp dir; dropping it closes powerfs's stdin, which unmounts.
pub struct PowerFs {
    child: Child,
    stdin: Option<ChildStdin>,
    mount: PathBuf,
    dir: Option<tempfile::TempDir>,
}

impl PowerFs {
    /// The powerfs binary these tests can run, or why they cannot here (said on stderr): the
    /// one `MOSAIC_POWERFS` names, else `tests/powerfs/target/release/powerfs` once built
    /// (`.ci/run` builds it); and root with `/dev/fuse`. Where one is missing a test on powerfs
    /// says so and checks nothing; `.ci/run` runs them all on machines that have FUSE.
    pub fn binary() -> Option<String> {
        let bin = std::env::var("MOSAIC_POWERFS").ok().or_else(|| {
            let built = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/powerfs/target/release/powerfs");
            std::path::Path::new(built).exists().then(|| built.to_owned())
        });
        let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let fuse = std::path::Path::new("/dev/fuse").exists();
        match bin {
            Some(bin) if root && fuse => Some(bin),
            _ => {
                eprintln!(
                    "powerfs tests skipped here: {NEEDS} (cargo build --release --manifest-path tests/powerfs/Cargo.toml)"
                );
                None
            }
        }
    }

    /// Mounts powerfs in `mode`, or says why it cannot here (see [`PowerFs::binary`]).
    pub fn try_mount(mode: &str) -> Option<PowerFs> {
        Some(PowerFs::mount_with(&PowerFs::binary()?, mode))
    }

    /// Mounts powerfs in `mode`; where it cannot run, the calling test fails.
    pub fn mount(mode: &str) -> PowerFs {
        PowerFs::mount_with(&PowerFs::binary().expect(NEEDS), mode)
    }

    fn mount_with(bin: &str, mode: &str) -> PowerFs {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("mnt");
        let mut child = Command::new(bin)
            .args(["--mode", mode, mount.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run MOSAIC_POWERFS={bin}: {e}"));
        // its output goes to the test's (captured) output; the first stdout line says it is mounted
        let (tx, rx) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = tx.send(line.clone());
                eprintln!("powerfs: {line}");
            }
        });
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || stderr.lines().map_while(Result::ok).for_each(|l| eprintln!("{l}")));
        let stdin = child.stdin.take();
        let fs = PowerFs { child, stdin, mount, dir: Some(dir) };
        match rx.recv_timeout(WAIT) {
            Ok(line) if line == "ready" => fs,
            other => panic!("powerfs --mode {mode} did not mount ({other:?}); {NEEDS}"),
        }
    }

    /// Where the server keeps its data: created by the server's first open.
    pub fn data(&self) -> PathBuf {
        self.mount.join("data")
    }

    /// Runs a control command (`cut`, `release-fsync`, `fail-write enospc`, ...).
    pub fn ctl(&self, cmd: &str) {
        self.try_ctl(cmd).unwrap_or_else(|e| panic!("powerfs {cmd}: {e}"));
    }

    fn try_ctl(&self, cmd: &str) -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).open(self.mount.join(".powerfs"))?;
        f.write_all(format!("{cmd}\n").as_bytes())
    }

    /// Holds every fsync until the guard is dropped. Take it after starting the server, so a
    /// failing assertion drops it first: a killed process stuck in a held fsync cannot be reaped
    /// until the fsync is answered, and the test would hang instead of failing.
    pub fn hold(&self) -> Hold<'_> {
        self.ctl("hold-fsync");
        Hold(self)
    }

    pub fn status(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.mount.join(".powerfs")).unwrap()).unwrap()
    }
}

/// Every fsync held while it lives; released when dropped.
pub struct Hold<'a>(&'a PowerFs);

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let _ = self.0.try_ctl("release-fsync");
    }
}

impl Drop for PowerFs {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // leaves the temp dir behind rather than deleting into a mount that is still there
        if std::fs::read_dir(&self.mount).is_ok_and(|mut d| d.next().is_some()) {
            let _ = self.dir.take().map(tempfile::TempDir::keep);
        }
    }
}

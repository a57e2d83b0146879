//! The binary started as a child process for one test, its log written to a file of its data
//! directory, killed when dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mosaicdb");

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running server.
pub struct Spawned {
    pub child: Child,
    pub addr: String,
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl Spawned {
    /// Starts `mosaicdb` on a free loopback port with a data directory of its own and `args`;
    /// under `prlimit --nofile=N:N` when `open_files` is given (the hard limit too, so that the
    /// server cannot raise it).
    pub fn start(args: &[&str], open_files: Option<u64>) -> Spawned {
        let dir = tempfile::tempdir().unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = dir.path().join("server.log");
        let data = dir.path().join("data");
        let mut command = match open_files {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.args([format!("--nofile={n}:{n}"), "--".into(), BIN.into()]);
                c
            }
            None => Command::new(BIN),
        };
        command
            .args(["--addr", &addr, "--data-dir", data.to_str().unwrap(), "--log", "info"])
            .args(args)
            .env_remove("MOSAIC_API_KEYS")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null());
        let child = command.spawn().expect("cannot start the server (is prlimit, from util-linux, installed?)");
        Spawned { child, addr, _dir: dir, data, log }
    }

    /// The server's data directory (kept until the value is dropped, a stop included).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log says the server listens.
    pub fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.log().contains("mosaicdb listening") {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the server exited with {status}: {}", self.log());
            }
            assert!(Instant::now() < deadline, "the server did not start: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn stop(&mut self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        let exit = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "no exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(exit.success(), "exit status {exit:?}: {}", self.log());
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! The `mosaicdb` binary as a child process, for the tests that kill it (SIGKILL) and start it
//! again on the same data directory.
#![allow(dead_code)] // each test uses what it needs

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_mosaicdb");
/// No wait for the process lasts longer.
const WAIT: Duration = Duration::from_secs(20);

/// The server process; killed when dropped, so a failing test leaves no server behind.
pub struct ServerProc {
    child: Child,
    /// `http://127.0.0.1:{port}`
    pub base: String,
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary on `dir` with `durability` (`sync` or `buffered`) on a free port, and
/// returns once `/ready` answers.
pub async fn start(dir: &Path, durability: &str, client: &reqwest::Client) -> ServerProc {
    start_with(dir, durability, &[], client).await
}

/// [`start`] with more flags.
pub async fn start_with(dir: &Path, durability: &str, extra: &[&str], client: &reqwest::Client) -> ServerProc {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(BIN)
        .args(["--data-dir", dir.to_str().unwrap(), "--durability", durability, "--log", "error"])
        .args(["--addr", &format!("127.0.0.1:{port}"), "--cache-mb", "16"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = ServerProc { child, base: format!("http://127.0.0.1:{port}") };
    let deadline = Instant::now() + WAIT;
    while client.get(format!("{}/ready", server.base)).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server
}

/// SIGKILL, and wait for the process to be gone.
pub fn kill(server: ServerProc) {
    kill_and(server, || {});
}

/// SIGKILL, then `meanwhile`, then wait for the process to be gone. A thread blocked in a
/// filesystem call that the filesystem has taken (an fsync powerfs holds) exits only once that
/// call is answered: `meanwhile` is what answers it (powerfs's `cut`).
pub fn kill_and(mut server: ServerProc, meanwhile: impl FnOnce()) {
    server.child.kill().unwrap();
    meanwhile();
    let deadline = Instant::now() + WAIT;
    while server.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the killed server did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// SIGTERM (a graceful stop: the memtables are flushed to table files), and wait for the exit;
/// returns whether it exited 0.
pub fn stop(mut server: ServerProc) -> bool {
    let pid = server.child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status.success();
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    }
}

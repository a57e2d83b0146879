//! Descriptors per connection: counted in a child process of this test binary that runs only this
//! test (`--exact`), so no other test opens or closes descriptors of that process while it counts
//! them (the other tests of the binary run in threads of the parent).
#![cfg(target_os = "linux")]

use crate::common::TestServer;
use std::io::{Read, Write};
use std::process::Command;

/// Set in the child: it counts.
const CHILD_ENV: &str = "MOSAIC_FDS_CHILD";

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// An idle keep-alive connection holds the client's socket and the server's, and nothing more:
/// the server duplicates a connection's socket only for an import's watch.
#[test]
fn an_idle_connection_costs_the_server_one_descriptor() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(idle_connections());
        return;
    }
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name = format!("{module}::an_idle_connection_costs_the_server_one_descriptor");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // it ran, alone, and passed
    assert!(out.status.success() && stdout.contains("test result: ok. 1 passed"), "{stdout}");
}

async fn idle_connections() {
    const N: usize = 100;
    let s = TestServer::start().await;
    let addr = s.base.trim_start_matches("http://").to_owned();
    let before = open_fds();
    let conns = tokio::task::spawn_blocking(move || {
        (0..N)
            .map(|_| {
                let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
                // one answered request: the server has accepted and served the connection
                write!(tcp, "GET /v1/tables HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = tcp.read(&mut buf).unwrap();
                    assert!(n > 0, "closed early");
                    seen.extend_from_slice(&buf[..n]);
                }
                assert!(seen.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
                tcp
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let added = open_fds() - before;
    // 2 per connection (client and server); a duplicate per connection would make it 3
    assert!((2 * N..2 * N + N / 2).contains(&added), "{added} descriptors for {N} idle connections");
    drop(conns);
}

//! Cluster mode with the real binary (skipped without `MOSAIC_TEST_POSTGRES`): two servers on one
//! PostgreSQL database, writers sending to both while the leader is SIGKILLed and while every
//! server restarts. After each: every acknowledged write is there as acknowledged, the
//! changefeed has no gap, `check` is clean, and a new leader took writes within a bound.

use crate::common::postgres;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mosaicdb");
/// The longest a SIGKILLed leader's writes may stay refused: PostgreSQL ends the dead session at
/// once (its socket closed by the kernel), a follower polls every 20 ms and reopens.
const TAKEOVER: Duration = Duration::from_secs(10);

struct Member {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Member {
    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start(&mut self, url: &str) {
        let child = Command::new(BIN)
            .args(["--data-dir", self.dir.path().to_str().unwrap(), "--log", "warn"])
            .args(["--addr", &format!("127.0.0.1:{}", self.port)])
            .args(["--backend", "postgres", "--postgres-url", url])
            .args(["--advertise-url", &self.base()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn ready(client: &reqwest::Client, m: &Member) -> Option<Value> {
    let r = client.get(format!("{}/ready", m.base())).send().await.ok()?;
    if r.status() != 200 {
        return None;
    }
    r.json().await.ok()
}

/// Waits until one of `members` says it leads; its index and the time it took.
async fn leader(client: &reqwest::Client, members: &[Member]) -> (usize, Duration) {
    let started = Instant::now();
    loop {
        for (i, m) in members.iter().enumerate() {
            if m.child.is_some()
                && let Some(r) = ready(client, m).await
                && r["cluster"]["role"] == "leader"
            {
                return (i, started.elapsed());
            }
        }
        assert!(started.elapsed() < TAKEOVER * 3, "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes `n` documents through the live members in turn (redirects followed), each id tried
/// until it is acknowledged or `deadline` passes: the acknowledged ones and the longest time a
/// write took to be acknowledged.
async fn write(
    client: &reqwest::Client,
    members: &[Member],
    next: &mut u64,
    n: u64,
    acked: &mut Vec<(String, u64)>,
) -> Duration {
    let mut longest = Duration::ZERO;
    for k in 0..n {
        let id = format!("d{}", *next);
        *next += 1;
        let started = Instant::now();
        loop {
            let live: Vec<&Member> = members.iter().filter(|m| m.child.is_some()).collect();
            let m = live[(k as usize) % live.len()];
            let r = client
                .put(format!("{}/v1/tables/acked/documents/{id}", m.base()))
                .json(&json!({"n": *next}))
                .send()
                .await;
            if let Ok(r) = r
                && r.status().is_success()
            {
                acked.push((id, *next));
                longest = longest.max(started.elapsed());
                break;
            }
            assert!(started.elapsed() < TAKEOVER, "a write was refused for {:?}", started.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    longest
}

/// Every acknowledged document is there as acknowledged (read from `m`), the changefeed has no
/// gap, and `check` is clean.
async fn verify(client: &reqwest::Client, m: &Member, acked: &[(String, u64)]) {
    for (id, n) in acked {
        let r = client.get(format!("{}/v1/tables/acked/documents/{id}", m.base())).send().await.unwrap();
        assert_eq!(r.status(), 200, "acknowledged {id} is missing");
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["n"], *n, "{id}");
    }
    let feed = json_of(client.get(format!("{}/v1/changes?since=0&limit=10000&table=acked", m.base()))).await;
    let seqs: Vec<u64> = feed["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.len() >= acked.len(), "{} events for {} writes", seqs.len(), acked.len());
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "the changefeed has a gap: {seqs:?}");
    let report = json_of(client.post(format!("{}/v1/admin/check", m.base())).json(&json!({}))).await;
    assert_eq!(report["ok"], true, "{report}");
}

/// The answer's body, as JSON.
async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn a_follower_takes_over_from_a_killed_leader_and_nothing_acknowledged_is_lost() {
    let Some(url) = postgres::fresh_database("cluster failover") else { return };
    let client = reqwest::Client::new();
    let mut members: Vec<Member> =
        (0..2).map(|_| Member { port: free_port(), dir: tempfile::tempdir().unwrap(), child: None }).collect();
    members[0].start(&url);
    leader(&client, &members[..1]).await;
    members[1].start(&url);
    let deadline = Instant::now() + Duration::from_secs(20);
    while ready(&client, &members[1]).await.is_none() {
        assert!(Instant::now() < deadline, "the follower did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = client.post(format!("{}/v1/tables", members[1].base())).json(&json!({"name": "acked"})).send().await;
    assert_eq!(r.unwrap().status(), 201, "a table made through the follower");
    let (mut next, mut acked) = (0, Vec::new());
    write(&client, &members, &mut next, 50, &mut acked).await;

    // (b) the leader SIGKILLed: the follower takes over
    let (old, _) = leader(&client, &members).await;
    members[old].kill();
    let killed = Instant::now();
    let (new, _) = leader(&client, &members).await;
    let took_over = killed.elapsed();
    assert_ne!(new, old);
    let longest = write(&client, &members, &mut next, 50, &mut acked).await;
    eprintln!("leader SIGKILLed: a new leader in {took_over:?}; the slowest write took {longest:?}");
    verify(&client, &members[new], &acked).await;

    // the old leader back: it follows
    members[old].start(&url);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(r) = ready(&client, &members[old]).await {
            assert_eq!(r["cluster"]["role"], "follower", "{r}");
            break;
        }
        assert!(Instant::now() < deadline, "the old leader did not come back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    write(&client, &members, &mut next, 20, &mut acked).await;

    // (d) everything restarted
    members.iter_mut().for_each(Member::kill);
    members.iter_mut().for_each(|m| m.start(&url));
    let (now, took) = leader(&client, &members).await;
    eprintln!("every server restarted: a leader in {took:?}");
    write(&client, &members, &mut next, 20, &mut acked).await;
    verify(&client, &members[now], &acked).await;
    verify(&client, &members[1 - now], &acked).await;
}

//! A fresh PostgreSQL database per test, in the cluster `MOSAIC_TEST_POSTGRES` names (a URL to
//! its `postgres` database; `.ci/postgres start` starts a throwaway cluster and prints it). Where
//! it is not set, the tests on PostgreSQL say they are skipped and pass. Shared by the unit tests
//! of `crates/storage` and the integration tests.

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable naming the cluster.
pub const ENV: &str = "MOSAIC_TEST_POSTGRES";

/// The URL of a new, empty database, or `None` (said on stderr) when no cluster is given.
pub fn fresh_database(test: &str) -> Option<String> {
    let Ok(admin) = std::env::var(ENV) else {
        eprintln!("{test}: skipped on PostgreSQL ({ENV} is not set; `.ci/postgres start DIR` starts a cluster)");
        return None;
    };
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("mosaic_t{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let create = format!("CREATE DATABASE {name}");
    // a name left by an earlier process of the same id (a long-lived local cluster) goes first
    let stale = format!("DROP DATABASE IF EXISTS {name}");
    let url = admin.clone();
    // on a thread of its own: the client runs a runtime, which a test's own would refuse
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connecting to the test cluster");
        client.batch_execute(&stale).expect("dropping a stale test database");
        client.batch_execute(&create).expect("creating a test database");
    })
    .join()
    .unwrap();
    Some(with_database(&admin, &name))
}

/// `url` with its database replaced by `name` (the path after the host).
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[after_scheme..].find('/').map_or(base.len(), |i| after_scheme + i);
    let mut out = format!("{}/{name}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

//! Cluster mode on PostgreSQL (see `cluster.rs`): one leader, fenced by the epoch; followers
//! read the leader's commits and write nothing. Skipped where `MOSAIC_TEST_POSTGRES` is not set.

use super::events::TestEvents;
use super::*;

use super::contract_tests::test_postgres;

/// A store on `url` in cluster mode, advertising `name`.
fn clustered(dir: &std::path::Path, url: &str, name: &str) -> Store {
    let mut cfg = StorageConfig::new(dir);
    cfg.backend = Backend::Postgres { url: url.to_owned() };
    cfg.advertise = Some(format!("http://{name}"));
    Store::open(cfg, &TestEvents).unwrap()
}

fn put(store: &Store, key: &[u8], value: &[u8]) -> Result<()> {
    let (key, value) = (key.to_vec(), value.to_vec());
    store.write_blocking(move |tx| {
        tx.put(Space::Entity, key, value);
        Ok(())
    })
}

/// Runs `sql` on its own connection (on a thread of its own: the client runs a runtime).
fn execute(url: &str, sql: &str) {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap().batch_execute(&sql).unwrap()
    })
    .join()
    .unwrap();
}

/// The one number `sql` answers, on its own connection.
fn count(url: &str, sql: &str) -> i64 {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap().query_one(&sql, &[]).unwrap().get::<_, i64>(0)
    })
    .join()
    .unwrap()
}

/// A leader on a fresh database, then deposed: another server moved the epoch on (as one does
/// once this one's session is gone). `None` without a test cluster.
fn deposed(test: &str, before: impl FnOnce(&Store)) -> Option<(tempfile::TempDir, Store, String)> {
    let url = test_postgres::fresh_database(test)?;
    let dir = tempfile::tempdir().unwrap();
    let leader = clustered(dir.path(), &url, "a:1");
    before(&leader);
    execute(&url, "UPDATE mosaic_store SET epoch = epoch + 1 WHERE id = 1");
    Some((dir, leader, url))
}

#[test]
fn the_first_server_leads_the_next_follow_and_read_its_commits() {
    let Some(url) = test_postgres::fresh_database("the_first_server_leads") else { return };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = clustered(a.path(), &url, "a:1");
    let follower = clustered(b.path(), &url, "b:1");
    assert_eq!((leader.role(), follower.role()), (Role::Leader, Role::Follower));
    assert!(leader.epoch() >= 1);
    assert_eq!(follower.epoch(), 0);

    put(&leader, b"k", b"v1").unwrap();
    let seen = follower.leadership().unwrap().unwrap();
    assert_eq!((seen.epoch, seen.leader.as_str()), (leader.epoch(), "http://a:1"));
    assert!(!follower.lead_is_free().unwrap(), "the leader holds the lead");
    assert_eq!(seen.state, leader.published_state(), "the row names the state the leader published");
    assert_eq!(seen.changed(Space::Entity), seen.state, "the write's keyspace is marked changed by its state");
    assert!(seen.changed(Space::Ts) < seen.state);

    // the follower reads the leader's commits, under the leader's state numbers
    let view = follower.snapshot();
    assert_eq!(view.get(Space::Entity, b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(view.state(), seen.state);
    drop(view);
    put(&leader, b"k", b"v2").unwrap();
    assert_eq!(follower.get(Space::Entity, b"k").unwrap().as_deref(), Some(&b"v2"[..]), "no stale cached copy");
    assert!(follower.snapshot().state() > seen.state);

    // its document cache follows the leader's log of the documents each group wrote
    for v in [&b"v3"[..], b"v4"] {
        assert!(follower.get(Space::Entity, b"k").unwrap().is_some(), "read, so cached");
        let before = follower.leadership().unwrap().unwrap().state;
        put(&leader, b"k", v).unwrap();
        let after = follower.leadership().unwrap().unwrap().state;
        follower.follow_documents(before, after).unwrap();
        assert_eq!(follower.get(Space::Entity, b"k").unwrap().as_deref(), Some(v));
    }
    // a log that does not reach back far enough empties the cache
    assert!(follower.get(Space::Entity, b"k").unwrap().is_some());
    execute(&url, "DELETE FROM mosaic_log");
    put(&leader, b"k", b"v2").unwrap();
    let after = follower.leadership().unwrap().unwrap().state;
    follower.follow_documents(0, after).unwrap();
    assert_eq!(follower.get(Space::Entity, b"k").unwrap().as_deref(), Some(&b"v2"[..]));

    // a follower writes nothing
    assert!(matches!(put(&follower, b"f", b"x"), Err(StorageError::NotLeader)));
    assert_eq!(leader.get(Space::Entity, b"f").unwrap(), None);

    // the leader gone, the next server to open leads, in the next epoch
    let epoch = leader.epoch();
    leader.close().unwrap();
    assert!(follower.lead_is_free().unwrap(), "a closed leader gives the lead back at once");
    drop(leader);
    let c = tempfile::tempdir().unwrap();
    let next = clustered(c.path(), &url, "c:1");
    assert_eq!((next.role(), next.epoch()), (Role::Leader, epoch + 1));
    assert!(next.published_state() > seen.state, "its states are numbered above the last leader's");
    let before = follower.leadership().unwrap().unwrap().state;
    put(&next, b"k", b"v3").unwrap();
    let after = follower.leadership().unwrap().unwrap().state;
    // the new leader's log goes on from the last one's: nothing missed, nothing cleared
    assert_eq!(follower.get(Space::Entity, b"k").unwrap().as_deref(), Some(&b"v2"[..]), "cached");
    follower.follow_documents(before, after).unwrap();
    assert_eq!(follower.get(Space::Entity, b"k").unwrap().as_deref(), Some(&b"v3"[..]));
    follower.close().unwrap();
    next.close().unwrap();
}

#[test]
fn a_deposed_leader_commits_nothing() {
    let before = |leader: &Store| put(leader, b"before", b"1").unwrap();
    let Some((_dir, leader, url)) = deposed("a_deposed_leader_commits_nothing", before) else { return };
    let refused = put(&leader, b"after", b"2");
    assert!(matches!(refused, Err(StorageError::Deposed)), "{refused:?}");
    assert!(leader.is_poisoned());
    assert!(put(&leader, b"later", b"3").is_err());
    let read = |key: &str| {
        count(&url, &format!("SELECT count(*) FROM mosaic_entity WHERE k = '\\x{}'::bytea", hex(key.as_bytes())))
    };
    assert_eq!((read("before"), read("after"), read("later")), (1, 0, 0));
    leader.close().ok();
}

#[test]
fn a_leader_that_reads_another_epoch_stops_writing() {
    let Some((_dir, leader, _)) = deposed("a_leader_reads_another_epoch", |_| {}) else { return };
    // no write needed: the first view it takes shows the other epoch
    let _ = leader.snapshot();
    assert!(leader.is_poisoned());
    assert!(put(&leader, b"k", b"v").is_err());
    leader.close().ok();
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

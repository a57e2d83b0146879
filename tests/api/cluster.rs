//! Cluster mode: several servers on one PostgreSQL database (skipped without
//! `MOSAIC_TEST_POSTGRES`). The first to open leads; the others read the leader's writes (as
//! soon as a read asks, with `X-Mosaic-Min-Seq`) and redirect writes to it.

use crate::common::{TestServer, postgres};
use reqwest::Method;
use serde_json::json;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A server in cluster mode on the database `url`.
async fn member(url: &str) -> TestServer {
    let port = free_port();
    let url = url.to_owned();
    TestServer::start_with(move |c| {
        c.addr = format!("127.0.0.1:{port}").parse().unwrap();
        c.storage.backend = mosaicdb::storage::Backend::Postgres { url };
        c.storage.advertise = Some(format!("http://127.0.0.1:{port}"));
    })
    .await
}

#[tokio::test]
async fn a_follower_reads_the_leaders_writes_and_redirects_writes_to_it() {
    let Some(url) = postgres::fresh_database("cluster follower") else { return };
    let leader = member(&url).await;
    let follower = member(&url).await;
    let (_, ready) = leader.get("/ready").await;
    assert_eq!(ready["cluster"]["role"], "leader", "{ready}");
    let epoch = ready["cluster"]["epoch"].as_u64().unwrap();
    assert!(epoch >= 1);
    let (status, ready) = follower.get("/ready").await;
    assert_eq!(status, 200, "a follower is ready: it serves reads and redirects writes");
    assert_eq!(ready["cluster"]["role"], "follower", "{ready}");
    let (_, info) = follower.get("/v1/info").await;
    assert_eq!(info["cluster"]["role"], "follower", "{info}");
    let metrics = follower.client.get(format!("{}/metrics", follower.base)).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    let role = format!("mosaicdb_cluster_role_info{{role=\"follower\",leader=\"{}\"}} 1", leader.base);
    assert!(metrics.contains(&role), "{metrics}");
    assert!(metrics.contains(&format!("mosaicdb_cluster_epoch {epoch}")), "{metrics}");

    // a table made on the leader, then a document: the follower sees both once it has
    // applied the state the leader's answer names
    let created = leader.send(Method::POST, "/v1/tables", Some(&json!({"name": "c"})), &[]).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let put = leader.send(Method::PUT, "/v1/tables/c/documents/a", Some(&json!({"n": 1})), &[]).await;
    assert_eq!(put.status, 201, "{}", put.body);
    let seq = put.header("x-mosaic-seq").expect("every answer names the state applied").to_owned();
    let read = follower.send(Method::GET, "/v1/tables/c/documents/a", None, &[("x-mosaic-min-seq", &seq)]).await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.body["n"], 1);
    assert!(read.header("x-mosaic-seq").unwrap().parse::<u64>().unwrap() >= seq.parse::<u64>().unwrap());
    // the follower's document cache: filled by reads, emptied of what the leader changes
    for n in 2..6 {
        assert_eq!(follower.get("/v1/tables/c/documents/a").await.1["n"], n - 1, "cached");
        let put = leader.send(Method::PUT, "/v1/tables/c/documents/a", Some(&json!({"n": n})), &[]).await;
        let seq = put.header("x-mosaic-seq").unwrap().to_owned();
        let read = follower.send(Method::GET, "/v1/tables/c/documents/a", None, &[("x-mosaic-min-seq", &seq)]).await;
        assert_eq!(read.body["n"], n, "a cached document the leader changed is read again");
    }
    let gone = leader.send(Method::DELETE, "/v1/tables/c/documents/a", None, &[]).await;
    let seq = gone.header("x-mosaic-seq").unwrap().to_owned();
    let read = follower.send(Method::GET, "/v1/tables/c/documents/a", None, &[("x-mosaic-min-seq", &seq)]).await;
    assert_eq!(read.status, 404, "a deleted document is gone from the follower's cache");
    assert_eq!(leader.put("/v1/tables/c/documents/a", json!({"n": 1})).await.0, 201);

    // a write sent to the follower goes to the leader (307: the client sends it again there),
    // even one naming a table the follower has not seen yet
    let manual = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for k in 0..20 {
        let table = format!("fresh{k}");
        assert_eq!(leader.post("/v1/tables", json!({"name": table})).await.0, 201);
        let r = manual.put(format!("{}/v1/tables/{table}/documents/x", follower.base)).json(&json!({})).send();
        assert_eq!(r.await.unwrap().status(), 307, "a write to a table just made is the leader's, never a 404");
    }
    let r = manual.put(format!("{}/v1/tables/c/documents/b?x=1", follower.base)).json(&json!({"n": 2})).send().await;
    let r = r.unwrap();
    assert_eq!(r.status(), 307);
    assert_eq!(r.headers()["location"], format!("{}/v1/tables/c/documents/b?x=1", leader.base));
    let r = reqwest::Client::new()
        .put(format!("{}/v1/tables/c/documents/b", follower.base))
        .json(&json!({"n": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "a client that follows redirects writes through any server");
    let seq = r.headers()["x-mosaic-seq"].to_str().unwrap().to_owned();
    let read = follower.send(Method::GET, "/v1/tables/c/documents/b", None, &[("x-mosaic-min-seq", &seq)]).await;
    assert_eq!((read.status.as_u16(), &read.body["n"]), (200, &json!(2)));

    // an index the leader builds serves the follower's queries
    let idx = json!({"name": "by_n", "kind": "range", "fields": ["n"]});
    assert_eq!(leader.post("/v1/tables/c/indexes", idx).await.0, 202);
    leader.index_settled("c", "by_n").await;
    let seq = leader.send(Method::GET, "/v1/tables", None, &[]).await.header("x-mosaic-seq").unwrap().to_owned();
    let q = json!({"filter": {"n": {"$gte": 2}}, "allow_scan": false});
    let found = follower.send(Method::POST, "/v1/tables/c/query", Some(&q), &[("x-mosaic-min-seq", &seq)]).await;
    assert_eq!(found.status, 200, "{}", found.body);
    assert_eq!(found.body["documents"].as_array().map(Vec::len), Some(1), "{}", found.body);
    follower.check_ok().await;
    leader.check_ok().await;
}

/// The POST routes a follower answers itself are routes, and only read (the rest go to the
/// leader before anything runs).
#[test]
fn the_read_only_posts_are_routes_that_take_post() {
    let spec: serde_json::Value = serde_json::from_str(include_str!("../../openapi/openapi.json")).unwrap();
    let source = include_str!("../../src/api/db_path.rs");
    let list = &source[source.find("READ_ONLY_POSTS").unwrap()..];
    let list = &list[..list.find("];").unwrap()];
    let routes: Vec<&str> = list.split('"').skip(1).step_by(2).collect();
    assert!(routes.len() >= 8, "{routes:?}");
    for route in routes {
        let op = &spec["paths"][route]["post"];
        assert!(op.is_object(), "{route} takes no POST");
        let id = op["operationId"].as_str().unwrap();
        let reads =
            ["backup", "check", "shortest_path", "traverse", "analyze", "query", "search", "vector_search", "sql"];
        // the Prometheus API's form POSTs (Grafana's way of asking)
        let reads = [&reads[..], &["query_post", "query_range_post", "series_post", "labels_post"]].concat();
        assert!(reads.contains(&id), "{route} ({id}) is not known to only read");
    }
}

#[tokio::test]
async fn a_read_waits_for_the_state_it_asks_for_at_most_a_while() {
    let Some(url) = postgres::fresh_database("cluster min seq") else { return };
    let leader = member(&url).await;
    let follower = member(&url).await;
    let bad = follower.send(Method::GET, "/v1/tables", None, &[("x-mosaic-min-seq", "soon")]).await;
    assert!(bad.is_problem(400, "invalid_header"), "{}", bad.body);
    // a state no leader gave out yet: the leader says so at once, the follower after its wait
    let far = (u64::MAX / 2).to_string();
    let r = leader.send(Method::GET, "/v1/tables", None, &[("x-mosaic-min-seq", &far)]).await;
    assert!(r.is_problem(503, "lagging"), "{}", r.body);
    let started = std::time::Instant::now();
    let r = follower.send(Method::GET, "/v1/tables", None, &[("x-mosaic-min-seq", &far)]).await;
    assert!(r.is_problem(503, "lagging"), "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(started.elapsed() >= std::time::Duration::from_secs(4), "the follower waited for it");
}

/// With keys, `/ready` tells a caller without one the role and the lag, not where the leader is
/// nor its epoch; a key (any role) sees them. A follower redirects a write only once its key is
/// checked.
#[tokio::test]
async fn ready_hides_the_leader_from_callers_without_a_key() {
    let Some(url) = postgres::fresh_database("cluster ready details") else { return };
    let port = free_port();
    let member = |port: u16| {
        let url = url.clone();
        TestServer::start_with_keys(move |c| {
            c.addr = format!("127.0.0.1:{port}").parse().unwrap();
            c.storage.backend = mosaicdb::storage::Backend::Postgres { url };
            c.storage.advertise = Some(format!("http://127.0.0.1:{port}"));
        })
    };
    let leader = member(port).await;
    let follower = member(free_port()).await;
    for s in [&leader, &follower] {
        let r = s.send_as(None, Method::GET, "/ready", None).await;
        assert_eq!(r.status, 200);
        let cluster = &r.body["cluster"];
        assert!(cluster["role"].is_string() && cluster["lag_ms"].is_u64(), "{}", r.body);
        for hidden in ["leader", "epoch", "applied"] {
            assert!(cluster.get(hidden).is_none(), "{hidden}: {}", r.body);
        }
        assert_eq!(r.header("x-mosaic-seq"), None);
        let r = s.send_as(Some(&crate::common::bearer(crate::common::READ_KEY)), Method::GET, "/ready", None).await;
        assert!(r.body["cluster"]["epoch"].as_u64().is_some_and(|e| e >= 1), "{}", r.body);
        assert_eq!(r.body["cluster"]["leader"], leader.base);
    }
    let r = follower.send_as(None, Method::PUT, "/v1/tables/t/documents/a", Some(&json!({}))).await;
    assert_eq!(r.status, 401, "no redirect (naming the leader) before the key check");
}

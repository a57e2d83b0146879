//! The PostgreSQL wire (`--pg-addr`) through real clients: the `postgres` crate (tokio-postgres:
//! the extended protocol, server-side parameters, binary results) and Debian's psql (the simple
//! protocol, text): the same rows as `POST /v1/sql`, every type in both formats, portals read in
//! pages, session statements, SQLSTATEs for bad statements, writes and unknown databases, API keys
//! as passwords, and a CancelRequest stopping a statement under way.

use crate::common::{ADMIN_KEY, KEYS, READ_KEY, TestServer};
use ::postgres::{Client, NoTls, SimpleQueryMessage};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn wire_server() -> TestServer {
    TestServer::start_with(|c| c.pg_addr = Some("127.0.0.1:0".parse().unwrap())).await
}

/// Runs `f` on a thread of its own (the `postgres` client blocks), and waits for it.
fn on_wire<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().unwrap()
}

fn connect(s: &TestServer, db: &str, password: Option<&str>) -> Result<Client, ::postgres::Error> {
    let addr = s.pg_addr();
    let mut config = ::postgres::Config::new();
    config.host(&addr.ip().to_string()).port(addr.port()).user("tester").dbname(db);
    config.connect_timeout(Duration::from_secs(10));
    if let Some(p) = password {
        config.password(p);
    }
    // the client runs a runtime of its own: not on the test's thread
    on_wire(move || config.connect(NoTls))
}

/// A value's bytes as the server sent them, whatever its type.
struct Raw(Vec<u8>);

impl<'a> ::postgres::types::FromSql<'a> for Raw {
    fn from_sql(_: &::postgres::types::Type, raw: &'a [u8]) -> Result<Raw, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
    }

    fn accepts(_: &::postgres::types::Type) -> bool {
        true
    }
}

/// The SQLSTATE of a failure.
fn code(e: &::postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

/// The rows of a simple query, as text.
fn simple_rows(client: &mut Client, sql: &str) -> Vec<Vec<Option<String>>> {
    client
        .simple_query(sql)
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect()),
            _ => None,
        })
        .collect()
}

async fn users(s: &TestServer) {
    s.create_table("users").await;
    let docs = json!([
        {"_id": "u1", "name": "Ada", "city": "Oslo", "age": 36},
        {"_id": "u2", "name": "Bo", "city": "Bergen", "age": 25},
        {"_id": "u3", "name": "Cy", "city": "Oslo", "age": 52},
    ]);
    let r = s.send(Method::POST, "/v1/tables/users/documents", Some(&docs), &[]).await;
    assert!(r.status.is_success(), "{}", r.body);
}

#[tokio::test]
async fn the_wire_answers_as_the_http_route_with_parameters_in_both_protocols() {
    let s = wire_server().await;
    users(&s).await;
    let statement = "SELECT _id, doc->>'city' AS city, (doc->>'age')::int AS age FROM users ORDER BY _id";
    let http = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": statement})), &[]).await;
    assert_eq!(http.status, 200, "{}", http.body);
    let client = connect(&s, "default", None);
    let (simple, extended, filtered) = on_wire(move || {
        let mut client = client.unwrap();
        let simple = simple_rows(&mut client, statement);
        let extended: Vec<Value> = client
            .query(statement, &[])
            .unwrap()
            .iter()
            .map(|r| json!([r.get::<_, String>(0), r.get::<_, Option<String>>(1), r.get::<_, Option<i32>>(2)]))
            .collect();
        // a server-side parameter: its type is the planner's (int, from the cast it meets)
        let filtered: Vec<String> = client
            .query(
                "SELECT _id FROM users WHERE (doc->>'age')::int >= $1 AND doc->>'city' = $2 ORDER BY _id",
                &[&30i32, &"Oslo"],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        (simple, extended, filtered)
    });
    let as_text: Vec<Value> = http.body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            Value::Array(
                r.as_array().unwrap().iter().map(|v| json!(v.as_str().map_or(v.to_string(), str::to_owned))).collect(),
            )
        })
        .collect();
    let simple: Vec<Value> = simple.into_iter().map(|r| json!(r)).collect();
    assert_eq!(simple, as_text);
    assert_eq!(Value::Array(extended), http.body["rows"]);
    assert_eq!(filtered, ["u1", "u3"]);
}

#[tokio::test]
async fn every_type_reads_back_in_text_and_in_binary() {
    let s = wire_server().await;
    users(&s).await;
    let client = connect(&s, "default", None);
    on_wire(move || {
        let mut client = client.unwrap();
        let statement = "SELECT 7::smallint AS a, 8::int AS b, 9::bigint AS c, 1.5::real AS d, 2.25::double AS e, \
            true AS f, 'x' AS g, NULL::text AS h, to_timestamp_micros(86400000001) AS i, DATE '2024-02-29' AS j, \
            doc AS k, 12.5::decimal(10,2) AS l FROM users WHERE _id = 'u2'";
        // binary: every column decoded by its PostgreSQL type
        let row = client.query_one(statement, &[]).unwrap();
        assert_eq!(row.get::<_, i16>("a"), 7);
        assert_eq!(row.get::<_, i32>("b"), 8);
        assert_eq!(row.get::<_, i64>("c"), 9);
        assert_eq!(row.get::<_, f32>("d"), 1.5);
        assert_eq!(row.get::<_, f64>("e"), 2.25);
        assert!(row.get::<_, bool>("f"));
        assert_eq!(row.get::<_, String>("g"), "x");
        assert_eq!(row.get::<_, Option<String>>("h"), None);
        // dates in binary: days since 2000-01-01
        assert_eq!(row.get::<_, Raw>("j").0, 8825i32.to_be_bytes());
        let at: std::time::SystemTime = row.get("i");
        assert_eq!(at, std::time::UNIX_EPOCH + Duration::from_micros(86_400_000_001));
        let doc: Value = serde_json::from_slice(&row.get::<_, Raw>("k").0).unwrap();
        assert_eq!(doc, json!({"_id": "u2", "age": 25, "city": "Bergen", "name": "Bo"}));
        // numeric's binary format: 2 groups, weight 0, positive, scale 2: 12 | 5000
        let numeric: Vec<u8> = [2i16, 0, 0, 2, 12, 5000].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(row.get::<_, Raw>("l").0, numeric);
        let types: Vec<String> = row.columns().iter().map(|c| c.type_().name().to_owned()).collect();
        assert_eq!(
            types,
            [
                "int2",
                "int4",
                "int8",
                "float4",
                "float8",
                "bool",
                "text",
                "text",
                "timestamp",
                "date",
                "json",
                "numeric"
            ]
        );
        // text: what PostgreSQL prints
        let text = simple_rows(&mut client, statement).remove(0);
        let expect = [
            Some("7"),
            Some("8"),
            Some("9"),
            Some("1.5"),
            Some("2.25"),
            Some("t"),
            Some("x"),
            None,
            Some("1970-01-02 00:00:00.000001"),
            Some("2024-02-29"),
            Some(r#"{"_id":"u2","age":25,"city":"Bergen","name":"Bo"}"#),
            Some("12.50"),
        ];
        let text: Vec<Option<&str>> = text.iter().map(Option::as_deref).collect();
        assert_eq!(&text[..8], &expect[..8]);
        assert_eq!(&text[8..10], &expect[8..10]);
        let doc: Value = serde_json::from_str(text[10].unwrap()).unwrap();
        assert_eq!(doc, json!({"_id": "u2", "age": 25, "city": "Bergen", "name": "Bo"}));
        assert_eq!(text[11], expect[11]);
    });
}

#[tokio::test]
async fn portals_read_in_pages_and_session_statements_are_answered() {
    let s = wire_server().await;
    let client = connect(&s, "default", None);
    on_wire(move || {
        let mut client = client.unwrap();
        let mut tx = client.transaction().unwrap();
        let portal = tx.bind("SELECT value FROM generate_series(1, 25) ORDER BY value", &[]).unwrap();
        let mut pages = Vec::new();
        loop {
            let page: Vec<i64> = tx.query_portal(&portal, 10).unwrap().iter().map(|r| r.get(0)).collect();
            if page.is_empty() {
                break;
            }
            pages.push(page);
        }
        tx.commit().unwrap();
        assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 5]);
        assert_eq!(pages.concat(), (1..=25).collect::<Vec<i64>>());
        // what drivers and BI tools send before their queries
        let answers = simple_rows(
            &mut client,
            "SET extra_float_digits = 3; SET application_name = 'x'; BEGIN READ ONLY; \
             SHOW TRANSACTION ISOLATION LEVEL; SHOW server_version; COMMIT",
        );
        assert_eq!(answers, [vec![Some("read committed".to_owned())], vec![Some("15.0 (mosaicdb)".to_owned())]]);
        // several statements in one string: each answers in turn, and a failing one ends them
        let messages = client.simple_query("SELECT 1; SELECT nope FROM nowhere; SELECT 3");
        assert_eq!(code(&messages.unwrap_err()), "42P01");
        assert_eq!(
            simple_rows(&mut client, "SELECT 1 AS one; SELECT 2 AS two"),
            [vec![Some("1".to_owned())], vec![Some("2".to_owned())]]
        );
    });
}

#[tokio::test]
async fn bad_statements_writes_and_unknown_databases_get_their_sqlstate() {
    let s = wire_server().await;
    users(&s).await;
    let client = connect(&s, "default", None);
    let unknown = connect(&s, "nowhere", None).map(|_| ()).map_err(|e| code(&e));
    assert_eq!(unknown, Err("3D000".to_owned()));
    on_wire(move || {
        let mut client = client.unwrap();
        let failed = |client: &mut Client, sql: &str| code(&client.simple_query(sql).unwrap_err());
        assert_eq!(failed(&mut client, "SELEC 1"), "42601");
        assert_eq!(failed(&mut client, "SELECT * FROM missing"), "42P01");
        assert_eq!(failed(&mut client, "SELECT nope FROM users"), "42703");
        assert_eq!(failed(&mut client, "DELETE FROM users"), "25006");
        assert_eq!(failed(&mut client, "SELECT (doc->>'name')::int FROM users"), "22P02");
        // the extended protocol says the same, and the connection goes on
        assert_eq!(code(&client.query("SELECT * FROM missing WHERE _id = $1", &[&"x"]).unwrap_err()), "42P01");
        let n: i64 = client.query_one("SELECT count(*) FROM users", &[]).unwrap().get(0);
        assert_eq!(n, 3);
    });
}

#[tokio::test]
async fn api_keys_are_the_passwords_and_a_key_sees_its_databases_only() {
    let files = tempfile::tempdir().unwrap();
    let path = files.path().join("keys.json");
    let limited = json!({"keys": [{"name": "shop", "role": "read", "key": "shop-only-key-0123456789", "databases": {"shop": "read"}}]});
    std::fs::write(&path, limited.to_string()).unwrap();
    let s = TestServer::start_with(|c| {
        c.pg_addr = Some("127.0.0.1:0".parse().unwrap());
        c.access.keys = mosaicdb::api::auth::KeySet::load(Some(&path), Some(KEYS)).unwrap();
    })
    .await;
    let r = s.send(Method::POST, "/v1/databases", Some(&json!({"name": "shop"})), &[]).await;
    assert!(r.status.is_success(), "{}", r.body);
    // no password, or one that is no key: refused
    assert!(connect(&s, "default", None).is_err());
    assert_eq!(connect(&s, "default", Some("not-a-key")).map(|_| ()).map_err(|e| code(&e)), Err("28P01".to_owned()));
    // a key limited to `shop` does not learn that `default` exists
    let outside = connect(&s, "default", Some("shop-only-key-0123456789")).map(|_| ()).map_err(|e| code(&e));
    assert_eq!(outside, Err("3D000".to_owned()));
    let limited = connect(&s, "shop", Some("shop-only-key-0123456789"));
    let reader = connect(&s, "default", Some(READ_KEY));
    let admin = connect(&s, "shop", Some(ADMIN_KEY));
    on_wire(move || {
        let one: i64 = reader.unwrap().query_one("SELECT 1::bigint", &[]).unwrap().get(0);
        assert_eq!(one, 1);
        admin.unwrap().simple_query("SELECT 1").unwrap();
        limited.unwrap().simple_query("SELECT 1").unwrap();
    });
}

#[tokio::test]
async fn a_cancel_request_stops_the_statement_under_way() {
    let s = wire_server().await;
    let client = connect(&s, "default", None).unwrap();
    let token = client.cancel_token();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        token.cancel_query(NoTls).unwrap();
    });
    let (code, took) = on_wire(move || {
        let mut client = client;
        let started = Instant::now();
        let heavy = "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b WHERE a.value + b.value = 3";
        let e = client.simple_query(heavy).unwrap_err();
        let took = started.elapsed();
        // the connection is usable after
        assert_eq!(simple_rows(&mut client, "SELECT 2"), [vec![Some("2".to_owned())]]);
        (code(&e), took)
    });
    canceller.join().unwrap();
    assert_eq!(code, "57014");
    assert!(took < Duration::from_secs(20), "the cancel took {took:?}");
}

/// Runs psql's `-c statement` on `s`'s wire with `options` added to the connection string;
/// `None` when psql is not installed.
fn psql(s: &TestServer, options: &str, statement: &str) -> Option<std::process::Output> {
    let Some(psql) =
        ["/usr/bin/psql", "/usr/lib/postgresql/15/bin/psql"].into_iter().find(|p| std::path::Path::new(p).exists())
    else {
        eprintln!("SKIP: psql is not installed");
        return None;
    };
    let addr = s.pg_addr();
    let out = std::process::Command::new(psql)
        .args(["-X", "-A", "-t", "-F", ",", "-v", "ON_ERROR_STOP=1"])
        .arg(format!("host={} port={} dbname=default user=tester connect_timeout=10 {options}", addr.ip(), addr.port()))
        .args(["-c", statement])
        .output()
        .unwrap();
    Some(out)
}

#[tokio::test]
async fn psql_connects_and_reads() {
    let s = wire_server().await;
    users(&s).await;
    let statement = "SELECT _id, doc->>'city' FROM users WHERE (doc->>'age')::int > 30 ORDER BY _id";
    let Some(out) = psql(&s, "sslmode=disable", statement) else { return };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "u1,Oslo\nu3,Oslo\n");
}

#[tokio::test]
async fn psql_connects_over_tls_with_a_key() {
    let files = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap().self_signed(&key).unwrap();
    let (cert_path, key_path) = (files.path().join("cert.pem"), files.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let s = TestServer::start_with(|c| {
        c.pg_addr = Some("127.0.0.1:0".parse().unwrap());
        c.tls = Some(mosaicdb::server::TlsFiles { cert: cert_path, key: key_path });
        c.access.keys = mosaicdb::api::auth::KeySet::parse_env(KEYS).unwrap();
    })
    .await;
    let options = format!("sslmode=require password={READ_KEY}");
    // sslmode=require: psql fails unless the server takes TLS
    let Some(out) = psql(&s, &options, "SELECT 2 AS two") else { return };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n");
    // the wrong key is refused over TLS as in clear
    let out = psql(&s, "sslmode=require password=wrong-key-0123456789", "SELECT 1").unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("password authentication failed"), "{:?}", out);
}

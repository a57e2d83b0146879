//! SQL against an oracle nobody here wrote: the same documents in mosaicdb and in PostgreSQL 15
//! (a `jsonb` column `doc` beside `_id`, and a typed table as plain columns), the same generated
//! statements in both (JSON paths, filters, joins, aggregates, window functions, subqueries, NULL
//! ordering), the answers compared as multisets, or as lists where the statement orders every
//! row. Skipped, saying so, where `MOSAIC_TEST_POSTGRES` names no cluster (CI starts one).

use crate::common::{Rng, TestServer, postgres};
use reqwest::Method;
use serde_json::{Value, json};

const CITIES: [&str; 4] = ["Bergen", "Oslo", "Rome", "Tromso"];
const USERS: u64 = 120;

/// A row as text cells, the way both sides are compared: numbers rounded to 9 significant
/// digits (PostgreSQL's `numeric` and DataFusion's doubles print differently), booleans as
/// `true`/`false`, NULL as `None`.
type Row = Vec<Option<String>>;

fn cell(text: &str) -> String {
    match text {
        "t" | "true" => "true".into(),
        "f" | "false" => "false".into(),
        _ => match text.parse::<f64>() {
            Ok(x) if text.bytes().any(|b| b.is_ascii_digit()) => {
                let x = if x == 0.0 { 0.0 } else { x };
                format!("{x:.9e}")
            }
            _ => text.to_owned(),
        },
    }
}

fn json_cell(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(cell(s)),
        other => Some(cell(&other.to_string())),
    }
}

/// The documents, as (id, JSON text) and the orders as SQL values.
struct Data {
    users: Vec<Value>,
    orders: Vec<Value>,
}

fn data(rng: &mut Rng) -> Data {
    let letters = b"abdeiklmnorstu";
    let users = (0..USERS)
        .map(|i| {
            let mut d = json!({"_id": format!("u{i:03}")});
            let len = 2 + rng.below(4) as usize;
            let name: String = (0..len)
                .map(|k| {
                    let c = letters[rng.below(letters.len() as u64) as usize] as char;
                    if k == 0 { c.to_ascii_uppercase() } else { c }
                })
                .collect();
            d["name"] = json!(name);
            match rng.below(6) {
                0 => {}
                1 => d["city"] = Value::Null,
                n => d["city"] = json!(CITIES[(n - 2) as usize]),
            }
            if rng.below(5) != 0 {
                d["age"] = json!(rng.below(60) as i64 + 10);
            }
            if rng.below(3) != 0 {
                d["score"] = json!(rng.below(400) as f64 / 8.0);
            }
            if rng.below(4) == 0 {
                d["address"] = json!({"zip": format!("{:04}", rng.below(20))});
            }
            d
        })
        .collect();
    let orders = (0..300u64)
        .map(|i| {
            let mut o = json!({"_id": format!("o{i:03}"), "buyer": format!("u{:03}", rng.below(USERS + 10)),
                "amount": rng.below(50) as i64 - 5});
            if rng.below(4) != 0 {
                o["price"] = json!(rng.below(1000) as f64 / 4.0);
            }
            if rng.below(3) != 0 {
                o["paid"] = json!(rng.below(2) == 0);
            }
            o
        })
        .collect();
    Data { users, orders }
}

/// One condition on the users table `u`.
fn atom(rng: &mut Rng) -> String {
    let city = CITIES[rng.below(4) as usize];
    let n = rng.below(70) + 5;
    match rng.below(12) {
        0 => format!("u.doc->>'city' = '{city}'"),
        1 => format!("(u.doc->>'age')::int > {n}"),
        2 => format!("(u.doc->>'age')::int BETWEEN {n} AND {}", n + 15),
        3 => format!("u._id < 'u{:03}'", rng.below(USERS)),
        4 => format!("u._id >= 'u{:03}'", rng.below(USERS)),
        5 => "u.doc->>'city' IS NULL".into(),
        6 => format!("u.doc->>'name' LIKE '{}%'", (b'A' + rng.below(20) as u8) as char),
        7 => format!("u.doc->>'city' IN ('{city}', 'Rome')"),
        8 => format!("(u.doc->>'score')::double precision <= {}.5", rng.below(50)),
        9 => format!("NOT (u.doc->>'city' = '{city}')"),
        10 => format!("(u.doc->>'city' = '{city}' OR (u.doc->>'age')::int < {n})"),
        _ => "u.doc->'address'->>'zip' IS NOT NULL".into(),
    }
}

fn filter(rng: &mut Rng) -> String {
    let n = 1 + rng.below(3);
    (0..n).map(|_| atom(rng)).collect::<Vec<_>>().join(" AND ")
}

/// A generated statement and whether its rows come in a fixed order.
fn statement(rng: &mut Rng) -> (String, bool) {
    let w = filter(rng);
    let n = rng.below(40);
    match rng.below(11) {
        0 => (
            format!("SELECT u._id, u.doc->>'city', (u.doc->>'age')::int, u.doc->>'name' FROM users u WHERE {w}"),
            false,
        ),
        1 => (
            format!(
                "SELECT u.doc->>'city' AS c, count(*), count(u.doc->>'age'), sum((u.doc->>'age')::int), \
                 min((u.doc->>'age')::int), max(u.doc->>'name'), avg((u.doc->>'score')::double precision) \
                 FROM users u WHERE {w} GROUP BY 1"
            ),
            false,
        ),
        2 => (
            format!(
                "SELECT u._id, o._id, o.amount, o.price FROM users u JOIN orders o ON o.buyer = u._id \
                 WHERE {w} AND o.amount > {n}"
            ),
            false,
        ),
        3 => (
            format!(
                "SELECT o.buyer, sum(o.amount), count(o.price), avg(o.price), bool_and(o.paid) FROM orders o \
                 WHERE o.amount < {n} GROUP BY o.buyer HAVING count(*) > 1"
            ),
            false,
        ),
        4 => (
            format!(
                "SELECT u._id, rank() OVER (PARTITION BY u.doc->>'city' ORDER BY (u.doc->>'age')::int), \
                 sum((u.doc->>'age')::int) OVER (PARTITION BY u.doc->>'city'), \
                 dense_rank() OVER (ORDER BY u.doc->>'city' DESC) FROM users u WHERE {w}"
            ),
            false,
        ),
        5 => {
            let dir = ["ASC", "DESC", ""][rng.below(3) as usize];
            let nulls = ["NULLS FIRST", "NULLS LAST", ""][rng.below(3) as usize];
            (
                format!(
                    "SELECT u.doc->>'city', (u.doc->>'age')::int FROM users u ORDER BY 1 {dir} {nulls}, 2 {dir} {nulls} LIMIT {}",
                    5 + n
                ),
                true,
            )
        }
        6 => (
            format!(
                "SELECT u._id, count(o._id), coalesce(sum(o.amount), 0) FROM users u LEFT JOIN orders o \
                 ON o.buyer = u._id AND o.paid WHERE {w} GROUP BY u._id"
            ),
            false,
        ),
        7 => (
            format!("SELECT u._id FROM users u WHERE {w} AND u._id IN (SELECT buyer FROM orders WHERE amount > {n})"),
            false,
        ),
        8 => (
            format!(
                "SELECT DISTINCT o.buyer FROM orders o WHERE NOT EXISTS \
                 (SELECT 1 FROM users u WHERE u._id = o.buyer AND {w})"
            ),
            false,
        ),
        9 => (
            format!(
                "SELECT CASE WHEN (u.doc->>'age')::int >= {n} THEN 'old' ELSE upper(u.doc->>'name') END, \
                 length(u.doc->>'name'), (u.doc->>'age')::int / 3, u.doc->>'city' || '!' FROM users u WHERE {w} \
                 UNION SELECT o.buyer, o.amount, o.amount % 7, NULL FROM orders o WHERE o.amount > {n}"
            ),
            false,
        ),
        _ => (
            format!(
                "SELECT o._id, o.amount, lag(o.amount) OVER (PARTITION BY o.buyer ORDER BY o._id), \
                 sum(o.amount) OVER (ORDER BY o._id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) \
                 FROM orders o WHERE o.amount BETWEEN {n} AND {} ORDER BY o._id",
                n + 10
            ),
            true,
        ),
    }
}

/// PostgreSQL's answers to `statements`, on a thread of its own (its client runs a runtime).
fn postgres_answers(url: String, data: &Data, statements: Vec<String>) -> Vec<Result<Vec<Row>, String>> {
    let mut setup = String::from(
        "CREATE TABLE users (_id text PRIMARY KEY, doc jsonb NOT NULL);\n\
         CREATE TABLE orders (_id text PRIMARY KEY, buyer text NOT NULL, amount bigint NOT NULL, \
         price double precision, paid boolean);\n",
    );
    for u in &data.users {
        setup.push_str(&format!("INSERT INTO users VALUES ('{}', '{}');\n", u["_id"].as_str().unwrap(), u));
    }
    let sql = |v: &Value| match v {
        Value::Null => "NULL".to_owned(),
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    };
    for o in &data.orders {
        setup.push_str(&format!(
            "INSERT INTO orders VALUES ({}, {}, {}, {}, {});\n",
            sql(&o["_id"]),
            sql(&o["buyer"]),
            sql(&o["amount"]),
            sql(&o["price"]),
            sql(&o["paid"])
        ));
    }
    std::thread::spawn(move || {
        let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("connecting to PostgreSQL");
        client.batch_execute(&setup).expect("loading the tables into PostgreSQL");
        statements
            .iter()
            .map(|s| {
                let messages = client.simple_query(s).map_err(|e| e.to_string())?;
                Ok(messages
                    .into_iter()
                    .filter_map(|m| match m {
                        ::postgres::SimpleQueryMessage::Row(row) => {
                            Some((0..row.len()).map(|i| row.get(i).map(cell)).collect())
                        }
                        _ => None,
                    })
                    .collect())
            })
            .collect()
    })
    .join()
    .unwrap()
}

#[tokio::test]
async fn generated_statements_answer_as_postgresql_does() {
    let Some(url) = postgres::fresh_database("sql differential") else { return };
    let seed = std::env::var("MOSAIC_SQL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20_261_129u64);
    eprintln!("sql differential: seed {seed} (MOSAIC_SQL_SEED replays it)");
    let mut rng = Rng(seed);
    let data = data(&mut rng);
    let statements: Vec<(String, bool)> = (0..150).map(|_| statement(&mut rng)).collect();
    let expected = postgres_answers(url, &data, statements.iter().map(|(s, _)| s.clone()).collect());

    let s = TestServer::start().await;
    s.create_table("users").await;
    let orders = json!({"name": "orders", "columns": [
        {"name": "buyer", "type": "string"},
        {"name": "amount", "type": "int"},
        {"name": "price", "type": "float", "nullable": true},
        {"name": "paid", "type": "bool", "nullable": true},
    ]});
    assert_eq!(s.post("/v1/tables", orders).await.0, 201);
    // half the statements meet an index on the JSON paths they filter on
    for (name, kind, field) in [("by_city", "hash", "city"), ("by_age", "range", "age")] {
        let (st, b) = s.post("/v1/tables/users/indexes", json!({"name": name, "kind": kind, "fields": [field]})).await;
        assert!(st.is_success(), "{b}");
        assert_eq!(s.index_settled("users", name).await["state"], "ready");
    }
    for (table, docs) in [("users", &data.users), ("orders", &data.orders)] {
        let r = s.send(Method::POST, &format!("/v1/tables/{table}/documents"), Some(&json!(docs)), &[]).await;
        assert!(r.status.is_success(), "{}", r.body);
    }
    let mut compared = 0;
    for ((statement, ordered), expected) in statements.iter().zip(expected) {
        let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": statement})), &[]).await;
        let expected = match expected {
            Ok(rows) => rows,
            Err(e) => {
                // a statement PostgreSQL refuses must not answer rows here either
                assert_ne!(r.status, 200, "PostgreSQL refused it ({e}), mosaicdb answered: {statement}");
                continue;
            }
        };
        assert_eq!(r.status, 200, "{statement}: {}", r.body);
        assert_eq!(r.body["truncated"], false);
        let mut got: Vec<Row> = r.body["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row.as_array().unwrap().iter().map(json_cell).collect())
            .collect();
        let mut expected = expected;
        if !ordered {
            got.sort();
            expected.sort();
        }
        assert_eq!(got, expected, "{statement}");
        compared += 1;
    }
    assert!(compared >= 140, "only {compared} statements compared");
}

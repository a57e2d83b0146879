//! Fuzzing (proptest, bounded) of JSON merge patch over HTTP: `PATCH …/documents/{id}` with a
//! random patch on a random document gives what RFC 7396's algorithm gives (the test model's,
//! written from the RFC independently of the server's), and a patch that would leave something other than an
//! object is refused without changing the document.

use crate::common::TestServer;
use crate::common::model::merge_patch;
use proptest::prelude::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};

fn value(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        3 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(Value::from),
        1 => (-1e9f64..1e9).prop_map(Value::from),
        1 => "[a-z ]{0,5}".prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, 24, 4, |inner| {
        prop_oneof![
            1 => prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            3 => prop::collection::btree_map("[a-c]", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn object(depth: u32) -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-c]", value(depth), 0..4).prop_map(|m| Value::Object(m.into_iter().collect()))
}

struct Fixture {
    runtime: tokio::runtime::Runtime,
    server: TestServer,
    ids: AtomicUsize,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let server = runtime.block_on(async {
            let s = TestServer::start().await;
            s.post("/v1/tables", json!({"name": "docs"})).await;
            s
        });
        Fixture { runtime, server, ids: AtomicUsize::new(0) }
    })
}

/// A stored document without its `_id`.
fn without_id(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.remove("_id");
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn patch_is_rfc_7396(target in object(3), patch in prop_oneof![6 => object(3), 1 => value(1)]) {
        let f = fixture();
        let s = &f.server;
        let path = format!("/v1/tables/docs/documents/d{}", f.ids.fetch_add(1, Ordering::Relaxed));
        f.runtime.block_on(async {
            let (status, _) = s.put(&path, target.clone()).await;
            prop_assert_eq!(status.as_u16(), 201);
            // the document as stored (null fields are kept by PUT)
            let (_, stored) = s.get(&path).await;
            let stored = without_id(stored);
            let r = s.send(Method::PATCH, &path, Some(&patch), &[]).await;
            let expected = merge_patch(&stored, &patch);
            let (_, now) = s.get(&path).await;
            if expected.is_object() {
                prop_assert_eq!(r.status.as_u16(), 200, "{}", r.body);
                prop_assert_eq!(without_id(now), expected);
            } else {
                prop_assert!(r.is_problem(422, "invalid_document"), "{} {}", r.status, r.body);
                prop_assert_eq!(without_id(now), stored);
            }
            Ok::<(), TestCaseError>(())
        })?;
    }
}

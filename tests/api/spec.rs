//! The OpenAPI document tells the truth: the answers and limits the server has are declared in
//! `/openapi.json`. (`.ci/schemathesis` checks every answer against the document; these pin the
//! declarations and the server behaviours that were made to match them.)

use crate::common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

/// The operation object of `method path`.
fn operation<'a>(spec: &'a Value, method: &str, path: &str) -> &'a Value {
    &spec["paths"][path][method]
}

/// The statuses an operation declares.
fn statuses(op: &Value) -> Vec<String> {
    op["responses"].as_object().map(|r| r.keys().cloned().collect()).unwrap_or_default()
}

/// A schema with `$ref`s into components followed.
fn resolve<'a>(spec: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => resolve(spec, &spec["components"]["schemas"][name]),
        None => schema,
    }
}

#[tokio::test]
async fn json_body_routes_declare_413_415_and_422_and_precondition_routes_412() {
    let s = TestServer::start().await;
    let (_, spec) = s.get("/openapi.json").await;
    let json_body = [
        ("post", "/v1/tables"),
        ("patch", "/v1/tables/{table}"),
        ("put", "/v1/tables/{table}/documents/{id}"),
        ("patch", "/v1/tables/{table}/documents/{id}"),
        ("post", "/v1/tables/{table}/documents"),
        ("post", "/v1/tables/{table}/indexes"),
        ("post", "/v1/tables/{table}/query"),
        ("post", "/v1/batch"),
    ];
    for (method, path) in json_body {
        let declared = statuses(operation(&spec, method, path));
        for status in ["400", "413", "415", "422"] {
            assert!(declared.iter().any(|s| s == status), "{method} {path} does not declare {status}: {declared:?}");
        }
    }
    for (method, path) in [
        ("put", "/v1/tables/{table}/documents/{id}"),
        ("patch", "/v1/tables/{table}/documents/{id}"),
        ("delete", "/v1/tables/{table}/documents/{id}"),
    ] {
        assert!(statuses(operation(&spec, method, path)).contains(&"412".to_owned()), "{method} {path}");
    }
    // and every one of them really answers 415 to a body that is not JSON
    s.post("/v1/tables", json!({"name": "t"})).await;
    for (method, path) in json_body {
        let path = path.replace("{table}", "t").replace("{id}", "d");
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let r = s.raw(method.clone(), &path, "text/plain", "{}").await;
        assert!(r.is_problem(415, "unsupported_media_type"), "{method} {path}: {}", r.status);
    }
}

#[tokio::test]
async fn limits_the_server_enforces_are_in_the_schemas() {
    let s = TestServer::start().await;
    let (_, spec) = s.get("/openapi.json").await;
    let list = operation(&spec, "get", "/v1/tables/{table}/documents");
    let limit = list["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "limit").unwrap();
    assert_eq!((limit["schema"]["minimum"].as_u64(), limit["schema"]["maximum"].as_u64()), (Some(1), Some(1000)));

    let body = |method: &str, path: &str| {
        resolve(&spec, &operation(&spec, method, path)["requestBody"]["content"]["application/json"]["schema"]).clone()
    };
    let query = body("post", "/v1/tables/{table}/query");
    assert_eq!(
        (query["properties"]["limit"]["minimum"].as_u64(), query["properties"]["limit"]["maximum"].as_u64()),
        (Some(1), Some(1000))
    );
    assert_eq!(query["additionalProperties"], false);

    let batch = body("post", "/v1/batch");
    let ops = &batch["properties"]["operations"];
    assert_eq!((ops["minItems"].as_u64(), ops["maxItems"].as_u64()), (Some(1), Some(10_000)));
    // put and patch need a document, delete takes none
    let variants = resolve(&spec, &ops["items"])["oneOf"].as_array().unwrap();
    let required: Vec<Vec<Value>> =
        variants.iter().map(|v| resolve(&spec, v)["required"].as_array().unwrap().clone()).collect();
    assert_eq!(required.iter().filter(|r| r.contains(&json!("document"))).count(), 2);

    let table = body("post", "/v1/tables");
    let name = &table["properties"]["name"];
    assert_eq!((name["minLength"].as_u64(), name["maxLength"].as_u64()), (Some(1), Some(256)));
    assert!(name["pattern"].as_str().unwrap().contains('/'));
    let kind = resolve(&spec, &table["properties"]["kind"]);
    assert_eq!(kind["enum"], json!(["document", "edge"]));

    // index kinds: only the ones that are built, and range/spatial take exactly one field
    let index = body("post", "/v1/tables/{table}/indexes");
    let variants = index["oneOf"].as_array().unwrap();
    let shapes: Vec<(Value, Option<u64>)> = variants
        .iter()
        .map(|v| {
            let v = resolve(&spec, v);
            (resolve(&spec, &v["properties"]["kind"])["enum"].clone(), v["properties"]["fields"]["maxItems"].as_u64())
        })
        .collect();
    assert_eq!(
        shapes,
        vec![
            (json!(["hash", "unique"]), Some(8)),
            (json!(["range", "spatial", "ngram"]), Some(1)),
            (json!(["fulltext"]), Some(8)),
            (json!(["vector"]), Some(1))
        ]
    );

    let search = body("post", "/v1/tables/{table}/search");
    let p = &search["properties"];
    assert_eq!((p["limit"]["minimum"].as_u64(), p["limit"]["maximum"].as_u64()), (Some(1), Some(1000)));
    assert_eq!(p["offset"]["maximum"].as_u64(), Some(9999));
    assert_eq!(p["query"]["maxLength"].as_u64(), Some(4096));

    let near = body("post", "/v1/tables/{table}/vector-search");
    let p = &near["properties"];
    assert_eq!((p["k"]["minimum"].as_u64(), p["k"]["maximum"].as_u64()), (Some(1), Some(1000)));
    assert_eq!((p["ef"]["minimum"].as_u64(), p["ef"]["maximum"].as_u64()), (Some(1), Some(10_000)));
    assert_eq!(p["vector"]["maxItems"].as_u64(), Some(4096));
    assert_eq!(near["additionalProperties"], false);

    // POST …/documents takes an object or an array
    let insert = body("post", "/v1/tables/{table}/documents");
    let types: Vec<&Value> = insert["oneOf"].as_array().unwrap().iter().map(|v| &v["type"]).collect();
    assert_eq!(types, vec![&json!("object"), &json!("array")]);
}

/// The single-object `POST …/documents` answer is one outcome, not `documents`: the declared
/// 201 schema must allow both shapes the server gives.
#[tokio::test]
async fn the_insert_answer_schema_covers_both_answers() {
    let s = TestServer::start().await;
    let (_, spec) = s.get("/openapi.json").await;
    let created = &operation(&spec, "post", "/v1/tables/{table}/documents")["responses"]["201"];
    let schema = resolve(&spec, &created["content"]["application/json"]["schema"]);
    let shapes: Vec<Vec<Value>> = schema["oneOf"]
        .as_array()
        .expect("a oneOf of the two answers")
        .iter()
        .map(|v| resolve(&spec, v)["required"].as_array().unwrap().clone())
        .collect();

    s.post("/v1/tables", json!({"name": "people"})).await;
    let (_, one) = s.post("/v1/tables/people/documents", json!({"name": "A"})).await;
    let (_, many) = s.post("/v1/tables/people/documents", json!([{"name": "B"}])).await;
    for answer in [one, many] {
        let fits = shapes.iter().filter(|req| req.iter().all(|f| answer.get(f.as_str().unwrap()).is_some())).count();
        assert_eq!(fits, 1, "{answer} fits {fits} of {shapes:?}");
    }
}

/// The spec bounds ids at 1024 bytes; every document route refuses a longer one with 400, before
/// any precondition or lookup (DELETE with If-Match answered 412, GET 404).
#[tokio::test]
async fn an_over_long_id_is_invalid_on_every_document_route() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "t"})).await;
    let path = format!("/v1/tables/t/documents/{}", "x".repeat(1025));
    for method in [Method::GET, Method::PUT, Method::PATCH, Method::DELETE] {
        let body = (method == Method::PUT || method == Method::PATCH).then(|| json!({}));
        let r = s.send(method.clone(), &path, body.as_ref(), &[("if-match", "\"0000000000000000\"")]).await;
        assert!(r.is_problem(400, "invalid_id"), "{method}: {} {}", r.status, r.body);
    }
}

/// A merge patch that is not an object is refused as such (422), not answered 412 when an
/// If-Match does not hold or 404 when the document is missing: the body is checked first.
#[tokio::test]
async fn a_patch_that_is_not_an_object_is_invalid_whatever_the_preconditions() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "t"})).await;
    s.put("/v1/tables/t/documents/d", json!({"a": 1})).await;
    for path in ["/v1/tables/t/documents/d", "/v1/tables/t/documents/missing"] {
        for patch in [json!(null), json!(5), json!([{"a": 2}])] {
            let r = s.send(Method::PATCH, path, Some(&patch), &[("if-match", "\"0000000000000000\"")]).await;
            assert!(r.is_problem(422, "invalid_document"), "{path} {patch}: {} {}", r.status, r.body);
        }
    }
    let (_, doc) = s.get("/v1/tables/t/documents/d").await;
    assert_eq!(doc, json!({"_id": "d", "a": 1}));
}

/// JSON Schema's integer includes `20.0`; a query's `limit` takes it.
#[tokio::test]
async fn a_query_limit_may_be_an_integral_float() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "t"})).await;
    s.post("/v1/tables/t/documents", json!([{"a": 1}, {"a": 2}, {"a": 3}])).await;
    let (status, page) = s.post("/v1/tables/t/query", json!({"limit": 2.0})).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["documents"].as_array().unwrap().len(), 2);
    for bad in [json!(2.5), json!(-1), json!("2")] {
        let r = s.send(Method::POST, "/v1/tables/t/query", Some(&json!({"limit": bad})), &[]).await;
        assert!(r.is_problem(422, "invalid_body"), "{bad}: {}", r.status);
    }
}

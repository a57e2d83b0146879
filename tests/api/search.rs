//! Full-text search and ngram indexes over HTTP: every query form, highlights, the analyzer,
//! filters, errors, backfill, drop, `$contains` served by trigrams, and a search past what the request's own thread reads.

use crate::common::TestServer;
use serde_json::{Value, json};

async fn with_posts(s: &TestServer, options: Value) {
    s.create_table("posts").await;
    let docs = json!([
        {"_id": "p1", "title": "Graph databases", "body": "A graph database stores nodes and edges. Graphs are fast.", "year": 2021},
        {"_id": "p2", "title": "Relational databases", "body": "Tables, rows and joins: the relational model.", "year": 2019},
        {"_id": "p3", "title": "Search engines", "body": "An inverted index maps terms to documents; BM25 ranks them.", "year": 2023},
        {"_id": "p4", "title": "Café culture", "body": "Crème brûlée and naïve questions about graph theory in the café.", "year": 2022},
        {"_id": "p5", "title": ["Tagged", "graph"], "body": 42, "year": 2020},
    ]);
    let (st, b) = s.post("/v1/tables/posts/documents", docs).await;
    assert_eq!(st, 201, "{b}");
    let (st, b) = s
        .post(
            "/v1/tables/posts/indexes",
            json!({"name": "ft", "kind": "fulltext", "fields": ["title", "body"], "options": options}),
        )
        .await;
    assert!(st == 201 || st == 202, "{b}");
    assert_eq!(s.index_settled("posts", "ft").await["state"], "ready");
}

async fn search(s: &TestServer, body: Value) -> Value {
    let (st, b) = s.post("/v1/tables/posts/search", body.clone()).await;
    assert_eq!(st, 200, "{body}: {b}");
    b
}

fn ids(r: &Value) -> Vec<&str> {
    r["hits"].as_array().unwrap().iter().map(|h| h["_id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn every_query_form_finds_what_it_should() {
    let s = TestServer::start().await;
    with_posts(&s, json!({"language": "english", "stop_words": true, "field_weights": {"title": 2.0}})).await;
    // stemming: "graphs" and "graph" are one term; the title weight puts title matches first
    let r = search(&s, json!({"query": "graphs"})).await;
    assert_eq!(r["total"]["value"], 3);
    assert_eq!(ids(&r)[0], "p1", "{r}");
    assert!(ids(&r).contains(&"p5") && ids(&r).contains(&"p4"));
    // any vs all
    assert_eq!(search(&s, json!({"query": "graph relational"})).await["total"]["value"], 4);
    assert_eq!(ids(&search(&s, json!({"query": "graph database", "mode": "all"})).await), ["p1"]);
    // phrases need the words in order and adjacent (a stop word keeps its place)
    assert_eq!(ids(&search(&s, json!({"query": "\"graph database\""})).await), ["p1"]);
    assert_eq!(search(&s, json!({"query": "\"database graph\""})).await["total"]["value"], 0);
    assert_eq!(ids(&search(&s, json!({"query": "\"questions about graph\""})).await), ["p4"]);
    // array elements are apart: no phrase spans two of them
    assert_eq!(search(&s, json!({"query": "\"tagged graph\""})).await["total"]["value"], 0);
    // prefix, exclusion, typos
    assert_eq!(ids(&search(&s, json!({"query": "relat*"})).await), ["p2"]);
    assert_eq!(search(&s, json!({"query": "graph -café"})).await["total"]["value"], 2);
    // typos are measured against the indexed terms (stems here)
    assert_eq!(ids(&search(&s, json!({"query": "relational~1"})).await), ["p2"]);
    assert_eq!(search(&s, json!({"query": "grpah~1"})).await["total"]["value"], 3, "a transposition is one edit");
    assert_eq!(ids(&search(&s, json!({"query": "enginez~2"})).await), ["p3"]);
    assert_eq!(search(&s, json!({"query": "enginezz~1"})).await["total"]["value"], 0);
    // in `all` mode a clause that expands to no term matches nothing, however common the rest
    let none = search(&s, json!({"query": "graph zzq*", "mode": "all"})).await;
    assert_eq!(
        (&none["total"], none["hits"].as_array().map(Vec::len)),
        (&json!({"value": 0, "relation": "eq"}), Some(0))
    );
    assert_eq!(search(&s, json!({"query": "graph zzq*"})).await["total"]["value"], 3);
    // diacritics fold both ways
    assert_eq!(ids(&search(&s, json!({"query": "creme brulee", "mode": "all"})).await), ["p4"]);
    assert_eq!(ids(&search(&s, json!({"query": "NAÏVE"})).await), ["p4"]);
    // filter + search; offset pages; fields project
    let r = search(&s, json!({"query": "graph", "filter": {"year": {"$gte": 2021}}, "fields": ["year"]})).await;
    assert_eq!(r["total"]["value"], 2);
    assert_eq!(r["hits"][0]["document"], json!({"_id": "p1", "year": 2021}));
    let all = ids(&search(&s, json!({"query": "graph", "limit": 3})).await).join(",");
    let second = search(&s, json!({"query": "graph", "limit": 1, "offset": 1})).await;
    assert_eq!(all.split(',').nth(1), ids(&second).first().copied());
    assert_eq!(second["total"]["value"], 3);
    // scores descend
    let r = search(&s, json!({"query": "graph databases relational"})).await;
    let scores: Vec<f64> = r["hits"].as_array().unwrap().iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    s.check_ok().await;
}

#[tokio::test]
async fn highlights_mark_words_in_multibyte_text() {
    let s = TestServer::start().await;
    with_posts(&s, json!({"language": "english"})).await;
    let r =
        search(&s, json!({"query": "naive cafe", "highlight": {"pre": "[", "post": "]", "fragment_chars": 40}})).await;
    let h = &r["hits"][0]["highlights"];
    assert_eq!(h["title"], "[Café] culture", "{r}");
    let body = h["body"].as_str().unwrap();
    assert!(body.contains("[naïve]"), "{body}");
    // 40 characters of text, the two marks and the two ellipses
    assert!(body.chars().count() <= 40 + 2 + 2, "{body}");
    let r = search(&s, json!({"query": "graph*", "highlight": {}})).await;
    assert_eq!(r["hits"][0]["highlights"]["title"], "<em>Graph</em> databases", "{r}");
    // no highlight asked: none given
    assert!(search(&s, json!({"query": "graph"})).await["hits"][0].get("highlights").is_none());
}

#[tokio::test]
async fn the_analyzer_shows_tokens_and_positions() {
    let s = TestServer::start().await;
    with_posts(&s, json!({"language": "english", "stop_words": true})).await;
    let (st, r) = s.post("/v1/tables/posts/indexes/ft/analyze", json!({"text": "The Graphs of Cafés"})).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(
        r["tokens"],
        json!([{"token": "graph", "position": 1, "start": 4, "end": 10},
               {"token": "cafe", "position": 3, "start": 14, "end": 20}])
    );
    let (st, _) = s.post("/v1/tables/posts/indexes", json!({"name": "y", "kind": "range", "fields": ["year"]})).await;
    assert_eq!(st, 202);
    let r = s.send(reqwest::Method::POST, "/v1/tables/posts/indexes/y/analyze", Some(&json!({"text": "x"})), &[]).await;
    assert!(r.is_problem(422, "no_search_index"), "{}", r.body);
    let r =
        s.send(reqwest::Method::POST, "/v1/tables/posts/indexes/nope/analyze", Some(&json!({"text": "x"})), &[]).await;
    assert!(r.is_problem(404, "index_not_found"), "{}", r.body);
}

#[tokio::test]
async fn bad_queries_and_options_are_clear_errors() {
    let s = TestServer::start().await;
    let problem = |body: Value| {
        let s = &s;
        async move { s.send(reqwest::Method::POST, "/v1/tables/posts/search", Some(&body), &[]).await }
    };
    s.create_table("posts").await;
    assert!(problem(json!({"query": "x"})).await.is_problem(422, "no_search_index"));
    for bad in [
        json!({"name": "f", "kind": "fulltext", "fields": ["a"], "options": {"language": "klingon"}}),
        json!({"name": "f", "kind": "fulltext", "fields": ["a"], "options": {"field_weights": {"b": 1}}}),
        json!({"name": "f", "kind": "fulltext", "fields": []}),
        json!({"name": "f", "kind": "range", "fields": ["a"], "options": {"language": "none"}}),
        json!({"name": "f", "kind": "ngram", "fields": ["a", "b"]}),
    ] {
        let r = s.send(reqwest::Method::POST, "/v1/tables/posts/indexes", Some(&bad), &[]).await;
        assert!(r.is_problem(400, "invalid_request"), "{bad}: {}", r.body);
    }
    with_posts_index(&s).await;
    let r = problem(json!({"query": "ok \"open"})).await;
    assert!(r.is_problem(400, "invalid_query"), "{}", r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("character 3"), "{}", r.body);
    for (body, status, code) in [
        (json!({"query": "-only"}), 400, "invalid_query"),
        (json!({"query": "x~7"}), 400, "invalid_query"),
        (json!({"query": "x", "limit": 0}), 400, "invalid_request"),
        (json!({"query": "x", "limit": 1000, "offset": 9500}), 400, "invalid_request"),
        (json!({"query": "x", "highlight": {"fragment_chars": 0}}), 400, "invalid_request"),
        (json!({"query": "x", "filter": {"$bogus": 1}}), 400, "invalid_filter"),
        (json!({"query": "x", "index": "nope"}), 422, "no_search_index"),
        (json!({"query": "x", "mode": "some"}), 422, "invalid_body"),
    ] {
        let r = problem(body.clone()).await;
        assert!(r.is_problem(status, code), "{body}: {} {}", r.status, r.body);
    }
    // a second fulltext index: the request must name one
    let (st, _) =
        s.post("/v1/tables/posts/indexes", json!({"name": "ft2", "kind": "fulltext", "fields": ["body"]})).await;
    assert_eq!(st, 201);
    assert!(problem(json!({"query": "x"})).await.is_problem(422, "no_search_index"));
    let (st, _) = s.post("/v1/tables/posts/search", json!({"query": "x", "index": "ft2"})).await;
    assert_eq!(st, 200);
}

async fn with_posts_index(s: &TestServer) {
    let (st, b) =
        s.post("/v1/tables/posts/indexes", json!({"name": "ft", "kind": "fulltext", "fields": ["body"]})).await;
    assert_eq!(st, 201, "{b}");
}

/// Writes while the index builds are kept, the build reports progress, and dropping the index
/// removes its keys.
#[tokio::test]
async fn backfill_writes_and_drop() {
    let s = TestServer::start_with(|c| c.options.backfill_chunk = 7).await;
    s.create_table("docs").await;
    let docs: Vec<Value> =
        (0..100).map(|i| json!({"_id": format!("d{i:03}"), "t": format!("word{} common", i % 10)})).collect();
    let (st, _) = s.post("/v1/tables/docs/documents", Value::Array(docs)).await;
    assert_eq!(st, 201);
    let (st, b) = s.post("/v1/tables/docs/indexes", json!({"name": "ft", "kind": "fulltext", "fields": ["t"]})).await;
    assert_eq!(st, 202, "{b}");
    assert_eq!(b["state"], "building");
    // writes during the build
    for i in 0..20 {
        let (st, _) = s.put(&format!("/v1/tables/docs/documents/d{i:03}"), json!({"t": "rewritten common"})).await;
        assert_eq!(st, 200);
    }
    let (st, _) = s.delete("/v1/tables/docs/documents/d050").await;
    assert_eq!(st, 204);
    // a write that leaves the text as it is, to a document the build has not reached yet (the
    // build then skips it as changed): it must be indexed all the same
    for i in [97, 98, 99] {
        let (st, b) = s.patch(&format!("/v1/tables/docs/documents/d{i:03}"), json!({"other": 1})).await;
        assert_eq!(st, 200, "{b}");
    }
    assert_eq!(s.index_settled("docs", "ft").await["state"], "ready");
    let r = |q: &str| {
        let s = &s;
        let q = q.to_owned();
        async move { s.post("/v1/tables/docs/search", json!({"query": q})).await.1["total"]["value"].clone() }
    };
    assert_eq!(r("common").await, 99);
    assert_eq!(r("rewritten").await, 20);
    assert_eq!(r("word0").await, 7, "of d000, d010, …, d090: d000 and d010 rewritten, d050 deleted");
    s.check_ok().await;
    let (st, _) = s.delete("/v1/tables/docs/indexes/ft").await;
    assert_eq!(st, 204);
    // the drop removed every key: an index of the same name over another field starts clean
    // (a leftover posting or statistic would fail the check and the counts)
    let (st, b) = s.post("/v1/tables/docs/indexes", json!({"name": "ft", "kind": "fulltext", "fields": ["u"]})).await;
    assert!(st == 201 || st == 202, "{b}");
    s.index_settled("docs", "ft").await;
    assert_eq!(r("common").await, 0);
    s.check_ok().await;
}

/// `$contains` through an ngram index returns what a scan returns, and `explain` shows the index.
#[tokio::test]
async fn ngram_contains_matches_a_scan() {
    let s = TestServer::start().await;
    s.create_table("names").await;
    let words = ["graphite", "paragraph", "Graph", "grape", "phoneme", "Ærøskøbing", "agraphia", "photograph"];
    let docs: Vec<Value> = (0..400)
        .map(|i| {
            let name = format!("{}-{}", words[i % words.len()], words[(i * 7 + 3) % words.len()]);
            let v = if i % 13 == 0 {
                json!([name, "tag"])
            } else if i % 17 == 0 {
                json!(i)
            } else {
                json!(name)
            };
            json!({"_id": format!("n{i:03}"), "name": v})
        })
        .collect();
    let (st, _) = s.post("/v1/tables/names/documents", Value::Array(docs)).await;
    assert_eq!(st, 201);
    let patterns = ["graph", "aph", "øbi", "Graph", "raph-p", "ph", "tag", "zzz", "hite-gra"];
    let mut scanned = Vec::new();
    for p in patterns {
        let (_, r) =
            s.post("/v1/tables/names/query", json!({"filter": {"name": {"$contains": p}}, "limit": 1000})).await;
        scanned.push(r["documents"].clone());
    }
    let (st, _) = s.post("/v1/tables/names/indexes", json!({"name": "tri", "kind": "ngram", "fields": ["name"]})).await;
    assert_eq!(st, 202);
    s.index_settled("names", "tri").await;
    for (p, want) in patterns.iter().zip(&scanned) {
        let (_, r) =
            s.post("/v1/tables/names/query", json!({"filter": {"name": {"$contains": p}}, "limit": 1000})).await;
        assert_eq!(&r["documents"], want, "{p}");
        let (_, e) =
            s.post("/v1/tables/names/query", json!({"filter": {"name": {"$contains": p}}, "explain": true})).await;
        let strategy = e["plan"]["strategy"].as_str().unwrap();
        if p.chars().count() >= 3 {
            assert!(strategy == "index_scan" || strategy == "intersection", "{p}: {e}");
            assert!(e["plan"]["scans"][0]["condition"].as_str().unwrap().contains("trigram"), "{e}");
        } else {
            assert_eq!(strategy, "full_scan", "{p}: too short for trigrams");
        }
    }
    assert!(!scanned[0].as_array().unwrap().is_empty());
    // writes keep it exact
    let (st, _) = s.put("/v1/tables/names/documents/n001", json!({"name": "zzz-new"})).await;
    assert_eq!(st, 200);
    let (_, r) = s.post("/v1/tables/names/query", json!({"filter": {"name": {"$contains": "zzz"}}})).await;
    assert_eq!(r["documents"], json!([{"_id": "n001", "name": "zzz-new"}]));
    s.check_ok().await;
}

/// A search whose postings pass what the request's own thread reads (`INLINE_POSTING_BYTES`)
/// starts again on the blocking pool: a term in every one of 30,000 documents, searched without
/// a filter (inline first) and with one matching everything (the pool), answers the same, and
/// so do rare terms (inline).
#[tokio::test]
async fn a_search_of_many_postings_answers_as_one_of_few() {
    let s = TestServer::start().await;
    s.create_table("many").await;
    let (st, b) =
        s.post("/v1/tables/many/indexes", json!({"name": "ft", "kind": "fulltext", "fields": ["body"]})).await;
    assert!(st == 201 || st == 202, "{b}");
    let body: String = (0..30_000)
        .map(|i| {
            format!(
                "{}\n",
                json!({"_id": format!("d{i}"), "body": format!("common word{} rare{}", i % 7, i % 1000), "n": i})
            )
        })
        .collect();
    let r = s.raw(reqwest::Method::POST, "/v1/tables/many/import", "application/x-ndjson", body).await;
    assert_eq!((r.status.as_u16(), &r.body["inserted"]), (200, &json!(30_000)), "{}", r.body);
    for q in ["common", "common word3", "rare17", "\"common word5\"", "wor*"] {
        let plain = json!({"query": q, "limit": 20, "fields": ["_id"], "total": "exact"});
        let (st, inline) = s.post("/v1/tables/many/search", plain.clone()).await;
        assert_eq!(st, 200, "{inline}");
        let mut filtered = plain.clone();
        filtered["filter"] = json!({"n": {"$gte": 0}});
        let (st, pool) = s.post("/v1/tables/many/search", filtered).await;
        assert_eq!(st, 200, "{pool}");
        assert_eq!(inline, pool, "{q}");
        assert_eq!(inline["hits"].as_array().unwrap().len(), 20, "{q}: {inline}");
        // only `_id` asked for: the documents are not read, and say just that
        assert!(inline["hits"].as_array().unwrap().iter().all(|h| h["document"] == json!({"_id": h["_id"]})));
    }
    // one term: its document frequency is the exact count, however large
    let (_, r) = s.post("/v1/tables/many/search", json!({"query": "common", "limit": 1})).await;
    assert_eq!(r["total"], json!({"value": 30_000, "relation": "eq"}));
    // a union of 30,000: exact only when asked; by default at least 10,000, with the same hits
    let q = json!({"query": "common word3", "limit": 5, "fields": ["_id"]});
    let (_, default) = s.post("/v1/tables/many/search", q.clone()).await;
    assert_eq!(default["total"], json!({"value": 10_000, "relation": "gte"}), "{default}");
    let mut exact = q.clone();
    exact["total"] = json!("exact");
    let (_, exact) = s.post("/v1/tables/many/search", exact).await;
    assert_eq!(exact["total"], json!({"value": 30_000, "relation": "eq"}), "{exact}");
    assert_eq!(exact["hits"], default["hits"]);
    // an intersection counts until the threshold it is given
    let mut up_to = json!({"query": "common word3", "mode": "all", "limit": 3, "total": 100});
    let (_, few) = s.post("/v1/tables/many/search", up_to.clone()).await;
    assert_eq!(few["total"], json!({"value": 100, "relation": "gte"}), "{few}");
    up_to["total"] = json!(5000);
    let (_, all) = s.post("/v1/tables/many/search", up_to).await;
    assert_eq!(all["total"], json!({"value": 4286, "relation": "eq"}), "{all}");
    assert_eq!(all["hits"], few["hits"]);
    for bad in [json!("most"), json!(-1), json!(1.5)] {
        let (st, b) = s.post("/v1/tables/many/search", json!({"query": "common", "total": bad})).await;
        assert_eq!(st, 422, "{bad}: {b}");
    }
}

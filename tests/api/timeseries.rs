//! Time series over HTTP: JSON and line-protocol writes (escapes, every precision, bad lines with
//! their numbers and nothing written), the Influx-compatible paths and gzip bodies, reads,
//! aggregation edges, series by labels (selectors, grouping, the series listing), retention,
//! deletes and the errors. The retention task running by itself: `tasks.rs`.

use crate::common;
use common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

async fn lines(s: &TestServer, path: &str, body: &str) -> common::Reply {
    s.raw(Method::POST, path, "text/plain; charset=utf-8", body.to_owned()).await
}

async fn points(s: &TestServer, query: &str) -> Vec<(String, i64, f64)> {
    let (status, page) = s.get(&format!("/v1/timeseries/{query}")).await;
    assert_eq!(status, 200, "{page}");
    page["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["entity"].as_str().unwrap().to_owned(), p["ts"].as_i64().unwrap(), p["value"].as_f64().unwrap()))
        .collect()
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test]
async fn json_points_overwrite_and_read_back_with_tags_in_any_precision() {
    let s = TestServer::start().await;
    let body = json!({"points": [
        {"entity": "s1", "ts": 1000, "value": 1.5},
        {"entity": "s1", "ts": "1970-01-01T00:00:02Z", "value": 2.5, "tags": {"dc": "eu"}},
        {"entity": "s2", "ts": -1000, "value": -3},
        {"entity": "s1", "ts": 1000, "value": 9},
    ]});
    let (status, report) = s.post("/v1/timeseries/cpu/points", body).await;
    assert_eq!((status.as_u16(), report), (200, json!({"points": 3, "skipped_string_fields": 0})));
    assert_eq!(
        points(&s, "cpu/points").await,
        [("s1".into(), 1000, 9.0), ("s1".into(), 2000, 2.5), ("s2".into(), -1000, -3.0)]
    );
    let (_, page) = s.get("/v1/timeseries/cpu/points?entity=s1&from=2000&precision=ns").await;
    assert_eq!(
        page,
        json!({"points": [{"entity": "s1", "ts": 2_000_000_000i64, "value": 2.5, "tags": {"dc": "eu"}}], "cursor": null})
    );
    // an integer ts in seconds
    s.post("/v1/timeseries/cpu/points?precision=s", json!({"points": [{"entity": "s3", "ts": 3, "value": 1}]})).await;
    assert_eq!(points(&s, "cpu/points?entity=s3").await, [("s3".into(), 3000, 1.0)]);
    // the window: from inclusive, to exclusive, RFC 3339 or ms; desc order
    assert_eq!(points(&s, "cpu/points?from=1970-01-01T00:00:01Z&to=2000&order=desc").await, [("s1".into(), 1000, 9.0)]);
    let (_, mut list) = s.get("/v1/timeseries").await;
    // the bytes of the stored keys and values (check recounts them from the keys)
    let bytes = list["metrics"][0].as_object_mut().unwrap().remove("bytes").unwrap();
    assert!(bytes.as_u64().is_some_and(|b| b > 4 * 8), "{bytes}");
    assert_eq!(
        list["metrics"][0],
        json!({"name": "cpu", "points": 4, "series": 3, "first": -1000, "last": 3000, "retention": {"max_age": null}})
    );
    s.check_ok().await;
}

#[tokio::test]
async fn a_bad_point_writes_nothing_and_names_the_point() {
    let s = TestServer::start().await;
    let body = json!({"points": [
        {"entity": "a", "ts": 1, "value": 1},
        {"entity": "a", "ts": "noon", "value": 1},
        {"entity": "a\u{1}", "ts": 1, "value": 1},
    ]});
    let r = s.send(Method::POST, "/v1/timeseries/m/points", Some(&body), &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    let detail = r.body["detail"].as_str().unwrap();
    assert!(detail.contains("points[1]") && detail.contains("points[2]"), "{detail}");
    // a time that is neither an integer nor a string does not fit the body's shape
    let body = json!({"points": [{"entity": "a", "ts": 1.5, "value": 1}]});
    let r = s.send(Method::POST, "/v1/timeseries/m/points", Some(&body), &[]).await;
    assert!(r.is_problem(422, "invalid_body"), "{}", r.body);
    let r = s.send(Method::GET, "/v1/timeseries/m/points", None, &[]).await;
    assert!(r.is_problem(404, "metric_not_found"), "{}", r.body);
    let r = s
        .send(Method::POST, "/v1/timeseries/m/points", Some(&json!({"points": [{"entity": "a", "ts": 1}]})), &[])
        .await;
    assert!(r.is_problem(422, "invalid_body") || r.status == 422, "{}", r.body);
    let long = "x".repeat(1025);
    let r = s
        .send(
            Method::POST,
            "/v1/timeseries/m/points",
            Some(&json!({"points": [{"entity": long, "ts": 1, "value": 1}]})),
            &[],
        )
        .await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    let (_, list) = s.get("/v1/timeseries").await;
    assert_eq!(list, json!({"metrics": []}));
}

#[tokio::test]
async fn line_protocol_maps_tags_fields_and_escapes() {
    let s = TestServer::start().await;
    let body = "cpu,region=eu,host=h1 value=0.5,idle=97i,up=true,note=\"a b\" 1000000000\n\
                disk\\ io,path=C:\\\\data\\,x,k\\=1=v\\ w used=12u 2000000000\n\
                # a comment line\n\
                \n\
                cpu,host=h2 value=-1e3 3000000000\n";
    let r = lines(&s, "/v1/timeseries/write", body).await;
    assert_eq!((r.status.as_u16(), &r.body), (200, &json!({"points": 5, "skipped_string_fields": 1})));
    assert_eq!(
        points(&s, "cpu/points").await,
        [("host=h1,region=eu".into(), 1000, 0.5), ("host=h2".into(), 3000, -1000.0)]
    );
    assert_eq!(points(&s, "cpu.idle/points").await, [("host=h1,region=eu".into(), 1000, 97.0)]);
    assert_eq!(points(&s, "cpu.up/points").await, [("host=h1,region=eu".into(), 1000, 1.0)]);
    let r = s.send(Method::GET, "/v1/timeseries/cpu.note/points", None, &[]).await;
    assert!(r.is_problem(404, "metric_not_found"), "a string field is no metric: {}", r.body);
    // measurement "disk io"; tags path=`C:\data,x` and `k=1`=`v w`, sorted by key, with `\`, `,`
    // and `=` escaped in the entity (so no other tag set reads the same)
    assert_eq!(
        points(&s, &format!("{}/points", common::seg("disk io.used"))).await,
        [("k\\=1=v w,path=C:\\\\data\\,x".into(), 2000, 12.0)]
    );
    let (_, listed) = s.get(&format!("/v1/timeseries/{}/series", common::seg("disk io.used"))).await;
    assert_eq!(listed["series"][0]["labels"], json!({"k=1": "v w", "path": "C:\\data,x"}));
    s.check_ok().await;
}

#[tokio::test]
async fn line_protocol_precisions_and_the_server_time() {
    let s = TestServer::start().await;
    for (precision, ts) in [("ns", "5000000"), ("us", "5000"), ("ms", "5"), ("s", "1"), ("n", "6000000"), ("u", "7000")]
    {
        let r = lines(
            &s,
            &format!("/v1/timeseries/write?precision={precision}"),
            &format!("p,unit={precision} value=1 {ts}"),
        )
        .await;
        assert_eq!(r.status, 200, "{precision}: {}", r.body);
    }
    let got: Vec<(String, i64)> =
        points(&s, "p/points?precision=us").await.into_iter().map(|(e, t, _)| (e, t)).collect();
    assert_eq!(
        got,
        [
            ("unit=ms".into(), 5000),
            ("unit=n".into(), 6000),
            ("unit=ns".into(), 5000),
            ("unit=s".into(), 1_000_000),
            ("unit=u".into(), 7000),
            ("unit=us".into(), 5000),
        ]
    );
    let before = now_ms();
    assert_eq!(lines(&s, "/v1/timeseries/write", "now value=1").await.status, 200);
    let after = now_ms();
    let got = points(&s, "now/points").await;
    assert!(got[0].1 >= before && got[0].1 <= after, "{got:?} not within {before}..{after}");
    let r = lines(&s, "/v1/timeseries/write?precision=fortnights", "p value=1 1").await;
    assert!(r.is_problem(400, "invalid_query"), "{}", r.body);
}

#[tokio::test]
async fn bad_lines_are_all_reported_by_number_and_nothing_is_written() {
    let s = TestServer::start().await;
    let body =
        "good value=1 1\nno_fields\ngood value=2 2\nbad value=1 notatime\n\nbad,tag value=1 3\ngood value=nan 4\n";
    let r = lines(&s, "/v1/timeseries/write", body).await;
    assert!(r.is_problem(400, "invalid_line_protocol"), "{}", r.body);
    let numbers: Vec<i64> = r.body["lines"].as_array().unwrap().iter().map(|l| l["line"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [2, 4, 6, 7]);
    assert!(r.body["lines"].as_array().unwrap().iter().all(|l| l["error"].as_str().is_some_and(|e| !e.is_empty())));
    assert!(r.body["detail"].as_str().unwrap().contains("line 2"));
    let r = s.send(Method::GET, "/v1/timeseries/good/points", None, &[]).await;
    assert!(r.is_problem(404, "metric_not_found"), "nothing of the body was written: {}", r.body);
    let r = s.raw(Method::POST, "/v1/timeseries/write", "text/plain", vec![0xff, 0xfe]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    for empty in ["", "\n\n", "# only a comment\n"] {
        let r = lines(&s, "/write", empty).await;
        assert!(r.is_influx_v1_error(400, "invalid_request"), "{empty:?}: {}", r.body);
    }
}

#[tokio::test]
async fn influx_clients_write_at_their_own_paths() {
    let s = TestServer::start().await;
    for method in [Method::GET, Method::HEAD] {
        let r = s.send(method, "/ping", None, &[]).await;
        assert_eq!(r.status, 204);
        assert_eq!((r.header("x-influxdb-version"), r.header("x-influxdb-build")), (Some("1.8.10"), Some("OSS")));
    }
    // db= and bucket= name the database (InfluxDB's answer to one that does not exist: 404)
    let r = lines(&s, "/write?db=telegraf&precision=s", "mem,host=h1 used_percent=42.5 10").await;
    assert!(r.is_influx_v1_error(404, "database_not_found"), "{}", r.body);
    assert_eq!(r.body["error"], "database \"telegraf\" does not exist");
    let r = lines(&s, "/api/v2/write?bucket=telegraf&precision=s", "mem,host=h1 used_percent=42.5 10").await;
    assert!(r.is_influx_v2_error(404, "not found", "database_not_found"), "{}", r.body);
    assert_eq!(r.body["message"], "database \"telegraf\" does not exist");
    let r = lines(&s, "/write?db=default&rp=autogen&precision=s", "mem,host=h1 used_percent=42.5 10").await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = s
        .client
        .post(format!("{}/api/v2/write?org=o&bucket=default&precision=ms", s.base))
        .header("authorization", "Token secret")
        .body("mem,host=h1 used_percent=43.5 20000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        points(&s, "mem.used_percent/points").await,
        [("host=h1".into(), 10_000, 42.5), ("host=h1".into(), 20_000, 43.5)]
    );
    // errors in the shapes Influx clients read, with the bad lines
    let r = lines(&s, "/api/v2/write?bucket=default", "mem used_percent=\n").await;
    assert!(r.is_influx_v2_error(400, "invalid", "invalid_line_protocol"), "{}", r.body);
    assert_eq!(r.body["lines"][0]["line"], 1, "{}", r.body);
    let r = lines(&s, "/write", "mem used_percent=1\nmem\n").await;
    assert!(r.is_influx_v1_error(400, "invalid_line_protocol"), "{}", r.body);
    assert!(r.body["error"].as_str().unwrap().contains("line 2"), "{}", r.body);
    let r = lines(&s, "/write?precision=fortnights", "mem used_percent=1\n").await;
    assert!(r.is_influx_v1_error(400, "invalid_query"), "{}", r.body);
    // a method the route does not take (answered by the router)
    let r = s.send(Method::GET, "/api/v2/write", None, &[]).await;
    assert!(r.is_influx_v2_error(405, "method not allowed", "method_not_allowed"), "{}", r.body);
    // the same errors elsewhere stay problems
    let r = lines(&s, "/v1/timeseries/write", "mem\n").await;
    assert!(r.is_problem(400, "invalid_line_protocol"), "{}", r.body);
}

#[tokio::test]
async fn telegraf_s_gzip_bodies_are_accepted() {
    use std::io::Write;
    let s = TestServer::start().await;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for i in 0..1000 {
        writeln!(gz, "disk,host=h1 used={i} {}", i * 1_000_000_000i64).unwrap();
    }
    let body = gz.finish().unwrap();
    let r = s
        .client
        .post(format!("{}/write?precision=ns", s.base))
        .header("content-encoding", "gzip")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let got = points(&s, "disk.used/points?limit=2000").await;
    assert_eq!(got.len(), 1000);
    assert_eq!(got[999], ("host=h1".into(), 999_000, 999.0));
    // a body that claims gzip and is not: a clear 400, nothing written
    let r = s
        .client
        .post(format!("{}/write", s.base))
        .header("content-encoding", "gzip")
        .body("disk,host=h2 used=1 1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let error: serde_json::Value = r.json().await.unwrap();
    assert!(error["error"].as_str().is_some_and(|e| !e.is_empty()), "{error}");
    assert_eq!(s.get("/v1/timeseries/disk.used/series").await.1["series"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn series_by_labels_select_group_and_list() {
    let s = TestServer::start().await;
    let body = "cpu,host=a,region=eu value=1 60000000000\n\
                cpu,host=b,region=eu value=2 60000000000\n\
                cpu,host=a,region=us value=4 60000000000\n\
                cpu,host=c value=8 120000000000\n\
                cpu,host=a\\,region=eu value=16 60000000000\n";
    assert_eq!(lines(&s, "/v1/timeseries/write", body).await.status, 200);
    // JSON writes name the same series by the same entity; an entity not of the k=v form has no labels
    let (st, _) = s
        .post(
            "/v1/timeseries/cpu/points",
            json!({"points": [{"entity": "host=b,region=eu", "ts": 60000, "value": 32}, {"entity": "box", "ts": 0, "value": 64}]}),
        )
        .await;
    assert_eq!(st, 200);
    let m = |sel: &str| common::seg(sel);
    // the series listing: a tag value holding `,` and `=` is its own series, escaped in its entity
    let (st, listed) = s.get(&format!("/v1/timeseries/cpu/series?match={}", m("{host=~\"a.*\"}"))).await;
    assert_eq!(st, 200, "{listed}");
    let entities: Vec<&str> =
        listed["series"].as_array().unwrap().iter().map(|e| e["entity"].as_str().unwrap()).collect();
    assert_eq!(entities, ["host=a,region=eu", "host=a,region=us", "host=a\\,region\\=eu"]);
    assert_eq!(listed["series"][2]["labels"], json!({"host": "a,region=eu"}));
    assert_eq!(listed["series"][0]["points"], 1);
    let (_, all) = s.get("/v1/timeseries/cpu/series?limit=2").await;
    assert_eq!(all["series"].as_array().unwrap().len(), 2);
    let next = all["cursor"].as_str().unwrap();
    let (_, rest) = s.get(&format!("/v1/timeseries/cpu/series?limit=10&cursor={next}")).await;
    assert_eq!(rest["series"].as_array().unwrap().len(), 4, "{rest}");
    assert_eq!(rest["series"][3]["entity"], "host=c");
    assert_eq!(all["series"][0], json!({"entity": "box", "labels": {}, "points": 1, "first": 0, "last": 0}));
    // points of the selected series only
    let got = points(&s, &format!("cpu/points?match={}", m("{region=\"eu\",host!=\"a\"}"))).await;
    assert_eq!(got, [("host=b,region=eu".into(), 60_000, 32.0)]);
    // a missing label is the empty value
    let got = points(&s, &format!("cpu/points?match={}", m("{region=\"\"}"))).await;
    assert_eq!(got.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(), ["box", "host=a\\,region\\=eu", "host=c"]);
    // grouped by labels: one list per combination of their values, a missing label left out
    let (st, by) = s.get("/v1/timeseries/cpu/aggregate?step=1m&fn=sum&by=region").await;
    assert_eq!(st, 200, "{by}");
    assert_eq!(
        by,
        json!({"groups": [
            {"labels": {}, "buckets": [{"ts": 0, "value": 64.0}, {"ts": 60000, "value": 16.0}, {"ts": 120000, "value": 8.0}]},
            {"labels": {"region": "eu"}, "buckets": [{"ts": 60000, "value": 33.0}]},
            {"labels": {"region": "us"}, "buckets": [{"ts": 60000, "value": 4.0}]},
        ]})
    );
    let q = format!("/v1/timeseries/cpu/aggregate?step=1m&fn=count&by=host,region&match={}", m("{host=\"a\"}"));
    let (_, by) = s.get(&q).await;
    let labels: Vec<&Value> = by["groups"].as_array().unwrap().iter().map(|g| &g["labels"]).collect();
    assert_eq!(labels, [&json!({"host": "a", "region": "eu"}), &json!({"host": "a", "region": "us"})]);
    let (_, one) = s.get(&format!("/v1/timeseries/cpu/aggregate?step=1m&fn=sum&match={}", m("host='b'"))).await;
    assert_eq!(one, json!({"buckets": [{"ts": 60000, "value": 32.0}]}));
    // errors
    for (query, says) in [
        ("match=%7Bhost%3Da%7D", "match: expected a quoted value"),
        ("match=%7Bhost%3D~%22(%22%7D", "match: host=~"),
        ("by=region&group_by=entity", "not both"),
        ("by=region,,host", "by:"),
    ] {
        let (st, body) = s.get(&format!("/v1/timeseries/cpu/aggregate?step=1m&{query}")).await;
        assert_eq!(st, 400, "{query}: {body}");
        assert!(body["detail"].as_str().unwrap().contains(says), "{query}: {body}");
    }
    let (st, body) = s.get("/v1/timeseries/cpu/series?match=%7Bx").await;
    assert_eq!((st.as_u16(), &body["code"]), (400, &json!("invalid_request")), "{body}");
    assert_eq!(s.get("/v1/timeseries/nope/series").await.0, 404);
    s.check_ok().await;
}

#[tokio::test]
async fn pages_follow_the_cursor_across_series_in_both_orders() {
    let s = TestServer::start().await;
    let mut body = String::new();
    for e in ["a", "b", "c"] {
        for t in 0..7 {
            body.push_str(&format!("m,e={e} value={t} {t}\n"));
        }
    }
    lines(&s, "/v1/timeseries/write?precision=ms", &body).await;
    for order in ["asc", "desc"] {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut q = format!("/v1/timeseries/m/points?limit=4&order={order}&from=1&to=6");
            if let Some(c) = &cursor {
                q.push_str(&format!("&cursor={c}"));
            }
            let (status, page) = s.get(&q).await;
            assert_eq!(status, 200, "{page}");
            for p in page["points"].as_array().unwrap() {
                all.push((p["entity"].as_str().unwrap().to_owned(), p["ts"].as_i64().unwrap()));
            }
            match page["cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        let mut want: Vec<(String, i64)> =
            ["a", "b", "c"].iter().flat_map(|e| (1..6).map(move |t| (format!("e={e}"), t))).collect();
        if order == "desc" {
            want.reverse();
        }
        assert_eq!(all, want, "{order}");
    }
    let (_, page) = s.get("/v1/timeseries/m/points?limit=2").await;
    let stale = page["cursor"].as_str().unwrap();
    let r = s.send(Method::GET, &format!("/v1/timeseries/m/points?limit=2&order=desc&cursor={stale}"), None, &[]).await;
    assert!(r.is_problem(400, "invalid_cursor"), "{}", r.body);
    for bad in ["limit=0", "limit=100001", "from=yesterday", "order=sideways"] {
        let r = s.send(Method::GET, &format!("/v1/timeseries/m/points?{bad}"), None, &[]).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
}

#[tokio::test]
async fn aggregation_edges_empty_buckets_and_errors() {
    let s = TestServer::start().await;
    // one point on each side of a bucket edge, one before the epoch, a gap of empty buckets
    let body = json!({"points": [
        {"entity": "a", "ts": 59_999, "value": 1}, {"entity": "a", "ts": 60_000, "value": 2},
        {"entity": "b", "ts": 60_000, "value": 4}, {"entity": "a", "ts": -1, "value": 8},
        {"entity": "a", "ts": 600_000, "value": 16},
    ]});
    s.post("/v1/timeseries/m/points", body).await;
    let buckets = |v: &Value| -> Vec<(i64, f64)> {
        v["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["ts"].as_i64().unwrap(), b["value"].as_f64().unwrap()))
            .collect()
    };
    let (_, all) = s.get("/v1/timeseries/m/aggregate?step=1m&fn=sum").await;
    assert_eq!(buckets(&all), [(-60_000, 8.0), (0, 1.0), (60_000, 6.0), (600_000, 16.0)]);
    let (_, a) = s.get("/v1/timeseries/m/aggregate?step=1m&fn=count&entity=a&from=0&to=600000").await;
    assert_eq!(buckets(&a), [(0, 1.0), (60_000, 1.0)]);
    let (_, last) = s.get("/v1/timeseries/m/aggregate?step=1m&fn=last&from=60000").await;
    assert_eq!(buckets(&last), [(60_000, 4.0), (600_000, 16.0)], "a tie goes to the later entity");
    let (_, first) = s.get("/v1/timeseries/m/aggregate?step=1m&fn=first&from=60000").await;
    assert_eq!(buckets(&first), [(60_000, 2.0), (600_000, 16.0)], "a tie goes to the earlier entity");
    let (_, grouped) = s.get("/v1/timeseries/m/aggregate?step=10m&fn=max&group_by=entity").await;
    assert_eq!(
        grouped,
        json!({"series": [
            {"entity": "a", "buckets": [{"ts": -600000, "value": 8.0}, {"ts": 0, "value": 2.0}, {"ts": 600000, "value": 16.0}]},
            {"entity": "b", "buckets": [{"ts": 0, "value": 4.0}]}]})
    );
    let (_, empty) = s.get("/v1/timeseries/m/aggregate?step=1m&from=5&to=5").await;
    assert_eq!(empty, json!({"buckets": []}));
    for (query, status, code) in [
        ("step=0s", 400, "invalid_request"),
        ("step=1y", 400, "invalid_request"),
        ("step=1m&fn=median", 400, "invalid_query"),
        ("step=1m&group_by=host", 400, "invalid_query"),
        ("fn=avg", 400, "invalid_query"),
        ("step=1ms&from=-100000000&to=100000000", 200, ""),
    ] {
        let r = s.send(Method::GET, &format!("/v1/timeseries/m/aggregate?{query}"), None, &[]).await;
        if status == 200 {
            assert_eq!(r.status, 200, "{query}: {}", r.body);
        } else {
            assert!(r.is_problem(status, code), "{query}: {}", r.body);
        }
    }
    // the ends of the time range: buckets whose start does not fit an i64 in ns still answer
    let body =
        json!({"points": [{"entity": "x", "ts": i64::MIN, "value": 1}, {"entity": "x", "ts": i64::MAX, "value": 2}]});
    assert_eq!(s.post("/v1/timeseries/edge/points?precision=ns", body).await.0, 200);
    for step in ["10000w", "7ms", "1ms"] {
        let (status, got) = s.get(&format!("/v1/timeseries/edge/aggregate?step={step}&fn=sum")).await;
        assert_eq!(status, 200, "{step}: {got}");
        assert_eq!(got["buckets"].as_array().unwrap().len(), 2, "{step}: {got}");
    }
    let (_, got) = s.get("/v1/timeseries/edge/aggregate?step=1ms&fn=sum").await;
    assert_eq!(got["buckets"][0]["ts"], i64::MIN.div_euclid(1_000_000), "{got}");
    let r = s.send(Method::GET, "/v1/timeseries/nope/aggregate?step=1m", None, &[]).await;
    assert!(r.is_problem(404, "metric_not_found"), "{}", r.body);
}

#[tokio::test]
async fn more_buckets_than_allowed_is_refused() {
    let s = TestServer::start().await;
    let mut body = String::with_capacity(2_000_000);
    for t in 0..100_001 {
        body.push_str(&format!("dense value=1 {t}\n"));
    }
    assert_eq!(lines(&s, "/v1/timeseries/write?precision=ms", &body).await.status, 200);
    let r = s.send(Method::GET, "/v1/timeseries/dense/aggregate?step=1ms", None, &[]).await;
    assert!(r.is_problem(422, "too_many_buckets"), "{}", r.body);
    // a series this long is scanned in two halves on two threads, split at a bucket edge
    let (status, ok) = s.get("/v1/timeseries/dense/aggregate?step=1s&fn=count").await;
    assert_eq!(status, 200);
    let counts: Vec<(i64, f64)> = ok["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["ts"].as_i64().unwrap(), b["value"].as_f64().unwrap()))
        .collect();
    let want: Vec<(i64, f64)> = (0..=100).map(|i| (i * 1000, if i == 100 { 1.0 } else { 1000.0 })).collect();
    assert_eq!(counts, want);
    let (_, window) = s.get("/v1/timeseries/dense/aggregate?step=7s&fn=first&from=1234&to=99999").await;
    let firsts: Vec<i64> = window["buckets"].as_array().unwrap().iter().map(|b| b["ts"].as_i64().unwrap()).collect();
    let want: Vec<i64> = (0..=14).map(|i| i * 7000).collect();
    assert_eq!(firsts, want);
}

#[tokio::test]
async fn retention_and_deletes() {
    let s = TestServer::start().await;
    let r = s.send(Method::GET, "/v1/timeseries/r/retention", None, &[]).await;
    assert!(r.is_problem(404, "metric_not_found"), "{}", r.body);
    let (status, set) = s.put("/v1/timeseries/r/retention", json!({"max_age": "168h"})).await;
    assert_eq!((status.as_u16(), set), (200, json!({"max_age": "1w"})));
    assert_eq!(s.get("/v1/timeseries/r/retention").await.1, json!({"max_age": "1w"}));
    let r = s.send(Method::PUT, "/v1/timeseries/r/retention", Some(&json!({"max_age": "1 year"})), &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    assert_eq!(s.put("/v1/timeseries/r/retention", json!({"max_age": null})).await.1, json!({"max_age": null}));

    let body = json!({"points": [
        {"entity": "a", "ts": 1, "value": 1}, {"entity": "a", "ts": 2, "value": 1}, {"entity": "b", "ts": 1, "value": 1}]});
    s.post("/v1/timeseries/r/points", body).await;
    assert_eq!(s.delete("/v1/timeseries/r?entity=a").await, (reqwest::StatusCode::OK, json!({"points": 2})));
    assert_eq!(points(&s, "r/points").await, [("b".into(), 1, 1.0)]);
    assert_eq!(s.delete("/v1/timeseries/r").await, (reqwest::StatusCode::OK, json!({"points": 1})));
    let r = s.send(Method::DELETE, "/v1/timeseries/r", None, &[]).await;
    assert!(r.is_problem(404, "metric_not_found"), "{}", r.body);
    assert_eq!(s.get("/v1/timeseries").await.1, json!({"metrics": []}));
    s.check_ok().await;
}

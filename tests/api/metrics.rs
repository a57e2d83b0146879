//! `GET /metrics`: a started server is scraped after requests, writes, an index build and the
//! periodic tasks' first runs; the answer is parsed strictly as OpenMetrics text (every line a
//! `# HELP`/`# TYPE`/`# UNIT` comment or a sample of the family declared above it, `# EOF` last,
//! histogram buckets cumulative with `_count` equal to the `+Inf` bucket) and the values those
//! requests caused are checked. A second server in the same process sees only its own. Asked for
//! `text/plain`, the server answers the Prometheus text format 0.0.4, which `promtool` checks.

use crate::common;
use common::TestServer;
use mosaicdb::storage::Durability;
use reqwest::Method;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// One sample: its name, labels and value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// One metric family: type, help, unit and samples.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    help: Option<String>,
    unit: Option<String>,
    samples: Vec<Sample>,
}

/// A parsed exposition.
#[derive(Debug, Default)]
struct Exposition {
    families: BTreeMap<String, Family>,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(name: &str) -> bool {
    valid_name(name) && !name.contains(':')
}

/// The suffixes a sample of a family of this type may add to the family's name.
fn suffixes(kind: &str) -> &'static [&'static str] {
    match kind {
        "counter" => &["_total", "_created"],
        "histogram" => &["_bucket", "_sum", "_count", "_created"],
        "info" => &["_info"],
        _ => &[""],
    }
}

/// `{a="x",b="y\"z"}` → the labels, and the rest of the line after `}`.
fn parse_labels(text: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = text.strip_prefix('{').ok_or("no {")?;
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = rest.find('=').ok_or_else(|| format!("no = in {rest:?}"))?;
        let name = &rest[..eq];
        if !valid_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..].strip_prefix('"').ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().ok_or("unterminated label value")? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or("dangling escape")?.1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    other => return Err(format!("bad escape \\{other}")),
                },
                (_, '\n') => return Err("newline in a label value".into()),
                (_, c) => value.push(c),
            }
        };
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &rest[end + 1..];
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
            if rest.starts_with('}') {
                return Err("trailing comma".into());
            }
        } else if !rest.starts_with('}') {
            return Err(format!("expected , or }} at {rest:?}"));
        }
    }
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ if text.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') => {
            text.parse().map_err(|e| format!("bad value {text:?}: {e}"))
        }
        _ => Err(format!("bad value {text:?}")),
    }
}

/// Parses OpenMetrics text strictly (the subset a scrape of this server may hold: no exemplars,
/// no timestamps) and checks what the format promises.
fn parse(text: &str) -> Result<Exposition, String> {
    let mut out = Exposition::default();
    let body = text.strip_suffix("# EOF\n").ok_or("the exposition must end with `# EOF`")?;
    let mut current: Option<String> = None;
    let mut seen = BTreeSet::new();
    for (n, line) in body.split_terminator('\n').enumerate() {
        let fail = |why: String| format!("line {}: {why}: {line:?}", n + 1);
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            let (keyword, name, rest) = (parts.next(), parts.next(), parts.next());
            let (Some(keyword), Some(name), Some(rest)) = (keyword, name, rest) else {
                return Err(fail("a comment must be `# KEYWORD name text`".into()));
            };
            if !valid_name(name) {
                return Err(fail(format!("bad metric name {name:?}")));
            }
            if current.as_deref() != Some(name) {
                // a new family: HELP/TYPE/UNIT of one family come together, each family once
                if out.families.contains_key(name) {
                    return Err(fail(format!("family {name} declared twice")));
                }
                out.families.insert(name.to_owned(), Family { kind: "unknown".into(), ..Family::default() });
                current = Some(name.to_owned());
            }
            let Some(family) = out.families.get_mut(name) else { unreachable!() };
            if !family.samples.is_empty() {
                return Err(fail("metadata after samples".into()));
            }
            match keyword {
                "HELP" => family.help = Some(rest.to_owned()),
                "TYPE" if ["counter", "gauge", "histogram", "info", "unknown"].contains(&rest) => {
                    family.kind = rest.to_owned()
                }
                "UNIT" if name.ends_with(&format!("_{rest}")) => family.unit = Some(rest.to_owned()),
                _ => return Err(fail("unknown comment, type, or a unit the name does not end with".into())),
            }
            continue;
        }
        let (name_end, has_labels) = match line.find(['{', ' ']) {
            Some(i) => (i, line.as_bytes()[i] == b'{'),
            None => return Err(fail("a sample needs a value".into())),
        };
        let name = &line[..name_end];
        let (labels, rest) = if has_labels {
            parse_labels(&line[name_end..]).map_err(fail)?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let value = rest.strip_prefix(' ').ok_or_else(|| fail("no space before the value".into()))?;
        let value = parse_value(value).map_err(fail)?;
        let Some(family_name) = current.clone() else { return Err(fail("a sample before any family".into())) };
        let family = out.families.get_mut(&family_name).ok_or_else(|| fail("no family".into()))?;
        let suffix =
            name.strip_prefix(family_name.as_str()).ok_or_else(|| fail(format!("not in family {family_name}")))?;
        if !suffixes(&family.kind).contains(&suffix) {
            return Err(fail(format!("suffix {suffix:?} is not one of a {}", family.kind)));
        }
        if family.kind == "counter" && (value.is_nan() || value < 0.0) {
            return Err(fail("a counter is never negative".into()));
        }
        if !seen.insert((name.to_owned(), labels.clone())) {
            return Err(fail("the same sample twice".into()));
        }
        family.samples.push(Sample { name: name.to_owned(), labels, value });
    }
    for (name, family) in &out.families {
        if family.kind == "histogram" {
            check_histogram(name, family)?;
        }
    }
    Ok(out)
}

/// One histogram series: its buckets (`le`, cumulative count), `_count` and `_sum`.
type HistogramSeries = (Vec<(f64, f64)>, Option<f64>, Option<f64>);

/// Per label set: buckets in increasing `le` with non-decreasing counts, the last `+Inf`, and
/// `_count` equal to it.
fn check_histogram(name: &str, family: &Family) -> Result<(), String> {
    let mut series: BTreeMap<BTreeMap<String, String>, HistogramSeries> = BTreeMap::new();
    for s in &family.samples {
        let mut labels = s.labels.clone();
        let le = labels.remove("le");
        let entry = series.entry(labels).or_default();
        match (&s.name[name.len()..], le) {
            ("_bucket", Some(le)) => entry.0.push((parse_value(&le)?, s.value)),
            ("_count", None) => entry.1 = Some(s.value),
            ("_sum", None) => entry.2 = Some(s.value),
            (suffix, le) => return Err(format!("{name}: unexpected {suffix} with le {le:?}")),
        }
    }
    for (labels, (buckets, count, sum)) in series {
        let context = format!("{name}{labels:?}");
        if !buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1) {
            return Err(format!("{context}: buckets not cumulative in increasing le: {buckets:?}"));
        }
        let last = buckets.last().ok_or(format!("{context}: no buckets"))?;
        if last.0 != f64::INFINITY || Some(last.1) != count {
            return Err(format!("{context}: the +Inf bucket {last:?} must be last and equal _count {count:?}"));
        }
        if !sum.is_some_and(|s| s >= 0.0) {
            return Err(format!("{context}: no _sum"));
        }
    }
    Ok(())
}

impl Exposition {
    fn family(&self, name: &str) -> &Family {
        self.families.get(name).unwrap_or_else(|| panic!("no family {name}"))
    }

    /// The value of the sample `name` whose labels are exactly `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        self.families.values().flat_map(|f| &f.samples).find(|s| s.name == name && s.labels == want).map(|s| s.value)
    }

    fn requests(&self, method: &str, route: &str, status: &str) -> Option<f64> {
        self.value("mosaicdb_http_requests_total", &[("method", method), ("route", route), ("status", status)])
    }

    fn duration_count(&self, method: &str, route: &str, status: &str) -> Option<f64> {
        let labels = [("method", method), ("route", route), ("status", status)];
        self.value("mosaicdb_http_request_duration_seconds_count", &labels)
    }
}

async fn scrape(s: &TestServer) -> Exposition {
    let resp = s.client.get(format!("{}/metrics", s.base)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    let text = resp.text().await.unwrap();
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

const FAMILIES: [&str; 13] =
    ["entity", "idx", "ridx", "sidx", "ftidx", "ftstat", "graph", "vec", "ts", "ttlidx", "view", "changefeed", "meta"];

#[tokio::test]
async fn a_scrape_parses_and_counts_what_the_requests_did() {
    let s = TestServer::start_with(|c| c.storage.durability = Durability::Sync).await;
    s.create_table("people").await;
    for id in ["a", "b", "c"] {
        let (status, body) = s.put(&format!("/v1/tables/people/documents/{id}"), json!({"age": 30})).await;
        assert_eq!(status, 201, "{body}");
    }
    assert_eq!(s.get("/v1/tables/people/documents/a").await.0, 200);
    assert_eq!(s.get("/v1/tables/people/documents/b").await.0, 200);
    assert_eq!(s.get("/v1/tables/people/documents/nobody").await.0, 404);
    assert_eq!(s.get("/no/such/route").await.0, 404);
    assert_eq!(s.get("/another/unknown/path").await.0, 404);
    assert_eq!(s.send(Method::DELETE, "/v1/tables", None, &[]).await.status, 405);
    // an index over existing documents: built in the background
    let (status, body) =
        s.post("/v1/tables/people/indexes", json!({"name": "by_age", "kind": "hash", "fields": ["age"]})).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(s.index_settled("people", "by_age").await["state"], "ready");

    // the periodic tasks run once at start; wait until both have reported (scraping at least
    // twice, so that a scrape is counted)
    scrape(&s).await;
    let mut m = scrape(&s).await;
    for _ in 0..500 {
        let runs = |task| m.value("mosaicdb_task_runs_total", &[("task", task)]).unwrap_or(0.0);
        if runs("ttl_sweep") >= 1.0 && runs("retention") >= 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        m = scrape(&s).await;
    }

    // requests by route template and status; a histogram per series with the same count
    let doc = "/v1/tables/{table}/documents/{id}";
    for (method, route, status, n) in [
        ("POST", "/v1/tables", "201", 1.0),
        ("PUT", doc, "201", 3.0),
        ("GET", doc, "200", 2.0),
        ("GET", doc, "404", 1.0),
        ("GET", "unmatched", "404", 2.0),
        ("DELETE", "/v1/tables", "405", 1.0),
        ("POST", "/v1/tables/{table}/indexes", "202", 1.0),
    ] {
        assert_eq!(m.requests(method, route, status), Some(n), "{method} {route} {status}");
        assert_eq!(m.duration_count(method, route, status), Some(n), "{method} {route} {status}");
    }
    assert_eq!(m.family("mosaicdb_http_request_duration_seconds").kind, "histogram");
    assert_eq!(m.family("mosaicdb_http_request_duration_seconds").unit.as_deref(), Some("seconds"));
    // the scrape under way is the one request in flight
    assert_eq!(m.value("mosaicdb_http_requests_in_flight", &[]), Some(1.0));
    // earlier scrapes count like any request
    assert!(m.requests("GET", "/metrics", "200").is_some_and(|n| n >= 1.0));
    // the connections: the scrape's among the open ones, none closed by a timeout or refused
    assert!(m.value("mosaicdb_http_connections", &[]).is_some_and(|n| n >= 1.0));
    assert!(m.value("mosaicdb_http_connections_max", &[]).is_some_and(|n| n >= 100.0));
    assert!(m.value("mosaicdb_http_connections_accepted_total", &[]).is_some_and(|n| n >= 1.0));
    for (family, label) in [("timed_out", ("phase", "header")), ("timed_out", ("phase", "idle"))]
        .into_iter()
        .chain([("refused", ("reason", "accept_error")), ("refused", ("reason", "tls_handshake"))])
    {
        assert_eq!(m.value(&format!("mosaicdb_http_connections_{family}_total"), &[label]), Some(0.0), "{family}");
    }

    // every acknowledged write (table, 3 documents, index definition) was fsynced before the next
    // was sent, so each took a group and an fsync of its own; every fsynced group wrote
    let (groups, writes, fsyncs) = (
        m.value("mosaicdb_storage_write_groups_total", &[]).unwrap(),
        m.value("mosaicdb_storage_writes_total", &[]).unwrap(),
        m.value("mosaicdb_storage_fsyncs_total", &[]).unwrap(),
    );
    assert!(fsyncs >= 5.0 && writes >= fsyncs && groups >= fsyncs, "{groups} {writes} {fsyncs}");
    assert!(m.value("mosaicdb_storage_fsync_seconds_total", &[]).is_some_and(|t| t > 0.0));
    for family in FAMILIES {
        assert!(m.value("mosaicdb_storage_disk_bytes", &[("family", family)]).is_some(), "{family}");
        assert!(m.value("mosaicdb_storage_keys", &[("family", family)]).is_some(), "{family}");
    }
    assert!(m.value("mosaicdb_storage_keys", &[("family", "entity")]).is_some_and(|n| n >= 3.0));
    assert!(m.value("mosaicdb_storage_keys", &[("family", "idx")]).is_some_and(|n| n >= 3.0));
    assert_eq!(m.value("mosaicdb_storage_journal_files", &[]), Some(1.0));
    assert_eq!(m.value("mosaicdb_storage_cache_capacity_bytes", &[]), Some((16u64 << 20) as f64));
    assert_eq!(m.value("mosaicdb_writable", &[]), Some(1.0));
    assert_eq!(m.value("mosaicdb_tables", &[]), Some(1.0));
    // three puts, three change events
    assert_eq!(m.value("mosaicdb_changefeed_last_seq", &[]), Some(3.0));
    assert_eq!(m.value("mosaicdb_changefeed_events", &[]), Some(3.0));
    assert!(m.value("mosaicdb_changefeed_disk_bytes", &[]).is_some());
    assert_eq!(m.value("mosaicdb_build_info", &[("version", env!("CARGO_PKG_VERSION"))]), Some(1.0));

    // the index is ready (no build progress left), the tasks ran without errors
    for (state, v) in [("building", 0.0), ("ready", 1.0), ("failed", 0.0)] {
        let labels = [("table", "people"), ("index", "by_age"), ("kind", "hash"), ("state", state)];
        assert_eq!(m.value("mosaicdb_index_state", &labels), Some(v), "{state}");
    }
    assert!(m.family("mosaicdb_index_build_progress_ratio").samples.is_empty());
    for task in ["ttl_sweep", "retention"] {
        assert!(m.value("mosaicdb_task_runs_total", &[("task", task)]).is_some_and(|n| n >= 1.0), "{task}");
        assert_eq!(m.value("mosaicdb_task_errors_total", &[("task", task)]), Some(0.0));
        assert_eq!(m.value("mosaicdb_task_interval_seconds", &[("task", task)]), Some(60.0));
        assert!(m.value("mosaicdb_task_duration_seconds_total", &[("task", task)]).is_some());
    }

    // a second server in this process counts only its own requests
    let other = TestServer::start().await;
    let o = scrape(&other).await;
    assert_eq!(o.requests("PUT", doc, "201"), None);
    assert_eq!(o.value("mosaicdb_tables", &[]), Some(0.0));
    assert_eq!(scrape(&s).await.requests("PUT", doc, "201"), Some(3.0));
}

/// Label values are escaped: a table name with a quote and a backslash reads back.
#[tokio::test]
async fn odd_table_names_are_escaped_in_labels() {
    let s = TestServer::start().await;
    let name = "we\"ird\\ta ble";
    let (status, body) = s.post("/v1/tables", json!({"name": name})).await;
    assert_eq!(status, 201, "{body}");
    s.put(&format!("/v1/tables/{}/documents/x", common::seg(name)), json!({"v": 1})).await;
    let path = format!("/v1/tables/{}/indexes", common::seg(name));
    let (status, body) = s.post(&path, json!({"name": "by\"v", "kind": "range", "fields": ["v"]})).await;
    assert!(status == 201 || status == 202, "{body}");
    s.index_settled(&common::seg(name), &common::seg("by\"v")).await;
    let m = scrape(&s).await;
    let labels = [("table", name), ("index", "by\"v"), ("kind", "range"), ("state", "ready")];
    assert_eq!(m.value("mosaicdb_index_state", &labels), Some(1.0));
}

/// What a metric's points take is reported per metric, by `GET /v1/timeseries` and `/metrics`
/// alike; a 2-decimal gauge at a regular interval, appended in blocks, takes about a byte a point.
#[tokio::test]
async fn time_series_bytes_per_metric() {
    let s = TestServer::start().await;
    let mut body = String::new();
    for i in 0..20_000i64 {
        let v = 20.0 + ((i * 37) % 1000) as f64 / 100.0;
        body.push_str(&format!("gauge,host=h{} value={v:.2} {}\n", i % 2, 1_700_000_000_000 + i * 10_000));
    }
    let r = s.raw(Method::POST, "/v1/timeseries/write?precision=ms", "text/plain", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = s.raw(Method::POST, "/v1/timeseries/write", "text/plain", "gauge,host=h2 value=1 1\n").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (_, list) = s.get("/v1/timeseries").await;
    let gauge = &list["metrics"][0];
    assert_eq!((gauge["name"].as_str(), gauge["points"].as_u64()), (Some("gauge"), Some(20_001)), "{list}");
    let bytes = gauge["bytes"].as_u64().unwrap();
    let per_point = bytes as f64 / 20_001.0;
    assert!(per_point > 0.05 && per_point < 2.0, "{per_point} bytes per point");
    let m = scrape(&s).await;
    assert_eq!(m.value("mosaicdb_timeseries_bytes", &[("metric", "gauge")]), Some(bytes as f64));
    assert_eq!(m.value("mosaicdb_timeseries_points", &[("metric", "gauge")]), Some(20_001.0));
    assert_eq!(m.value("mosaicdb_timeseries_series", &[("metric", "gauge")]), Some(3.0));
    // check recounts every series' bytes from its keys
    s.check_ok().await;
}

/// A series: a sample's name and labels.
type Series = (String, BTreeMap<String, String>);

/// The series of a Prometheus 0.0.4 text, and its `# TYPE` lines (name → type), read with the
/// OpenMetrics parser's pieces (the sample lines are the same).
fn samples_and_types_004(text: &str) -> (BTreeSet<Series>, BTreeMap<String, String>) {
    let (mut samples, mut types) = (BTreeSet::new(), BTreeMap::new());
    for line in text.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let (name, kind) = declared.split_once(' ').unwrap();
            assert!(types.insert(name.to_owned(), kind.to_owned()).is_none(), "{name} typed twice");
            continue;
        }
        assert!(line.starts_with("# HELP ") || !line.starts_with('#'), "no other comment in 0.0.4: {line}");
        if line.starts_with('#') {
            continue;
        }
        let end = line.find(['{', ' ']).unwrap();
        let (labels, rest) = if line[end..].starts_with('{') {
            parse_labels(&line[end..]).unwrap()
        } else {
            (BTreeMap::new(), &line[end..])
        };
        parse_value(rest.trim_start()).unwrap();
        samples.insert((line[..end].to_owned(), labels));
    }
    (samples, types)
}

/// A server that has done some work of every kind — tables, documents, an index, time-series
/// points, several databases, refused requests — is scraped in both formats: the OpenMetrics
/// answer parses strictly, the 0.0.4 answer passes `promtool check metrics` (Prometheus 2.42's,
/// from Debian's `prometheus`; the test says it is skipped where promtool is missing) and holds
/// the same families and series, renamed and retyped as 0.0.4 has them.
#[tokio::test]
async fn prometheus_text_0_0_4_when_asked_and_promtool_accepts_it() {
    let s = TestServer::start().await;
    for db in ["", "/db/shop", "/db/lab"] {
        if !db.is_empty() {
            assert_eq!(s.post("/v1/databases", json!({"name": &db[4..]})).await.0, 201);
        }
        s.post(&format!("/v1{db}/tables"), json!({"name": "people"})).await;
        for id in ["a", "b"] {
            let (status, body) = s.put(&format!("/v1{db}/tables/people/documents/{id}"), json!({"age": 30})).await;
            assert_eq!(status, 201, "{body}");
        }
        let index = json!({"name": "by_age", "kind": "range", "fields": ["age"]});
        assert!(s.post(&format!("/v1{db}/tables/people/indexes"), index).await.0.is_success());
        let lines = "cpu,host=h1 value=0.5 1763719200\ncpu,host=h2 value=0.7,idle=97i 1763719260\n";
        let r = s.raw(Method::POST, &format!("/v1{db}/timeseries/write?precision=s"), "text/plain", lines).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // the builds end (a building index has series of its own, which would come and go)
    for db in ["", "/db/shop", "/db/lab"] {
        let path = format!("/v1{db}/tables/people/indexes/by_age");
        let mut index = s.get(&path).await.1;
        for _ in 0..500 {
            if index["state"] != "building" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            index = s.get(&path).await.1;
        }
        assert_eq!(index["state"], "ready", "{index}");
    }
    let r = s.raw(Method::POST, "/write?db=lab&precision=s", "text/plain", "mem used=1 1763719200\n").await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(s.get("/v1/tables/people/documents/nobody").await.0, 404);
    assert_eq!(s.get("/no/such/route").await.0, 404);

    let get = |accept: &'static str| {
        let request = s.client.get(format!("{}/metrics", s.base)).header("accept", accept);
        async move {
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()["vary"], "accept");
            let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
            (content_type, r.text().await.unwrap())
        }
    };
    // what Prometheus 2.x sends: OpenMetrics preferred
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                      text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (content_type, before) = get(prometheus).await;
    assert_eq!(content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    let before = parse(&before).unwrap_or_else(|e| panic!("{e}\n{before}"));
    // a scraper that prefers the 0.0.4 text
    let (content_type, text) = get("text/plain;version=0.0.4;q=1,*/*;q=0.1").await;
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    let after = scrape(&s).await;

    let (samples, types) = samples_and_types_004(&text);
    assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
    for (name, family) in &before.families {
        let (renamed, kind) = match family.kind.as_str() {
            "counter" => (format!("{name}_total"), "counter"),
            "info" => (format!("{name}_info"), "gauge"),
            "unknown" => (name.clone(), "untyped"),
            other => (name.clone(), other),
        };
        assert_eq!(types.get(&renamed).map(String::as_str), Some(kind), "{name} ({})", family.kind);
        // every series of the scrape before is in this one, and this one's are in the scrape after
        for sample in &family.samples {
            assert!(samples.contains(&(sample.name.clone(), sample.labels.clone())), "{sample:?} missing");
        }
    }
    assert_eq!(types.len(), before.families.len(), "{types:?}");
    let later: BTreeSet<_> =
        after.families.values().flat_map(|f| &f.samples).map(|s| (s.name.clone(), s.labels.clone())).collect();
    assert!(samples.is_subset(&later), "{:?}", samples.difference(&later).collect::<Vec<_>>());
    // the work done shows: every database, the Influx write
    for db in ["default", "shop", "lab"] {
        assert!(samples.contains(&("mosaicdb_database_documents".into(), [("database".into(), db.into())].into())));
    }
    assert!(text.contains("mosaicdb_build_info{version=\""), "{text}");
    assert!(text.contains("route=\"/write\",status=\"204\""), "{text}");

    let promtool = match std::process::Command::new("promtool").arg("--version").output() {
        Ok(out) if out.status.success() => "promtool",
        _ => {
            eprintln!("promtool check metrics skipped: no promtool here (Debian: apt-get install prometheus)");
            return;
        }
    };
    let mut check = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {:?} {said}\n{text}", out.status);
}

/// The parser is strict: each of these breaks a rule of the format.
#[test]
fn the_parser_refuses_broken_expositions() {
    let good = "# HELP a x\n# TYPE a counter\na_total{b=\"c\"} 1\n# EOF\n";
    parse(good).unwrap();
    for bad in [
        "# TYPE a counter\na_total 1\n",                           // no EOF
        "# TYPE a counter\na 1\n# EOF\n",                          // a counter's sample lacks _total
        "# TYPE a gauge\nb 1\n# EOF\n",                            // sample outside its family
        "# TYPE a gauge\na{b=\"c} 1\n# EOF\n",                     // unterminated value
        "# TYPE a gauge\na{b=\"c\",} 1\n# EOF\n",                  // trailing comma
        "# TYPE a gauge\na{1b=\"c\"} 1\n# EOF\n",                  // bad label name
        "# TYPE a gauge\na x\n# EOF\n",                            // bad value
        "# TYPE a gauge\na 1\na 2\n# EOF\n",                       // the same sample twice
        "# TYPE a gauge\na 1\n# TYPE a gauge\n# EOF\n",            // a family twice
        "# TYPE a_seconds gauge\n# UNIT a_seconds bytes\n# EOF\n", // unit not in the name
        "# TYPE a counter\na_total -1\n# EOF\n",                   // negative counter
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 1\n# EOF\n", // not cumulative
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 3\nh_sum 1\n# EOF\n", // count ≠ +Inf
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\nh_sum 1\n# EOF\n",                          // no +Inf
    ] {
        assert!(parse(bad).is_err(), "accepted: {bad:?}");
    }
}

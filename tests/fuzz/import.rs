//! Fuzzing (proptest, bounded) of the NDJSON import path (`Db::import`, what
//! `POST …/import` streams into): however the body is cut into chunks on the wire, the report
//! and the stored documents are the same, and they agree with an independent reading of the
//! lines (split on `\n`, `\r` dropped, blank lines skipped, each line one JSON object). Arbitrary
//! bytes never panic it; an over-long line stops it at the same line whatever the chunking. The
//! CSV import (`Db::import_as`) too: arbitrary bytes, cut two ways, give the same outcome.

use bytes::Bytes;
use mosaicdb::catalog::{ColumnDef, TableKind};
use mosaicdb::service::{CreateTable, Db, DbOptions, ImportFormat, ImportLimits, ImportReport, ServiceError};
use mosaicdb::storage::{Durability, StorageConfig};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Fixture {
    runtime: tokio::runtime::Runtime,
    db: Arc<Db>,
    tables: AtomicUsize,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let mut config = StorageConfig::new(dir.path());
        config.durability = Durability::Buffered;
        config.cache_bytes = 8 << 20;
        let db = runtime.block_on(async { Db::open(config, DbOptions::default()) }).unwrap();
        Fixture { runtime, db, tables: AtomicUsize::new(0), _dir: dir }
    }

    /// A fresh table; typed ones declare `a` and `b` as nullable JSON columns (lines with `c` fail).
    fn table(&self, typed: bool) -> String {
        let name = format!("t{}", self.tables.fetch_add(1, Ordering::Relaxed));
        let columns = typed.then(|| {
            ["a", "b"]
                .map(|c| ColumnDef { name: c.into(), ty: "json".parse().unwrap(), nullable: true, default: None })
                .to_vec()
        });
        let req = CreateTable { name: name.clone(), kind: TableKind::Document, columns, ..Default::default() };
        self.runtime.block_on(self.db.pipeline.create_table(req)).unwrap();
        name
    }

    fn import(&self, table: &str, chunks: Vec<Vec<u8>>, max_line: usize) -> Result<ImportReport, ServiceError> {
        self.import_as(table, ImportFormat::Ndjson, chunks, max_line)
    }

    fn import_as(
        &self,
        table: &str,
        format: ImportFormat,
        chunks: Vec<Vec<u8>>,
        max_line: usize,
    ) -> Result<ImportReport, ServiceError> {
        let body = futures_util::stream::iter(chunks.into_iter().map(|c| Ok::<_, std::io::Error>(Bytes::from(c))));
        let limits = ImportLimits { max_line, window: std::time::Duration::from_secs(60), min_bytes: 1 };
        self.runtime.block_on(self.db.pipeline.import_as(table.to_owned(), format, body, limits))
    }

    /// Every stored document, `_id` taken out: `(id, rest)` sorted.
    fn documents(&self, table: &str) -> Vec<(String, Value)> {
        let page = self.runtime.block_on(self.db.pipeline.list_documents(table.to_owned(), 1000, None)).unwrap();
        let mut docs: Vec<(String, Value)> = page
            .documents
            .iter()
            .map(|d| {
                let mut v: Map<String, Value> = serde_json::from_slice(d).unwrap();
                let id = v.remove("_id").and_then(|i| i.as_str().map(str::to_owned)).unwrap();
                (id, Value::Object(v))
            })
            .collect();
        docs.sort_by(|a, b| a.0.cmp(&b.0));
        docs
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    FIXTURE.get_or_init(Fixture::new)
}

/// One line of a body (without its `\n`).
fn line() -> impl Strategy<Value = Vec<u8>> {
    let value = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        ".{0,6}".prop_map(Value::String),
        Just(json!({"x": [1, {"y": null}]})),
    ];
    let id = prop_oneof![
        2 => Just(None),
        4 => "[a-e]".prop_map(|s| Some(Value::String(s))),
        1 => Just(Some(json!(7))),
        1 => Just(Some(json!(""))),
    ];
    let object = (prop::collection::btree_map(prop::sample::select(vec!["a", "b", "c"]), value, 0..3), id).prop_map(
        |(fields, id)| {
            let mut m: Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            if let Some(id) = id {
                m.insert("_id".into(), id);
            }
            serde_json::to_vec(&Value::Object(m)).unwrap()
        },
    );
    prop_oneof![
        6 => object,
        1 => Just(b"[1, 2]".to_vec()),
        1 => Just(b"not json".to_vec()),
        1 => Just(b"{\"a\": ".to_vec()),
        1 => Just(b"   ".to_vec()),
        1 => Just(Vec::new()),
        1 => prop::collection::vec(any::<u8>(), 0..12).prop_map(|b| b.into_iter().filter(|&c| c != b'\n').collect()),
    ]
}

fn bodies() -> impl Strategy<Value = (Vec<u8>, usize)> {
    (prop::collection::vec((line(), any::<bool>()), 0..24), any::<bool>()).prop_map(|(lines, last_newline)| {
        let n = lines.len();
        let mut body = Vec::new();
        for (i, (l, crlf)) in lines.into_iter().enumerate() {
            body.extend_from_slice(&l);
            if crlf {
                body.push(b'\r');
            }
            if i + 1 < n || last_newline {
                body.push(b'\n');
            }
        }
        (body, n)
    })
}

/// Cuts `body` at the given points (as fractions of its length).
fn chunked(body: &[u8], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
    at.push(0);
    at.push(body.len());
    at.sort_unstable();
    at.windows(2).map(|w| body[w[0]..w[1]].to_vec()).collect()
}

/// The independent reading: which lines are documents, and which fail.
fn expected(body: &[u8], typed: bool) -> (u64, Vec<u64>) {
    let mut inserted = 0;
    let mut failed = Vec::new();
    for (i, raw) in body.split(|&b| b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let good = match serde_json::from_slice::<Value>(raw) {
            Ok(Value::Object(m)) => {
                let id_ok = match m.get("_id") {
                    None => true,
                    Some(Value::String(s)) => !s.is_empty(),
                    Some(_) => false,
                };
                id_ok && (!typed || m.keys().all(|k| ["_id", "a", "b"].contains(&k.as_str())))
            }
            _ => false,
        };
        if good {
            inserted += 1;
        } else {
            failed.push(i as u64 + 1);
        }
    }
    (inserted, failed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn chunking_never_changes_an_import(
        (body, _) in bodies(),
        cuts_a in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        cuts_b in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        typed in any::<bool>(),
    ) {
        let f = fixture();
        let (ta, tb) = (f.table(typed), f.table(typed));
        let a = f.import(&ta, chunked(&body, &cuts_a), 1 << 20).unwrap();
        // the other extreme as well: one byte at a time
        let b = f.import(&tb, if cuts_b.len() > 30 { body.iter().map(|&c| vec![c]).collect() } else { chunked(&body, &cuts_b) }, 1 << 20).unwrap();
        let show = |r: &ImportReport| (r.inserted, r.failed, r.failures.iter().map(|l| (l.line, l.code, l.detail.clone())).collect::<Vec<_>>());
        prop_assert_eq!(show(&a), show(&b));

        let (inserted, failed_lines) = expected(&body, typed);
        prop_assert_eq!(a.inserted, inserted, "body {:?}", String::from_utf8_lossy(&body));
        prop_assert_eq!(a.failures.iter().map(|l| l.line).collect::<Vec<_>>(), failed_lines);

        // the same documents; generated ids differ between the two imports, the rest does not
        let strip = |docs: Vec<(String, Value)>| {
            let mut v: Vec<(Option<String>, Value)> = docs
                .into_iter()
                .map(|(id, d)| ((id.len() == 1).then_some(id), d))
                .collect();
            v.sort_by_key(|x| serde_json::to_string(x).unwrap());
            v
        };
        prop_assert_eq!(strip(f.documents(&ta)), strip(f.documents(&tb)));
    }

    #[test]
    fn arbitrary_bytes_never_panic_an_import(
        body in prop::collection::vec(prop_oneof![any::<u8>(), Just(b'\n'), Just(b'{'), Just(b'"')], 0..200),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        max_line in 1usize..64,
    ) {
        let f = fixture();
        let t = f.table(false);
        match f.import(&t, chunked(&body, &cuts), max_line) {
            // every id is generated, so each line written is a document of its own
            Ok(r) => prop_assert_eq!(r.inserted, f.documents(&t).len() as u64),
            Err(e) => prop_assert!(matches!(e, ServiceError::LineTooLong { .. }), "{:?}", e),
        }
    }

    #[test]
    fn an_over_long_line_stops_at_the_same_line_whatever_the_chunking(
        (body, _) in bodies(),
        cuts_a in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        cuts_b in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        max_line in 4usize..40,
    ) {
        let f = fixture();
        let (ta, tb) = (f.table(false), f.table(false));
        let outcome = |r: Result<ImportReport, ServiceError>| match r {
            Ok(r) => Ok((r.inserted, r.failed)),
            Err(ServiceError::LineTooLong { line, written }) => Err((line, written)),
            Err(e) => panic!("{e:?}"),
        };
        let a = outcome(f.import(&ta, chunked(&body, &cuts_a), max_line));
        let b = outcome(f.import(&tb, chunked(&body, &cuts_b), max_line));
        prop_assert_eq!(a, b);
        // the line it names is the first longer than the limit (its `\r` counts, as on the wire)
        let first_long = body.split(|&c| c == b'\n').position(|l| l.len() > max_line).map(|i| i as u64 + 1);
        prop_assert_eq!(a.err().map(|(line, _)| line), first_long);
    }

    #[test]
    fn a_csv_import_is_the_same_however_the_body_is_cut(
        header in prop_oneof![Just(b"a,b,c\n".to_vec()), Just(b"a,\"b\r\n\",c\r\n".to_vec()), Just(Vec::new())],
        rest in prop::collection::vec(
            prop_oneof![Just(b','), Just(b'"'), Just(b'\n'), Just(b'\r'), Just(b'1'), Just(b'x'), Just(b' '), any::<u8>()],
            0..160,
        ),
        cuts_a in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        cuts_b in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        max_line in 4usize..64,
    ) {
        let f = fixture();
        let (ta, tb) = (f.table(false), f.table(false));
        let body = [header, rest].concat();
        let outcome = |t: &str, chunks| match f.import_as(t, ImportFormat::Csv, chunks, max_line) {
            Ok(r) => Ok((r.inserted, r.failed, r.failures.iter().map(|l| (l.line, l.code, l.detail.clone())).collect::<Vec<_>>())),
            Err(e) => Err(e.to_string()),
        };
        let a = outcome(&ta, chunked(&body, &cuts_a));
        let b = outcome(&tb, if cuts_b.len() > 30 { body.iter().map(|&c| vec![c]).collect() } else { chunked(&body, &cuts_b) });
        prop_assert_eq!(&a, &b, "body {:?}", String::from_utf8_lossy(&body));
        // no `_id` column: every row written is a document of its own
        if let Ok((inserted, _, _)) = a {
            prop_assert_eq!(inserted, f.documents(&ta).len() as u64);
        }
    }
}

//! Fuzzing (proptest, bounded) of what reads user input or stored bytes without the HTTP layer in
//! between: the filter parser (any JSON must give a filter or a clean `invalid_filter`, never a
//! panic) and every reader of a document blob the server uses on damaged bytes (the JSON writer
//! behind GET, listing and query; filter evaluation; index entry extraction). The blob codec's own
//! decoders are fuzzed in `crates/entity/src/tests.rs`.

use mosaicdb::entity::{self, EncodeOptions, FieldDict, ValueRef};
use mosaicdb::service::ServiceError;
use mosaicdb::service::core::filter::Filter;
use mosaicdb::service::core::filter::field_values;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const OPERATORS: [&str; 17] = [
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$exists",
    "$prefix",
    "$contains",
    "$near",
    "$box",
    "$and",
    "$or",
    "$not",
    "$nope",
];

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-200.0f64..200.0).prop_map(Value::from),
        prop::sample::select(vec![0.0, -0.0, f64::MAX, f64::MIN, f64::MIN_POSITIVE, 1e308, -1e-308, 90.0, 180.0])
            .prop_map(Value::from),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        "[a-c.$]{0,3}".prop_map(Value::String),
        ".{0,4}".prop_map(Value::String),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(OPERATORS.to_vec()).prop_map(str::to_owned),
        prop::sample::select(vec![
            "a", "b", "a.b", "a.b.c", "", ".", "a.", ".a", "a..b", "lat", "lon", "meters", "min_lat", "min_lon",
            "max_lat", "max_lon"
        ])
        .prop_map(str::to_owned),
        "[a-z$.]{0,4}",
    ]
}

/// JSON biased towards the filter language: operator keys, geo argument names, nested filters.
fn filterish() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..5).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn document() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![scalar(), Just(json!({"lat": 59.9, "lon": 10.7})), Just(json!([10.7, 59.9]))];
    let value = leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map("[a-c]", value, 0..5).prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()))
}

/// Filters that read a blob in every way evaluation can.
fn probe_filters() -> Vec<Filter> {
    [
        json!({"a": 1}),
        json!({"a.b": {"$gt": 0, "$lte": "z"}}),
        json!({"b": {"$in": [null, true, "x", [1]], "$nin": [{}]}}),
        json!({"c": {"$exists": true, "$prefix": "a", "$contains": 1}}),
        json!({"a": {"$near": {"lat": 59.9, "lon": 10.7, "meters": 1000}}}),
        json!({"b": {"$box": {"min_lat": -90, "min_lon": -180, "max_lat": 90, "max_lon": 180}}}),
        json!({"$or": [{"a.b.c": null}, {"$not": {"c": {"$ne": [1, 2]}}}]}),
    ]
    .iter()
    .map(|f| Filter::parse(f).unwrap())
    .collect()
}

/// Reads `blob` the ways the server does; only checks that nothing panics.
fn serve_blob(blob: &[u8], dict: &FieldDict, filters: &[Filter]) {
    if let Ok(ValueRef::Object(o)) = entity::root(blob) {
        let mut out = Vec::new();
        let _ = entity::write_entries(o, dict, &mut out, false);
    }
    for f in filters {
        let _ = f.matches("d", blob, dict);
    }
    for field in ["a", "a.b", "b", "c.a.b"] {
        let _ = field_values(blob, dict, field);
    }
}

fn encode(doc: &Value, dict: &mut FieldDict) -> Vec<u8> {
    entity::encode(doc, dict, &EncodeOptions::default()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn the_filter_parser_takes_any_json(v in filterish()) {
        match Filter::parse(&v) {
            Ok(filter) => {
                // a parsed filter evaluates on any document without panicking
                let mut dict = FieldDict::new();
                for doc in [json!({}), json!({"a": {"b": [1, "x", null]}, "lat": 1, "b": {"lat": 1, "lon": 2}})] {
                    let blob = encode(&doc, &mut dict);
                    let _ = filter.matches("d", &blob, &dict);
                }
            }
            Err(e) => prop_assert!(
                matches!(e, ServiceError::InvalidFilter(_) | ServiceError::QueryTooComplex(_)),
                "{:?} for {}",
                e,
                v
            ),
        }
    }

    #[test]
    fn the_filter_parser_refuses_what_is_not_an_object(v in scalar()) {
        prop_assert!(matches!(Filter::parse(&v), Err(ServiceError::InvalidFilter(_))));
    }

    /// The JSON the server writes straight from a blob is the document.
    #[test]
    fn blob_json_writer_agrees_with_the_decoder(doc in document()) {
        let mut dict = FieldDict::new();
        let blob = encode(&doc, &mut dict);
        let ValueRef::Object(o) = entity::root(&blob).unwrap() else { panic!("a document is an object") };
        let mut out = vec![b'{'];
        entity::write_entries(o, &dict, &mut out, false).unwrap();
        out.push(b'}');
        prop_assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), entity::decode(&blob, &dict).unwrap());
    }

    #[test]
    fn damaged_blobs_never_panic_a_reader(
        doc in document(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut dict = FieldDict::new();
        let mut blob = encode(&doc, &mut dict);
        for (at, byte, kind) in edits {
            let i = at.index(blob.len().max(1));
            match kind {
                0 => if let Some(b) = blob.get_mut(i) { *b = byte },
                1 => blob.insert(i.min(blob.len()), byte),
                _ => if i < blob.len() { blob.remove(i); },
            }
        }
        let filters = probe_filters();
        serve_blob(&blob, &dict, &filters);
        blob.truncate(cut.index(blob.len() + 1));
        serve_blob(&blob, &dict, &filters);
        // and with a dictionary that lacks the field names the blob refers to
        serve_blob(&blob, &FieldDict::new(), &filters);
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_reader(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let dict = FieldDict::from_names(["a", "b", "c", "lat", "lon"].map(str::to_owned)).unwrap();
        serve_blob(&bytes, &dict, &probe_filters());
    }
}

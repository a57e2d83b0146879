//! Round-trip, cross-path and robustness tests of the whole format.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn opts() -> EncodeOptions<'static> {
    EncodeOptions::default()
}

fn round_trip(v: &Value) -> Value {
    let mut dict = FieldDict::new();
    let blob = encode(v, &mut dict, &opts()).unwrap();
    decode(&blob, &dict).unwrap()
}

fn simd_blob(text: &str, dict: &mut FieldDict) -> Vec<u8> {
    let mut buf = text.as_bytes().to_vec();
    let v = simd_json::to_borrowed_value(&mut buf).unwrap();
    encode_simd(&v, dict, &opts()).unwrap()
}

#[test]
fn exact_numbers_through_text() {
    let texts = [
        "-9223372036854775808",
        "9223372036854775807",
        "9007199254740993",
        "18446744073709551615",
        "-0.0",
        "3.0",
        "1e300",
        "5e-324",
        "0.1",
        "-200",
        "127",
        "128",
        "0",
    ];
    for text in texts {
        let v: Value = serde_json::from_str(text).unwrap();
        let back = round_trip(&v);
        let expected = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), expected, "{text}");
        let wrapped: Value = serde_json::from_str(&format!(r#"{{"n":[{text}]}}"#)).unwrap();
        assert_eq!(round_trip(&wrapped), wrapped, "{text}");
    }
    assert_eq!(serde_json::to_string(&round_trip(&json!(3.0))).unwrap(), "3.0");
    assert_eq!(round_trip(&json!(u64::MAX)).as_u64(), Some(u64::MAX));
    assert_eq!(round_trip(&json!(i64::MIN)).as_i64(), Some(i64::MIN));
    let neg_zero = round_trip(&json!(-0.0)).as_f64().unwrap();
    assert!(neg_zero == 0.0 && neg_zero.is_sign_negative());
    assert!(round_trip(&json!(9007199254740993u64)).is_u64());
    assert_eq!(round_trip(&json!(1e300)).as_f64(), Some(1e300));
    assert_eq!(round_trip(&json!(5e-324)).as_f64(), Some(5e-324));
}

#[test]
fn golden_document_decodes() {
    let doc = json!({"a":1,"b":"x","c":[true,null],"d":-200,"e":1.5,"f":0.1});
    assert_eq!(round_trip(&doc), doc);
}

#[test]
fn vector_output_uses_shortest_f32_decimal() {
    let doc = json!({"v": [0.1, 1, -2.5, 16777217], "w": []});
    let fields = ["v", "w"];
    let mut dict = FieldDict::new();
    let blob = encode(&doc, &mut dict, &EncodeOptions { vector_fields: &fields }).unwrap();
    let back = decode(&blob, &dict).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), r#"{"v":[0.1,1.0,-2.5,16777216.0],"w":[]}"#);
    let Some(ValueRef::Vector(v)) = get_path(&blob, &dict, &["v"]).unwrap() else {
        panic!("not a vector");
    };
    assert_eq!(v.len(), 4);
    assert_eq!(v.iter().collect::<Vec<_>>(), vec![0.1f32, 1.0, -2.5, 16777216.0]);
}

#[test]
fn bytes_and_non_finite_blobs() {
    let blob = [1, 0x08, 3, 0, 7, 255];
    assert_eq!(decode(&blob, &FieldDict::new()).unwrap(), json!([0, 7, 255]));
    let mut nan = vec![1, 0x05];
    nan.extend(f64::NAN.to_le_bytes());
    assert_eq!(decode(&nan, &FieldDict::new()), Err(Error::NotFinite));
    let mut inf_vec = vec![1, 0x09, 1];
    inf_vec.extend(f32::INFINITY.to_le_bytes());
    assert_eq!(decode(&inf_vec, &FieldDict::new()), Err(Error::NotFinite));
}

#[test]
fn malformed_blobs() {
    let d = FieldDict::new();
    assert_eq!(decode(&[], &d), Err(Error::Truncated));
    assert_eq!(decode(&[2, 0], &d), Err(Error::UnknownVersion(2)));
    assert_eq!(decode(&[1], &d), Err(Error::Truncated));
    assert_eq!(decode(&[1, 0x0D], &d), Err(Error::UnknownTag(0x0D)));
    assert_eq!(decode(&[1, 0x0C, 0x02, 23], &d), Err(Error::InvalidDecimal));
    assert_eq!(decode(&[1, 0x3F], &d), Err(Error::UnknownTag(0x3F)));
    assert_eq!(decode(&[1, 0, 0], &d), Err(Error::TrailingBytes));
    assert_eq!(decode(&[1, 0x42, 0xff, 0xfe], &d), Err(Error::InvalidUtf8));
    assert_eq!(decode(&[1, 0x07, 0x80, 0x00], &d), Err(Error::InvalidVarint));
    assert_eq!(decode(&[1, 0x07, 5, b'a'], &d), Err(Error::Truncated));
    assert_eq!(decode(&[1, 0x05, 0, 0], &d), Err(Error::Truncated));
    // Count larger than the body could hold.
    assert_eq!(decode(&[1, 0x0A, 2, 9, 0], &d), Err(Error::LengthMismatch));
    assert_eq!(decode(&[1, 0x0B, 3, 2, 0, 0], &d), Err(Error::LengthMismatch));
    // A hostile count far above memory: rejected before any allocation.
    let mut huge = vec![1, 0x0A, 11];
    huge.extend([0xff; 9]);
    huge.extend([0x01, 0]);
    assert_eq!(decode(&huge, &d), Err(Error::LengthMismatch));
    // Elements leave bytes over, or overrun the body.
    assert_eq!(decode(&[1, 0x0A, 3, 1, 0, 0], &d), Err(Error::LengthMismatch));
    assert_eq!(decode(&[1, 0x0A, 2, 1, 0x81], &d), Ok(json!([1])));
    assert_eq!(decode(&[1, 0x0A, 2, 1, 0x03], &d), Err(Error::Truncated));
    // Unknown field id; inline key with bad UTF-8.
    assert_eq!(decode(&[1, 0x0B, 3, 1, 0x0E, 0x00], &d), Err(Error::UnknownFieldId(7)));
    assert_eq!(decode(&[1, 0x0B, 4, 1, 0x03, 0xff, 0x00], &d), Err(Error::InvalidUtf8));
    // Vector dimension overflowing the byte length.
    let mut vec_over = vec![1, 0x09];
    vec_over.extend([0xff; 9]);
    vec_over.push(0x01);
    assert_eq!(decode(&vec_over, &d), Err(Error::Truncated));
}

fn nested_arrays(depth: usize) -> Vec<u8> {
    // Build inside out: each level is [0x0A, body_len, 1, child].
    let mut value = vec![0x00];
    for _ in 0..depth {
        let mut body = vec![1];
        body.extend(&value);
        let mut next = vec![0x0A];
        let (len, n) = varint::to_bytes(body.len() as u64);
        next.extend(&len[..n]);
        next.extend(body);
        value = next;
    }
    let mut blob = vec![FORMAT_VERSION];
    blob.extend(value);
    blob
}

#[test]
fn decode_depth_limit() {
    let d = FieldDict::new();
    assert!(decode(&nested_arrays(MAX_DEPTH), &d).is_ok());
    assert_eq!(decode(&nested_arrays(MAX_DEPTH + 1), &d), Err(Error::TooDeep));
}

#[test]
fn access_views() {
    let doc = json!({
        "name": "Ada",
        "big": "q".repeat(300),
        "tags": ["x", 2, null],
        "addr": {"city": "Paris", "zip": "75001", "geo": {"lat": 48.85}},
        "n": u64::MAX,
    });
    let mut dict = FieldDict::new();
    let blob = encode(&doc, &mut dict, &opts()).unwrap();
    assert_eq!(get_path(&blob, &dict, &["name"]).unwrap(), Some(ValueRef::Str("Ada")));
    assert_eq!(get_path(&blob, &dict, &["n"]).unwrap(), Some(ValueRef::UInt(u64::MAX)));
    assert_eq!(get_path(&blob, &dict, &["addr", "geo", "lat"]).unwrap(), Some(ValueRef::Float(48.85)));
    assert_eq!(get_path(&blob, &dict, &["addr", "nope"]).unwrap(), None);
    assert_eq!(get_path(&blob, &dict, &["name", "x"]).unwrap(), None);
    assert_eq!(get_path(&blob, &dict, &["unknown-key"]).unwrap(), None);
    let whole = get_path(&blob, &dict, &[]).unwrap().unwrap();
    assert_eq!(whole.to_json(&dict).unwrap(), doc);

    let Some(ValueRef::Array(tags)) = get_path(&blob, &dict, &["tags"]).unwrap() else {
        panic!("tags");
    };
    assert_eq!(tags.len(), 3);
    let items: Vec<_> = tags.iter().collect::<Result<_>>().unwrap();
    assert_eq!(items, vec![ValueRef::Str("x"), ValueRef::Int(2), ValueRef::Null]);
    assert_eq!(tags.get(1).unwrap(), Some(ValueRef::Int(2)));
    assert_eq!(tags.get(3).unwrap(), None);

    let ValueRef::Object(top) = root(&blob).unwrap() else {
        panic!("root");
    };
    let keys: Vec<&str> = top.iter(&dict).map(|e| e.map(|(k, _)| k)).collect::<Result<_>>().unwrap();
    assert_eq!(keys, vec!["addr", "big", "n", "name", "tags"]);
    assert_eq!(top.len(), 5);
}

/// The iterators borrow the blob and dict, not the view they came from.
fn first_keys<'s>(blob: &'s [u8], dict: &'s FieldDict) -> impl Iterator<Item = &'s str> {
    let obj = match root(blob) {
        Ok(ValueRef::Object(o)) => Some(o),
        _ => None,
    };
    obj.into_iter().flat_map(|o| o.iter(dict)).filter_map(|e| e.ok().map(|(k, _)| k))
}

fn array_items(blob: &[u8]) -> impl Iterator<Item = ValueRef<'_>> {
    let arr = match root(blob) {
        Ok(ValueRef::Array(a)) => Some(a),
        _ => None,
    };
    arr.into_iter().flat_map(|a| a.iter()).filter_map(Result::ok)
}

#[test]
fn iterators_outlive_views() {
    let mut dict = FieldDict::new();
    let blob = encode(&json!({"b": 1, "a": 2}), &mut dict, &opts()).unwrap();
    assert_eq!(first_keys(&blob, &dict).collect::<Vec<_>>(), vec!["a", "b"]);
    let blob = encode(&json!([true, "s"]), &mut dict, &opts()).unwrap();
    let items: Vec<_> = array_items(&blob).collect();
    assert_eq!(items, vec![ValueRef::Bool(true), ValueRef::Str("s")]);
}

#[test]
fn inline_key_found_by_get_path() {
    let long = "L".repeat(70);
    let doc = json!({ long.clone(): {"inner": 5}, "short": 1 });
    let mut dict = FieldDict::new();
    let blob = encode(&doc, &mut dict, &opts()).unwrap();
    assert_eq!(dict.id_of(&long), None);
    assert_eq!(get_path(&blob, &dict, &[&long, "inner"]).unwrap(), Some(ValueRef::Int(5)));
    assert_eq!(decode(&blob, &dict).unwrap(), doc);
}

#[test]
fn full_dictionary_falls_back_to_inline() {
    let mut dict = FieldDict::from_names((0..MAX_FIELD_NAMES).map(|i| format!("f{i}"))).unwrap();
    let doc = json!({"f5": 1, "brand-new": {"f65535": true, "other": null}});
    let blob = encode(&doc, &mut dict, &opts()).unwrap();
    assert_eq!(dict.len(), MAX_FIELD_NAMES);
    assert_eq!(decode(&blob, &dict).unwrap(), doc);
    assert_eq!(get_path(&blob, &dict, &["brand-new", "f65535"]).unwrap(), Some(ValueRef::Bool(true)));
    // f65535 has the largest id: key-ref 131070 takes 3 bytes.
    assert!(blob.windows(3).any(|w| w == [0xFE, 0xFF, 0x07]));
}

#[test]
fn dictionary_reload_decodes_old_blobs() {
    let mut dict = FieldDict::new();
    let doc = json!({"z": 1, "a": {"m": [1, {"q": 2}]}});
    let blob = encode(&doc, &mut dict, &opts()).unwrap();
    let reloaded = FieldDict::from_names(dict.names_from(0).map(|(_, n)| n.to_owned())).unwrap();
    assert_eq!(decode(&blob, &reloaded).unwrap(), doc);
    // Rolled-back names make the blob undecodable, not wrong.
    let mut short = dict.clone();
    short.truncate(1);
    assert!(matches!(decode(&blob, &short), Err(Error::UnknownFieldId(_))));
}

// ---- property tests ----

fn any_string(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..max).prop_map(String::from_iter)
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec!["id", "name", "a", "b", "tags", ""]).prop_map(str::to_owned),
        2 => any_string(8),
        // Up to 30 chars of up to 4 bytes: past the 64-byte id cap.
        1 => any_string(30),
        1 => "[a-z]{60,70}",
    ]
}

fn finite_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |x| x.is_finite()),
        any::<f32>().prop_filter("finite", |x| x.is_finite()).prop_map(f64::from),
        (-1000i32..1000).prop_map(|i| f64::from(i) / 4.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0i64..300).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        finite_f64().prop_map(Value::from),
        any_string(80).prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..8).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(key(), json_value(), 0..8).prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// Every path of object keys in `v`, with the value it leads to.
fn object_paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Value)>) {
    if let Value::Object(m) = v {
        for (k, child) in m {
            prefix.push(k.clone());
            out.push((prefix.clone(), child.clone()));
            object_paths(child, prefix, out);
            prefix.pop();
        }
    }
}

/// Reads `blob` every way a caller can; only checks that nothing panics.
fn read_all_ways(blob: &[u8], dict: &FieldDict) {
    let _ = decode(blob, dict);
    if let Ok(v) = root(blob) {
        let _ = v.to_json(dict);
        walk(v, dict);
    }
    for path in [&["a"][..], &["id", "name"], &["b", "a", "tags"], &[""]] {
        if let Ok(Some(v)) = get_path(blob, dict, path) {
            let _ = v.to_json(dict);
        }
    }
}

fn walk(v: ValueRef<'_>, dict: &FieldDict) {
    match v {
        ValueRef::Array(a) => {
            let _ = a.get(a.len().saturating_sub(1));
            for item in a.iter().flatten() {
                walk(item, dict);
            }
        }
        ValueRef::Object(o) => {
            let _ = o.get(dict, "a");
            for (_, item) in o.iter(dict).flatten() {
                walk(item, dict);
            }
        }
        ValueRef::Vector(v) => {
            let _ = v.iter().count();
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn prop_round_trip(v in json_value()) {
        let mut dict = FieldDict::new();
        let blob = encode(&v, &mut dict, &opts()).unwrap();
        prop_assert_eq!(&decode(&blob, &dict).unwrap(), &v);
        prop_assert_eq!(root(&blob).unwrap().to_json(&dict).unwrap(), v.clone());
        // Same text out as in, so numbers keep their type and bits.
        let text = serde_json::to_string(&v).unwrap();
        prop_assert_eq!(serde_json::to_string(&decode(&blob, &dict).unwrap()).unwrap(), text);
        // A second encode with the warmed dictionary is identical.
        prop_assert_eq!(encode(&v, &mut dict, &opts()).unwrap(), blob);
    }

    #[test]
    fn prop_simd_same_bytes(v in json_value()) {
        let text = serde_json::to_string(&v).unwrap();
        let parsed: Value = serde_json::from_str(&text).unwrap();
        // serde_json without float_roundtrip may parse a float 1 ULP off,
        // and then the two parsers disagree on the document itself.
        prop_assume!(parsed == v);
        let mut d1 = FieldDict::new();
        let mut d2 = FieldDict::new();
        let a = encode(&parsed, &mut d1, &opts()).unwrap();
        let b = simd_blob(&text, &mut d2);
        prop_assert_eq!(a, b);
        prop_assert_eq!(d1.names_from(0).collect::<Vec<_>>(), d2.names_from(0).collect::<Vec<_>>());
    }

    #[test]
    fn prop_get_path_agrees(v in json_object()) {
        let mut dict = FieldDict::new();
        let blob = encode(&v, &mut dict, &opts()).unwrap();
        let mut paths = Vec::new();
        object_paths(&v, &mut Vec::new(), &mut paths);
        for (path, expected) in paths {
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            let got = get_path(&blob, &dict, &path).unwrap();
            prop_assert_eq!(got.map(|g| g.to_json(&dict).unwrap()), Some(expected));
            let mut missing = path.clone();
            missing.push("\u{0}no such key");
            prop_assert_eq!(get_path(&blob, &dict, &missing).unwrap(), None);
        }
    }

    #[test]
    fn prop_random_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..256), versioned in any::<bool>()) {
        if versioned {
            bytes.insert(0, FORMAT_VERSION);
        }
        let dict = FieldDict::from_names(["a", "id", "name", "b", "tags"].map(str::to_owned)).unwrap();
        read_all_ways(&bytes, &dict);
    }

    #[test]
    fn prop_mutated_blobs_never_panic(
        v in json_object(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut dict = FieldDict::new();
        let blob = encode(&v, &mut dict, &opts()).unwrap();
        let mut bad = blob.clone();
        for (at, byte, kind) in edits {
            let i = at.index(bad.len().max(1));
            match kind {
                0 => if let Some(b) = bad.get_mut(i) { *b = byte },
                1 => bad.insert(i.min(bad.len()), byte),
                _ => if i < bad.len() { bad.remove(i); },
            }
        }
        read_all_ways(&bad, &dict);
        let truncated = &blob[..cut.index(blob.len())];
        read_all_ways(truncated, &dict);
        prop_assert!(decode(truncated, &dict).is_err());
    }
}

#[test]
fn decimal_floats_round_trip_bit_exactly() {
    let mut d = FieldDict::new();
    for x in [29.99, -0.001, 123_456.789, 1e-7, 0.30000000000000004, 9.999_999_999_999_999e14, 1.0 / 3.0, -2.675, 4.35]
    {
        let doc = serde_json::json!({ "x": x });
        let blob = encode(&doc, &mut d, &EncodeOptions::default()).unwrap();
        let back = decode(&blob, &d).unwrap();
        assert_eq!(back["x"].as_f64().unwrap().to_bits(), f64::to_bits(x), "{x}");
        assert!(back["x"].is_f64(), "{x} stays a float");
    }
    // a price costs 4 bytes, not 9
    let blob = encode(&serde_json::json!({ "p": 29.99 }), &mut d, &EncodeOptions::default()).unwrap();
    assert_eq!(blob.len(), 1 + 3 + 1 + 4);
}

#[test]
fn json_text_straight_from_the_blob_matches_serde_json() {
    let mut d = FieldDict::new();
    let doc = serde_json::json!({"a": [1, -2, 3.5, 29.99, "x\"y\n", null, true, {"b": {}}], "c": 18446744073709551615u64,
        "e": [], "s": "é🦀", "v": [0.1, 0.2], "z": -0.0});
    let blob = encode(&doc, &mut d, &EncodeOptions { vector_fields: &["v"] }).unwrap();
    let mut out = Vec::new();
    root(&blob).unwrap().write_json(&d, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&decode(&blob, &d).unwrap()).unwrap());
}

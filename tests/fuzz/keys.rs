//! Fuzzing (proptest, bounded) of every key family's decoder: keys are read back from disk by
//! scans, the consistency check and `inspect`, so damaged or foreign bytes must give an error,
//! never a panic; and whatever does decode must be the one key whose encoding is those bytes
//! (otherwise two stored keys would read as the same key).

use mosaicdb::keys::sidx::decode_point;
use mosaicdb::keys::{
    ChangeKey, Component, EntityKey, FtStatKey, FtidxKey, GraphKey, IdxKey, KeyReader, KeyWriter, MetaKey, Number,
    RidxKey, SidxKey, TsKey, TtlKey, VecKey, ViewKey, display,
};
use proptest::prelude::*;

const KEYSPACES: [&str; 13] =
    ["entity", "idx", "ridx", "sidx", "ftidx", "ftstat", "graph", "vec", "ts", "ttlidx", "view", "changefeed", "meta"];

/// Bytes that are mostly well-formed tuple components (so decoders get past the first one),
/// with arbitrary bytes mixed in.
fn key_bytes() -> impl Strategy<Value = Vec<u8>> {
    let part = prop_oneof![
        "[a-z:/%\\x00]{0,4}".prop_map(|s| KeyWriter::default().str(&s).finish()),
        any::<i64>().prop_map(|n| KeyWriter::default().num(n).finish()),
        prop::sample::select(vec![
            "table", "index", "field", "count", "out", "in", "ftdlen", "ftstat", "view", "m", "g", "x", "c"
        ])
        .prop_map(|s| KeyWriter::default().str(s).finish()),
        any::<f64>().prop_filter_map("a finite float", |f| {
            Number::from_f64(f).ok().map(|n| KeyWriter::default().component(&Component::Num(n)).finish())
        }),
        prop::collection::vec(any::<u8>(), 0..6),
        prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xffu8)], 0..3),
    ];
    prop::collection::vec(part, 0..7).prop_map(|parts| parts.concat())
}

/// Decodes `bytes` as every family; each decode that succeeds must re-encode to `bytes`.
fn decode_every_family(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(k) = EntityKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    for by in 0..5 {
        if let Ok(k) = ViewKey::decode(bytes, by) {
            prop_assert_eq!(k.encode(), bytes);
        }
    }
    for arity in 0..4 {
        if let Ok(k) = IdxKey::decode(bytes, arity) {
            prop_assert_eq!(k.encode(), bytes);
        }
    }
    if let Ok(k) = RidxKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = SidxKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = FtidxKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = FtStatKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = GraphKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = VecKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = TsKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = TtlKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = ChangeKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    if let Ok(k) = MetaKey::decode(bytes) {
        prop_assert_eq!(k.encode(), bytes);
    }
    let _ = decode_point(bytes);
    let _ = KeyReader::new(bytes).rest();
    for keyspace in KEYSPACES {
        let shown = display(keyspace, bytes);
        // ftstat keys name their own family in their first component
        prop_assert!(keyspace == "ftstat" || shown.starts_with(&format!("{keyspace}:")), "{}", shown);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic_any_decoder(bytes in prop::collection::vec(any::<u8>(), 0..48)) {
        decode_every_family(&bytes)?;
    }

    #[test]
    fn near_keys_decode_only_to_their_own_encoding(bytes in key_bytes()) {
        decode_every_family(&bytes)?;
    }

    #[test]
    fn mutated_keys_never_panic(
        table in "[a-z]{1,4}", id in "[a-z0-9]{0,4}", n in any::<i64>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let valid = [
            EntityKey::new(&table, &id).encode(),
            RidxKey::new(&table, "i", Component::Num(Number::Int(n)), &id).encode(),
            IdxKey::new(&table, "i", vec![Component::Str(id.as_str().into()), Component::Null], &id).encode(),
            TsKey::new(&table, &id, n).encode(),
            MetaKey::Count(table.as_str().into()).encode(),
        ];
        for mut key in valid {
            for (at, byte, kind) in &edits {
                let i = at.index(key.len().max(1));
                match kind {
                    0 => if let Some(b) = key.get_mut(i) { *b = *byte },
                    1 => key.insert(i.min(key.len()), *byte),
                    _ => if i < key.len() { key.remove(i); },
                }
            }
            decode_every_family(&key)?;
        }
    }
}

/// Found by `mutated_keys_never_panic`: a negative integral number below i64::MIN with more
/// significant bits than an f64 holds decoded (rounded) to a float whose encoding is other bytes.
#[test]
fn a_number_f64_cannot_hold_exactly_does_not_decode() {
    // tag NEG, exponent 63, mantissa 0xFF87F21DDB6C0A00 (55 significant bits), both complemented
    let bad = [0x04, 0xfb, 0x74, 0x00, 0x78, 0x0d, 0xe2, 0x24, 0x93, 0xf5, 0xff];
    assert!(KeyReader::new(&bad).rest().is_err());
    // the same value rounded to 53 bits is a float below i64::MIN, and decodes to itself
    let f = -(0xFF87F21DDB6C0A00u64 as f64);
    let n = Number::from_f64(f).unwrap();
    let good = KeyWriter::default().component(&Component::Num(n)).finish();
    assert_eq!(KeyReader::new(&good).rest().unwrap(), vec![Component::Num(n)]);
}

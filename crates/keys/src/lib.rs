//! Key families: one file each, every key an order-preserving tuple (see [`tuple`]).
//!
//! Each family lives in its own keyspace (named like the family), so the family prefix is not
//! repeated in the stored bytes; it appears in the display form. Where one keyspace holds several
//! kinds of key (graph, ftstat, meta), the first component tells them apart.
//!
//! | keyspace     | display form                                   | value |
//! |--------------|------------------------------------------------|-------|
//! | `entity`     | `entity:{table}:{id}`                          | entity blob |
//! | `idx`        | `idx:{table}:{index}:{value…}:{id}`            | empty (unique: key ends at the values, value = id) |
//! | `ridx`       | `ridx:{table}:{index}:{value}:{id}`            | empty |
//! | `sidx`       | `sidx:{table}:{index}:{geohash}:{id}`          | lat, lon |
//! | `ftidx`      | `ftidx:{table}:{index}:{token}:{first}`        | a block of postings: columns of document numbers, lengths, per-field term frequencies, then positions (see [`ftidx`]) |
//! | `ftstat`     | `ftdlen:{table}:{index}:{id}`                  | document length, number, tokens |
//! | `ftstat`     | `ftdoc:{table}:{index}:{num}`                  | the id of document number `num` |
//! | `ftstat`     | `ftterm:{table}:{index}:{token}`               | empty: the term dictionary (a term's df is the sum of its blocks' counts) |
//! | `ftstat`     | `ftstat:{table}:{index}`                       | N and total length |
//! | `graph`      | `graph:out:{edge_table}:{from}:{edge_id}`      | other endpoint (+ weight) |
//! | `graph`      | `graph:in:{edge_table}:{to}:{edge_id}`         | other endpoint (+ weight) |
//! | `vec`        | `vec:{table}:{index}:…`                        | vector index data (layout: `service::vectors::layout`) |
//! | `vec`        | `vec:{table}:{index}:node:{slot}`              | the node at a graph slot: its id, then its vector (f32 LE) |
//! | `vec`        | `vec:{table}:{index}:links:{slot}`             | its level and links per layer (slots) |
//! | `vec`        | `vec:{table}:{index}:slots`                    | u32 LE: the graph's slot count |
//! | `ts`         | `ts:{metric}:{entity}:{timestamp}`             | f64 value (BE), then the tags as JSON if any; timestamp in ns |
//! | `ttlidx`     | `ttlidx:{table}:{expire_at}:{id}`              | empty |
//! | `view`       | `view:{table}:{view}:c`                        | u64 BE: the view's member count (filter view) or group count (group view) |
//! | `view`       | `view:{table}:{view}:m:{id}`                   | empty: a member of a filter view |
//! | `view`       | `view:{table}:{view}:g:{group…}`               | a group's state: document count, exact sums (see `service::views::state`) |
//! | `view`       | `view:{table}:{view}:x:{field}:{group…}:{value}` | u64 BE: the group's documents holding that value (min/max) |
//! | `changefeed` | `changefeed:{seqno}`                           | change event |
//! | `hist`       | `hist:{table}:{id}`                            | the current version's start (µs, i64 BE) and how it was written |
//! | `hist`       | `hist:{table}:{id}:{start}`                    | a replaced version: how it was written, then its entity blob (none: a deletion) |
//! | `meta`       | `meta:table:{name}`                            | table definition |
//! | `meta`       | `meta:index:{table}:{name}`                    | index definition |
//! | `meta`       | `meta:metric:{name}`                           | metric configuration |
//! | `meta`       | `meta:seq:{name}`                              | sequence value (`meta:seq:created_at`: the last table/index `created_at`, i64 BE) |
//! | `meta`       | `meta:field:{id}`                              | interned field name |
//! | `meta`       | `meta:dropping:{table}`                        | table drop in progress |
//! | `meta`       | `meta:index_dropping:{table}:{name}`           | index drop in progress: the dropped index's `created_at` (i64 BE) |
//! | `meta`       | `meta:view:{table}:{name}`                     | view definition |
//! | `meta`       | `meta:view_dropping:{table}:{name}`            | view drop in progress: the dropped view's `created_at` (i64 BE) |
//! | `meta`       | `meta:count:{table}`                           | document count (u64 BE) |
//! | `meta`       | `meta:series:{metric}:{entity}`                | point count (u64 BE), first and last timestamp (i64 BE each) |
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod changefeed;
pub mod entity;
pub mod ftidx;
pub mod ftstat;
pub mod graph;
pub mod hist;
pub mod idx;
pub mod meta;
pub mod ridx;
pub mod sidx;
pub mod ts;
pub mod ttlidx;
pub mod tuple;
pub mod vec;
pub mod view;

pub use changefeed::ChangeKey;
pub use entity::EntityKey;
pub use ftidx::FtidxKey;
pub use ftstat::FtStatKey;
pub use graph::{AdjValue, Direction, GraphKey};
pub use hist::HistKey;
pub use idx::IdxKey;
pub use meta::MetaKey;
pub use ridx::RidxKey;
pub use sidx::SidxKey;
pub use ts::TsKey;
pub use ttlidx::TtlKey;
pub use tuple::{Component, KeyError, KeyReader, KeyWriter, Number, prefix_successor};
pub use vec::VecKey;
pub use view::{ViewKey, ViewPart};

/// The prefix of every key of `table` in the families whose keys start with the table name:
/// entity, idx, ridx, sidx, ftidx, vec, view and ttlidx (graph and ftstat keys start with a kind tag).
pub fn table_prefix(table: &str) -> Vec<u8> {
    KeyWriter::default().str(table).finish()
}

/// Renders a stored key of `keyspace` in the display form, e.g. `entity:users:alice`. Scan
/// bounds render too: a lone type tag as the start of that type (`ridx:t:by_age:<strings>`), the
/// successor of a key prefix as that prefix and `+` (everything after it); anything else that
/// does not decode is shown as hex, so a debugging tool never fails on a damaged key.
pub fn display(keyspace: &str, key: &[u8]) -> String {
    let (parts, rest) = components(key);
    let mut shown = parts.join(":");
    if !rest.is_empty() {
        let tail = match rest {
            [tag] => tuple::tag_name(*tag).map(str::to_owned),
            _ => None,
        }
        .or_else(|| successor_of(rest))
        .unwrap_or_else(|| format!("0x{}", rest.iter().map(|b| format!("{b:02x}")).collect::<String>()));
        if !shown.is_empty() {
            shown.push(':');
        }
        shown.push_str(&tail);
    }
    // The ftstat keyspace's first component is already the family name.
    if keyspace == "ftstat" { shown } else { format!("{keyspace}:{shown}") }
}

/// The components that decode, and the bytes after them.
fn components(key: &[u8]) -> (Vec<String>, &[u8]) {
    let mut r = KeyReader::new(key);
    let mut parts = Vec::new();
    while !r.is_empty() {
        let before = r.clone();
        match r.next_component() {
            Ok(c) => parts.push(c.to_string()),
            Err(_) => return (parts, before.remaining()),
        }
    }
    (parts, &[])
}

/// `x+` when `bytes` are the successor of whole components `x` (see [`prefix_successor`]: the
/// last byte that is not `FF` plus one, the `FF`s after it dropped).
fn successor_of(bytes: &[u8]) -> Option<String> {
    let (last, head) = bytes.split_last()?;
    let mut prev = head.to_vec();
    prev.push(last.checked_sub(1)?);
    for _ in 0..=16 {
        if let (parts, []) = components(&prev)
            && !parts.is_empty()
        {
            return Some(format!("{}+", parts.join(":")));
        }
        prev.push(0xff);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The layout table in this module's doc comment, checked against what the code renders.
    #[test]
    fn scan_bounds_display() {
        let end = KeyWriter::default().str("t").str("by_age").tag(0x07).finish();
        assert_eq!(display("ridx", &end), "ridx:t:by_age:<strings>");
        let after = prefix_successor(&RidxKey::value_prefix("t", "by_age", &Component::Num(Number::Int(15)))).unwrap();
        assert_eq!(display("ridx", &after), "ridx:t:by_age:15+");
        assert_eq!(display("ridx", &[0xff, 0xfe]), "ridx:0xfffe");
    }

    #[test]
    fn layout_table_matches_code() {
        let doc = include_str!("lib.rs");
        let rendered = [
            display("entity", &EntityKey::new("{table}", "{id}").encode()),
            display(
                "idx",
                &IdxKey::new("{table}", "{index}", vec![Component::Str("{value…}".into())], "{id}").encode(),
            ),
            display("ridx", &RidxKey::new("{table}", "{index}", Component::Str("{value}".into()), "{id}").encode()),
            display("sidx", &SidxKey::new("{table}", "{index}", "{geohash}", "{id}").encode()),
            display("ftidx", &FtidxKey::new("{table}", "{index}", "{token}", 0).encode()).replace(":0", ":{first}"),
            display("ftstat", &FtStatKey::doc_len("{table}", "{index}", "{id}").encode()),
            display("ftstat", &FtStatKey::doc("{table}", "{index}", 0).encode()).replace(":0", ":{num}"),
            display("ftstat", &FtStatKey::term("{table}", "{index}", "{token}").encode()),
            display("ftstat", &FtStatKey::stat("{table}", "{index}").encode()),
            display("graph", &GraphKey::new(Direction::Out, "{edge_table}", "{from}", "{edge_id}").encode()),
            display("graph", &GraphKey::new(Direction::In, "{edge_table}", "{to}", "{edge_id}").encode()),
            display("vec", &VecKey::new("{table}", "{index}", vec![Component::Str("…".into())]).encode()),
            display("vec", &VecKey::node("{table}", "{index}", 0).encode()).replace(":0", ":{slot}"),
            display("vec", &VecKey::links("{table}", "{index}", 0).encode()).replace(":0", ":{slot}"),
            display("vec", &VecKey::slots("{table}", "{index}").encode()),
            display("ts", &TsKey::new("{metric}", "{entity}", 0).encode()).replace(":0", ":{timestamp}"),
            display("ttlidx", &TtlKey::new("{table}", 0, "{id}").encode()).replace(":0:", ":{expire_at}:"),
            display("view", &ViewKey::count("{table}", "{view}").encode()),
            display("view", &ViewKey::member("{table}", "{view}", "{id}").encode()),
            display("view", &ViewKey::group("{table}", "{view}", vec![Component::Str("{group…}".into())]).encode()),
            display(
                "view",
                &ViewKey::value(
                    "{table}",
                    "{view}",
                    "{field}",
                    vec![Component::Str("{group…}".into())],
                    Component::Str("{value}".into()),
                )
                .encode(),
            ),
            display("changefeed", &ChangeKey::new(0).encode()).replace(":0", ":{seqno}"),
            display("meta", &MetaKey::Table("{name}".into()).encode()),
            display("meta", &MetaKey::Index("{table}".into(), "{name}".into()).encode()),
            display("meta", &MetaKey::Metric("{name}".into()).encode()),
            display("meta", &MetaKey::Seq("{name}".into()).encode()),
            display("meta", &MetaKey::Field(0).encode()).replace(":0", ":{id}"),
            display("meta", &MetaKey::Dropping("{table}".into()).encode()),
            display("meta", &MetaKey::IndexDropping("{table}".into(), "{name}".into()).encode()),
            display("meta", &MetaKey::Count("{table}".into()).encode()),
            display("meta", &MetaKey::View("{table}".into(), "{name}".into()).encode()),
            display("meta", &MetaKey::ViewDropping("{table}".into(), "{name}".into()).encode()),
        ];
        for form in rendered {
            // placeholders are not bare words, so the renderer quotes them: strip the quotes
            let form = form.replace('"', "");
            assert!(doc.contains(&format!("`{form}`")), "{form} is not in the layout table");
        }
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof!["[a-z]{0,4}", "[a-z:/%\\x00🦀]{0,5}", ".{0,6}"]
    }

    proptest! {
        /// A table's prefix holds exactly that table's keys, never a neighbour's (`user` vs `users`,
        /// `a` vs `a\0`), and key order is (table, id) order.
        #[test]
        fn entity_prefix_and_order(t1 in name(), id1 in name(), t2 in name(), id2 in name()) {
            let k1 = EntityKey::new(&t1, &id1).encode();
            let k2 = EntityKey::new(&t2, &id2).encode();
            prop_assert_eq!(EntityKey::decode(&k1).unwrap(), EntityKey::new(&t1, &id1));
            prop_assert_eq!(k2.starts_with(&table_prefix(&t1)), t1 == t2);
            prop_assert_eq!(k1.cmp(&k2), (t1.as_bytes(), id1.as_bytes()).cmp(&(t2.as_bytes(), id2.as_bytes())));
            // the prefix range [prefix, successor) agrees with starts_with
            let p = table_prefix(&t1);
            let in_range = k2 >= p && prefix_successor(&p).is_none_or(|s| k2 < s);
            prop_assert_eq!(in_range, t1 == t2);
        }

        #[test]
        fn ridx_orders_by_value_then_id(v1 in tuple::tests::any_component(), v2 in tuple::tests::any_component(),
                                         id1 in name(), id2 in name()) {
            let k1 = RidxKey::new("t", "i", v1.clone(), &id1);
            let k2 = RidxKey::new("t", "i", v2.clone(), &id2);
            let e1 = k1.encode();
            prop_assert_eq!(RidxKey::decode(&e1).unwrap(), k1.clone());
            prop_assert_eq!(k1.encode().cmp(&k2.encode()), (v1.clone(), id1.as_bytes()).cmp(&(v2, id2.as_bytes())));
            prop_assert!(k1.encode().starts_with(&RidxKey::value_prefix("t", "i", &v1)));
        }

        #[test]
        fn ts_orders_by_time_within_a_series(m in name(), e in name(), a in any::<i64>(), b in any::<i64>()) {
            let ka = TsKey::new(&m, &e, a).encode();
            let kb = TsKey::new(&m, &e, b).encode();
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert!(ka.starts_with(&TsKey::series_prefix(&m, &e)));
            prop_assert_eq!(TsKey::decode(&ka).unwrap(), TsKey::new(&m, &e, a));
        }

        #[test]
        fn graph_vertex_prefix_is_exact(v1 in name(), v2 in name(), id in name()) {
            let k = GraphKey::new(Direction::Out, "e", &v2, &id).encode();
            prop_assert_eq!(k.starts_with(&GraphKey::vertex_prefix(Direction::Out, "e", &v1)), v1 == v2);
            prop_assert!(!k.starts_with(&GraphKey::vertex_prefix(Direction::In, "e", &v2)));
        }

        #[test]
        fn display_shows_scan_bounds(v in tuple::tests::any_component()) {
            let p = RidxKey::value_prefix("t", "i", &v);
            let after = prefix_successor(&p).unwrap();
            let shown = display("ridx", &after);
            // the successor of a one-byte component is the next type's start (null+ is false)
            prop_assert!(shown.starts_with("ridx:t:i:"), "{}", shown);
            // bytes components render as 0x… themselves; anything else never falls back to hex
            // (the component itself: an escaped NUL before an `x` also reads `0x`)
            prop_assert!(matches!(v, Component::Bytes(_)) || !shown["ridx:t:i:".len()..].starts_with("0x"), "{}", shown);
        }

        #[test]
        fn display_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            let _ = display("entity", &bytes);
        }
    }
}

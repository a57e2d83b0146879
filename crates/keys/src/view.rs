//! `view:{table}:{view}:…` → the keys of a maintained view (`service::views`):
//!
//! - `view:{table}:{view}:c` → the view's size, u64 BE: members of a filter view, groups of a
//!   group view;
//! - `view:{table}:{view}:m:{id}` → empty: a member of a filter view (members page in `_id`
//!   order, as the keys sort);
//! - `view:{table}:{view}:g:{group…}` → a group's state (document count, and per summed field
//!   the exact sum; codec in `service::views::state`); one component per `by` field;
//! - `view:{table}:{view}:x:{field}:{group…}:{value}` → u64 BE, how many of the group's
//!   documents hold that value of `field`: the group's min of `field` is the first key of its
//!   range, the max the last, so both stay exact under deletes without a rescan.
//!
//! The tuple encoding is self-delimiting, so a group prefix (`g` or `x:{field}` followed by the
//! group's components) holds exactly that group's keys.

use super::tuple::{Component, KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// The kinds of key under one view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewPart<'a> {
    /// the view's member or group count
    Count,
    /// a filter view's member
    Member(Cow<'a, str>),
    /// a group's state
    Group(Vec<Component<'a>>),
    /// a value count of a min/max field within a group: field, group, value
    Value(Cow<'a, str>, Vec<Component<'a>>, Component<'a>),
}

/// A key of a maintained view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// view name
    pub view: Cow<'a, str>,
    /// what the key holds
    pub part: ViewPart<'a>,
}

/// Room for a view key's group and value components beside its names (a key grows without
/// reallocating while they fit: keys are made on the write path, several per view per write).
const COMPONENTS_ROOM: usize = 64;

fn head(table: &str, view: &str, kind: &str) -> KeyWriter {
    KeyWriter::with_capacity(table.len() + view.len() + kind.len() + 9 + COMPONENTS_ROOM).str(table).str(view).str(kind)
}

impl<'a> ViewKey<'a> {
    /// `view:{table}:{view}:c`
    pub fn count(table: &'a str, view: &'a str) -> Self {
        ViewKey { table: table.into(), view: view.into(), part: ViewPart::Count }
    }

    /// `view:{table}:{view}:m:{id}`
    pub fn member(table: &'a str, view: &'a str, id: &'a str) -> Self {
        ViewKey { table: table.into(), view: view.into(), part: ViewPart::Member(id.into()) }
    }

    /// `view:{table}:{view}:g:{group…}`
    pub fn group(table: &'a str, view: &'a str, group: Vec<Component<'a>>) -> Self {
        ViewKey { table: table.into(), view: view.into(), part: ViewPart::Group(group) }
    }

    /// `view:{table}:{view}:x:{field}:{group…}:{value}`
    pub fn value(
        table: &'a str,
        view: &'a str,
        field: &'a str,
        group: Vec<Component<'a>>,
        value: Component<'a>,
    ) -> Self {
        ViewKey { table: table.into(), view: view.into(), part: ViewPart::Value(field.into(), group, value) }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        let (t, v) = (&*self.table, &*self.view);
        match &self.part {
            ViewPart::Count => head(t, v, "c").finish(),
            ViewPart::Member(id) => head(t, v, "m").str(id).finish(),
            ViewPart::Group(g) => g.iter().fold(head(t, v, "g"), |w, c| w.component(c)).finish(),
            ViewPart::Value(f, g, value) => {
                g.iter().fold(head(t, v, "x").str(f), |w, c| w.component(c)).component(value).finish()
            }
        }
    }

    /// Parses key bytes; `by` is the number of group components of the view (0 for a filter view).
    pub fn decode(key: &'a [u8], by: usize) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let (table, view) = (r.next_str()?, r.next_str()?);
        let group = |r: &mut KeyReader<'a>| (0..by).map(|_| r.next_component()).collect::<Result<Vec<_>, _>>();
        let part = match r.next_str()?.as_ref() {
            "c" => ViewPart::Count,
            "m" => ViewPart::Member(r.next_str()?),
            "g" => ViewPart::Group(group(&mut r)?),
            "x" => {
                let field = r.next_str()?;
                let g = group(&mut r)?;
                ViewPart::Value(field, g, r.next_component()?)
            }
            _ => return Err(KeyError::UnexpectedType { expected: "view key kind" }),
        };
        r.end()?;
        Ok(ViewKey { table, view, part })
    }

    /// The prefix of every key of one view.
    pub fn view_prefix(table: &str, view: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(view).finish()
    }

    /// The prefix of a filter view's members.
    pub fn members_prefix(table: &str, view: &str) -> Vec<u8> {
        head(table, view, "m").finish()
    }

    /// The prefix of a group view's group states.
    pub fn groups_prefix(table: &str, view: &str) -> Vec<u8> {
        head(table, view, "g").finish()
    }

    /// The prefix of one group's value counts of `field`.
    pub fn values_prefix(table: &str, view: &str, field: &str, group: &[Component<'_>]) -> Vec<u8> {
        group.iter().fold(head(table, view, "x").str(field), |w, c| w.component(c)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple::Number;
    use crate::{display, prefix_successor};
    use proptest::prelude::*;

    #[test]
    fn golden() {
        let m = ViewKey::member("t", "v", "a");
        assert_eq!(m.encode(), b"\x07t\x00\x01\x07v\x00\x01\x07m\x00\x01\x07a\x00\x01");
        assert_eq!(display("view", &m.encode()), "view:t:v:m:a");
        let c = ViewKey::count("t", "v");
        assert_eq!(c.encode(), b"\x07t\x00\x01\x07v\x00\x01\x07c\x00\x01");
        let g = ViewKey::group("t", "v", vec![Component::Str("Oslo".into()), Component::Null]);
        assert_eq!(g.encode(), b"\x07t\x00\x01\x07v\x00\x01\x07g\x00\x01\x07Oslo\x00\x01\x01");
        assert_eq!(display("view", &g.encode()), "view:t:v:g:Oslo:null");
        let x = ViewKey::value("t", "v", "age", vec![Component::Str("Oslo".into())], Component::Num(Number::Int(0)));
        assert_eq!(x.encode(), b"\x07t\x00\x01\x07v\x00\x01\x07x\x00\x01\x07age\x00\x01\x07Oslo\x00\x01\x05");
        assert_eq!(display("view", &x.encode()), "view:t:v:x:age:Oslo:0");
        for (k, by) in [(m, 0), (c, 0), (g, 2), (x, 1)] {
            assert_eq!(ViewKey::decode(&k.encode(), by).unwrap(), k);
        }
        // a key of another kind, or with trailing bytes, does not decode
        assert!(ViewKey::decode(&head("t", "v", "q").finish(), 0).is_err());
        let mut long = ViewKey::member("t", "v", "a").encode();
        long.push(0x01);
        assert!(ViewKey::decode(&long, 0).is_err());
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof!["[a-z]{0,4}", "[a-z:/%\\x00🦀]{0,5}"]
    }

    proptest! {
        /// Members sort by id; a view's prefix holds exactly that view's keys.
        #[test]
        fn members_order_and_prefixes(v1 in name(), v2 in name(), id1 in name(), id2 in name()) {
            let k1 = ViewKey::member("t", &v1, &id1).encode();
            let k2 = ViewKey::member("t", &v2, &id2).encode();
            prop_assert_eq!(ViewKey::decode(&k1, 0).unwrap(), ViewKey::member("t", &v1, &id1));
            if v1 == v2 {
                prop_assert_eq!(k1.cmp(&k2), id1.as_bytes().cmp(id2.as_bytes()));
            }
            prop_assert_eq!(k2.starts_with(&ViewKey::view_prefix("t", &v1)), v1 == v2);
            prop_assert_eq!(k2.starts_with(&ViewKey::members_prefix("t", &v1)), v1 == v2);
        }

        /// Within a group, value keys sort by value (the first is the min, the last the max), and
        /// a group's prefix never holds another group's keys (groups are self-delimiting).
        #[test]
        fn values_order_within_a_group(g1 in crate::tuple::tests::any_component(),
                                       g2 in crate::tuple::tests::any_component(),
                                       a in crate::tuple::tests::any_component(),
                                       b in crate::tuple::tests::any_component()) {
            let ka = ViewKey::value("t", "v", "f", vec![g1.clone()], a.clone()).encode();
            let kb = ViewKey::value("t", "v", "f", vec![g1.clone()], b.clone()).encode();
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            let p2 = ViewKey::values_prefix("t", "v", "f", std::slice::from_ref(&g2));
            prop_assert_eq!(ka.starts_with(&p2), g1 == g2);
            let in_range = ka >= p2 && prefix_successor(&p2).is_none_or(|s| ka < s);
            prop_assert_eq!(in_range, g1 == g2);
            let decoded = ViewKey::decode(&ka, 1).unwrap();
            prop_assert_eq!(decoded, ViewKey::value("t", "v", "f", vec![g1.clone()], a.clone()));
            let g = ViewKey::group("t", "v", vec![g1.clone(), a.clone()]).encode();
            prop_assert_eq!(ViewKey::decode(&g, 2).unwrap(), ViewKey::group("t", "v", vec![g1, a]));
        }
    }
}

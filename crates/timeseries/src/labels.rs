//! Series labels and the series index. A series' labels are a function of its entity: an entity
//! of the form `k=v,k=v` — the form line protocol writes a tag set in, sorted by key, with `\`,
//! `,` and `=` escaped by a backslash inside keys and values — has those labels; any other
//! entity (`server1`, the empty entity of a series without tags) has none. So a JSON write that
//! gives the entity as line protocol builds it names the same series, with the same labels.
//!
//! The series index, `meta:label:{metric}:{name}:{value}:{entity}` (empty values), holds one key
//! per label of every series that has points: written with the series' record when its first
//! point arrives, removed with it when its last point goes. A selector's `name="value"` matchers
//! read only the series they name from it (Prometheus' postings lists, as keys).

use mosaic_keys::MetaKey;
use mosaic_storage::{Space, WriteTx};

/// One label: name and value.
pub type Label = (String, String);

/// The entity of a tag set: `k=v` pairs sorted by key, joined by `,`, with `\`, `,` and `=`
/// escaped in keys and values (so tag values holding them cannot collide with other tag sets).
pub fn entity_of(mut pairs: Vec<(&str, &str)>) -> String {
    pairs.sort_unstable();
    let mut out = String::with_capacity(pairs.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        escape_into(&mut out, k);
        out.push('=');
        escape_into(&mut out, v);
    }
    out
}

fn escape_into(out: &mut String, text: &str) {
    if !text.contains(['\\', ',', '=']) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
}

/// The labels of `entity`, sorted by name: none unless the entity is of the `k=v,k=v` form with
/// non-empty, distinct names (see the module's documentation).
pub fn of(entity: &str) -> Vec<Label> {
    parse(entity).unwrap_or_default()
}

fn parse(entity: &str) -> Option<Vec<Label>> {
    let mut labels: Vec<Label> = Vec::new();
    if entity.is_empty() {
        return Some(labels);
    }
    let (mut name, mut value, mut in_value) = (String::new(), String::new(), false);
    let mut chars = entity.chars();
    loop {
        let c = chars.next();
        match c {
            Some('\\') => {
                let escaped = chars.next()?;
                if in_value { &mut value } else { &mut name }.push(escaped);
            }
            Some('=') if !in_value => in_value = true,
            Some(',') | None => {
                if !in_value || name.is_empty() {
                    return None;
                }
                labels.push((std::mem::take(&mut name), std::mem::take(&mut value)));
                in_value = false;
                if c.is_none() {
                    break;
                }
            }
            Some(c) => if in_value { &mut value } else { &mut name }.push(c),
        }
    }
    labels.sort_unstable();
    if labels.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }
    Some(labels)
}

/// Stages the series index keys of a series that just got its first point (`present`) or lost
/// its last one.
pub fn stage(tx: &mut WriteTx<'_>, metric: &str, entity: &str, present: bool) {
    for (name, value) in of(entity) {
        let key = MetaKey::Label(metric.into(), name.into(), value.into(), entity.into()).encode();
        if present {
            tx.put(Space::Meta, key, Vec::new());
        } else {
            tx.delete(Space::Meta, key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn owned(pairs: &[(&str, &str)]) -> Vec<Label> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn entities_and_their_labels() {
        assert_eq!(entity_of(vec![("region", "eu"), ("host", "h1")]), "host=h1,region=eu");
        assert_eq!(of("host=h1,region=eu"), owned(&[("host", "h1"), ("region", "eu")]));
        // written by hand, in any order
        assert_eq!(of("region=eu,host=h1"), owned(&[("host", "h1"), ("region", "eu")]));
        assert_eq!(of(""), []);
        assert_eq!(of("server1"), []);
        assert_eq!(of("a=1,b"), []);
        assert_eq!(of("=1"), []);
        assert_eq!(of("a=1,a=2"), []);
        assert_eq!(of("a=1\\"), []);
        assert_eq!(of("a=,b=x=y"), owned(&[("a", ""), ("b", "x=y")]));
    }

    #[test]
    fn separators_inside_values_do_not_collide() {
        let one = entity_of(vec![("k", "v,w=x")]);
        let two = entity_of(vec![("k", "v"), ("w", "x")]);
        assert_ne!(one, two);
        assert_eq!(one, "k=v\\,w\\=x");
        assert_eq!(of(&one), owned(&[("k", "v,w=x")]));
        assert_eq!(of(&two), owned(&[("k", "v"), ("w", "x")]));
        assert_eq!(of(&entity_of(vec![("p", "C:\\")])), owned(&[("p", "C:\\")]));
    }

    proptest! {
        #[test]
        fn tag_sets_round_trip(tags in proptest::collection::btree_map("[a-z,=\\\\ ]{1,6}", "[a-z,=\\\\ ]{0,6}", 0..5)) {
            let pairs: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let entity = entity_of(pairs);
            let back: Vec<Label> = tags.into_iter().collect();
            prop_assert_eq!(of(&entity), back);
        }
    }
}

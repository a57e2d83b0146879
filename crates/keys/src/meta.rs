//! `meta:table:{name}`, `meta:index:{table}:{name}`, `meta:metric:{name}`, `meta:seq:{name}`,
//! `meta:field:{id}`, `meta:dropping:{table}`, `meta:index_dropping:{table}:{name}` (value: the dropped
//! index's `created_at`),
//! `meta:count:{table}`, `meta:series:{metric}:{entity}` (value: the series' point count, first
//! and last time), `meta:label:{metric}:{name}:{value}:{entity}` (empty: the series index, one
//! key per label of each series), `meta:view:{table}:{name}`, `meta:view_dropping:{table}:{name}` (value: the
//! dropped view's `created_at`), `meta:database:{name}` (JSON: the database's id and creation
//! time), `meta:database_dropping:{id}` (the dropped database's name) → catalog entries; the two
//! database kinds only in the default database.

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// A catalog key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaKey<'a> {
    /// a table definition
    Table(Cow<'a, str>),
    /// an index definition: table, index name
    Index(Cow<'a, str>, Cow<'a, str>),
    /// a metric's configuration (retention)
    Metric(Cow<'a, str>),
    /// a named sequence's last value
    Seq(Cow<'a, str>),
    /// an interned field name of the entity codec, by id
    Field(u32),
    /// a dropped table whose keys are still being removed
    Dropping(Cow<'a, str>),
    /// a dropped index whose entries are still being removed: table, index name
    IndexDropping(Cow<'a, str>, Cow<'a, str>),
    /// a table's document count
    Count(Cow<'a, str>),
    /// a time series' statistics: metric, entity
    Series(Cow<'a, str>, Cow<'a, str>),
    /// one label of a time series (the series index): metric, label name, label value, entity
    Label(Cow<'a, str>, Cow<'a, str>, Cow<'a, str>, Cow<'a, str>),
    /// a maintained view's definition: table, view name
    View(Cow<'a, str>, Cow<'a, str>),
    /// a dropped view whose keys are still being removed: table, view name
    ViewDropping(Cow<'a, str>, Cow<'a, str>),
    /// the data directory's format version
    Format,
    /// one of the server's databases (kept in the default one): its name → its id and creation
    Database(Cow<'a, str>),
    /// a dropped database whose store is still being removed (kept in the default one), by id
    DatabaseDropping(u32),
}

impl<'a> MetaKey<'a> {
    fn kind(&self) -> &'static str {
        match self {
            MetaKey::Table(_) => "table",
            MetaKey::Index(..) => "index",
            MetaKey::Metric(_) => "metric",
            MetaKey::Seq(_) => "seq",
            MetaKey::Field(_) => "field",
            MetaKey::Dropping(_) => "dropping",
            MetaKey::IndexDropping(..) => "index_dropping",
            MetaKey::Count(_) => "count",
            MetaKey::Series(..) => "series",
            MetaKey::Label(..) => "label",
            MetaKey::View(..) => "view",
            MetaKey::ViewDropping(..) => "view_dropping",
            MetaKey::Format => "format",
            MetaKey::Database(_) => "database",
            MetaKey::DatabaseDropping(_) => "database_dropping",
        }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        let w = KeyWriter::default().str(self.kind());
        match self {
            MetaKey::Table(n)
            | MetaKey::Metric(n)
            | MetaKey::Seq(n)
            | MetaKey::Dropping(n)
            | MetaKey::Count(n)
            | MetaKey::Database(n) => w.str(n),
            MetaKey::Index(t, n)
            | MetaKey::IndexDropping(t, n)
            | MetaKey::Series(t, n)
            | MetaKey::View(t, n)
            | MetaKey::ViewDropping(t, n) => w.str(t).str(n),
            MetaKey::Label(m, n, v, e) => w.str(m).str(n).str(v).str(e),
            MetaKey::Field(id) | MetaKey::DatabaseDropping(id) => w.num(i64::from(*id)),
            MetaKey::Format => w,
        }
        .finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = match r.next_str()?.as_ref() {
            "table" => MetaKey::Table(r.next_str()?),
            "index" => MetaKey::Index(r.next_str()?, r.next_str()?),
            "metric" => MetaKey::Metric(r.next_str()?),
            "seq" => MetaKey::Seq(r.next_str()?),
            "field" => {
                MetaKey::Field(u32::try_from(r.next_u64()?).map_err(|_| KeyError::UnexpectedType { expected: "u32" })?)
            }
            "dropping" => MetaKey::Dropping(r.next_str()?),
            "index_dropping" => MetaKey::IndexDropping(r.next_str()?, r.next_str()?),
            "count" => MetaKey::Count(r.next_str()?),
            "series" => MetaKey::Series(r.next_str()?, r.next_str()?),
            "label" => MetaKey::Label(r.next_str()?, r.next_str()?, r.next_str()?, r.next_str()?),
            "view" => MetaKey::View(r.next_str()?, r.next_str()?),
            "view_dropping" => MetaKey::ViewDropping(r.next_str()?, r.next_str()?),
            "format" => MetaKey::Format,
            "database" => MetaKey::Database(r.next_str()?),
            "database_dropping" => MetaKey::DatabaseDropping(
                u32::try_from(r.next_u64()?).map_err(|_| KeyError::UnexpectedType { expected: "u32" })?,
            ),
            _ => return Err(KeyError::UnexpectedType { expected: "catalog kind" }),
        };
        r.end()?;
        Ok(k)
    }

    /// The prefix of every catalog key of one kind: `"table"`, `"index"`, `"metric"`, `"seq"`,
    /// `"field"`, `"dropping"`, `"index_dropping"`, `"count"`, `"series"`, `"label"`, `"view"`,
    /// `"view_dropping"`, `"format"`, `"database"` or `"database_dropping"`.
    pub fn kind_prefix(kind: &str) -> Vec<u8> {
        KeyWriter::default().str(kind).finish()
    }

    /// The prefix of every index definition of `table`.
    pub fn indexes_of(table: &str) -> Vec<u8> {
        KeyWriter::default().str("index").str(table).finish()
    }

    /// The prefix of every view definition of `table`.
    pub fn views_of(table: &str) -> Vec<u8> {
        KeyWriter::default().str("view").str(table).finish()
    }

    /// The prefix of the statistics of every series of `metric`.
    pub fn series_of(metric: &str) -> Vec<u8> {
        KeyWriter::default().str("series").str(metric).finish()
    }

    /// The prefix of the series index of `metric`.
    pub fn labels_of(metric: &str) -> Vec<u8> {
        KeyWriter::default().str("label").str(metric).finish()
    }

    /// The prefix of the series of `metric` whose label `name` is `value`.
    pub fn label_postings(metric: &str, name: &str, value: &str) -> Vec<u8> {
        KeyWriter::default().str("label").str(metric).str(name).str(value).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let t = MetaKey::Table("users".into());
        assert_eq!(t.encode(), b"\x07table\x00\x01\x07users\x00\x01");
        let all = [
            t,
            MetaKey::Index("users".into(), "by_age".into()),
            MetaKey::Metric("cpu".into()),
            MetaKey::Seq("changefeed".into()),
            MetaKey::Field(7),
            MetaKey::Dropping("old".into()),
            MetaKey::Count("users".into()),
            MetaKey::IndexDropping("users".into(), "by_age".into()),
            MetaKey::Series("cpu".into(), "host=h1".into()),
            MetaKey::View("users".into(), "adults".into()),
            MetaKey::ViewDropping("users".into(), "adults".into()),
            MetaKey::Format,
            MetaKey::Label("cpu".into(), "host".into(), "h1".into(), "host=h1".into()),
        ];
        for k in &all {
            assert_eq!(&MetaKey::decode(&k.encode()).unwrap(), k);
        }
        assert_eq!(super::super::display("meta", &all[1].encode()), "meta:index:users:by_age");
        assert_eq!(super::super::display("meta", &all[4].encode()), "meta:field:7");
        assert_eq!(super::super::display("meta", &all[7].encode()), "meta:index_dropping:users:by_age");
        assert_eq!(all[7].encode(), b"\x07index_dropping\x00\x01\x07users\x00\x01\x07by_age\x00\x01");
        assert!(all[1].encode().starts_with(&MetaKey::indexes_of("users")));
        assert_eq!(super::super::display("meta", &all[8].encode()), "meta:series:cpu:\"host=h1\"");
        assert!(all[8].encode().starts_with(&MetaKey::series_of("cpu")));
        assert!(!MetaKey::Series("cpu2".into(), "h".into()).encode().starts_with(&MetaKey::series_of("cpu")));
        assert!(!MetaKey::Index("users2".into(), "x".into()).encode().starts_with(&MetaKey::indexes_of("users")));
        assert_eq!(all[9].encode(), b"\x07view\x00\x01\x07users\x00\x01\x07adults\x00\x01");
        assert!(all[9].encode().starts_with(&MetaKey::views_of("users")));
        assert!(!all[10].encode().starts_with(&MetaKey::views_of("users")));
        assert!(!MetaKey::View("users2".into(), "x".into()).encode().starts_with(&MetaKey::views_of("users")));
        assert_eq!(super::super::display("meta", &all[10].encode()), "meta:view_dropping:users:adults");
        assert_eq!(super::super::display("meta", &all[12].encode()), "meta:label:cpu:host:h1:\"host=h1\"");
        assert!(all[12].encode().starts_with(&MetaKey::label_postings("cpu", "host", "h1")));
        assert!(all[12].encode().starts_with(&MetaKey::labels_of("cpu")));
        assert!(
            !MetaKey::Label("cpu".into(), "host".into(), "h10".into(), "x".into())
                .encode()
                .starts_with(&MetaKey::label_postings("cpu", "host", "h1"))
        );
    }
}

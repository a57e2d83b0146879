//! The hand parser against influxdata's crate, the oracle: on random lines built from the
//! grammar's pieces (valid and broken: escapes, quotes, numbers of every kind and out of range,
//! stray spaces, tabs, comments) and on random text, both give the same line or both an error.

use super::{Field, parse};
use influxdb_line_protocol::FieldValue;
use proptest::prelude::*;

/// What a parsed line says, comparable across the two parsers (floats by their bits).
#[derive(Debug, PartialEq)]
struct Said {
    measurement: String,
    tags: Vec<(String, String)>,
    fields: Vec<(String, String)>,
    timestamp: Option<i64>,
}

fn ours(text: &str) -> Option<Result<Said, ()>> {
    parse(text).map(|r| {
        r.map(|l| Said {
            measurement: l.measurement.into_owned(),
            tags: l.tags.into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect(),
            fields: l
                .fields
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        Field::I64(n) => format!("i{n}"),
                        Field::U64(n) => format!("u{n}"),
                        Field::F64(f) => format!("f{}", f.to_bits()),
                        Field::Bool(b) => format!("b{b}"),
                        Field::Str(s) => format!("s{s}"),
                    };
                    (k.into_owned(), v)
                })
                .collect(),
            timestamp: l.timestamp,
        })
        .map_err(|_| ())
    })
}

fn theirs(text: &str) -> Option<Result<Said, ()>> {
    influxdb_line_protocol::parse_lines(text).next().map(|r| {
        r.map(|l| Said {
            measurement: l.series.measurement.as_str().to_owned(),
            tags: l
                .series
                .tag_set
                .iter()
                .flatten()
                .map(|(k, v)| (k.as_str().to_owned(), v.as_str().to_owned()))
                .collect(),
            fields: l
                .field_set
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        FieldValue::I64(n) => format!("i{n}"),
                        FieldValue::U64(n) => format!("u{n}"),
                        FieldValue::F64(f) => format!("f{}", f.to_bits()),
                        FieldValue::Boolean(b) => format!("b{b}"),
                        FieldValue::String(s) => format!("s{}", s.as_str()),
                    };
                    (k.as_str().to_owned(), v)
                })
                .collect(),
            timestamp: l.timestamp,
        })
        .map_err(|_| ())
    })
}

const NAMES: &[&str] = &[
    "m", "cpu", "a\\ b", "a\\,b", "x\\=y", "\\\\", "é", "m\\", "a=b", "a,b", "\\q", "\\é", "x\\", "t\0", "\"q\"", "",
    "#c", "-1", "a\\\\b",
];
const VALUES: &[&str] = &[
    "1",
    "-1.5",
    "1e3",
    "1.5E-2",
    "2e+5",
    "3i",
    "-3i",
    "4u",
    "-4u",
    "t",
    "T",
    "true",
    "True",
    "TRUE",
    "f",
    "false",
    "FALSE",
    "tru",
    "\"s\"",
    "\"a\\\"b\"",
    "\"a\\\\\"",
    "\"\"",
    "\"x y,z=1\"",
    "\"a\\b\"",
    "1.",
    ".5",
    "1e",
    "--1",
    "99999999999999999999i",
    "99999999999999999999u",
    "9223372036854775807i",
    "1e400",
    "abc",
    "\"open",
    "0",
    "-0",
    "1.5e3i",
    "",
];
const TIMESTAMPS: &[&str] = &["", " 5", " -5", "  7", " 5 ", " 99999999999999999999", " 5x", " -", "  ", " 1 2", "\t5"];
const GAPS: &[&str] = &[" ", "  ", "\t", "", ","];

fn line_strategy() -> impl Strategy<Value = String> {
    let pick = |items: &'static [&'static str]| prop::sample::select(items);
    (
        prop::option::of(pick(&[" ", "\t", "\n", "# comment\n"])),
        pick(NAMES),
        prop::collection::vec((pick(NAMES), pick(NAMES)), 0..3),
        pick(GAPS),
        prop::collection::vec((pick(NAMES), pick(VALUES)), 0..3),
        pick(TIMESTAMPS),
    )
        .prop_map(|(lead, m, tags, gap, fields, ts)| {
            let mut s = lead.unwrap_or("").to_owned();
            s.push_str(m);
            for (k, v) in tags {
                s.push_str(&format!(",{k}={v}"));
            }
            s.push_str(gap);
            let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&fields.join(","));
            s.push_str(ts);
            s
        })
}

fn agree(body: &str) -> Result<(), TestCaseError> {
    for text in influxdb_line_protocol::split_lines(body) {
        prop_assert_eq!(ours(text), theirs(text), "line {:?}", text);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn lines_built_from_the_grammar_parse_as_the_crate_says(line in line_strategy()) {
        agree(&line)?;
    }

    #[test]
    fn random_text_parses_as_the_crate_says(text in "[a-c=, \\\\\"#t0-9.eEiu+\\-\t\n\u{e9}]{0,40}") {
        agree(&text)?;
    }
}

#[test]
fn the_usual_lines() {
    for body in
        ["cpu,host=a,region=eu value=0.5 1700000000", "disk\\ io,path=C:\\,x=a\\ b\\=c value=1,n=2i 5", "m s=\"x\""]
    {
        assert!(matches!(ours(body), Some(Ok(_))), "{body}");
        assert_eq!(ours(body), theirs(body));
    }
}

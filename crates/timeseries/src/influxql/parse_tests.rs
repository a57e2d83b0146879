use super::*;
use proptest::prelude::*;

const NOW: i64 = 1_767_225_600_000_000_000; // 2026-01-01T00:00:00Z

fn one(text: &str) -> Statement {
    let mut all = parse(text, NOW).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(all.len(), 1, "{text}");
    all.pop().unwrap()
}

fn select(text: &str) -> Select {
    match one(text) {
        Statement::Select(s) => *s,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn a_grafana_query() {
    let s = select(
        "SELECT mean(\"usage\") AS \"m\", max(usage) FROM \"telegraf\".\"autogen\".\"cpu\" WHERE (\"host\" =~ /^a$/ \
         OR host = 'b') AND time >= 1767225600000ms and time <= now() - 5m GROUP BY time(1m, 30s), \"host\" \
         fill(previous) ORDER BY time DESC LIMIT 10 OFFSET 2 SLIMIT 3",
    );
    assert_eq!(s.fields.len(), 2);
    assert_eq!(s.fields[0].expr, FieldExpr::Call(Func::Mean, Some("usage".into())));
    assert_eq!(s.fields[0].alias.as_deref(), Some("m"));
    assert!(matches!(&s.from[..], [Source::Name(n)] if n == "cpu"));
    assert_eq!(s.interval, Some((60_000_000_000, 30_000_000_000)));
    assert_eq!(s.group_tags, GroupTags::Keys(vec!["host".into()]));
    assert_eq!(s.fill, Fill::Previous);
    assert!(s.desc);
    assert_eq!((s.rows.limit, s.rows.offset, s.series.limit), (Some(10), 2, Some(3)));
    let Some(Cond::And(left, right)) = &s.cond else { panic!("{:?}", s.cond) };
    assert!(matches!(**left, Cond::And(..)));
    assert!(matches!(**right, Cond::Cmp(Operand::Ident(_), CmpOp::Le, Operand::Time(t)) if t == NOW - 300_000_000_000));
}

#[test]
fn every_show_statement() {
    assert!(matches!(one("show databases"), Statement::ShowDatabases));
    assert!(matches!(one("SHOW RETENTION POLICIES ON \"db\""), Statement::ShowRetentionPolicies { on: Some(_) }));
    assert!(matches!(
        one("SHOW MEASUREMENTS WITH MEASUREMENT =~ /cp.*/ LIMIT 100"),
        Statement::ShowMeasurements { name: Some(NameFilter::Re(_)), page: Page { limit: Some(100), .. }, .. }
    ));
    assert!(matches!(one("SHOW TAG KEYS FROM cpu"), Statement::ShowTagKeys { .. }));
    match one("SHOW TAG VALUES FROM \"cpu\" WITH KEY IN (\"host\", region) WHERE region = 'eu'") {
        Statement::ShowTagValues { key: NameFilter::In(keys), cond: Some(_), .. } => {
            assert_eq!(keys, ["host", "region"])
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        one("SHOW TAG VALUES WITH KEY = \"host\""),
        Statement::ShowTagValues { key: NameFilter::Eq(_), .. }
    ));
    assert!(matches!(one("SHOW FIELD KEYS FROM cpu"), Statement::ShowFieldKeys { .. }));
    assert!(matches!(one("SHOW SERIES FROM cpu WHERE host = 'a' LIMIT 5"), Statement::ShowSeries { .. }));
    assert_eq!(parse("SHOW DATABASES; SELECT * FROM cpu;", NOW).unwrap().len(), 2);
}

#[test]
fn times_in_every_form() {
    let bound = |text: &str| match select(&format!("SELECT v FROM m WHERE time > {text}")).cond {
        Some(Cond::Cmp(_, _, Operand::Time(t))) => t,
        Some(Cond::Cmp(_, _, Operand::Str(s))) => time_string(&s).unwrap(),
        Some(Cond::Cmp(_, _, Operand::Number(n))) => n as i64,
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(bound("'2026-01-01T00:00:00Z'"), NOW);
    assert_eq!(bound("'2026-01-01 00:00:00'"), NOW);
    assert_eq!(bound("'2026-01-01'"), NOW);
    assert_eq!(bound("1767225600s"), NOW);
    assert_eq!(bound("1767225600000ms"), NOW);
    assert_eq!(bound(&NOW.to_string()), NOW);
    assert_eq!(bound("now()"), NOW);
    assert_eq!(bound("now() - 1h + 30m"), NOW - 1_800_000_000_000);
    assert_eq!(bound("'2026-01-01T00:00:00Z' - 1d"), NOW - 86_400_000_000_000);
}

#[test]
fn bad_queries_say_what_and_where() {
    for (text, says) in [
        ("", "empty query"),
        ("DELETE FROM cpu", "SELECT or SHOW"),
        ("SELECT", "a field"),
        ("SELECT v", "FROM"),
        ("SELECT v FROM", "a measurement"),
        ("SELECT v FROM m WHERE", "a value"),
        ("SELECT v FROM m WHERE host", "a comparison"),
        ("SELECT v FROM m WHERE host = 'a' OR", "a value"),
        ("SELECT v FROM m WHERE (host = 'a'", "`)`"),
        ("SELECT percentile(v, 90) FROM m", "percentile() is not supported"),
        ("SELECT mean(v, 2) FROM m", "one argument"),
        ("SELECT v * 2 FROM m", "arithmetic"),
        ("SELECT mean(v) FROM m GROUP BY time(0s)", "positive interval"),
        ("SELECT mean(v) FROM m GROUP BY time(x)", "a duration"),
        ("SELECT v FROM m fill(sideways)", "null, none"),
        ("SELECT v FROM m ORDER BY host", "ordered by time"),
        ("SELECT v FROM m LIMIT -1", "a whole number"),
        ("SELECT v FROM m tz('Europe/Paris')", "tz()"),
        ("SELECT v FROM m WHERE host =~ /(/", "/(/"),
        ("SHOW USERS", "SHOW statements"),
        ("SHOW TAG VALUES FROM cpu", "WITH"),
        ("SELECT v FROM m x", "`;` or the end"),
        ("SELECT v FROM m WHERE time > 'yesterday' + 1h", "not a time"),
        ("SELECT FROM m", "expected a field"),
        ("SELECT v FROM m WHERE time > - - 1h", "after `-`"),
    ] {
        let err = parse(text, NOW).unwrap_err();
        assert!(err.contains(says), "{text}: {err}");
    }
    assert!(parse(&"x".repeat(MAX_QUERY_BYTES + 1), NOW).unwrap_err().contains("longer than"));
    assert!(parse(&"SHOW DATABASES;".repeat(MAX_STATEMENTS + 1), NOW).unwrap_err().contains("at most"));
    // nesting and signs bounded, not recursed into as deep as the text goes
    let nested = format!("SELECT v FROM m WHERE {}a = 'b'{}", "(".repeat(20_000), ")".repeat(20_000));
    assert!(parse(&nested, NOW).unwrap_err().contains("parentheses deep"));
    let signs = format!("SELECT v FROM m WHERE time > {}1", "- ".repeat(20_000));
    assert!(parse(&signs, NOW).is_err());
    assert!(matches!(select("SELECT v FROM m fill(-2)").fill, Fill::Value(v) if v == -2.0));
    let deep = format!("SELECT v FROM m WHERE {}", vec!["a = 'b'"; 300].join(" AND "));
    assert!(parse(&deep, NOW).unwrap_err().contains("at most"));
}

proptest! {
    /// Any text: an answer or an error, never a panic.
    #[test]
    fn any_text_parses_or_is_refused(text in "\\PC{0,80}") {
        let _ = parse(&text, NOW);
    }

    /// Queries made of the grammar's pieces parse, and their conditions keep every comparison.
    #[test]
    fn generated_selects_parse(
        fields in proptest::collection::vec(("(mean|max|count|median)", "[a-z][a-z0-9_]{0,5}"), 1..4),
        tags in proptest::collection::vec(("[a-z][a-z0-9]{0,4}", "[a-z0-9 ]{0,5}", any::<bool>()), 0..5),
        every in 1i64..3600,
        fill in "(null|none|previous|linear|0|-1\\.5)",
    ) {
        let cols: Vec<String> = fields.iter().map(|(f, a)| format!("{f}(\"{a}\")")).collect();
        let conds: Vec<String> = tags
            .iter()
            .map(|(k, v, re)| if *re { format!("\"{k}\" =~ /^{v}$/") } else { format!("\"{k}\" = '{v}'") })
            .chain(std::iter::once("time >= now() - 1h".to_owned()))
            .collect();
        let text = format!(
            "SELECT {} FROM m WHERE {} GROUP BY time({every}s), * fill({fill})",
            cols.join(", "),
            conds.join(" AND ")
        );
        let s = select(&text);
        prop_assert_eq!(s.fields.len(), fields.len());
        prop_assert_eq!(s.interval, Some((every * 1_000_000_000, 0)));
        prop_assert_eq!(s.group_tags, GroupTags::All);
        fn count(c: &Cond) -> usize {
            match c {
                Cond::And(a, b) | Cond::Or(a, b) => count(a) + count(b),
                Cond::Cmp(..) => 1,
            }
        }
        prop_assert_eq!(count(s.cond.as_ref().unwrap()), tags.len() + 1);
    }
}

//! The Prometheus text exposition format 0.0.4, made from the OpenMetrics text that
//! prometheus-client writes. The two formats share their sample lines; what differs is metadata:
//!
//! - a counter family is named as its samples (`# TYPE x_total counter`, where OpenMetrics says
//!   `# TYPE x counter` over `x_total` samples), which is what the 0.0.4 parsers (and
//!   `promtool check metrics`) match samples to families by;
//! - 0.0.4 has no `info` type: an info family `x` becomes the gauge `x_info` (its samples are
//!   `x_info{…} 1` already), as the Prometheus data model has it;
//! - `unknown` is `untyped`; `# UNIT` lines and `# EOF` go; `_created` samples go (0.0.4 has no
//!   place for them), as do exemplars; a sample's timestamp goes from seconds to milliseconds;
//! - `# HELP` text escapes only `\` and a newline (OpenMetrics also escapes `"`).
//!
//! Only the OpenMetrics that prometheus-client writes is read: one `# HELP`, `# TYPE` and maybe
//! `# UNIT` line before each family's samples, every family once.

/// The media type of the answer.
pub(super) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The 0.0.4 text of an OpenMetrics text.
pub(super) fn from_openmetrics(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // the family's HELP text, held until its TYPE names it; and the family being written
    let mut help: Option<(&str, &str)> = None;
    let mut family = Family::default();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.strip_prefix(' ').unwrap_or(comment);
            let (keyword, rest) = comment.split_once(' ').unwrap_or((comment, ""));
            let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            match keyword {
                "HELP" => {
                    flush_help(&mut out, help.take(), None);
                    help = Some((name, rest));
                }
                "TYPE" => {
                    family = Family::of(name, rest);
                    let renamed = family.renamed();
                    match help.take() {
                        Some(held) if held.0 == name => flush_help(&mut out, Some(held), Some(&renamed)),
                        // a HELP of another family, with no TYPE of its own: as it was
                        other => flush_help(&mut out, other, None),
                    }
                    out.push_str("# TYPE ");
                    out.push_str(&renamed);
                    out.push(' ');
                    out.push_str(family.kind);
                    out.push('\n');
                }
                // UNIT, EOF and any other comment have no 0.0.4 form
                _ => {}
            }
            continue;
        }
        flush_help(&mut out, help.take(), None);
        if line.is_empty() {
            continue;
        }
        sample(&mut out, line, &family);
    }
    flush_help(&mut out, help.take(), None);
    out
}

/// The family whose samples follow: its OpenMetrics name and its 0.0.4 type.
#[derive(Debug, Default)]
struct Family {
    name: String,
    kind: &'static str,
    /// what 0.0.4 appends to the family's name (`_total`, `_info`)
    suffix: &'static str,
}

impl Family {
    fn of(name: &str, kind: &str) -> Family {
        let (kind, suffix) = match kind {
            "counter" => ("counter", "_total"),
            "info" => ("gauge", "_info"),
            "gauge" => ("gauge", ""),
            "histogram" => ("histogram", ""),
            "summary" => ("summary", ""),
            // unknown, and the types 0.0.4 has none of (gaugehistogram, stateset)
            _ => ("untyped", ""),
        };
        Family { name: name.to_owned(), kind, suffix }
    }

    fn renamed(&self) -> String {
        format!("{}{}", self.name, self.suffix)
    }

    /// Whether a sample of this name has no 0.0.4 form.
    fn drops(&self, sample: &str) -> bool {
        matches!(self.kind, "counter" | "histogram" | "summary")
            && sample.strip_prefix(self.name.as_str()) == Some("_created")
    }
}

/// Writes a held `# HELP` line under `name` (its own when `None`), its text escaped for 0.0.4.
fn flush_help(out: &mut String, help: Option<(&str, &str)>, name: Option<&str>) {
    let Some((own, text)) = help else { return };
    out.push_str("# HELP ");
    out.push_str(name.unwrap_or(own));
    out.push(' ');
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push_str("\\n"),
                Some('\\') => out.push_str("\\\\"),
                Some('"') => out.push('"'),
                // a lone backslash is one
                Some(other) => {
                    out.push_str("\\\\");
                    out.push(other);
                }
                None => out.push_str("\\\\"),
            },
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\n');
}

/// Writes one sample line: name and labels as they are, the value, the timestamp in ms; no
/// exemplar.
fn sample(out: &mut String, line: &str, family: &Family) {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    if family.drops(&line[..name_end]) {
        return;
    }
    let labels_end =
        if line[name_end..].starts_with('{') { name_end + labels_len(&line[name_end..]) } else { name_end };
    let (series, rest) = line.split_at(labels_end);
    // ` value [timestamp] [# exemplar]`
    let rest = rest.split(" # ").next().unwrap_or(rest);
    let mut fields = rest.split_ascii_whitespace();
    let Some(value) = fields.next() else { return };
    out.push_str(series);
    out.push(' ');
    out.push_str(value);
    if let Some(ms) = fields.next().and_then(|seconds| seconds.parse::<f64>().ok()).map(|s| (s * 1000.0).round()) {
        out.push(' ');
        out.push_str(&format!("{ms:.0}"));
    }
    out.push('\n');
}

/// The length of the label set `{…}` that `text` starts with, its closing brace included
/// (quoted values may hold `}`, `,`, `#` and escaped quotes).
fn labels_len(text: &str) -> usize {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return i + 1,
            _ => {}
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family as Families;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::metrics::info::Info;
    use prometheus_client::registry::{Registry, Unit};

    /// What prometheus-client writes for each type becomes what 0.0.4 says of it.
    #[test]
    fn every_type_prometheus_client_writes() {
        let mut registry = Registry::default();
        let requests = Families::<Vec<(String, String)>, Counter>::default();
        requests.get_or_create(&vec![("route".into(), "/a{b}, \"c\" # d\\e\nf".into())]).inc_by(3);
        registry.register("app_requests", "requests \"answered\"", requests);
        let fsync: Counter<f64> = Counter::default();
        fsync.inc_by(1.5);
        registry.register_with_unit("app_fsync", "time in fsyncs", Unit::Seconds, fsync);
        let open: Gauge = Gauge::default();
        open.set(-2);
        registry.register("app_open", "a back\\slash", open);
        registry.register("app_build", "the version", Info::new(vec![("version", "1.2")]));
        let latency = Histogram::new([0.5, 1.0]);
        latency.observe(0.7);
        registry.register_with_unit("app_latency", "", Unit::Seconds, latency);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert_eq!(
            from_openmetrics(&text),
            "# HELP app_requests_total requests \"answered\".\n\
             # TYPE app_requests_total counter\n\
             app_requests_total{route=\"/a{b}, \\\"c\\\" # d\\\\e\\nf\"} 3\n\
             # HELP app_fsync_seconds_total time in fsyncs.\n\
             # TYPE app_fsync_seconds_total counter\n\
             app_fsync_seconds_total 1.5\n\
             # HELP app_open a back\\\\slash.\n\
             # TYPE app_open gauge\n\
             app_open -2\n\
             # HELP app_build_info the version.\n\
             # TYPE app_build_info gauge\n\
             app_build_info{version=\"1.2\"} 1\n\
             # HELP app_latency_seconds .\n\
             # TYPE app_latency_seconds histogram\n\
             app_latency_seconds_sum 0.7\n\
             app_latency_seconds_count 1\n\
             app_latency_seconds_bucket{le=\"0.5\"} 0\n\
             app_latency_seconds_bucket{le=\"1.0\"} 1\n\
             app_latency_seconds_bucket{le=\"+Inf\"} 1\n",
            "from:\n{text}"
        );
    }

    /// Exemplars, `_created` samples, timestamps and a HELP without its TYPE, which
    /// prometheus-client may write for other metrics than this server's.
    #[test]
    fn exemplars_created_and_timestamps() {
        let text = "# HELP c a counter\n# TYPE c counter\nc_total{a=\"x # {y}\"} 4 # {trace=\"t\"} 1.0 1.5\n\
                    c_created 1700000000.25\n# HELP u what\n# TYPE u unknown\nu 1 1700000000.5\n\
                    # HELP s a set\n# TYPE s stateset\ns{s=\"a\"} 1\n# HELP lone no type\n# TYPE g gauge\ng 2\n# EOF\n";
        assert_eq!(
            from_openmetrics(text),
            "# HELP c_total a counter\n# TYPE c_total counter\nc_total{a=\"x # {y}\"} 4\n\
             # HELP u what\n# TYPE u untyped\nu 1 1700000000500\n\
             # HELP s a set\n# TYPE s untyped\ns{s=\"a\"} 1\n# HELP lone no type\n# TYPE g gauge\ng 2\n"
        );
    }

    #[test]
    fn labels_end_at_the_first_unquoted_brace() {
        assert_eq!(labels_len(r#"{a="}",b="\"}"} 1"#), 15);
        assert_eq!(labels_len("{} 1"), 2);
        assert_eq!(labels_len("{a=\"unclosed"), 12);
    }
}

//! Which text format a scrape asks for in its `Accept`: OpenMetrics 1.0 (the default) or the
//! Prometheus text format 0.0.4 (`text/plain`).

use axum::http::{HeaderMap, header};

/// The formats `GET /metrics` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// `application/openmetrics-text; version=1.0.0`
    OpenMetrics,
    /// `text/plain; version=0.0.4`
    PrometheusText,
}

/// The format the request's `Accept` prefers. Each format takes the q of the most specific media
/// range that matches it (`application/openmetrics-text` or `text/plain`, then `application/*` or
/// `text/*`, then `*/*`; the highest q among ranges as specific, whatever their `version`); 0.0.4
/// text is answered only when its q is above OpenMetrics' — so OpenMetrics is the answer without
/// `Accept`, on a tie (`*/*`) and when neither is acceptable.
pub(super) fn negotiate(headers: &HeaderMap) -> Format {
    let mut openmetrics = Preference::default();
    let mut text = Preference::default();
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut params = range.split(';');
            let media = params.next().unwrap_or("").trim();
            let Some((kind, subtype)) = media.split_once('/') else { continue };
            let mut q = Some(1.0);
            for param in params {
                let (name, value) = param.split_once('=').unwrap_or((param, ""));
                if name.trim().eq_ignore_ascii_case("q") {
                    q = value.trim().parse::<f32>().ok().filter(|q| (0.0..=1.0).contains(q));
                }
            }
            // a range with a q that does not parse is left out, as RFC 9110 leaves it undefined
            let Some(q) = q else { continue };
            openmetrics.offer(specificity(kind, subtype, "application", "openmetrics-text"), q);
            text.offer(specificity(kind, subtype, "text", "plain"), q);
        }
    }
    if text.q > openmetrics.q { Format::PrometheusText } else { Format::OpenMetrics }
}

/// The q of the most specific range seen that matches a format (0: none yet).
#[derive(Debug, Default)]
struct Preference {
    specificity: u8,
    q: f32,
}

impl Preference {
    fn offer(&mut self, specificity: u8, q: f32) {
        if specificity > self.specificity {
            *self = Preference { specificity, q };
        } else if specificity == self.specificity && specificity > 0 {
            self.q = self.q.max(q);
        }
    }
}

/// How closely the range `kind/subtype` names `want_kind/want_subtype`: 3 exactly, 2 by its type
/// (`text/*`), 1 as `*/*`, 0 not at all.
fn specificity(kind: &str, subtype: &str, want_kind: &str, want_subtype: &str) -> u8 {
    let (kind, subtype) = (kind.trim(), subtype.trim());
    match (kind == "*", kind.eq_ignore_ascii_case(want_kind), subtype) {
        (true, _, "*") => 1,
        (_, true, "*") => 2,
        (_, true, s) if s.eq_ignore_ascii_case(want_subtype) => 3,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Format::{OpenMetrics, PrometheusText};

    fn format(accept: &[&str]) -> Format {
        let mut headers = HeaderMap::new();
        for value in accept {
            headers.append(header::ACCEPT, value.parse().unwrap());
        }
        negotiate(&headers)
    }

    #[test]
    fn what_scrapers_send() {
        // Prometheus 2.x: OpenMetrics first
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                          text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(format(&[prometheus]), OpenMetrics);
        // Prometheus with `scrape_protocols: [PrometheusText0.0.4]`, promtool, older scrapers
        assert_eq!(format(&["text/plain;version=0.0.4;q=1,*/*;q=0.1"]), PrometheusText);
        assert_eq!(format(&["text/plain; version=0.0.4"]), PrometheusText);
        assert_eq!(format(&["text/plain"]), PrometheusText);
        assert_eq!(format(&["TEXT/Plain;Q=0.9"]), PrometheusText);
        assert_eq!(format(&["text/*"]), PrometheusText);
        // OpenMetrics by default
        assert_eq!(format(&[]), OpenMetrics);
        assert_eq!(format(&["*/*"]), OpenMetrics);
        assert_eq!(format(&["application/json"]), OpenMetrics);
        assert_eq!(format(&["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"]), OpenMetrics);
        assert_eq!(format(&["application/openmetrics-text"]), OpenMetrics);
    }

    #[test]
    fn q_values_decide() {
        assert_eq!(format(&["application/openmetrics-text;q=0.5,text/plain;q=0.6"]), PrometheusText);
        assert_eq!(format(&["application/openmetrics-text;q=0.6,text/plain;q=0.5"]), OpenMetrics);
        // a tie goes to OpenMetrics
        assert_eq!(format(&["text/plain;q=0.5,application/openmetrics-text;q=0.5"]), OpenMetrics);
        assert_eq!(format(&["text/plain, application/openmetrics-text"]), OpenMetrics);
        // the most specific range wins over a broader one with a higher q
        assert_eq!(format(&["text/plain;q=0,*/*"]), OpenMetrics);
        assert_eq!(format(&["application/openmetrics-text;q=0,*/*;q=0.2"]), PrometheusText);
        assert_eq!(format(&["application/*;q=0.3,text/*;q=0.4"]), PrometheusText);
        // several header lines, and ranges of one type with different versions: the highest q
        assert_eq!(format(&["text/plain;q=0.4", "application/openmetrics-text;q=0.3"]), PrometheusText);
        let versions = "application/openmetrics-text;version=0.0.1;q=0.2,application/openmetrics-text;version=1.0.0;q=0.9,\
                        text/plain;q=0.8";
        assert_eq!(format(&[versions]), OpenMetrics);
    }

    #[test]
    fn malformed_ranges_are_left_out() {
        assert_eq!(format(&["text/plain;q=abc"]), OpenMetrics);
        assert_eq!(format(&["text/plain;q=2"]), OpenMetrics);
        assert_eq!(format(&["plain, text/plain;q=0.1"]), PrometheusText);
        assert_eq!(format(&[",,;"]), OpenMetrics);
    }
}

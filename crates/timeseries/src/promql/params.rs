//! The parameters of the Prometheus HTTP API as Prometheus reads them: times as Unix seconds
//! (with a fraction) or RFC 3339, a step as seconds or a duration (`15s`, `1m30s`), the query's
//! text checked for size before it is parsed.

use super::limits::{MAX_QUERY_BYTES, MAX_STEPS};
use mosaic_core::{Result, ServiceError};
use promql_parser::parser::Expr;

/// The furthest time from the epoch, in ms, whose ns still fit an i64 (year 2262).
const MAX_ABS_MS: i64 = i64::MAX / 1_000_000;

fn invalid(param: &str, detail: String) -> ServiceError {
    ServiceError::InvalidRequest(format!("invalid parameter {param:?}: {detail}"))
}

/// A time parameter in ms since the epoch.
pub fn parse_time(param: &str, text: &str) -> Result<i64> {
    let bad = || invalid(param, format!("cannot parse {text:?} to a valid timestamp"));
    let ms = if let Ok(secs) = text.parse::<f64>() {
        if !secs.is_finite() {
            return Err(bad());
        }
        let (whole, frac) = (secs.trunc(), secs.fract());
        whole * 1000.0 + (frac * 1000.0).round()
    } else {
        let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).map_err(|_| bad())?;
        (t.unix_timestamp_nanos() / 1_000_000) as f64
    };
    if ms.abs() > MAX_ABS_MS as f64 {
        return Err(bad());
    }
    Ok(ms as i64)
}

/// A step (or other duration) parameter in ms.
pub fn parse_step(param: &str, text: &str) -> Result<i64> {
    let bad = || invalid(param, format!("cannot parse {text:?} to a valid duration"));
    let ms = if let Ok(secs) = text.parse::<f64>() {
        if !secs.is_finite() || (secs * 1000.0).abs() > MAX_ABS_MS as f64 {
            return Err(bad());
        }
        (secs * 1000.0) as i64
    } else {
        promql_parser::util::parse_duration(text)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .filter(|ms| *ms <= MAX_ABS_MS)
            .ok_or_else(bad)?
    };
    Ok(ms)
}

/// The steps of a range query.
pub fn steps(start: i64, end: i64, step: i64) -> Result<Vec<i64>> {
    if end < start {
        return Err(invalid("end", "end timestamp must not be before start time".into()));
    }
    if step <= 0 {
        return Err(invalid(
            "step",
            "zero or negative query resolution step widths are not accepted. Try a positive integer".into(),
        ));
    }
    if (end - start) / step > MAX_STEPS {
        return Err(ServiceError::InvalidRequest(
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution \
             (?step=XX)"
                .into(),
        ));
    }
    let mut out = Vec::new();
    let mut t = start;
    while t <= end {
        out.push(t);
        t += step;
    }
    Ok(out)
}

/// The expression of a query (or a `match[]` selector), refused past its size or when it does
/// not parse. The parser is a well-kept crate's, but a panic in it must not take the request
/// with it: one is answered as a query that does not parse.
pub fn parse_expr(param: &str, text: &str) -> Result<Expr> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(invalid(param, format!("the query is longer than {MAX_QUERY_BYTES} bytes")));
    }
    // every bracket and every operator opens a level of the parser's tree, which is built, and
    // dropped, recursively: deep nesting and long operator chains are refused before parsing
    let (mut depth, mut deepest, mut operators, mut quote, mut braces) = (0usize, 0usize, 0usize, None::<char>, 0usize);
    let mut word = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if quote.is_none() && (c.is_ascii_alphanumeric() || c == '_') {
            word.push(c);
            continue;
        }
        if matches!(word.as_str(), "and" | "or" | "unless") && braces == 0 {
            operators += 1;
        }
        word.clear();
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '(' | '[' | '{') => {
                depth += 1;
                deepest = deepest.max(depth);
                braces += usize::from(c == '{');
            }
            (None, ')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                braces = braces.saturating_sub(usize::from(c == '}'));
            }
            (None, '+' | '-' | '*' | '/' | '%' | '^' | '<' | '>') if braces == 0 => operators += 1,
            _ => {}
        }
    }
    let max = super::limits::MAX_DEPTH;
    if deepest > max || operators > 4 * max {
        return Err(invalid(
            param,
            format!("the query nests deeper than {max} brackets or chains more than {} operators", 4 * max),
        ));
    }
    let parsed = std::panic::catch_unwind(|| promql_parser::parser::parse(text));
    match parsed {
        Ok(Ok(expr)) => Ok(expr),
        Ok(Err(e)) => Err(invalid(param, e)),
        Err(_) => Err(invalid(param, "the query does not parse".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_steps_and_queries() {
        assert_eq!(parse_time("time", "1763719200").unwrap(), 1_763_719_200_000);
        assert_eq!(parse_time("time", "1763719200.1234").unwrap(), 1_763_719_200_123);
        assert_eq!(parse_time("time", "-1.5").unwrap(), -1500);
        assert_eq!(parse_time("time", "2025-11-21T10:00:00.5Z").unwrap(), 1_763_719_200_500);
        for bad in ["", "x", "NaN", "inf", "1e300"] {
            assert!(parse_time("time", bad).unwrap_err().to_string().contains("valid timestamp"), "{bad}");
        }
        assert_eq!(parse_step("step", "15").unwrap(), 15_000);
        assert_eq!(parse_step("step", "0.5").unwrap(), 500);
        assert_eq!(parse_step("step", "1m30s").unwrap(), 90_000);
        assert_eq!(parse_step("step", "-1").unwrap(), -1000);
        for bad in ["", "x", "NaN", "-inf", "1e300", "5q"] {
            assert!(parse_step("step", bad).is_err(), "{bad}");
        }
        assert_eq!(steps(0, 30_000, 15_000).unwrap(), vec![0, 15_000, 30_000]);
        assert_eq!(steps(0, 29_999, 15_000).unwrap(), vec![0, 15_000]);
        assert!(steps(1, 0, 1).unwrap_err().to_string().contains("before start"));
        assert!(steps(0, 1, 0).unwrap_err().to_string().contains("zero or negative"));
        // as Prometheus: (end - start) / step at most 11 000, so 11 001 steps
        assert!(steps(0, 11_001, 1).unwrap_err().to_string().contains("11,000"));
        assert_eq!(steps(0, 11_000, 1).unwrap().len(), 11_001);
        assert!(parse_expr("query", "sum(rate(x[5m]))").is_ok());
        assert!(parse_expr("query", "sum(").is_err());
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(parse_expr("query", &deep).unwrap_err().to_string().contains("nests"));
        assert!(parse_expr("query", &"-".repeat(1000)).unwrap_err().to_string().contains("nests"));
        assert!(parse_expr("query", &vec!["x"; 300].join(" or ")).unwrap_err().to_string().contains("nests"));
        assert!(parse_expr("query", "x{a=~\"-+-\"} - 1").is_ok());
        assert!(parse_expr("query", &"x".repeat(20_000)).unwrap_err().to_string().contains("longer"));
    }
}

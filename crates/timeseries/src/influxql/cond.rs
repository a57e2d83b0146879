//! A `WHERE` condition split into what the reads use: the time window (the top-level `AND`ed
//! comparisons of `time`) and a condition on tags, evaluated on each series' labels. Tag
//! comparisons are `=`, `!=` (`<>`) with a string and `=~`, `!~` with a regular expression
//! (unanchored, as InfluxDB matches; a missing tag is the empty string). Conditions on field
//! values are refused.

use super::ast::{CmpOp, Cond, Operand};
use super::parse::time_string;
use crate::labels::Label;

/// A condition, split.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// inclusive start, ns
    pub from: Option<i64>,
    /// exclusive end, ns
    pub to: Option<i64>,
    /// the condition on tags (none: every series)
    pub tags: Option<Cond>,
}

impl Filter {
    /// Whether the window holds no time at all.
    pub fn is_empty(&self) -> bool {
        matches!((self.from, self.to), (Some(f), Some(t)) if f >= t)
    }
}

fn is_time(op: &Operand) -> bool {
    matches!(op, Operand::Ident(n) if n.eq_ignore_ascii_case("time"))
}

fn mentions_time(c: &Cond) -> bool {
    match c {
        Cond::And(a, b) | Cond::Or(a, b) => mentions_time(a) || mentions_time(b),
        Cond::Cmp(l, _, r) => is_time(l) || is_time(r),
    }
}

fn conjuncts<'c>(c: &'c Cond, out: &mut Vec<&'c Cond>) {
    match c {
        Cond::And(a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        other => out.push(other),
    }
}

/// Splits `cond`; `is_field` tells the fields of the measurements read, whose conditions are
/// refused.
pub fn split(cond: Option<&Cond>, is_field: &dyn Fn(&str) -> bool) -> Result<Filter, String> {
    let mut filter = Filter::default();
    let Some(cond) = cond else { return Ok(filter) };
    let mut parts = Vec::new();
    conjuncts(cond, &mut parts);
    for part in parts {
        if !mentions_time(part) {
            check_tags(part, is_field)?;
            filter.tags = Some(match filter.tags.take() {
                None => part.clone(),
                Some(t) => Cond::And(Box::new(t), Box::new(part.clone())),
            });
            continue;
        }
        let Cond::Cmp(l, op, r) = part else {
            return Err("time conditions may only be joined with AND, not OR".into());
        };
        // `time op x`, or `x op time` turned around
        let (op, value) = if is_time(l) { (*op, r) } else { (flip(*op), l) };
        let t = match value {
            Operand::Time(t) => *t,
            Operand::Number(n) if n.fract() == 0.0 => *n as i64,
            Operand::Str(s) => time_string(s)?,
            _ => {
                return Err(
                    "time is compared with a time: '2026-01-01T00:00:00Z', 1700000000000ms or now() - 1h".into()
                );
            }
        };
        let (from, to) = match op {
            CmpOp::Eq => (Some(t), t.checked_add(1)),
            CmpOp::Gt => (t.checked_add(1), None),
            CmpOp::Ge => (Some(t), None),
            CmpOp::Lt => (None, Some(t)),
            CmpOp::Le => (None, t.checked_add(1)),
            _ => return Err("time is compared with = < <= > >= only".into()),
        };
        if let Some(f) = from {
            filter.from = Some(filter.from.map_or(f, |g| g.max(f)));
        }
        if let Some(t) = to {
            filter.to = Some(filter.to.map_or(t, |u| u.min(t)));
        }
    }
    Ok(filter)
}

fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

fn check_tags(c: &Cond, is_field: &dyn Fn(&str) -> bool) -> Result<(), String> {
    match c {
        Cond::And(a, b) | Cond::Or(a, b) => {
            check_tags(a, is_field)?;
            check_tags(b, is_field)
        }
        Cond::Cmp(l, op, r) => {
            let (key, value) = match (l, r) {
                (Operand::Ident(k), v) | (v, Operand::Ident(k)) if !matches!(v, Operand::Ident(_)) => (k, v),
                _ => return Err("a condition compares a tag with a string or a /regular expression/".into()),
            };
            if is_field(key) {
                return Err(format!("conditions on fields ({key:?}) are not supported: only on time and tags"));
            }
            match (op, value) {
                (CmpOp::Eq | CmpOp::Ne, Operand::Str(_)) | (CmpOp::Re | CmpOp::NotRe, Operand::Regex(_)) => Ok(()),
                (CmpOp::Eq | CmpOp::Ne, _) => {
                    Err(format!("tag {key:?} is compared with a string ('…'): tag values are strings"))
                }
                (CmpOp::Re | CmpOp::NotRe, _) => {
                    Err(format!("=~ and !~ compare tag {key:?} with a /regular expression/"))
                }
                _ => Err(format!("tag {key:?} is compared with = != =~ !~ only")),
            }
        }
    }
}

/// Whether a series with `labels` satisfies a tag condition (checked by [`split`]).
pub fn eval(c: &Cond, labels: &[Label]) -> bool {
    match c {
        Cond::And(a, b) => eval(a, labels) && eval(b, labels),
        Cond::Or(a, b) => eval(a, labels) || eval(b, labels),
        Cond::Cmp(l, op, r) => {
            let (key, value) = match (l, r) {
                (Operand::Ident(k), v) | (v, Operand::Ident(k)) => (k, v),
                _ => return false,
            };
            let tag = self::tag(labels, key);
            match (op, value) {
                (CmpOp::Eq, Operand::Str(s)) => tag == s,
                (CmpOp::Ne, Operand::Str(s)) => tag != s,
                (CmpOp::Re, Operand::Regex(re)) => re.is_match(tag),
                (CmpOp::NotRe, Operand::Regex(re)) => !re.is_match(tag),
                _ => false,
            }
        }
    }
}

/// The value of tag `key` in `labels` (`""` without it, as InfluxDB has it).
pub fn tag<'l>(labels: &'l [Label], key: &str) -> &'l str {
    labels.iter().find(|(k, _)| k == key).map_or("", |(_, v)| v.as_str())
}

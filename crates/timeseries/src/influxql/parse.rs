//! A recursive-descent parser of the supported InfluxQL subset (see docs/timeseries.md): no
//! InfluxQL parser is published on crates.io (InfluxDB IOx's `influxdb_influxql_parser` lives
//! only in its repository, with its workspace's dependencies), and the subset is small.

use super::ast::*;
use super::lex::{Tok, tokens};

/// Longest query text.
pub const MAX_QUERY_BYTES: usize = 64 * 1024;
/// Most statements in one query.
pub const MAX_STATEMENTS: usize = 32;
/// Most columns, measurements, `GROUP BY` tags, `IN` names or conditions in one statement.
const MAX_ITEMS: usize = 256;
/// Deepest nesting of parentheses in a condition.
const MAX_DEPTH: usize = 32;
/// The compiled size a regular expression may take.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The statements of `text`, `now` (ns) standing for `now()`; the error is InfluxDB's
/// `error parsing query: …`.
pub fn parse(text: &str, now: i64) -> Result<Vec<Statement>, String> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(format!("the query is longer than {MAX_QUERY_BYTES} bytes"));
    }
    let toks = tokens(text)?;
    let mut p = Parser { toks, at: 0, now, conds: 0, depth: 0 };
    let mut out = Vec::new();
    loop {
        while p.eat_sym(";") {}
        if p.done() {
            break;
        }
        if out.len() == MAX_STATEMENTS {
            return Err(format!("at most {MAX_STATEMENTS} statements in one query"));
        }
        out.push(p.statement()?);
        if !p.done() && !p.eat_sym(";") {
            return Err(p.expected("`;` or the end"));
        }
    }
    if out.is_empty() {
        return Err("empty query".into());
    }
    Ok(out)
}

/// A time string: RFC 3339, or `YYYY-MM-DD[ HH:MM:SS[.f]]` in UTC as InfluxQL also takes.
pub fn time_string(s: &str) -> Result<i64, String> {
    use time::format_description::well_known::Rfc3339;
    let mut text = s.trim().to_owned();
    if text.len() == 10 {
        text.push_str("T00:00:00Z");
    } else if text.len() > 10 && text.as_bytes()[10] == b' ' {
        text.replace_range(10..11, "T");
        if !text.ends_with('Z') && !text[19..].contains(['+', '-']) {
            text.push('Z');
        }
    }
    let t = time::OffsetDateTime::parse(&text, &Rfc3339)
        .map_err(|_| format!("{s:?} is not a time such as '2026-01-01T00:00:00Z'"))?;
    i64::try_from(t.unix_timestamp_nanos()).map_err(|_| format!("{s:?} is out of range (years 1678 to 2262)"))
}

fn compile(text: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(text).size_limit(REGEX_SIZE_LIMIT).build().map_err(|e| format!("/{text}/: {e}"))
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    at: usize,
    now: i64,
    /// comparisons read in this statement
    conds: usize,
    /// parentheses open around the condition being read
    depth: usize,
}

impl Parser {
    fn done(&self) -> bool {
        self.at >= self.toks.len()
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(t, _)| t)
    }

    fn expected(&self, what: &str) -> String {
        match self.toks.get(self.at) {
            Some((tok, at)) => format!("found {}, expected {what} at character {}", show(tok), at + 1),
            None => format!("expected {what} at the end"),
        }
    }

    fn eat_sym(&mut self, sym: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym) {
            self.at += 1;
            return true;
        }
        false
    }

    fn sym(&mut self, sym: &str) -> Result<(), String> {
        if self.eat_sym(sym) { Ok(()) } else { Err(self.expected(&format!("`{sym}`"))) }
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident { name, quoted: false }) if name.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.at += 1;
            return true;
        }
        false
    }

    fn kw(&mut self, kw: &str) -> Result<(), String> {
        if self.eat_kw(kw) { Ok(()) } else { Err(self.expected(kw)) }
    }

    fn ident(&mut self, what: &str) -> Result<String, String> {
        match self.peek() {
            Some(Tok::Ident { name, .. }) => {
                let name = name.clone();
                self.at += 1;
                Ok(name)
            }
            _ => Err(self.expected(what)),
        }
    }

    fn count(&mut self) -> Result<usize, String> {
        match self.peek() {
            Some(Tok::Int(n)) => {
                let n = *n;
                self.at += 1;
                usize::try_from(n).map_err(|_| format!("{n} is out of range"))
            }
            _ => Err(self.expected("a whole number")),
        }
    }

    fn statement(&mut self) -> Result<Statement, String> {
        self.conds = 0;
        if self.eat_kw("SELECT") {
            return Ok(Statement::Select(Box::new(self.select()?)));
        }
        if !self.eat_kw("SHOW") {
            return Err(self.expected("SELECT or SHOW (the supported statements)"));
        }
        if self.eat_kw("DATABASES") {
            return Ok(Statement::ShowDatabases);
        }
        if self.eat_kw("RETENTION") {
            self.kw("POLICIES")?;
            let on = if self.eat_kw("ON") { Some(self.ident("a database")?) } else { None };
            return Ok(Statement::ShowRetentionPolicies { on });
        }
        if self.eat_kw("MEASUREMENTS") {
            let on = if self.eat_kw("ON") { Some(self.ident("a database")?) } else { None };
            let name = if self.eat_kw("WITH") {
                self.kw("MEASUREMENT")?;
                Some(self.name_filter()?)
            } else {
                None
            };
            let cond = self.where_clause()?;
            return Ok(Statement::ShowMeasurements { on, name, cond, page: self.page("LIMIT", "OFFSET")? });
        }
        if self.eat_kw("TAG") {
            if self.eat_kw("KEYS") {
                let from = self.sources(false)?;
                let cond = self.where_clause()?;
                return Ok(Statement::ShowTagKeys { from, cond, page: self.page("LIMIT", "OFFSET")? });
            }
            self.kw("VALUES")?;
            let from = self.sources(false)?;
            self.kw("WITH")?;
            self.kw("KEY")?;
            let key = self.name_filter()?;
            let cond = self.where_clause()?;
            return Ok(Statement::ShowTagValues { from, key, cond, page: self.page("LIMIT", "OFFSET")? });
        }
        if self.eat_kw("FIELD") {
            self.kw("KEYS")?;
            let from = self.sources(false)?;
            return Ok(Statement::ShowFieldKeys { from, page: self.page("LIMIT", "OFFSET")? });
        }
        if self.eat_kw("SERIES") {
            let from = self.sources(false)?;
            let cond = self.where_clause()?;
            return Ok(Statement::ShowSeries { from, cond, page: self.page("LIMIT", "OFFSET")? });
        }
        Err(self.expected(
            "DATABASES, MEASUREMENTS, TAG KEYS, TAG VALUES, FIELD KEYS, SERIES or RETENTION POLICIES (the supported SHOW statements)",
        ))
    }

    /// `= x`, `!= x`, `=~ /re/`, `!~ /re/` or `IN (x, …)`; names bare or quoted either way.
    fn name_filter(&mut self) -> Result<NameFilter, String> {
        if self.eat_kw("IN") {
            self.sym("(")?;
            let mut names = vec![self.name()?];
            while self.eat_sym(",") {
                if names.len() == MAX_ITEMS {
                    return Err(format!("at most {MAX_ITEMS} names in IN"));
                }
                names.push(self.name()?);
            }
            self.sym(")")?;
            return Ok(NameFilter::In(names));
        }
        for (op, regex) in [("=~", true), ("!~", true), ("=", false), ("!=", false), ("<>", false)] {
            if !self.eat_sym(op) {
                continue;
            }
            if regex {
                let Some(Tok::Regex(re)) = self.peek().cloned() else {
                    return Err(self.expected("a /regular expression/"));
                };
                self.at += 1;
                let re = compile(&re)?;
                return Ok(if op == "=~" { NameFilter::Re(re) } else { NameFilter::NotRe(re) });
            }
            let name = self.name()?;
            return Ok(if op == "=" { NameFilter::Eq(name) } else { NameFilter::Ne(name) });
        }
        Err(self.expected("= != =~ !~ or IN"))
    }

    /// A name: an identifier or a string.
    fn name(&mut self) -> Result<String, String> {
        if let Some(Tok::Str(s)) = self.peek() {
            let s = s.clone();
            self.at += 1;
            return Ok(s);
        }
        self.ident("a name")
    }

    fn page(&mut self, limit: &str, offset: &str) -> Result<Page, String> {
        let mut page = Page::default();
        if self.eat_kw(limit) {
            page.limit = Some(self.count()?);
        }
        if self.eat_kw(offset) {
            page.offset = self.count()?;
        }
        Ok(page)
    }

    /// `FROM m[, …]` (required for SELECT); `db.rp.m` and `rp.m` name `m`, `/re/` every
    /// measurement it matches.
    fn sources(&mut self, required: bool) -> Result<Vec<Source>, String> {
        if !self.eat_kw("FROM") {
            return if required { Err(self.expected("FROM")) } else { Ok(Vec::new()) };
        }
        let mut out = Vec::new();
        loop {
            if out.len() == MAX_ITEMS {
                return Err(format!("at most {MAX_ITEMS} measurements in FROM"));
            }
            if let Some(Tok::Regex(re)) = self.peek().cloned() {
                self.at += 1;
                out.push(Source::Regex(compile(&re)?));
            } else {
                let mut name = self.ident("a measurement")?;
                // `db.rp.m`, `rp.m`, `db..m`: the last part is the measurement
                while self.eat_sym(".") {
                    if self.eat_sym(".") {
                        // `db..m`
                    }
                    if let Some(Tok::Regex(re)) = self.peek().cloned() {
                        self.at += 1;
                        out.push(Source::Regex(compile(&re)?));
                        name.clear();
                        break;
                    }
                    name = self.ident("a measurement")?;
                }
                if !name.is_empty() {
                    out.push(Source::Name(name));
                }
            }
            if !self.eat_sym(",") {
                return Ok(out);
            }
        }
    }

    fn where_clause(&mut self) -> Result<Option<Cond>, String> {
        if self.eat_kw("WHERE") { Ok(Some(self.or()?)) } else { Ok(None) }
    }

    fn or(&mut self) -> Result<Cond, String> {
        let mut left = self.and()?;
        while self.eat_kw("OR") {
            left = Cond::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Cond, String> {
        let mut left = self.unary()?;
        while self.eat_kw("AND") {
            left = Cond::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Cond, String> {
        if self.eat_sym("(") {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(format!("conditions nest at most {MAX_DEPTH} parentheses deep"));
            }
            let inner = self.or()?;
            self.sym(")")?;
            self.depth -= 1;
            return Ok(inner);
        }
        self.conds += 1;
        if self.conds > MAX_ITEMS {
            return Err(format!("at most {MAX_ITEMS} comparisons in a condition"));
        }
        let left = self.operand()?;
        let ops = [
            ("=~", CmpOp::Re),
            ("!~", CmpOp::NotRe),
            ("!=", CmpOp::Ne),
            ("<>", CmpOp::Ne),
            ("<=", CmpOp::Le),
            (">=", CmpOp::Ge),
            ("=", CmpOp::Eq),
            ("<", CmpOp::Lt),
            (">", CmpOp::Gt),
        ];
        let Some((_, op)) = ops.into_iter().find(|(s, _)| self.eat_sym(s)) else {
            return Err(self.expected("a comparison (= != <> < <= > >= =~ !~)"));
        };
        let right = self.operand()?;
        Ok(Cond::Cmp(left, op, right))
    }

    /// A term, or times and durations added and subtracted (`now() - 1h`).
    fn operand(&mut self) -> Result<Operand, String> {
        let first = self.term()?;
        let mut sum: Option<i64> = None;
        loop {
            let sign = if self.eat_sym("+") {
                1
            } else if self.eat_sym("-") {
                -1
            } else {
                break;
            };
            let at = sum.map_or_else(|| self.as_time(&first), Ok)?;
            let next = self.term()?;
            let step = self.as_time(&next)?;
            let step = if sign < 0 { step.checked_neg() } else { Some(step) };
            sum = Some(step.and_then(|s| at.checked_add(s)).ok_or("a time is out of range")?);
        }
        Ok(sum.map_or(first, Operand::Time))
    }

    fn as_time(&self, term: &Operand) -> Result<i64, String> {
        match term {
            Operand::Time(t) => Ok(*t),
            Operand::Number(n) if n.fract() == 0.0 && n.abs() < 9.2e18 => Ok(*n as i64),
            Operand::Str(s) => time_string(s),
            _ => Err("only times, durations and integers (nanoseconds) can be added and subtracted".into()),
        }
    }

    fn term(&mut self) -> Result<Operand, String> {
        let Some(tok) = self.peek().cloned() else { return Err(self.expected("a value")) };
        self.at += 1;
        Ok(match tok {
            Tok::Str(s) => Operand::Str(s),
            Tok::Int(n) => Operand::Number(n as f64),
            Tok::Float(f) => Operand::Number(f),
            Tok::Duration(d) => Operand::Time(d),
            Tok::Regex(re) => Operand::Regex(compile(&re)?),
            // not recursive: `- - - 1` would nest as deep as the text is long
            Tok::Sym("-") => match self.peek().cloned() {
                Some(Tok::Int(n)) => {
                    self.at += 1;
                    Operand::Number(-(n as f64))
                }
                Some(Tok::Float(f)) => {
                    self.at += 1;
                    Operand::Number(-f)
                }
                Some(Tok::Duration(d)) => {
                    self.at += 1;
                    Operand::Time(-d)
                }
                _ => return Err(self.expected("a number or a duration after `-`")),
            },
            Tok::Ident { name, quoted: false } if name.eq_ignore_ascii_case("now") && self.eat_sym("(") => {
                self.sym(")")?;
                Operand::Time(self.now)
            }
            Tok::Ident { name, .. } => {
                // `field::tag`, `field::field`: the type is not needed
                if self.eat_sym("::") {
                    self.ident("a type")?;
                }
                Operand::Ident(name)
            }
            other => {
                self.at -= 1;
                return Err(self.expected(&format!("a value, not {}", show(&other))));
            }
        })
    }

    fn select(&mut self) -> Result<Select, String> {
        let mut fields = Vec::new();
        loop {
            if fields.len() == MAX_ITEMS {
                return Err(format!("at most {MAX_ITEMS} columns"));
            }
            fields.push(self.field()?);
            if !self.eat_sym(",") {
                break;
            }
        }
        let from = self.sources(true)?;
        let cond = self.where_clause()?;
        let (mut interval, mut group_tags) = (None, GroupTags::Keys(Vec::new()));
        if self.eat_kw("GROUP") {
            self.kw("BY")?;
            loop {
                if self.is_kw("time") && matches!(self.toks.get(self.at + 1), Some((Tok::Sym("("), _))) {
                    self.at += 2;
                    let every = self.duration()?;
                    let offset = if self.eat_sym(",") { self.offset()? } else { 0 };
                    self.sym(")")?;
                    if every <= 0 {
                        return Err("GROUP BY time needs a positive interval".into());
                    }
                    interval = Some((every, offset.rem_euclid(every)));
                } else if self.eat_sym("*") {
                    group_tags = GroupTags::All;
                } else if let Some(Tok::Regex(_)) = self.peek() {
                    return Err("GROUP BY a /regular expression/ is not supported: name the tags, or *".into());
                } else {
                    let tag = self.ident("a tag key, * or time(…)")?;
                    if let GroupTags::Keys(keys) = &mut group_tags {
                        if keys.len() == MAX_ITEMS {
                            return Err(format!("at most {MAX_ITEMS} GROUP BY tags"));
                        }
                        if !keys.contains(&tag) {
                            keys.push(tag);
                        }
                    }
                }
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let fill = if self.eat_kw("fill") { self.fill()? } else { Fill::Null };
        let mut desc = false;
        if self.eat_kw("ORDER") {
            self.kw("BY")?;
            if !self.eat_kw("time") {
                return Err(self.expected("time (results are ordered by time only)"));
            }
            desc = self.eat_kw("DESC");
            if !desc {
                self.eat_kw("ASC");
            }
        }
        let rows = self.page("LIMIT", "OFFSET")?;
        let series = self.page("SLIMIT", "SOFFSET")?;
        if self.is_kw("tz") {
            return Err("tz() is not supported: times are UTC".into());
        }
        if self.is_kw("INTO") {
            return Err("SELECT … INTO is not supported".into());
        }
        Ok(Select { fields, from, cond, interval, group_tags, fill, desc, rows, series })
    }

    fn duration(&mut self) -> Result<i64, String> {
        match self.peek() {
            Some(Tok::Duration(d)) => {
                let d = *d;
                self.at += 1;
                Ok(d)
            }
            _ => Err(self.expected("a duration such as 1m")),
        }
    }

    /// `GROUP BY time(…)`'s offset: a duration, negative too, or `now()`.
    fn offset(&mut self) -> Result<i64, String> {
        if self.is_kw("now") {
            self.at += 1;
            self.sym("(")?;
            self.sym(")")?;
            return Ok(self.now);
        }
        let negative = self.eat_sym("-");
        let d = self.duration()?;
        Ok(if negative { -d } else { d })
    }

    fn fill(&mut self) -> Result<Fill, String> {
        self.sym("(")?;
        let fill = match self.peek().cloned() {
            Some(Tok::Ident { name, quoted: false }) => {
                self.at += 1;
                match name.to_ascii_lowercase().as_str() {
                    "null" => Fill::Null,
                    "none" => Fill::None,
                    "previous" => Fill::Previous,
                    "linear" => Fill::Linear,
                    _ => {
                        self.at -= 1;
                        return Err(self.expected("null, none, previous, linear or a number"));
                    }
                }
            }
            Some(Tok::Int(n)) => {
                self.at += 1;
                Fill::Value(n as f64)
            }
            Some(Tok::Float(f)) => {
                self.at += 1;
                Fill::Value(f)
            }
            Some(Tok::Sym("-")) => match self.term()? {
                Operand::Number(n) => Fill::Value(n),
                _ => return Err("fill(-…) takes a number".into()),
            },
            _ => return Err(self.expected("null, none, previous, linear or a number")),
        };
        self.sym(")")?;
        Ok(fill)
    }

    fn field(&mut self) -> Result<Field, String> {
        let expr = if self.eat_sym("*") {
            FieldExpr::Wildcard
        } else if self.is_kw("FROM") {
            return Err(self.expected("a field, * or an aggregate"));
        } else {
            let name = self.ident("a field, * or an aggregate")?;
            let quoted = matches!(self.toks.get(self.at - 1), Some((Tok::Ident { quoted: true, .. }, _)));
            if !quoted && self.eat_sym("(") {
                let func = Func::ALL
                    .into_iter()
                    .find(|f| f.name().eq_ignore_ascii_case(&name))
                    .ok_or_else(|| unsupported_function(&name))?;
                let arg = if self.eat_sym("*") { None } else { Some(self.ident("a field or *")?) };
                if self.eat_sym("::") {
                    self.ident("a type")?;
                }
                if self.eat_sym(",") {
                    return Err(format!("{}() takes one argument", func.name()));
                }
                self.sym(")")?;
                FieldExpr::Call(func, arg)
            } else {
                if self.eat_sym("::") {
                    self.ident("a type")?;
                }
                FieldExpr::Field(name)
            }
        };
        if matches!(self.peek(), Some(Tok::Sym("+" | "-" | "*"))) || matches!(self.peek(), Some(Tok::Regex(_))) {
            return Err("arithmetic on columns is not supported".into());
        }
        let alias = if self.eat_kw("AS") { Some(self.ident("an alias")?) } else { None };
        Ok(Field { expr, alias })
    }
}

fn unsupported_function(name: &str) -> String {
    let names: Vec<&str> = Func::ALL.iter().map(|f| f.name()).collect();
    format!("{name}() is not supported; the supported functions are {}", names.join(", "))
}

fn show(tok: &Tok) -> String {
    match tok {
        Tok::Ident { name, quoted: false } => name.clone(),
        Tok::Ident { name, quoted: true } => format!("{name:?}"),
        Tok::Str(s) => format!("'{s}'"),
        Tok::Int(n) => n.to_string(),
        Tok::Float(f) => f.to_string(),
        Tok::Duration(d) => format!("a duration ({d}ns)"),
        Tok::Regex(r) => format!("/{r}/"),
        Tok::Sym(s) => (*s).to_owned(),
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;

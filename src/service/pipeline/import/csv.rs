//! CSV import (`Content-Type: text/csv`): the body split into records as it arrives, by csv-core
//! (RFC 4180: `,` between fields, `"` quoting with `""` for a quote, records ending in `\n`,
//! `\r\n` or `\r`, blank lines skipped, a UTF-8 byte order mark dropped), then each record made a
//! document by the header row's names.
//!
//! The splitter looks at each byte once and keeps only the record under way, at most `max_row`
//! bytes of field text: a longer record ends the import as soon as it passes that, like a long
//! NDJSON line. A record travels to the blocking pool as its fields (see [`encode`]); there it
//! becomes a document by [`document`], against the table as it is then.
//!
//! How a field becomes a value:
//!
//! - an empty field is absent (a column's default, or null where nullable, applies);
//! - `_id` is the document's id, `_from` and `_to` an edge's vertices: strings;
//! - under a typed column: `string` keeps the text; `int`, `float` and `timestamp` take a JSON
//!   number (`42`, `-1.5e3`; a timestamp also an RFC 3339 text); `bool` takes `true` or `false`
//!   in any case; `json` and `vector(N)` take JSON text (`[1, 2, 3]`), and a `json` column the
//!   text itself when it is not JSON. Anything else is kept as the text, so the schema check
//!   refuses it by name (`schema_violation`);
//! - elsewhere (a schemaless table, or a field no column names): `true` and `false` are booleans,
//!   a JSON number that is stored exactly (the rules of every JSON body) is a number, and anything
//!   else is the text as it is — `007`, `1.`, ` 5`, `1e400`, `null` stay strings.

use crate::catalog::{ColumnType, TableDef};
use crate::service::ServiceError;
use crate::service::core::fields::{FROM_FIELD, ID_FIELD, TO_FIELD};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Most fields of the header row (and so of any row).
pub(crate) const MAX_FIELDS: usize = 10_000;

/// The header row: the field names, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) names: Vec<String>,
}

/// Why the splitter stops the import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SplitError {
    /// the record starting on this line passed the limit
    TooLong(u64),
    /// the header row cannot name documents' fields
    Header(String),
}

/// Splits a CSV byte stream into records; the first is the header.
#[derive(Debug)]
pub(crate) struct CsvSplitter {
    reader: csv_core::Reader,
    /// the field text of the record under way
    out: Vec<u8>,
    out_len: usize,
    /// where each of its fields ends in `out`
    ends: Vec<usize>,
    ends_len: usize,
    /// the record has more fields than `ends` keeps (more than the header's)
    extra: bool,
    /// a record is under way
    in_row: bool,
    /// the line it started on
    row_line: u64,
    max_row: usize,
    header: Option<Arc<Header>>,
    /// the record handed on, encoded
    encoded: Vec<u8>,
}

impl CsvSplitter {
    pub(crate) fn new(max_row: usize) -> Self {
        CsvSplitter {
            reader: csv_core::Reader::new(),
            // one byte over the limit: csv-core asks for room before it sees that a field ended
            out: vec![0; 1024.min(max_row.saturating_add(1))],
            out_len: 0,
            ends: vec![0; 64],
            ends_len: 0,
            extra: false,
            in_row: false,
            row_line: 1,
            max_row,
            header: None,
            encoded: Vec::new(),
        }
    }

    /// The header row, once read.
    pub(crate) fn header(&self) -> Option<&Arc<Header>> {
        self.header.as_ref()
    }

    /// The line the next record starts on (or the one under way).
    pub(crate) fn next_line(&self) -> u64 {
        if self.in_row { self.row_line } else { self.reader.line() }
    }

    /// Feeds `input`; `row` gets each complete record after the header, encoded, with the line it
    /// starts on.
    pub(crate) fn push(&mut self, mut input: &[u8], row: &mut impl FnMut(u64, &[u8])) -> Result<(), SplitError> {
        while !input.is_empty() {
            if !self.in_row {
                // what ends records between two of them is skipped here, so that a record's line
                // is the one it starts on
                let skip = input.iter().take_while(|&&b| b == b'\n' || b == b'\r').count();
                let newlines = input.iter().take(skip).filter(|&&b| b == b'\n').count();
                self.reader.set_line(self.reader.line() + newlines as u64);
                input = input.get(skip..).unwrap_or_default();
                if input.is_empty() {
                    break;
                }
                self.in_row = true;
                self.row_line = self.reader.line();
            }
            let taken = self.step(input, row)?;
            input = input.get(taken..).unwrap_or_default();
        }
        Ok(())
    }

    /// Ends the stream: the record under way, if any.
    pub(crate) fn finish(&mut self, row: &mut impl FnMut(u64, &[u8])) -> Result<(), SplitError> {
        // csv-core takes an empty input for the end of the data; it answers End when done
        while self.step(&[], row)? != usize::MAX {}
        Ok(())
    }

    /// One call of csv-core: the bytes of `input` it took (`usize::MAX` once the data ended).
    fn step(&mut self, input: &[u8], row: &mut impl FnMut(u64, &[u8])) -> Result<usize, SplitError> {
        use csv_core::ReadRecordResult as R;
        let out = self.out.get_mut(self.out_len..).unwrap_or_default();
        let ends = self.ends.get_mut(self.ends_len..).unwrap_or_default();
        let (result, nin, nout, nend) = self.reader.read_record(input, out, ends);
        self.out_len += nout;
        self.ends_len += nend;
        match result {
            // an empty input is the end of the data, which csv-core answers with End; never wait
            R::InputEmpty if input.is_empty() => return Ok(usize::MAX),
            R::InputEmpty => {}
            R::OutputFull => {
                if self.out.len() > self.max_row {
                    return Err(SplitError::TooLong(self.row_line));
                }
                let grown = (self.out.len() * 2).max(1024).min(self.max_row.saturating_add(1));
                self.out.resize(grown, 0);
            }
            R::OutputEndsFull => {
                let most = self.header.as_ref().map_or(MAX_FIELDS, |h| h.names.len());
                if self.ends.len() < most {
                    let grown = (self.ends.len() * 2).min(most);
                    self.ends.resize(grown, 0);
                } else {
                    // more fields than any row may have: the row fails, so its last slot is
                    // written over from here on
                    self.extra = true;
                    self.ends_len -= 1;
                }
            }
            R::Record => self.record(row)?,
            R::End => return Ok(usize::MAX),
        }
        Ok(nin)
    }

    /// A record is complete: the header, or a row handed on.
    fn record(&mut self, row: &mut impl FnMut(u64, &[u8])) -> Result<(), SplitError> {
        let ends = self.ends.get(..self.ends_len).unwrap_or_default();
        let text = self.out.get(..self.out_len).unwrap_or_default();
        if self.header.is_none() {
            if self.extra {
                return Err(SplitError::Header(format!("the header row has more than {MAX_FIELDS} fields")));
            }
            self.header = Some(Arc::new(header(text, ends)?));
        } else {
            encode(text, ends, self.extra, &mut self.encoded);
            row(self.row_line, &self.encoded);
        }
        (self.out_len, self.ends_len, self.extra, self.in_row) = (0, 0, false, false);
        Ok(())
    }
}

/// The header row's names: UTF-8, trimmed, not empty, each once.
fn header(text: &[u8], ends: &[usize]) -> Result<Header, SplitError> {
    let mut names: Vec<String> = Vec::with_capacity(ends.len());
    for (i, field) in fields_of(text, ends).enumerate() {
        let name = std::str::from_utf8(field)
            .map_err(|_| SplitError::Header(format!("the header row's field {} is not UTF-8", i + 1)))?
            // a byte order mark, which csv-core drops only when the first piece holds it whole
            .trim_start_matches('\u{feff}')
            .trim();
        if name.is_empty() {
            return Err(SplitError::Header(format!(
                "the header row's field {} is empty: every column needs a name",
                i + 1
            )));
        }
        if names.iter().any(|n| n == name) {
            return Err(SplitError::Header(format!("the header row names {name:?} twice")));
        }
        names.push(name.to_owned());
    }
    Ok(Header { names })
}

/// The fields of a record: `text` cut at `ends`.
fn fields_of<'t>(text: &'t [u8], ends: &[usize]) -> impl Iterator<Item = &'t [u8]> {
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts.zip(ends.iter().copied()).map(|(start, end)| text.get(start..end).unwrap_or_default())
}

/// A record as it travels to the blocking pool: the field count (`u32::MAX`: more fields than
/// the header), each field's end as a u32, then the fields' text.
fn encode(text: &[u8], ends: &[usize], extra: bool, out: &mut Vec<u8>) {
    out.clear();
    let count = if extra { u32::MAX } else { u32::try_from(ends.len()).unwrap_or(u32::MAX) };
    out.extend_from_slice(&count.to_le_bytes());
    if !extra {
        for &end in ends {
            // a record's text is at most the line limit, far below 4 GiB
            out.extend_from_slice(&u32::try_from(end).unwrap_or(u32::MAX).to_le_bytes());
        }
    }
    out.extend_from_slice(text);
}

/// The fields of an encoded record, or `None` when it has more than its header.
fn decode(record: &[u8]) -> Option<Vec<&[u8]>> {
    let word = |i: usize| -> usize {
        let bytes = record.get(i * 4..i * 4 + 4).and_then(|b| <[u8; 4]>::try_from(b).ok()).unwrap_or_default();
        u32::from_le_bytes(bytes) as usize
    };
    let count = word(0);
    if count == u32::MAX as usize {
        return None;
    }
    let ends: Vec<usize> = (1..=count).map(word).collect();
    let text = record.get((count + 1) * 4..).unwrap_or_default();
    Some(fields_of(text, &ends).collect())
}

/// The document a row makes under `header` in `table` (see the module doc), with its `_id` if
/// the row gives one.
pub(crate) fn document(
    header: &Header,
    table: &TableDef,
    record: &[u8],
) -> Result<(Option<String>, Map<String, Value>), ServiceError> {
    let width = header.names.len();
    let fields = match decode(record) {
        Some(fields) if fields.len() == width => fields,
        Some(fields) => {
            let n = fields.len();
            return Err(ServiceError::InvalidDocument(format!("the row has {n} field(s), the header {width}")));
        }
        None => {
            return Err(ServiceError::InvalidDocument(format!("the row has more fields than the header's {width}")));
        }
    };
    let mut id = None;
    let mut doc = Map::new();
    for (name, raw) in header.names.iter().zip(fields) {
        if raw.is_empty() {
            continue;
        }
        let text = std::str::from_utf8(raw)
            .map_err(|_| ServiceError::InvalidDocument(format!("field {name:?} is not UTF-8")))?;
        if name == ID_FIELD {
            id = Some(text.to_owned());
            continue;
        }
        let value = match table.column(name).map(|c| &c.ty) {
            _ if name == FROM_FIELD || name == TO_FIELD => Value::String(text.to_owned()),
            Some(ColumnType::String) => Value::String(text.to_owned()),
            Some(ColumnType::Int | ColumnType::Float | ColumnType::Timestamp) => {
                number(text)?.unwrap_or_else(|| text.into())
            }
            Some(ColumnType::Bool) => match text.to_ascii_lowercase().as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => text.into(),
            },
            Some(ColumnType::Json | ColumnType::Vector(_)) => json(text)?.unwrap_or_else(|| text.into()),
            None => match text {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => number(text).ok().flatten().unwrap_or_else(|| text.into()),
            },
        };
        doc.insert(name.clone(), value);
    }
    Ok((id, doc))
}

/// `text` as a JSON number, if it is one (nothing around it) that is stored exactly; an error
/// for a number that cannot be (`1e400`), which a typed column reports and inference keeps as text.
fn number(text: &str) -> Result<Option<Value>, ServiceError> {
    let numeric = text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
        && text.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
    if !numeric {
        return Ok(None);
    }
    json(text).map(|v| v.filter(Value::is_number))
}

/// `text` as JSON, under the rules of every JSON body (repeated keys, exact numbers, nesting:
/// the error when it breaks one), or `None` when it is not JSON.
fn json(text: &str) -> Result<Option<Value>, ServiceError> {
    let Ok(value) = serde_json::from_str::<Value>(text) else { return Ok(None) };
    // a field of a document nests one level below it
    let checked = crate::entity::check_text(text.as_bytes(), crate::entity::MAX_DEPTH - 1)?;
    if !checked.negative_zero {
        return Ok(Some(value));
    }
    let mut bytes = text.as_bytes().to_vec();
    crate::entity::rewrite_negative_zero(&mut bytes);
    Ok(serde_json::from_slice(&bytes).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows a split gave: each with its line and fields.
    type Rows = Vec<(u64, Vec<String>)>;

    /// The header and the rows of `pieces` fed in order.
    fn split(pieces: &[&[u8]], max_row: usize) -> Result<(Vec<String>, Rows), SplitError> {
        let mut s = CsvSplitter::new(max_row);
        let mut rows = Vec::new();
        let mut take = |line: u64, record: &[u8]| {
            let fields = decode(record).map(|f| f.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect());
            rows.push((line, fields.unwrap_or_else(|| vec!["<extra>".to_owned()])));
        };
        for piece in pieces {
            s.push(piece, &mut take)?;
        }
        s.finish(&mut take)?;
        let header = s.header().map(|h| h.names.clone()).unwrap_or_default();
        Ok((header, rows))
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn records_are_split_however_the_body_is_cut() {
        let body = "\u{feff}_id, name ,note\r\na,Ann,\"says \"\"hi\"\"\"\r\n\r\nb,Bo,\"two\nlines\"\nc,,x";
        let want = (
            strings(&["_id", "name", "note"]),
            vec![
                (2, strings(&["a", "Ann", "says \"hi\""])),
                (4, strings(&["b", "Bo", "two\nlines"])),
                (6, strings(&["c", "", "x"])),
            ],
        );
        let bytes = body.as_bytes();
        assert_eq!(split(&[bytes], 1 << 20), Ok(want.clone()));
        for cut in 0..bytes.len() {
            assert_eq!(split(&[&bytes[..cut], &bytes[cut..]], 1 << 20), Ok(want.clone()), "cut at {cut}");
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(split(&bytewise, 1 << 20), Ok(want));
    }

    #[test]
    fn a_long_record_or_a_bad_header_stops_the_split() {
        assert_eq!(split(&[b"a\n", b"12345\n"], 5).map(|r| r.1.len()), Ok(1));
        assert_eq!(split(&[b"a\nok\n", b"123", b"456\n"], 5), Err(SplitError::TooLong(3)));
        assert!(
            matches!(split(&[b"a,,b\n1,2,3\n"], 100), Err(SplitError::Header(m)) if m.contains("field 2 is empty"))
        );
        assert!(matches!(split(&[b"a,b,a\n"], 100), Err(SplitError::Header(m)) if m.contains("\"a\" twice")));
        assert_eq!(split(&[b""], 100), Ok((vec![], vec![])));
    }

    #[test]
    fn a_row_wider_than_the_header_is_marked_without_keeping_its_fields() {
        let mut body = "a,b\n".to_owned();
        body.push_str(&",".repeat(500));
        body.push_str("\n1,2\n");
        let (_, rows) = split(&[body.as_bytes()], 1 << 20).unwrap();
        assert_eq!(rows, vec![(2, strings(&["<extra>"])), (3, strings(&["1", "2"]))]);
    }

    #[test]
    fn fields_are_typed_by_column_or_inferred() {
        let table: TableDef = serde_json::from_value(serde_json::json!({
            "name": "t", "kind": "document", "created_at": 1,
            "columns": [{"name": "s", "type": "string"}, {"name": "i", "type": "int"}, {"name": "b", "type": "bool"},
                        {"name": "j", "type": "json"}, {"name": "ts", "type": "timestamp"}]
        }))
        .unwrap();
        let names = ["_id", "s", "i", "b", "j", "ts", "x", "y", "z", "w", "_from"];
        let header = Header { names: strings(&names) };
        let row = |fields: &[&str]| {
            let ends: Vec<usize> = fields
                .iter()
                .scan(0, |at, f| {
                    *at += f.len();
                    Some(*at)
                })
                .collect();
            let mut out = Vec::new();
            encode(fields.concat().as_bytes(), &ends, false, &mut out);
            document(&header, &table, &out)
        };
        let (id, doc) =
            row(&["k1", "007", "42", "TRUE", "{\"a\": [1]}", "2025-01-01T00:00:00Z", "-0", "1.5", "", "007", "u/1"])
                .unwrap();
        assert_eq!(id.as_deref(), Some("k1"));
        assert_eq!(
            Value::Object(doc),
            serde_json::json!({"s": "007", "i": 42, "b": true, "j": {"a": [1]}, "ts": "2025-01-01T00:00:00Z",
                "x": 0, "y": 1.5, "w": "007", "_from": "u/1"})
        );
        let (_, doc) =
            row(&["", "x", "4.5", "yes", "not json", "1700000000000", "true", "1e400", " 5", "null", ""]).unwrap();
        assert_eq!(
            Value::Object(doc),
            serde_json::json!({"s": "x", "i": 4.5, "b": "yes", "j": "not json", "ts": 1700000000000_i64,
                "x": true, "y": "1e400", "z": " 5", "w": "null"})
        );
        // JSON that breaks a rule of every JSON body fails the row
        let e = row(&["", "", "", "", "{\"a\":1,\"a\":2}", "", "", "", "", "", ""]).unwrap_err();
        assert_eq!(e.code(), "duplicate_key");
        let e = row(&["a", "b"]).unwrap_err();
        assert_eq!(e.to_string(), "invalid document: the row has 2 field(s), the header 11");
    }
}

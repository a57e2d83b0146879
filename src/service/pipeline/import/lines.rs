//! Splitting an NDJSON body into lines as it arrives: each byte looked at once, only the
//! unfinished last line kept between pieces, a line over the limit refused as soon as it passes it.
//! And what a line that is not JSON answers: where it stops being JSON, and why.

use crate::service::ServiceError;
use serde::Deserialize;

/// Splits a byte stream into lines. Each byte is examined once (only new bytes are searched for
/// `\n`), and only the unfinished last line is kept between pushes.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    carry: Vec<u8>,
    max_line: usize,
    line_no: u64,
    /// bytes searched for a newline so far (each byte once)
    pub(crate) examined: u64,
}

impl LineSplitter {
    pub(crate) fn new(max_line: usize) -> Self {
        LineSplitter { carry: Vec::new(), max_line, line_no: 0, examined: 0 }
    }

    /// Feeds `bytes`; `line` gets each complete line (without its `\n`) with its 1-based number.
    /// Fails with the number of the line that grew past the limit, as soon as it does.
    pub(crate) fn push(&mut self, bytes: &[u8], mut line: impl FnMut(u64, &[u8])) -> std::result::Result<(), u64> {
        let mut start = 0;
        while let Some(rest) = bytes.get(start..) {
            let found = rest.iter().position(|&b| b == b'\n');
            self.examined += found.map_or(rest.len(), |p| p + 1) as u64;
            let Some(pos) = found else { break };
            self.line_no += 1;
            let piece = rest.get(..pos).unwrap_or_default();
            if self.carry.len() + piece.len() > self.max_line {
                return Err(self.line_no);
            }
            if self.carry.is_empty() {
                line(self.line_no, piece);
            } else {
                self.carry.extend_from_slice(piece);
                line(self.line_no, &self.carry);
                self.carry.clear();
            }
            start += pos + 1;
        }
        let rest = bytes.get(start..).unwrap_or_default();
        if self.carry.len() + rest.len() > self.max_line {
            return Err(self.line_no + 1);
        }
        self.carry.extend_from_slice(rest);
        Ok(())
    }

    /// Ends the stream: the unterminated last line, if any.
    pub(crate) fn finish(&mut self, mut line: impl FnMut(u64, &[u8])) {
        if !self.carry.is_empty() {
            self.line_no += 1;
            line(self.line_no, &self.carry);
            self.carry.clear();
        }
    }

    /// The number of the line not complete yet.
    pub(crate) fn next_line(&self) -> u64 {
        self.line_no + 1
    }
}

/// The error of a line serde_json refused: its message, at the 0-based byte where the text stops
/// being JSON (serde_json counts a line's columns in bytes, from 1) and the character there.
pub(crate) fn malformed(line: &[u8], e: &serde_json::Error) -> ServiceError {
    let text = e.to_string();
    // "expected value at line 1 column 2": the position is given apart
    let message = text.rsplit_once(" at line ").map_or(text.as_str(), |(m, _)| m).to_owned();
    // the text ended early: serde_json names its last byte, the error is past it
    let at = if e.is_eof() { line.len() } else { e.column().saturating_sub(1).min(line.len()) };
    ServiceError::MalformedJson { at, found: found(line, at), message }
}

/// The error of a line simd-json refused: serde_json's account of the same text (the same
/// grammar; parsed into a value, as a typed table's lines are, so both paths tell a line alike),
/// or simd-json's own where serde_json takes the text.
pub(crate) fn not_json(line: &[u8], e: &simd_json::Error) -> ServiceError {
    let mut de = serde_json::Deserializer::from_slice(line);
    // the text rules bounded the depth before either parser ran
    de.disable_recursion_limit();
    match serde_json::Value::deserialize(&mut de).and_then(|_| de.end()) {
        Err(serde) => malformed(line, &serde),
        Ok(()) => {
            let at = e.index().min(line.len());
            ServiceError::MalformedJson { at, found: found(line, at), message: format!("{:?}", e.error()) }
        }
    }
}

/// The character at byte `at` of a line, quoted, or "the end of the line".
fn found(line: &[u8], at: usize) -> String {
    let Some(rest) = line.get(at..).filter(|r| !r.is_empty()) else { return "the end of the line".into() };
    // the whole character when the line is UTF-8 there, else the byte
    let text = String::from_utf8_lossy(&rest[..rest.len().min(4)]);
    match text.chars().next() {
        Some(c) if c != char::REPLACEMENT_CHARACTER => format!("{:?}", c),
        _ => format!("byte 0x{:02x}", rest[0]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Lines = Vec<(u64, Vec<u8>)>;

    /// The lines (or the number of the line over the cap) and the bytes examined.
    fn split(chunks: &[&[u8]], max_line: usize) -> (std::result::Result<Lines, u64>, u64) {
        let mut s = LineSplitter::new(max_line);
        let mut out = Vec::new();
        for c in chunks {
            if let Err(line) = s.push(c, |no, l| out.push((no, l.to_vec()))) {
                return (Err(line), s.examined);
            }
        }
        s.finish(|no, l| out.push((no, l.to_vec())));
        (Ok(out), s.examined)
    }

    fn detail(line: &str) -> (String, String) {
        let mut de = serde_json::Deserializer::from_str(line);
        let e = serde_json::Value::deserialize(&mut de).and_then(|_| de.end()).unwrap_err();
        let e = malformed(line.as_bytes(), &e);
        (e.code().to_owned(), e.to_string())
    }

    #[test]
    fn a_line_that_is_not_json_says_where_and_why() {
        let m = |s: &str| detail(s).1;
        assert_eq!(detail("not json").0, "malformed_json");
        assert_eq!(m("not json"), "malformed JSON at byte 1 ('o'): expected ident");
        assert_eq!(m(r#"{"a": 1,}"#), "malformed JSON at byte 8 ('}'): trailing comma");
        assert_eq!(m(r#"{"a": tru}"#), "malformed JSON at byte 9 ('}'): expected ident");
        assert_eq!(m(r#"{"a": 1"#), "malformed JSON at byte 7 (the end of the line): EOF while parsing an object");
        assert_eq!(m(r#"{"a": 1} x"#), "malformed JSON at byte 9 ('x'): trailing characters");
        assert_eq!(m(r#"{"é": ü}"#), "malformed JSON at byte 7 ('ü'): expected value");
    }

    #[test]
    fn simd_json_refusals_are_told_as_serde_json_tells_them() {
        for line in ["not json", "{\"a\":}", "{\"a\" 1}", "[1,", "\"\\x\""] {
            let mut copy = line.as_bytes().to_vec();
            let simd = simd_json::to_borrowed_value(&mut copy).map(drop).unwrap_err();
            assert_eq!(not_json(line.as_bytes(), &simd).to_string(), detail(line).1, "{line}");
        }
    }

    #[test]
    fn lines_are_split_across_chunks() {
        let (lines, _) = split(&[b"ab", b"c\nd", b"\n\nef\ng", b"h"], 10);
        let want: Vec<(u64, Vec<u8>)> =
            vec![(1, b"abc".to_vec()), (2, b"d".to_vec()), (3, vec![]), (4, b"ef".to_vec()), (5, b"gh".to_vec())];
        assert_eq!(lines, Ok(want));
    }

    #[test]
    fn each_byte_is_examined_once_however_the_line_is_cut() {
        // an 8 MiB line in 1 KiB pieces: the old splitter searched the whole carried line again
        // at every piece (quadratic); this one looks at each byte once
        let piece = vec![b'x'; 1 << 10];
        let mut s = LineSplitter::new(16 << 20);
        for _ in 0..(8 << 10) {
            s.push(&piece, |_, _| panic!("no newline was sent")).unwrap();
        }
        assert_eq!(s.examined, 8 << 20);
        let mut got = 0;
        s.push(b"\n", |no, l| {
            assert_eq!(no, 1);
            got = l.len();
        })
        .unwrap();
        assert_eq!((got, s.examined), (8 << 20, (8 << 20) + 1));
    }

    #[test]
    fn the_cap_trips_at_the_piece_that_passes_it() {
        // exactly the cap is fine, one byte more fails at once, before any newline
        assert!(split(&[b"12345", b"\n"], 5).0.is_ok());
        let (r, examined) = split(&[b"ok\n", b"123", b"456", b"never reached"], 5);
        assert_eq!((r, examined), (Err(2), 9));
        assert_eq!(split(&[b"1234567\n"], 5).0, Err(1));
    }
}

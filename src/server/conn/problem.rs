//! The problem documents that replace hyper's own bare error responses (see `conn.rs`): how a
//! response head written by hyper itself is told from the application's, and what the problem
//! says, down to the character of a request target that a URL must percent-encode.

use crate::api::ApiError;
use axum::http::StatusCode;

/// A byte of a request target that a URL must percent-encode, and its 0-based offset in the
/// target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refused {
    byte: u8,
    at: usize,
}

/// Which bytes the http crate takes in a request target's path, and in its query: asked of the
/// crate itself, byte by byte, once, so that these rules are exactly the ones hyper applies.
/// Bytes of 0x80 and above are taken (a target must be UTF-8 as a whole, which is another check).
fn target_rules() -> &'static [[bool; 256]; 2] {
    static RULES: std::sync::OnceLock<[[bool; 256]; 2]> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let mut rules = [[true; 256]; 2];
        for b in 0..=0x7fu8 {
            let takes = |prefix: &[u8]| {
                let mut target = prefix.to_vec();
                target.push(b);
                axum::http::uri::PathAndQuery::try_from(target.as_slice()).is_ok()
            };
            rules[0][usize::from(b)] = takes(b"/");
            rules[1][usize::from(b)] = takes(b"/?");
        }
        rules
    })
}

/// The first byte of the request target in `head`'s first line that the http crate refuses, if
/// the line is there whole (method, target, version). A `#` ends the scan: hyper drops a fragment.
pub(super) fn refused_in_target(head: &[u8]) -> Option<Refused> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let start = line.iter().position(|&b| b == b' ')? + 1;
    let end = start + line.get(start..)?.iter().rposition(|&b| b == b' ')?;
    let target = line.get(start..end)?;
    if !target.starts_with(b"/") {
        // `*`, or an absolute form: not the common case this is for
        return None;
    }
    let rules = target_rules();
    let mut part = 0;
    for (at, &byte) in target.iter().enumerate() {
        match byte {
            b'#' => return None,
            b'?' if part == 0 => part = 1,
            _ if !rules[part][usize::from(byte)] => return Some(Refused { byte, at }),
            _ => {}
        }
    }
    None
}

/// The status of a response head hyper writes by itself, if `bytes` is one: a 400, 414 or 431
/// head alone, without a content type (every error the application sends has one, even to HEAD).
pub(super) fn hypers_own(bytes: &[u8]) -> Option<StatusCode> {
    let rest = bytes.strip_prefix(b"HTTP/1.1 ")?;
    if !bytes.ends_with(b"\r\n\r\n") || bytes.windows(15).any(|w| w.eq_ignore_ascii_case(b"\ncontent-type: ")) {
        return None;
    }
    let status = StatusCode::from_bytes(rest.get(..3)?).ok()?;
    matches!(status, StatusCode::BAD_REQUEST | StatusCode::URI_TOO_LONG | StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        .then_some(status)
}

/// The whole HTTP/1.1 response, a problem document, that replaces hyper's `status`; `refused`,
/// what the request target held that the http crate refuses, if anything.
pub(super) fn problem_response(status: StatusCode, refused: Option<Refused>) -> Vec<u8> {
    let (code, detail) = match (status, refused) {
        (StatusCode::URI_TOO_LONG, _) => {
            ("uri_too_long", "the request target is longer than the server accepts (64 KiB)".to_owned())
        }
        (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, _) => {
            ("headers_too_large", "the request head is larger than the server accepts".to_owned())
        }
        (_, Some(Refused { byte, at })) => (
            "malformed_request",
            format!(
                "the request target holds {} at byte {at}, which a URL must percent-encode (as %{byte:02X}); \
                 a placeholder such as <cursor> left in a URL does this",
                shown(byte)
            ),
        ),
        _ => (
            "malformed_request",
            "the request line or a header is malformed (e.g. an invalid Content-Length)".to_owned(),
        ),
    };
    let body = serde_json::to_vec(&ApiError::new(status, code, detail).problem()).unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// A byte as a reader would name it: `'<'`, or `a space`, or `byte 0x01`.
fn shown(byte: u8) -> String {
    match byte {
        b' ' => "a space".to_owned(),
        0x21..=0x7e => format!("'{}'", char::from(byte)),
        _ => format!("byte 0x{byte:02x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_error_head_is_taken_for_hypers_own() {
        assert_eq!(
            hypers_own(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: x\r\n\r\n"),
            Some(StatusCode::URI_TOO_LONG)
        );
        assert_eq!(hypers_own(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"), None);
        // the application's own errors carry a content type (a HEAD answer has no body)
        assert_eq!(hypers_own(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\n\r\n"), None);
        assert_eq!(hypers_own(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"), None);
        assert_eq!(hypers_own(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\nhello"), None);
        assert_eq!(hypers_own(b"{\"HTTP/1.1 400\":1}"), None);
        let response = String::from_utf8(problem_response(StatusCode::BAD_REQUEST, None)).unwrap_or_default();
        assert!(response.starts_with("HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\n"));
        assert!(response.ends_with("\"code\":\"malformed_request\"}"), "{response}");
    }

    #[test]
    fn a_target_character_a_url_must_encode_is_found() {
        let refused = |head: &[u8]| refused_in_target(head).map(|r| (char::from(r.byte), r.at));
        let head = b"GET /v1/tables/users/documents?limit=100&cursor=<cursor> HTTP/1.1\r\nhost: x\r\n\r\n";
        assert_eq!(refused(head), Some(('<', 44)));
        assert_eq!(refused(b"GET /a>b HTTP/1.1\r\n"), Some(('>', 2)));
        assert_eq!(refused(b"GET /a?m=\"b\" HTTP/1.1\r\n"), Some(('"', 5)), "taken in a path, not in a query");
        assert_eq!(refused(b"GET /a?b=c d HTTP/1.1\r\n"), Some((' ', 6)), "the version is after the last space");
        // what the http crate takes is not reported: percent-encoded, braces in a query, UTF-8
        for fine in [
            &b"GET /v1/x?cursor=%3Ccursor%3E HTTP/1.1\r\n"[..],
            b"GET /v1/x?match={host=~h.} HTTP/1.1\r\n",
            b"GET /a\"b HTTP/1.1\r\n",
            "GET /v1/tables/caf\u{e9} HTTP/1.1\r\n".as_bytes(),
            b"GET /a#<frag> HTTP/1.1\r\n",
            b"GET /v1/x?cursor=<cur",
        ] {
            assert_eq!(refused(fine), None, "{}", String::from_utf8_lossy(fine));
        }
        let response =
            String::from_utf8(problem_response(StatusCode::BAD_REQUEST, refused_in_target(head))).unwrap_or_default();
        assert!(response.contains("holds '<' at byte 44, which a URL must percent-encode (as %3C)"), "{response}");
    }
}

//! Conditional writes: `If-Match` / `If-None-Match` against a document's content tag.

use crate::service::{Result, ServiceError};

/// A set of entity tags from `If-Match` / `If-None-Match`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtagMatch {
    /// `*`: any current version
    Any,
    /// a list of tags (quotes and `W/` removed)
    Tags(Vec<String>),
}

impl EtagMatch {
    /// Parses a header value: `*` or a comma-separated list of (weak or strong) tags.
    pub fn parse(header: &str) -> EtagMatch {
        if header.trim() == "*" {
            return EtagMatch::Any;
        }
        EtagMatch::Tags(header.split(',').map(|t| bare_tag(t.trim()).to_owned()).filter(|t| !t.is_empty()).collect())
    }

    fn matches(&self, current: &str) -> bool {
        match self {
            EtagMatch::Any => true,
            EtagMatch::Tags(tags) => tags.iter().any(|t| t == bare_tag(current)),
        }
    }
}

fn bare_tag(t: &str) -> &str {
    t.trim_start_matches("W/").trim_matches('"')
}

/// Conditions a write checks against the document's current version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// `If-Match`: the document must exist with one of these tags
    pub if_match: Option<EtagMatch>,
    /// `If-None-Match`: the document must not exist (`*`) or not have one of these tags
    pub if_none_match: Option<EtagMatch>,
}

impl Preconditions {
    pub(crate) fn check(&self, current: Option<&str>) -> Result<()> {
        if let Some(m) = &self.if_match {
            match current {
                None => return Err(ServiceError::PreconditionFailed("If-Match: the document does not exist".into())),
                Some(tag) if !m.matches(tag) => {
                    return Err(ServiceError::PreconditionFailed(format!("If-Match: the current ETag is {tag}")));
                }
                Some(_) => {}
            }
        }
        if let (Some(m), Some(tag)) = (&self.if_none_match, current)
            && m.matches(tag)
        {
            return Err(ServiceError::PreconditionFailed(format!("If-None-Match: the current ETag is {tag}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::core::render::etag;

    /// The tag is the one earlier versions made with `format!`: clients keep tags across upgrades.
    #[test]
    fn etags_are_the_quoted_hash_in_sixteen_hex_digits() {
        for blob in [&b""[..], b"a", b"some longer blob \x00\xff"] {
            assert_eq!(etag(blob), format!("\"{:016x}\"", xxhash_rust::xxh3::xxh3_64(blob)));
        }
    }

    #[test]
    fn preconditions() {
        let tag = "\"00000000000000ab\"";
        let pre = |m: Option<&str>, n: Option<&str>| Preconditions {
            if_match: m.map(EtagMatch::parse),
            if_none_match: n.map(EtagMatch::parse),
        };
        assert!(pre(Some(tag), None).check(Some(tag)).is_ok());
        assert!(pre(Some("W/\"00000000000000ab\", \"x\""), None).check(Some(tag)).is_ok());
        assert!(pre(Some("\"other\""), None).check(Some(tag)).is_err());
        assert!(pre(Some("*"), None).check(None).is_err());
        assert!(pre(None, Some("*")).check(Some(tag)).is_err());
        assert!(pre(None, Some("*")).check(None).is_ok());
        assert!(pre(None, None).check(None).is_ok());
    }
}

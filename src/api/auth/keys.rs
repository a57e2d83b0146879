//! API keys: read from a key file (TOML or JSON) and from `MOSAIC_API_KEYS`, checked at start-up,
//! kept only as SHA-256 digests, and verified in constant time.
//!
//! No key ever appears in an error message, a log line or a `Debug` output: errors name an entry
//! by its position and name, parse errors by line and column.

use super::roles::Role;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

/// The shortest key accepted, in characters. A random key of 16 hex digits has 64 bits.
pub const MIN_KEY_CHARS: usize = 16;

/// The longest key name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// The environment variable that holds keys as `name:role:key`, comma-separated.
pub const ENV_KEYS: &str = "MOSAIC_API_KEYS";

/// Why the configured keys were refused; the server does not start.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// the key file could not be read
    #[error("cannot read the API key file {path}: {source}")]
    Read {
        /// the file
        path: String,
        /// why
        source: std::io::Error,
    },
    /// the key file is not TOML or JSON of the expected shape
    #[error("cannot parse the API key file {path}: {detail}")]
    Parse {
        /// the file
        path: String,
        /// where and what (line and column, never the text)
        detail: String,
    },
    /// one entry is wrong
    #[error("API key {entry} of {origin}: {problem}")]
    Invalid {
        /// the key file's path, or `MOSAIC_API_KEYS`
        origin: String,
        /// `#n` (1-based), with the name when there is one
        entry: String,
        /// what is wrong with it
        problem: String,
    },
    /// a key shorter than [`MIN_KEY_CHARS`]
    #[error(
        "API key {entry} of {origin} is a weak key: shorter than {MIN_KEY_CHARS} characters (make one with `openssl rand -hex 32`)"
    )]
    Weak {
        /// the key file's path, or `MOSAIC_API_KEYS`
        origin: String,
        /// `#n "name"`
        entry: String,
    },
    /// two entries with one name
    #[error("two API keys are named {name:?} ({first} and {second}): names must be unique")]
    DuplicateName {
        /// the name
        name: String,
        /// where the first is
        first: String,
        /// where the second is
        second: String,
    },
    /// two entries with one key
    #[error("API keys {first:?} and {second:?} are the same key: each key must be unique")]
    DuplicateKey {
        /// the first entry's name
        first: String,
        /// the second entry's name
        second: String,
    },
    /// a key file with no keys in it
    #[error("the API key file {path} defines no keys (expected [[keys]] entries with name, role and key or sha256)")]
    Empty {
        /// the file
        path: String,
    },
}

/// One configured key: its name, its role and the SHA-256 of the key.
#[derive(Clone)]
struct Entry {
    name: Arc<str>,
    role: Role,
    /// the databases the key is limited to, with its role in each (`None`: every database, with
    /// `role`)
    databases: Option<Arc<BTreeMap<String, Role>>>,
    digest: [u8; 32],
    origin: String,
}

/// The configured keys (empty: authentication is off).
#[derive(Clone, Default)]
pub struct KeySet {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // names and roles only: not even a digest
        f.debug_list().entries(self.entries.iter().map(|e| (&*e.name, e.role, &e.databases))).finish()
    }
}

/// The key a request presented, once verified.
#[derive(Debug, Clone)]
pub struct Caller {
    /// the key's name (never the key)
    pub name: Arc<str>,
    /// its role: on every database, unless `databases` limits it, and on the server's own routes
    /// (`/v1/databases`, `/metrics`)
    pub role: Role,
    /// the databases the key is limited to, with its role in each (`None`: every database)
    pub databases: Option<Arc<BTreeMap<String, Role>>>,
}

impl Caller {
    /// The key's role in database `db`; `None` if it may not reach it (it does not learn that
    /// the database exists: 404 `database_not_found`).
    pub fn role_in(&self, db: &str) -> Option<Role> {
        match &self.databases {
            None => Some(self.role),
            Some(listed) => listed.get(db).copied(),
        }
    }
}

impl KeySet {
    /// The keys of the key file (if any) and of `MOSAIC_API_KEYS`'s value (if any), checked
    /// together: weak keys, duplicate names and duplicate keys are refused.
    pub fn load(file: Option<&Path>, env: Option<&str>) -> Result<KeySet, KeyError> {
        let mut set = KeySet::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|source| KeyError::Read { path: path.display().to_string(), source })?;
            set.extend(parse_file(&text, path)?)?;
        }
        if let Some(value) = env {
            set.extend(KeySet::parse_env(value)?)?;
        }
        Ok(set)
    }

    /// The keys of a `MOSAIC_API_KEYS` value: `name:role:key` entries separated by commas (spaces
    /// around an entry and empty entries are ignored; the key is everything after the second `:`).
    pub fn parse_env(value: &str) -> Result<KeySet, KeyError> {
        let mut set = KeySet::default();
        for (i, item) in value.split(',').map(str::trim).filter(|s| !s.is_empty()).enumerate() {
            let entry = || format!("#{}", i + 1);
            let mut parts = item.splitn(3, ':');
            let (Some(name), Some(role), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
                return Err(KeyError::Invalid {
                    origin: ENV_KEYS.into(),
                    entry: entry(),
                    problem: "is not name:role:key".into(),
                });
            };
            let raw = RawKey {
                name: name.to_owned(),
                role: role.to_owned(),
                key: Some(Secret(key.to_owned())),
                sha256: None,
                databases: None,
            };
            set.extend(KeySet { entries: vec![raw.check(ENV_KEYS, i)?] })?;
        }
        Ok(set)
    }

    /// Adds `other`'s keys, refusing a name or a key already present.
    pub fn extend(&mut self, other: KeySet) -> Result<(), KeyError> {
        for e in other.entries {
            if let Some(old) = self.entries.iter().find(|old| old.name == e.name) {
                return Err(KeyError::DuplicateName {
                    name: e.name.to_string(),
                    first: old.origin.clone(),
                    second: e.origin,
                });
            }
            if let Some(old) = self.entries.iter().find(|old| old.digest == e.digest) {
                return Err(KeyError::DuplicateKey { first: old.name.to_string(), second: e.name.to_string() });
            }
            self.entries.push(e);
        }
        Ok(())
    }

    /// No keys: authentication is off.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many keys have `role`.
    pub fn count(&self, role: Role) -> usize {
        self.entries.iter().filter(|e| e.role == role).count()
    }

    /// The key whose digest is the digest of `presented`. Every configured digest is compared,
    /// each in constant time, and the match is selected without a branch, so the time taken
    /// depends on the number of keys only.
    pub fn verify(&self, presented: &[u8]) -> Option<Caller> {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        let mut found = Choice::from(0);
        let mut index = 0u64;
        for (i, e) in self.entries.iter().enumerate() {
            let same = e.digest.ct_eq(&digest);
            index.conditional_assign(&(i as u64), same);
            found |= same;
        }
        if !bool::from(found) {
            return None;
        }
        let e = self.entries.get(usize::try_from(index).ok()?)?;
        Some(Caller { name: e.name.clone(), role: e.role, databases: e.databases.clone() })
    }
}

/// The key file's text: JSON for `.json`, TOML for `.toml`, else JSON if it parses as JSON, else
/// TOML. The shape is the same in both: `keys`, a list of `{name, role, key | sha256}`.
pub(super) fn parse_file(text: &str, path: &Path) -> Result<KeySet, KeyError> {
    let origin = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let file = match ext.as_deref() {
        Some("json") => parse_json(text, &origin)?,
        Some("toml") => parse_toml(text, &origin)?,
        _ => match parse_json(text, &origin) {
            Ok(file) => file,
            Err(_) => parse_toml(text, &origin)?,
        },
    };
    if file.keys.is_empty() {
        return Err(KeyError::Empty { path: origin });
    }
    let mut set = KeySet::default();
    for (i, raw) in file.keys.into_iter().enumerate() {
        set.extend(KeySet { entries: vec![raw.check(&origin, i)?] })?;
    }
    Ok(set)
}

fn parse_json(text: &str, origin: &str) -> Result<KeyFile, KeyError> {
    // serde_json's messages name the line and column, never the text
    serde_json::from_str(text).map_err(|e| KeyError::Parse { path: origin.into(), detail: e.to_string() })
}

fn parse_toml(text: &str, origin: &str) -> Result<KeyFile, KeyError> {
    toml::from_str(text).map_err(|e| {
        // toml's Display quotes the offending line, which may hold a key: the position and the
        // message only
        let at = e.span().map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: ")
        });
        KeyError::Parse { path: origin.into(), detail: format!("{}{}", at.unwrap_or_default(), e.message()) }
    })
}

/// A key file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    #[serde(default)]
    keys: Vec<RawKey>,
}

/// One entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    name: String,
    role: String,
    #[serde(default)]
    key: Option<Secret>,
    #[serde(default)]
    sha256: Option<String>,
    /// the databases the key is limited to, each with its role: `{shop = "write"}`
    #[serde(default)]
    databases: Option<BTreeMap<String, String>>,
}

impl RawKey {
    /// The entry, or why it is refused; `index` is 0-based.
    fn check(self, origin: &str, index: usize) -> Result<Entry, KeyError> {
        let invalid = |entry: String, problem: String| KeyError::Invalid { origin: origin.into(), entry, problem };
        let valid_name = !self.name.is_empty()
            && self.name.len() <= MAX_NAME_BYTES
            && !self.name.chars().any(|c| c.is_control() || c.is_whitespace() || c == ',' || c == ':');
        if !valid_name {
            return Err(invalid(
                format!("#{}", index + 1),
                format!("the name must be 1-{MAX_NAME_BYTES} bytes without spaces, control characters, `,` or `:`"),
            ));
        }
        let entry = format!("#{} {:?}", index + 1, self.name);
        let role = Role::parse(&self.role)
            .ok_or_else(|| invalid(entry.clone(), format!("role {:?} is not one of read, write, admin", self.role)))?;
        let digest = match (self.key, self.sha256) {
            (Some(Secret(key)), None) => {
                if !key.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(invalid(
                        entry,
                        "the key must be visible ASCII without spaces (what an Authorization header can carry)".into(),
                    ));
                }
                if key.chars().count() < MIN_KEY_CHARS {
                    return Err(KeyError::Weak { origin: origin.into(), entry });
                }
                Sha256::digest(key.as_bytes()).into()
            }
            (None, Some(hex)) => decode_digest(&hex)
                .ok_or_else(|| invalid(entry.clone(), "sha256 must be 64 hexadecimal digits".into()))?,
            (Some(_), Some(_)) => return Err(invalid(entry, "give key or sha256, not both".into())),
            (None, None) => return Err(invalid(entry, "needs key or sha256".into())),
        };
        let databases = match self.databases {
            None => None,
            Some(listed) if listed.is_empty() => {
                return Err(invalid(entry, "databases lists no database (leave it out for every database)".into()));
            }
            Some(listed) => {
                let mut roles = BTreeMap::new();
                for (db, role_name) in listed {
                    if let Err(e) = crate::service::check_table_name(&db) {
                        return Err(invalid(entry, format!("database {db:?}: {e}")));
                    }
                    let role = Role::parse(&role_name).ok_or_else(|| {
                        invalid(
                            entry.clone(),
                            format!("role {role_name:?} of database {db:?} is not one of read, write, admin"),
                        )
                    })?;
                    roles.insert(db, role);
                }
                Some(Arc::new(roles))
            }
        };
        Ok(Entry { name: self.name.into(), role, databases, digest, origin: format!("{origin} {entry}") })
    }
}

/// 64 hex digits (either case) as 32 bytes.
fn decode_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

/// A key as written in the file. Its `Debug` hides it, and a value of the wrong type is refused
/// without being quoted (serde's own message would quote it).
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        fn refuse<E: serde::de::Error>() -> Result<Secret, E> {
            Err(E::custom("a key must be a string"))
        }
        impl serde::de::Visitor<'_> for Visit {
            type Value = Secret;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key (a string)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Secret, E> {
                Ok(Secret(v.to_owned()))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Secret, E> {
                refuse()
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Secret, E> {
                refuse()
            }
            fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<Secret, E> {
                refuse()
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Secret, E> {
                refuse()
            }
            fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<Secret, E> {
                refuse()
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Secret, E> {
                refuse()
            }
            fn visit_bytes<E: serde::de::Error>(self, _: &[u8]) -> Result<Secret, E> {
                refuse()
            }
        }
        d.deserialize_any(Visit)
    }
}

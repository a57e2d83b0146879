//! The keys of the server's registry of databases, which the default database's catalog keeps:
//! `databases` writes them, a backup leaves them out (they are the server's, not a database's).

use mosaic_keys::MetaKey;

/// The sequence database ids are taken from (`meta:seq:database`): ids are never used twice, so
/// a dropped database's store still being removed is never mistaken for a new one's.
pub const ID_SEQ: &str = "database";
/// The kind of a database's entry (`meta:database:{name}`).
pub const KIND: &str = "database";
/// The kind of a database's drop mark (`meta:database_dropping:{name}`).
pub const DROPPING_KIND: &str = "database_dropping";

/// The key prefixes of the registry: entries, drop marks and the id sequence.
pub fn prefixes() -> [Vec<u8>; 3] {
    [MetaKey::kind_prefix(KIND), MetaKey::kind_prefix(DROPPING_KIND), MetaKey::Seq(ID_SEQ.into()).encode()]
}

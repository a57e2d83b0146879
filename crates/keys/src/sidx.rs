//! `sidx:{table}:{index}:{geohash}:{id}` → the point (lat, lon as two f64, big-endian).

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// A spatial-index entry: the geohash cell of a point, then the document id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidxKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// index name
    pub index: Cow<'a, str>,
    /// geohash of the point
    pub cell: Cow<'a, str>,
    /// document id
    pub id: Cow<'a, str>,
}

impl<'a> SidxKey<'a> {
    /// An entry for document `id` in geohash `cell`.
    pub fn new(table: &'a str, index: &'a str, cell: &'a str, id: &'a str) -> Self {
        SidxKey { table: table.into(), index: index.into(), cell: cell.into(), id: id.into() }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::default().str(&self.table).str(&self.index).str(&self.cell).str(&self.id).finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = SidxKey { table: r.next_str()?, index: r.next_str()?, cell: r.next_str()?, id: r.next_str()? };
        r.end()?;
        Ok(k)
    }

    /// The prefix of every entry of one index.
    pub fn index_prefix(table: &str, index: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).finish()
    }

    /// The range start of every entry whose cell starts with `cell_prefix` (a coarser geohash).
    /// Geohash cells are strings, so the entries of a coarse cell are those whose cell component
    /// starts with it: scan from this key while the decoded cell still has the prefix.
    pub fn cell_scan_start(table: &str, index: &str, cell_prefix: &str) -> Vec<u8> {
        let mut k = Self::index_prefix(table, index);
        k.push(0x07);
        k.extend_from_slice(cell_prefix.as_bytes());
        k
    }
}

/// The stored value of a spatial entry: latitude and longitude.
pub fn encode_point(lat: f64, lon: f64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&lat.to_be_bytes());
    out[8..].copy_from_slice(&lon.to_be_bytes());
    out
}

/// Reads a value written by [`encode_point`].
pub fn decode_point(value: &[u8]) -> Result<(f64, f64), KeyError> {
    let bytes: &[u8; 16] = value.try_into().map_err(|_| KeyError::Truncated)?;
    let (lat, lon) = bytes.split_at(8);
    let f = |b: &[u8]| b.try_into().map(f64::from_be_bytes).map_err(|_| KeyError::Truncated);
    Ok((f(lat)?, f(lon)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let k = SidxKey::new("shops", "by_loc", "u4pruyd", "s1");
        let bytes = k.encode();
        assert_eq!(bytes, b"\x07shops\x00\x01\x07by_loc\x00\x01\x07u4pruyd\x00\x01\x07s1\x00\x01");
        assert_eq!(SidxKey::decode(&bytes).unwrap(), k);
        assert_eq!(super::super::display("sidx", &bytes), "sidx:shops:by_loc:u4pruyd:s1");
        assert!(bytes.starts_with(&SidxKey::cell_scan_start("shops", "by_loc", "u4pr")));
        assert_eq!(decode_point(&encode_point(59.9, -10.75)).unwrap(), (59.9, -10.75));
    }
}

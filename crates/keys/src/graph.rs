//! `graph:out:{edge_table}:{from}:{edge_id}` and `graph:in:{edge_table}:{to}:{edge_id}` → the other
//! endpoint (and weight), so traversals never read edge documents.

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// Which way an adjacency entry points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// from the vertex along its outgoing edges
    Out,
    /// into the vertex along its incoming edges
    In,
}

impl Direction {
    fn tag(self) -> &'static str {
        match self {
            Direction::Out => "out",
            Direction::In => "in",
        }
    }
}

/// An adjacency entry of one edge at one of its endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphKey<'a> {
    /// out (at `_from`) or in (at `_to`)
    pub direction: Direction,
    /// the edge table
    pub edge_table: Cow<'a, str>,
    /// the vertex this entry hangs off (`"table/id"`)
    pub vertex: Cow<'a, str>,
    /// the edge document's id
    pub edge_id: Cow<'a, str>,
}

impl<'a> GraphKey<'a> {
    /// The entry of edge `edge_id` at `vertex`.
    pub fn new(direction: Direction, edge_table: &'a str, vertex: &'a str, edge_id: &'a str) -> Self {
        GraphKey { direction, edge_table: edge_table.into(), vertex: vertex.into(), edge_id: edge_id.into() }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::default()
            .str(self.direction.tag())
            .str(&self.edge_table)
            .str(&self.vertex)
            .str(&self.edge_id)
            .finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let direction = match r.next_str()?.as_ref() {
            "out" => Direction::Out,
            "in" => Direction::In,
            _ => return Err(KeyError::UnexpectedType { expected: "out or in" }),
        };
        let k = GraphKey { direction, edge_table: r.next_str()?, vertex: r.next_str()?, edge_id: r.next_str()? };
        r.end()?;
        Ok(k)
    }

    /// The prefix of every edge of `edge_table` at `vertex` in one direction.
    pub fn vertex_prefix(direction: Direction, edge_table: &str, vertex: &str) -> Vec<u8> {
        KeyWriter::default().str(direction.tag()).str(edge_table).str(vertex).finish()
    }

    /// The prefix of every entry of `edge_table` in one direction.
    pub fn table_prefix(direction: Direction, edge_table: &str) -> Vec<u8> {
        KeyWriter::default().str(direction.tag()).str(edge_table).finish()
    }
}

/// The value of an adjacency entry: the edge's other endpoint (`"table/id"`), and the value of
/// the edge table's declared weight field when it has one.
///
/// Two layouts, told apart by the first byte:
/// - the endpoint's UTF-8 bytes alone (no weight): a table name is never empty and never starts
///   with a control character, so such a value never starts with `0x01`;
/// - `0x01`, the weight as an f64 (8 bytes, big-endian), then the endpoint's UTF-8 bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct AdjValue<'a> {
    /// the other endpoint
    pub other: Cow<'a, str>,
    /// the weight, when the edge table declares a weight field
    pub weight: Option<f64>,
}

/// The tag of a weighted adjacency value.
const WEIGHTED: u8 = 0x01;

impl<'a> AdjValue<'a> {
    /// The value bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self.weight {
            None => self.other.as_bytes().to_vec(),
            Some(w) => {
                let mut out = Vec::with_capacity(9 + self.other.len());
                out.push(WEIGHTED);
                out.extend_from_slice(&w.to_be_bytes());
                out.extend_from_slice(self.other.as_bytes());
                out
            }
        }
    }

    /// Parses value bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, KeyError> {
        let text = |b: &'a [u8]| std::str::from_utf8(b).map_err(|_| KeyError::UnexpectedType { expected: "UTF-8" });
        match bytes.split_first() {
            Some((&WEIGHTED, rest)) => {
                let (w, other) = rest.split_first_chunk::<8>().ok_or(KeyError::UnexpectedType { expected: "f64" })?;
                Ok(AdjValue { other: text(other)?.into(), weight: Some(f64::from_be_bytes(*w)) })
            }
            _ => Ok(AdjValue { other: text(bytes)?.into(), weight: None }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let k = GraphKey::new(Direction::Out, "knows", "users/alice", "e1");
        let bytes = k.encode();
        assert_eq!(bytes, b"\x07out\x00\x01\x07knows\x00\x01\x07users/alice\x00\x01\x07e1\x00\x01");
        assert_eq!(GraphKey::decode(&bytes).unwrap(), k);
        assert_eq!(super::super::display("graph", &bytes), "graph:out:knows:\"users/alice\":e1");
        let i = GraphKey::new(Direction::In, "knows", "users/bob", "e1");
        assert_eq!(GraphKey::decode(&i.encode()).unwrap(), i);
    }

    #[test]
    fn adjacency_values_round_trip() {
        let plain = AdjValue { other: "users/bob".into(), weight: None };
        assert_eq!(plain.encode(), b"users/bob");
        assert_eq!(AdjValue::decode(&plain.encode()).unwrap(), plain);
        let weighted = AdjValue { other: "c/x/y:z".into(), weight: Some(2.5) };
        let bytes = weighted.encode();
        assert_eq!(bytes[0], 1);
        assert_eq!(AdjValue::decode(&bytes).unwrap(), weighted);
        assert!(AdjValue::decode(&[1, 0, 0]).is_err());
        assert!(AdjValue::decode(&[0xff]).is_err());
    }

    proptest::proptest! {
        /// Any vertex reference (a table name never starts with a control character) and weight
        /// round-trip; any bytes decode to a value or an error, never a panic.
        #[test]
        fn adjacency_values_round_trip_or_fail_cleanly(
            table in "[^\\x00-\\x1f/][^/]{0,8}", id in ".{1,12}", weight in proptest::option::of(0.0f64..1e12),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
        ) {
            let v = AdjValue { other: format!("{table}/{id}").into(), weight };
            let bytes = v.encode();
            proptest::prop_assert_eq!(AdjValue::decode(&bytes).unwrap(), v);
            let _ = AdjValue::decode(&junk);
        }
    }
}

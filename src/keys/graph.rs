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
}

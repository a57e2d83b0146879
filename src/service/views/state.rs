//! A group's state (`view:{table}:{view}:g:{group…}`): its document count and, per summed field,
//! how many of its documents hold a number there, how many of those a float, and the exact sum.
//!
//! Encoding: count (u64 BE), field count (u8), then per field numbers (u64 BE), floats (u64 BE)
//! and the sum ([`ExactSum::encode`]).

use super::def::{Agg, Compiled};
use super::sum::ExactSum;
use crate::keys::Component;
use serde_json::{Map, Value};

/// One summed field of a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSum {
    /// documents whose value is a number
    pub numbers: u64,
    /// of those, documents whose value is a float (the sum is then shown as a float)
    pub floats: u64,
    /// the exact sum of the numbers
    pub sum: ExactSum,
}

impl FieldSum {
    /// The sum as JSON: an integer while no float was added (when it fits i64 or u64), else the
    /// nearest f64 (`null` beyond the f64 range).
    pub fn sum_json(&self) -> Value {
        if self.floats == 0
            && let Some(i) = self.sum.to_i128()
        {
            if let Ok(v) = i64::try_from(i) {
                return v.into();
            }
            if let Ok(v) = u64::try_from(i) {
                return v.into();
            }
        }
        finite(self.sum.to_f64())
    }

    /// The mean of the numbers, `null` when there are none.
    pub fn avg_json(&self) -> Value {
        if self.numbers == 0 {
            return Value::Null;
        }
        finite(self.sum.to_f64() / self.numbers as f64)
    }
}

fn finite(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// A group's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    /// documents in the group
    pub count: u64,
    /// per summed field of the view
    pub sums: Vec<FieldSum>,
}

impl GroupState {
    /// An empty group of a view summing `fields` fields.
    pub fn new(fields: usize) -> Self {
        GroupState { count: 0, sums: vec![FieldSum::default(); fields] }
    }

    /// The stored bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.sums.len() * 24);
        out.extend_from_slice(&self.count.to_be_bytes());
        out.push(self.sums.len() as u8);
        for s in &self.sums {
            out.extend_from_slice(&s.numbers.to_be_bytes());
            out.extend_from_slice(&s.floats.to_be_bytes());
            s.sum.encode(&mut out);
        }
        out
    }

    /// Parses stored bytes of a view summing `fields` fields; `None` when damaged.
    pub fn decode(bytes: &[u8], fields: usize) -> Option<Self> {
        let (count, rest) = bytes.split_first_chunk::<8>()?;
        let (&n, mut rest) = rest.split_first()?;
        if usize::from(n) != fields {
            return None;
        }
        let mut sums = Vec::with_capacity(fields);
        for _ in 0..fields {
            let (numbers, r) = rest.split_first_chunk::<8>()?;
            let (floats, r) = r.split_first_chunk::<8>()?;
            let (sum, r) = ExactSum::decode(r)?;
            sums.push(FieldSum { numbers: u64::from_be_bytes(*numbers), floats: u64::from_be_bytes(*floats), sum });
            rest = r;
        }
        rest.is_empty().then_some(GroupState { count: u64::from_be_bytes(*count), sums })
    }

    /// The group as the API shows it: `key` (by field → value) and each aggregate; `extremes`
    /// holds each min/max field's least and greatest value in the group.
    pub fn to_json(
        &self,
        c: &Compiled,
        group: &[Component<'_>],
        extremes: &[(Option<Component<'static>>, Option<Component<'static>>)],
    ) -> Value {
        let mut out = Map::new();
        let key: Map<String, Value> = c.by.iter().cloned().zip(group.iter().map(Component::to_json)).collect();
        out.insert("key".into(), Value::Object(key));
        for (name, agg) in &c.aggs {
            let v = match *agg {
                Agg::Count => self.count.into(),
                Agg::Sum(i) => self.sums.get(i).map_or(Value::Null, FieldSum::sum_json),
                Agg::Avg(i) => self.sums.get(i).map_or(Value::Null, FieldSum::avg_json),
                Agg::Min(i) => extremes.get(i).and_then(|e| e.0.as_ref()).map_or(Value::Null, Component::to_json),
                Agg::Max(i) => extremes.get(i).and_then(|e| e.1.as_ref()).map_or(Value::Null, Component::to_json),
            };
            out.insert(name.clone(), v);
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut s = GroupState::new(2);
        s.count = 3;
        s.sums[0].numbers = 2;
        s.sums[0].sum.add_int(40, false);
        s.sums[1].numbers = 1;
        s.sums[1].floats = 1;
        s.sums[1].sum.add_f64(-2.5, false);
        let bytes = s.encode();
        assert_eq!(GroupState::decode(&bytes, 2), Some(s.clone()));
        assert_eq!(GroupState::decode(&bytes, 1), None);
        assert_eq!(GroupState::decode(&bytes[..bytes.len() - 1], 2), None);
        assert_eq!(s.sums[0].sum_json(), serde_json::json!(40));
        assert_eq!(s.sums[0].avg_json(), serde_json::json!(20.0));
        assert_eq!(s.sums[1].sum_json(), serde_json::json!(-2.5));
        assert_eq!(FieldSum::default().avg_json(), Value::Null);
        assert_eq!(FieldSum::default().sum_json(), serde_json::json!(0));
    }
}

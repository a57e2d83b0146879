//! The values of PromQL expressions while they are evaluated, and the results as the Prometheus
//! HTTP API writes them: times as Unix seconds (a JSON number, ms precision), values as strings
//! (`"NaN"`, `"+Inf"`, `"-Inf"` for the special ones, Go's shortest form for the rest).

use super::series::Labels;
use serde::ser::{SerializeMap, SerializeSeq, SerializeStruct};
use serde::{Serialize, Serializer};
use utoipa::ToSchema;

/// One series of an instant vector over the steps: its value at each step, if it has one.
#[derive(Debug, Clone)]
pub struct StepSeries {
    pub labels: Labels,
    pub values: Vec<Option<f64>>,
}

#[cfg(test)]
impl StepSeries {
    /// A series of `labels` (name, value) with `values` per step, for tests.
    pub fn of(labels: &[(&str, &str)], values: &[Option<f64>]) -> StepSeries {
        StepSeries {
            labels: labels.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect(),
            values: values.to_vec(),
        }
    }
}

/// Refuses an instant vector holding two series with the same labels that both have a value at
/// one step (as Prometheus does once a function or operator dropped the names apart).
pub fn unique_labelsets(series: &[StepSeries]) -> mosaic_core::Result<()> {
    let mut order: Vec<usize> = (0..series.len()).collect();
    order.sort_by(|&a, &b| series[a].labels.cmp(&series[b].labels));
    for pair in order.windows(2) {
        let (a, b) = (&series[pair[0]], &series[pair[1]]);
        if a.labels == b.labels && a.values.iter().zip(&b.values).any(|(x, y)| x.is_some() && y.is_some()) {
            let text: Vec<String> = a.labels.iter().map(|(n, v)| format!("{n}={v:?}")).collect();
            return Err(mosaic_core::ServiceError::DuplicateLabelset(format!("{{{}}}", text.join(", "))));
        }
    }
    Ok(())
}

/// A range vector: each series' points (ms, value), for the range functions.
#[derive(Debug, Clone)]
pub struct RangeSeries {
    pub labels: Labels,
    pub points: Vec<(i64, f64)>,
}

/// A value during evaluation, at every step of the query.
#[derive(Debug)]
pub enum Value {
    /// a number at every step
    Scalar(Vec<f64>),
    /// an instant vector
    Vector(Vec<StepSeries>),
    /// a range vector: its series, its range and its offset (ms)
    Matrix { series: Vec<RangeSeries>, range: i64, offset: i64 },
}

/// A sample as Prometheus writes one: `[<unix seconds>, "<value>"]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplePair {
    /// ms since the epoch
    pub ms: i64,
    /// the value
    pub value: f64,
}

impl Serialize for SamplePair {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(2))?;
        if self.ms % 1000 == 0 {
            seq.serialize_element(&(self.ms / 1000))?;
        } else {
            seq.serialize_element(&(self.ms as f64 / 1000.0))?;
        }
        seq.serialize_element(&format_value(self.value))?;
        seq.end()
    }
}

/// A value as Prometheus writes it.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v == f64::INFINITY {
        "+Inf".to_owned()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        // Rust's shortest round-trip form without an exponent, as Go's FormatFloat(v, 'f', -1)
        format!("{v}")
    }
}

/// A series' labels as a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric(pub Vec<(String, String)>);

impl Serialize for Metric {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (n, v) in &self.0 {
            map.serialize_entry(n, v)?;
        }
        map.end()
    }
}

/// One series of an instant vector result.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSample {
    /// its labels
    pub metric: Metric,
    /// its sample
    pub value: SamplePair,
}

/// One series of a matrix result.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSeries {
    /// its labels
    pub metric: Metric,
    /// its samples, in time order
    pub values: Vec<SamplePair>,
}

impl Serialize for VectorSample {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("VectorSample", 2)?;
        st.serialize_field("metric", &self.metric)?;
        st.serialize_field("value", &self.value)?;
        st.end()
    }
}

impl Serialize for MatrixSeries {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("MatrixSeries", 2)?;
        st.serialize_field("metric", &self.metric)?;
        st.serialize_field("values", &self.values)?;
        st.end()
    }
}

/// The `data` of a query's answer: `{"resultType": "vector"|"matrix"|"scalar", "result": …}`.
///
/// Its OpenAPI schema is one object (`resultType` an enum, `result` an array) rather than a
/// `oneOf` per result type, which client generators turn into clashing models; the description
/// says which `result` goes with which type.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
pub enum QueryData {
    /// an instant query's vector: `[{"metric": {labels}, "value": [t, "v"]}]`
    Vector(Vec<VectorSample>),
    /// a range query's series (or an instant query of a range selector):
    /// `[{"metric": {labels}, "values": [[t, "v"], …]}]`
    Matrix(Vec<MatrixSeries>),
    /// an instant query's number: `[t, "v"]`
    Scalar(SamplePair),
}

impl utoipa::PartialSchema for QueryData {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
        ObjectBuilder::new()
            .description(Some(
                "The `data` of a query's answer. `vector` (an instant query): `result` is \
                 `[{\"metric\": {labels}, \"value\": [t, \"v\"]}, …]`; `matrix` (a range query, or an \
                 instant query of a range selector): `[{\"metric\": {labels}, \"values\": [[t, \"v\"], …]}, …]`; \
                 `scalar`: `[t, \"v\"]` (t in seconds, v the value as text).",
            ))
            .property(
                "resultType",
                ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["vector", "matrix", "scalar"])),
            )
            .required("resultType")
            .property(
                "result",
                ArrayBuilder::new()
                    .items(ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::AnyValue)),
            )
            .required("result")
            .into()
    }
}

impl ToSchema for QueryData {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_written_as_prometheus_writes_them() {
        let text = |ms, value| serde_json::to_string(&SamplePair { ms, value }).unwrap();
        assert_eq!(text(1_763_719_200_000, 0.5), "[1763719200,\"0.5\"]");
        assert_eq!(text(1_763_719_200_123, 3.0), "[1763719200.123,\"3\"]");
        assert_eq!(text(-1500, 1e21), "[-1.5,\"1000000000000000000000\"]");
        assert_eq!(text(0, f64::NAN), "[0,\"NaN\"]");
        assert_eq!(text(0, f64::INFINITY), "[0,\"+Inf\"]");
        assert_eq!(text(0, f64::NEG_INFINITY), "[0,\"-Inf\"]");
        assert_eq!(text(0, 0.1 + 0.2), "[0,\"0.30000000000000004\"]");
        let data = QueryData::Vector(vec![VectorSample {
            metric: Metric(vec![("__name__".into(), "up".into())]),
            value: SamplePair { ms: 1000, value: 1.0 },
        }]);
        assert_eq!(
            serde_json::to_string(&data).unwrap(),
            r#"{"resultType":"vector","result":[{"metric":{"__name__":"up"},"value":[1,"1"]}]}"#
        );
    }
}

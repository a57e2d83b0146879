//! Test support: the property names of a type's OpenAPI schema, to check that a body described
//! for the OpenAPI document names exactly the fields of the type the handler reads.

use std::collections::BTreeSet;
use utoipa::PartialSchema;

/// The names under `properties` of `T`'s schema.
pub(crate) fn properties<T: PartialSchema>() -> BTreeSet<String> {
    let schema = serde_json::to_value(T::schema()).unwrap();
    schema["properties"].as_object().unwrap().keys().cloned().collect()
}

//! The OpenAPI shape of an index's or a view's build state, which the definition carries flat
//! (`"state": "building", "done": …, "total": …`, serde's internally tagged enum flattened into
//! the definition).
//!
//! Described as one object — `state` an enum, the fields of the other states optional — rather
//! than the `oneOf` of tagged objects serde's shape would give: that `oneOf` sits inside the
//! definition's `allOf`, which client generators (openapi-python-client among them) cannot merge,
//! and they then drop the definition and every operation answering it. The object is what every
//! state's JSON is, so a validator checks the same answers; what it no longer says is which
//! fields go with which state, and the field descriptions say that.

use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};

/// The state object of `what` (`an index`, `a view`); `building_extra` names further fields of
/// the building state (name, description), all strings.
pub(super) fn flat_state(what: &str, building_extra: &[(&str, &str)]) -> RefOr<Schema> {
    let count = |description: &str| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(0))
            .description(Some(description))
    };
    let mut object = ObjectBuilder::new()
        .description(Some(format!(
            "Whether {what} serves yet: `building` (with `done` and `total`), `ready`, or `failed` (with `error`)."
        )))
        .property(
            "state",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["building", "ready", "failed"]))
                .description(Some(
                    "building: a background job is adding the existing documents, not used yet; \
                     ready: complete and maintained with every write; failed: the build stopped, \
                     not used nor maintained (drop it and fix the data)",
                )),
        )
        .required("state")
        .property("done", count("building: documents done so far"))
        .property("total", count("building: documents to do (an estimate taken when the build started)"))
        .property(
            "error",
            ObjectBuilder::new().schema_type(Type::String).description(Some("failed: why the build stopped")),
        );
    for (name, description) in building_extra {
        object = object.property(*name, ObjectBuilder::new().schema_type(Type::String).description(Some(*description)));
    }
    object.into()
}

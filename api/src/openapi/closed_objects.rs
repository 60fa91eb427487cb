//! `additionalProperties: false` on the object schemas of request bodies.
//! Every type a request body is made of refuses unknown fields
//! (`#[serde(deny_unknown_fields)]`), which utoipa does not always say
//! (variants of tagged enums). Objects that are nothing but the tag — unit
//! variants of internally tagged enums — stay open, because serde takes
//! unknown fields beside the tag there.

use std::collections::BTreeSet;

use utoipa::openapi::schema::{AdditionalProperties, ArrayItems, Schema, SchemaType, Type};
use utoipa::openapi::{OpenApi, RefOr};

/// Closes every object schema reachable from a request body.
pub(super) fn close_request_objects(doc: &mut OpenApi) {
    let mut pending = Vec::new();
    for item in doc.paths.paths.values() {
        let operations = [
            &item.get,
            &item.put,
            &item.post,
            &item.delete,
            &item.options,
            &item.head,
            &item.patch,
            &item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            let contents = operation
                .request_body
                .iter()
                .flat_map(|b| b.content.values());
            for schema in contents.filter_map(|c| c.schema.as_ref()) {
                references(schema, &mut pending);
            }
        }
    }
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let mut reachable = BTreeSet::new();
    while let Some(name) = pending.pop() {
        if reachable.insert(name.clone())
            && let Some(schema) = components.schemas.get(&name)
        {
            references(schema, &mut pending);
        }
    }
    for name in reachable {
        if let Some(schema) = components.schemas.get_mut(&name) {
            close(schema);
        }
    }
}

/// The component names `schema` refers to.
fn references(schema: &RefOr<Schema>, out: &mut Vec<String>) {
    let schema = match schema {
        RefOr::Ref(r) => {
            if let Some(name) = r.ref_location.strip_prefix("#/components/schemas/") {
                out.push(name.to_owned());
            }
            return;
        }
        RefOr::T(schema) => schema,
    };
    match schema {
        Schema::Object(o) => o.properties.values().for_each(|p| references(p, out)),
        Schema::OneOf(o) => o.items.iter().for_each(|i| references(i, out)),
        Schema::AllOf(o) => o.items.iter().for_each(|i| references(i, out)),
        Schema::AnyOf(o) => o.items.iter().for_each(|i| references(i, out)),
        Schema::Array(a) => {
            if let ArrayItems::RefOrSchema(items) = &a.items {
                references(items, out);
            }
        }
        _ => {}
    }
}

fn close(schema: &mut RefOr<Schema>) {
    let RefOr::T(schema) = schema else {
        return;
    };
    match schema {
        Schema::Object(o) => {
            let is_object =
                o.schema_type == SchemaType::Type(Type::Object) || !o.properties.is_empty();
            let tag_only = o.properties.len() == 1
                && o.properties.values().all(|p| {
                    matches!(p, RefOr::T(Schema::Object(tag))
                        if tag.enum_values.as_ref().is_some_and(|e| e.len() == 1))
                });
            if is_object && !tag_only && o.additional_properties.is_none() {
                o.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
            }
            o.properties.values_mut().for_each(close);
        }
        Schema::OneOf(o) => o.items.iter_mut().for_each(close),
        Schema::AllOf(o) => o.items.iter_mut().for_each(close),
        Schema::AnyOf(o) => o.items.iter_mut().for_each(close),
        Schema::Array(a) => {
            if let ArrayItems::RefOrSchema(items) = &mut a.items {
                close(items);
            }
        }
        _ => {}
    }
}

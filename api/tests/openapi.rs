//! The committed OpenAPI document matches the code, and documents exactly
//! the routes the server serves.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use utoipa::OpenApi;

use api::openapi::{ApiDoc, openapi_json};
use api::server::served_routes;
use api::types::{RebalanceRequest, VmConfigBody};
use tiering::TieringPolicy;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");

#[test]
fn committed_document_matches_the_code() {
    let generated = openapi_json();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(COMMITTED, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(Path::new(COMMITTED)).unwrap_or_default();
    assert!(
        committed == generated,
        "api/openapi.json is out of date with the code; regenerate it with\n    \
         UPDATE_OPENAPI=1 cargo test -p api --test openapi\nand commit the result"
    );
}

#[test]
fn every_route_is_documented_and_every_documented_route_served() {
    let doc = ApiDoc::openapi();
    let mut documented = BTreeSet::new();
    for (path, item) in &doc.paths.paths {
        let ops = [
            ("GET", item.get.is_some()),
            ("PUT", item.put.is_some()),
            ("POST", item.post.is_some()),
            ("DELETE", item.delete.is_some()),
            ("PATCH", item.patch.is_some()),
            ("HEAD", item.head.is_some()),
            ("OPTIONS", item.options.is_some()),
            ("TRACE", item.trace.is_some()),
        ];
        for (method, present) in ops {
            if present {
                documented.insert((method.to_owned(), path.clone()));
            }
        }
    }
    let served: BTreeSet<_> = served_routes()
        .into_iter()
        .map(|(m, p)| (m.to_owned(), p))
        .collect();
    assert_eq!(served, documented);
    assert_eq!(served.len(), 18, "{served:?}");
}

/// The document's schema for `instance`: references followed, and of a
/// `oneOf` the item whose tag (a property with one allowed value) matches.
fn resolve<'a>(doc: &'a Value, schema: &'a Value, instance: &Value) -> &'a Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return resolve(
            doc,
            doc.pointer(r.trim_start_matches('#')).unwrap(),
            instance,
        );
    }
    let Some(items) = schema.get("oneOf").and_then(Value::as_array) else {
        return schema;
    };
    let fits = |item: &&Value| {
        let item = resolve(doc, item, instance);
        if instance.is_null() {
            return item["type"] == "null";
        }
        item["type"] != "null"
            && item["properties"].as_object().is_none_or(|props| {
                props.iter().all(|(name, p)| match p["enum"].as_array() {
                    Some(values) if values.len() == 1 => instance[name] == values[0],
                    _ => true,
                })
            })
    };
    let item = items.iter().find(fits).expect("no oneOf item fits");
    resolve(doc, item, instance)
}

/// Every object of `instance` whose schema says `additionalProperties:
/// false` must be refused with an extra field, and every other accepted.
fn check_objects(
    doc: &Value,
    schema: &Value,
    pointer: &str,
    root: &Value,
    accepts: &dyn Fn(Value) -> bool,
    wrong: &mut Vec<String>,
) {
    let instance = root.pointer(pointer).unwrap();
    let schema = resolve(doc, schema, instance);
    match instance {
        Value::Object(fields) => {
            let closed = schema["additionalProperties"] == false;
            let mut extended = root.clone();
            extended
                .pointer_mut(pointer)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .insert("zz_unknown".into(), json!(1));
            if closed == accepts(extended) {
                wrong.push(format!("{pointer}: closed in the document: {closed}"));
            }
            for name in fields.keys() {
                let property = &schema["properties"][name];
                assert!(!property.is_null(), "{pointer}/{name} undocumented");
                check_objects(
                    doc,
                    property,
                    &format!("{pointer}/{name}"),
                    root,
                    accepts,
                    wrong,
                );
            }
        }
        Value::Array(items) => {
            for i in 0..items.len() {
                let pointer = format!("{pointer}/{i}");
                check_objects(doc, &schema["items"], &pointer, root, accepts, wrong);
            }
        }
        _ => {}
    }
}

#[test]
fn request_objects_are_closed_exactly_where_unknown_fields_are_refused() {
    let doc: Value = serde_json::from_str(&openapi_json()).unwrap();
    let body_schema = |path: &str| {
        doc["paths"][path]["put"]["requestBody"]["content"]["application/json"]["schema"].clone()
    };
    let policy = json!({
        "tracker": "dirty-log", "interval_ms": 100, "fast_quota": { "min_bytes": 0, "max_bytes": 1 },
        "promote_rate_mbps": 1.0, "demote_rate_mbps": 1.0, "threshold": { "mode": "auto" },
        "headroom_bytes": 0, "significance": 2.0, "min_residency_ms": 1, "exchange": true,
        "pinned": [{ "gpa": 0, "len": 1 }],
        "heat": { "read_weight": 1.0, "write_weight": 1.0, "half_life_ms": 1 }
    });
    let mut manual = policy.clone();
    manual["threshold"] = json!({ "mode": "manual", "heat": 2.0 });
    let configs = [
        json!({
            "id": "a", "vcpus": 1, "timeout_s": 1.0,
            "memory": {
                "size": 4194304, "frame_size": 2097152, "placement": "fast-first",
                "backing": { "mode": "per-tier" },
                "tiers": [
                    { "name": "d", "size": 4194304,
                      "backend": { "kind": "memfd", "numa_node": 0, "hugetlb": false, "prealloc": false } },
                    { "name": "p", "backend": { "kind": "file", "path": "/x" } }
                ]
            },
            "payload": { "kind": "workload", "spec": "x" },
            "migration": { "migrator": "remap", "copy_engine": "cpu" },
            "tiering": policy
        }),
        json!({
            "memory": { "size": 1, "tiers": [],
                        "backing": { "mode": "shared-numa", "allow_same_node": true } },
            "payload": { "kind": "elf", "path": "/x", "args": "" },
            "tiering": manual
        }),
    ];
    let mut wrong = Vec::new();
    let vm_config = |v: Value| serde_json::from_value::<VmConfigBody>(v).is_ok();
    for config in &configs {
        assert!(vm_config(config.clone()));
        check_objects(
            &doc,
            &body_schema("/api/v1/vm.create"),
            "",
            config,
            &vm_config,
            &mut wrong,
        );
    }
    let tiering = |v: Value| serde_json::from_value::<TieringPolicy>(v).is_ok();
    for p in [&policy, &manual] {
        check_objects(
            &doc,
            &body_schema("/api/v1/vm.tiering"),
            "",
            p,
            &tiering,
            &mut wrong,
        );
    }
    let rebalance = |v: Value| serde_json::from_value::<RebalanceRequest>(v).is_ok();
    let request = json!({ "fast_bytes": 1, "deadline_ms": 1 });
    check_objects(
        &doc,
        &body_schema("/api/v1/vm.rebalance"),
        "",
        &request,
        &rebalance,
        &mut wrong,
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}

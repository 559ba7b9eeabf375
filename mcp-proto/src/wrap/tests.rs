#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

//! The shape of the wrapper and its errors. What each kind of schema means once wrapped is
//! checked case by case in tests/wrap/cases.json, against jsonschema here (the mcp-tests `wrap`
//! test) and against the official SDKs' validators (tests/wrap/run.sh).

use serde_json::{json, Value};

use super::*;

fn compiled(schema: &Value) -> jsonschema::Validator {
    jsonschema::options().build(schema).unwrap()
}

fn failure() -> Value {
    json!({"failure": {"code": "busy", "message": "try later", "retryable": true}})
}

/// Checks that `app` accepts exactly the values the wrapper accepts as `{"value": v}`, and that
/// the wrapper accepts the plain failure envelope.
fn same_meaning(app: &Value, values: &[(Value, bool)]) {
    let wrapped = wrap_output_schema(app).unwrap();
    let (a, w) = (compiled(app), compiled(&wrapped));
    for (v, want) in values {
        assert_eq!(a.is_valid(v), *want, "app on {v}");
        assert_eq!(w.is_valid(&json!({"value": v})), *want, "wrapped on {v}: {wrapped:#}");
    }
    assert!(w.is_valid(&failure()));
}

#[test]
fn shape_of_a_2020_12_wrapper() {
    let app = json!({"type": "object"});
    let w = wrap_output_schema(&app).unwrap();
    assert_eq!(
        w,
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "anyOf": [
                {"properties": {"value": {"$ref": GENERATED_VALUE_ID}}, "required": ["value"],
                 "additionalProperties": false},
                {"properties": {"failure": {
                    "type": "object",
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"},
                                   "retryable": {"type": "boolean"}, "diagnostics": true},
                    "required": ["code", "message", "retryable"],
                    "additionalProperties": false}},
                 "required": ["failure"], "additionalProperties": false}
            ],
            "$defs": {"value": {"$id": GENERATED_VALUE_ID, "type": "object"}}
        })
    );
}

#[test]
fn the_application_schema_is_bundled_once_and_keeps_its_id() {
    let app = json!({"$id": "https://example.com/order.json", "type": "object"});
    let w = wrap_output_schema_with_diagnostics(&app, &app).unwrap();
    let text = w.to_string();
    assert_eq!(text.matches("\"$id\"").count(), 1, "{text}");
    assert_eq!(w["$defs"]["value"], app);
    let reference = json!({"$ref": "https://example.com/order.json"});
    assert_eq!(w["anyOf"][0]["properties"]["value"], reference);
    assert_eq!(w["anyOf"][1]["properties"]["failure"]["properties"]["diagnostics"], reference);
}

#[test]
fn an_empty_fragment_is_dropped_and_an_empty_id_replaced() {
    let w = wrap_output_schema(&json!({"$id": "https://example.com/a.json#", "type": "object"})).unwrap();
    assert_eq!(w["$defs"]["value"]["$id"], "https://example.com/a.json");
    for id in ["", "#"] {
        let w = wrap_output_schema(&json!({"$id": id, "type": "object"})).unwrap();
        assert_eq!(w["$defs"]["value"]["$id"], GENERATED_VALUE_ID);
    }
}

#[test]
fn a_draft_07_schema_gets_a_draft_07_wrapper_under_definitions() {
    let app = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
    let w = wrap_output_schema(&app).unwrap();
    assert_eq!(w["$schema"], "http://json-schema.org/draft-07/schema#");
    assert!(w.get("$defs").is_none());
    assert_eq!(w["definitions"]["value"]["$id"], GENERATED_VALUE_ID);
    // Without the trailing `#` too.
    let app = json!({"$schema": "http://json-schema.org/draft-07/schema", "type": "object"});
    assert_eq!(wrap_output_schema(&app).unwrap()["$schema"], "http://json-schema.org/draft-07/schema#");
}

#[test]
fn a_draft_07_root_ref_moves_into_all_of() {
    let app = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$ref": "#/definitions/Root",
        "title": "generated",
        "definitions": {"Root": {"type": "object", "required": ["n"]}}
    });
    let w = wrap_output_schema(&app).unwrap();
    assert_eq!(
        w["definitions"]["value"],
        json!({
            "$id": GENERATED_VALUE_ID,
            "$schema": "http://json-schema.org/draft-07/schema#",
            "allOf": [{"$ref": "#/definitions/Root"}],
            "title": "generated",
            "definitions": {"Root": {"type": "object", "required": ["n"]}}
        })
    );
    same_meaning(&app, &[(json!({"n": 1}), true), (json!({}), false), (json!(3), false)]);
}

#[test]
fn a_draft_07_root_ref_beside_an_assertion_is_refused() {
    let app = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$ref": "#/definitions/Root",
        "type": "string",
        "definitions": {"Root": {"type": "object"}}
    });
    assert_eq!(
        wrap_output_schema(&app),
        Err(WrapError::Draft07RefSibling { part: Part::Value, keyword: "type".into() })
    );
    // 2020-12 applies siblings of `$ref` like any keyword: nothing to refuse, nothing moved.
    let mut modern = app.clone();
    modern.as_object_mut().unwrap().remove("$schema");
    let w = wrap_output_schema(&modern).unwrap();
    assert_eq!(w["$defs"]["value"]["$ref"], "#/definitions/Root");
    same_meaning(&modern, &[(json!({}), false), (json!("s"), false)]);
}

#[test]
fn pointers_resolve_in_the_application_schema_not_the_wrapper() {
    // `#/$defs/value` is also where the wrapper bundles the schema: resolved against the
    // wrapper it would make `v` recursive instead of a string.
    let app = json!({
        "type": "object",
        "properties": {"v": {"$ref": "#/$defs/value"}},
        "$defs": {"value": {"type": "string"}}
    });
    same_meaning(&app, &[(json!({"v": "s"}), true), (json!({"v": {"v": "s"}}), false)]);
}

#[test]
fn boolean_schemas_are_referenced_by_pointer() {
    let w = wrap_output_schema(&json!(true)).unwrap();
    assert_eq!(w["$defs"]["value"], json!(true));
    assert_eq!(w["anyOf"][0]["properties"]["value"], json!({"$ref": "#/$defs/value"}));
    same_meaning(&json!(true), &[(json!(null), true), (json!({"a": 1}), true)]);
    same_meaning(&json!(false), &[(json!(null), false), (json!({}), false)]);
}

#[test]
fn a_generated_id_avoids_one_the_schema_uses() {
    let app = json!({
        "type": "object",
        "properties": {"a": {"$ref": GENERATED_VALUE_ID}},
        "$defs": {"a": {"$id": GENERATED_VALUE_ID, "type": "integer"}}
    });
    let w = wrap_output_schema(&app).unwrap();
    assert_eq!(w["$defs"]["value"]["$id"], format!("{GENERATED_VALUE_ID}-2"));
    same_meaning(&app, &[(json!({"a": 1}), true), (json!({"a": "x"}), false)]);
}

#[test]
fn diagnostics_are_bundled_beside_the_value() {
    let app = json!({"type": "object"});
    let diag = json!({"type": "object", "properties": {"field": {"type": "string"}}, "required": ["field"]});
    let w = prepare(&app, Some(&diag)).unwrap();
    assert_eq!(w.schema()["$defs"]["diagnostics"]["$id"], GENERATED_DIAGNOSTICS_ID);
    let with =
        |d: Value| json!({"failure": {"code": "bad", "message": "m", "retryable": false, "diagnostics": d}});
    assert!(w.validator().is_valid(&with(json!({"field": "x"}))));
    assert!(!w.validator().is_valid(&with(json!({"field": 1}))));
    assert!(w.validator().is_valid(&failure()));
}

#[test]
fn envelopes_outside_both_branches_are_invalid() {
    let w = prepare(&json!(true), None).unwrap();
    let v = w.validator();
    for bad in [
        json!({}),
        json!([]),
        json!({"value": 1, "failure": failure()["failure"]}),
        json!({"value": 1, "extra": true}),
        json!({"failure": {"code": "c", "message": "m"}}),
        json!({"failure": {"code": "c", "message": "m", "retryable": "yes"}}),
        json!({"failure": {"code": 1, "message": "m", "retryable": true}}),
        json!({"failure": {"code": "c", "message": "m", "retryable": true, "cause": "private"}}),
    ] {
        assert!(!v.is_valid(&bad), "{bad}");
    }
    assert!(v.is_valid(&json!({"value": null})));
}

#[test]
fn refusals_are_errors() {
    let cases =
        [(json!(1), Part::Value), (json!({"$id": 7}), Part::Value), (json!({"$schema": true}), Part::Value)];
    for (app, part) in cases {
        assert!(
            matches!(wrap_output_schema(&app), Err(WrapError::InvalidSchema { part: p, .. }) if p == part)
        );
    }
    for uri in [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://example.com/my-dialect",
    ] {
        assert_eq!(
            wrap_output_schema(&json!({"$schema": uri})),
            Err(WrapError::UnsupportedDialect { part: Part::Value, uri: uri.into() })
        );
    }
    assert_eq!(
        wrap_output_schema(&json!({"$schema": "http://json-schema.org/draft-07/schema#", "$id": "#root"})),
        Err(WrapError::FragmentId { part: Part::Value, id: "#root".into() })
    );
    assert_eq!(
        wrap_output_schema_with_diagnostics(
            &json!({"type": "object"}),
            &json!({"$schema": "http://json-schema.org/draft-07/schema#"})
        ),
        Err(WrapError::MixedDialects)
    );
    assert_eq!(
        wrap_output_schema_with_diagnostics(
            &json!({"$id": "https://example.com/x", "type": "object"}),
            &json!({"$id": "https://example.com/x", "type": "string"})
        ),
        Err(WrapError::DuplicateId("https://example.com/x".into()))
    );
    // A schema that wraps but does not compile: the error comes from preparing, not a panic.
    let e = prepare(&json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}), None);
    assert!(matches!(e, Err(WrapError::Compile(_))), "{e:?}");
    let e = prepare(&json!({"type": "objekt"}), None);
    assert!(matches!(e, Err(WrapError::Compile(_))), "{e:?}");
    // Every error has a message for the log.
    assert!(WrapError::MixedDialects.to_string().contains("dialects"));
}

//! Unit tests of the interaction module: request building, answer checks, sealed state.

use std::cmp::Ordering;

use super::forms::{decimal_cmp, is_date, is_date_time, is_email};
use super::*;
use crate::cursor::{self, KeyRing};
use ProtocolVersion::{V2025_03_26, V2025_06_18, V2025_11_25, V2026_07_28};

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn form(props: Value) -> InputRequest {
    InputRequest::elicit("Please fill in", json!({"type": "object", "properties": props})).unwrap()
}

fn schema_err(schema: Value) -> String {
    match InputRequest::elicit("m", schema) {
        Err(InteractionError::InvalidSchema(m)) => m,
        other => panic!("expected InvalidSchema, got {other:?}"),
    }
}

/// The `test_elicitation_sep1034_defaults` form of the conformance suite.
fn sep1034() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": true}
    }})
}

/// The `test_elicitation_sep1330_enums` form of the conformance suite.
fn sep1330() -> Value {
    json!({"type": "object", "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"}]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2"], "enumNames": ["Option One", "Option Two"]},
        "untitledMulti": {"type": "array", "minItems": 1, "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"},
            {"const": "value2", "title": "Second Choice"}]}}
    }})
}

fn caps(v: Value) -> Value {
    v
}

// --- schemas --------------------------------------------------------------------------

#[test]
fn accepts_every_primitive_kind() {
    InputRequest::elicit("m", sep1034()).unwrap();
    InputRequest::elicit("m", sep1330()).unwrap();
    InputRequest::elicit(
        "m",
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "title": "t", "description": "d",
            "properties": {
                "username": {"type": "string", "title": "User", "description": "d", "minLength": 1, "maxLength": 20},
                "email": {"type": "string", "format": "email"},
                "site": {"type": "string", "format": "uri"},
                "born": {"type": "string", "format": "date", "default": "2000-02-29"},
                "at": {"type": "string", "format": "date-time"},
                "n": {"type": "number", "minimum": -1.5, "maximum": 1e3}
            },
            "required": ["username", "email"]}),
    )
    .unwrap();
    InputRequest::elicit("m", json!({"type": "object", "properties": {}})).unwrap();
}

#[test]
fn refuses_what_a_form_cannot_show() {
    let nested = schema_err(json!({"type": "object", "properties": {
        "address": {"type": "object", "properties": {"street": {"type": "string"}}}}}));
    assert!(nested.contains("`address`") && nested.contains("nested object"), "{nested}");
    let untyped = schema_err(json!({"type": "object", "properties": {"a": {"properties": {}}}}));
    assert!(untyped.contains("nested object"), "{untyped}");
    let items = schema_err(json!({"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "object"}}}}));
    assert!(items.contains("`list`") && items.contains("array of objects"), "{items}");
    let cases = [
        (json!([]), "JSON object"),
        (json!({"properties": {}}), "\"type\": \"object\""),
        (json!({"type": "object"}), "`properties`"),
        (json!({"type": "object", "properties": {}, "additionalProperties": false}), "additionalProperties"),
        (json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}), "`pattern`"),
        (json!({"type": "object", "properties": {"a": {"$ref": "#/x"}}}), "needs a `type`"),
        (json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}), "type unions"),
        (json!({"type": "object", "properties": {"a": {"type": "null"}}}), "type `null`"),
        (json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}), "`b`"),
        (json!({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}), "non-empty"),
        (json!({"type": "object", "properties": {"a": {"type": "string", "enum": [1]}}}), "strings"),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"], "enumNames": ["X"]}}}),
            "different length",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "oneOf": [{"const": "x", "title": "X"}]}}}),
            "both",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "oneOf": [{"const": "x"}]}}}),
            "title",
        ),
        (json!({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}), "format"),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "format": "email"}}}),
            "free text",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 2}}}),
            "minLength",
        ),
        (json!({"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}), "non-negative"),
        (
            json!({"type": "object", "properties": {"a": {"type": "number", "minimum": 2, "maximum": 1}}}),
            "minimum",
        ),
        (json!({"type": "object", "properties": {"a": {"type": "integer", "default": 30.5}}}), "integer"),
        (json!({"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}}), "boolean"),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "default": "y"}}}),
            "options",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "date", "default": "2001-02-29"}}}),
            "date",
        ),
        (json!({"type": "object", "properties": {"a": {"type": "array"}}}), "items"),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["x"]}, "default": ["z"]}}}),
            "options",
        ),
    ];
    for (schema, needle) in cases {
        let msg = schema_err(schema.clone());
        assert!(msg.contains(needle), "{schema}: {msg:?} lacks {needle:?}");
    }
}

#[test]
fn other_constructors_check_their_input() {
    assert!(InputRequest::elicit_url("go", "https://example.com/auth?x=1").is_ok());
    for bad in ["", "example.com", "https://exa mple.com", "1http://x", "https:"] {
        assert!(matches!(InputRequest::elicit_url("go", bad), Err(InteractionError::InvalidUrl(_))), "{bad}");
    }
    let msg = json!([{"role": "user", "content": {"type": "text", "text": "hi"}}]);
    assert!(InputRequest::sample(json!({"messages": msg, "maxTokens": 100})).is_ok());
    // A bound past u64 is kept as sent (only `exact-json` can carry one).
    #[cfg(feature = "exact-json")]
    {
        let big = parse(r#"{"messages": [], "maxTokens": 123456789012345678901234567890}"#);
        assert!(InputRequest::sample(big).is_ok());
    }
    for bad in [
        json!({"maxTokens": 100}),
        json!({"messages": {}, "maxTokens": 100}),
        json!({"messages": msg}),
        json!({"messages": msg, "maxTokens": 1.5}),
        json!({"messages": msg, "maxTokens": 1e2}),
        json!({"messages": msg, "maxTokens": "100"}),
        json!({"messages": [{"role": "bot", "content": {}}], "maxTokens": 1}),
        json!({"messages": msg, "maxTokens": 100, "task": {"ttl": 1000}}),
        json!([]),
    ] {
        assert!(
            matches!(InputRequest::sample(bad.clone()), Err(InteractionError::InvalidSampling(_))),
            "{bad}"
        );
    }
    assert_eq!(InputRequest::list_roots().method(), "roots/list");
    assert_eq!(form(json!({})).method(), "elicitation/create");
}

// --- capabilities ---------------------------------------------------------------------

#[test]
fn capability_rules_per_version() {
    let plain = form(json!({"name": {"type": "string"}}));
    let multi = form(json!({"m": {"type": "array", "items": {"type": "string", "enum": ["a"]}}}));
    let url = InputRequest::elicit_url("go", "https://example.com").unwrap();
    let el = caps(json!({"elicitation": {}}));
    let el_both = caps(json!({"elicitation": {"form": {}, "url": {}}}));
    let el_url = caps(json!({"elicitation": {"url": {}}}));
    let none = json!({});

    // Elicitation needs 2025-06-18.
    let e = plain.check_client(V2025_03_26, &el).unwrap_err();
    assert!(e.message().contains("2025-06-18"));
    assert!(plain.check_client(V2025_06_18, &el).is_ok());
    assert!(plain.check_client(V2025_06_18, &none).is_err());
    // June client + multiselect.
    let e = multi.check_client(V2025_06_18, &el).unwrap_err();
    assert!(e.message().contains("2025-11-25"), "{e}");
    assert!(multi.check_client(V2025_11_25, &el).is_ok());
    assert!(multi.check_client(V2026_07_28, &el).is_ok());
    // `{}` means form-only from 2025-11-25.
    for v in [V2025_11_25, V2026_07_28] {
        let e = url.check_client(v, &el).unwrap_err();
        assert_eq!(e.required_capabilities(), &json!({"elicitation": {"url": {}}}));
        assert!(url.check_client(v, &el_both).is_ok());
        assert!(url.check_client(v, &el_url).is_ok());
        assert!(plain.check_client(v, &el_both).is_ok());
        let e = plain.check_client(v, &el_url).unwrap_err();
        assert_eq!(e.required_capabilities(), &json!({"elicitation": {"form": {}}}));
        assert!(plain.check_client(v, &none).is_err());
    }
    assert!(url.check_client(V2025_06_18, &el_both).is_err());
    // A non-object declaration is no declaration.
    assert!(plain.check_client(V2025_11_25, &json!({"elicitation": true})).is_err());
    assert!(plain.check_client(V2025_11_25, &json!(null)).is_err());

    // Sampling and roots, every version.
    let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 10})).unwrap();
    for v in ProtocolVersion::ALL {
        let e = sample.check_client(v, &el).unwrap_err();
        assert_eq!(e.rpc_error().code.code(), -32021);
        assert_eq!(e.rpc_error().data, Some(json!({"requiredCapabilities": {"sampling": {}}})));
        assert!(sample.check_client(v, &json!({"sampling": {}})).is_ok());
        let e = InputRequest::list_roots().check_client(v, &json!({"sampling": {}})).unwrap_err();
        assert_eq!(e.required_capabilities(), &json!({"roots": {}}));
        assert!(InputRequest::list_roots().check_client(v, &json!({"roots": {"listChanged": true}})).is_ok());
    }

    // Tool use and context in sampling.
    let tools = InputRequest::sample(json!({"messages": [], "maxTokens": 10, "tools": []})).unwrap();
    assert!(tools.check_client(V2025_06_18, &json!({"sampling": {"tools": {}}})).is_err());
    let e = tools.check_client(V2025_11_25, &json!({"sampling": {}})).unwrap_err();
    assert_eq!(e.required_capabilities(), &json!({"sampling": {"tools": {}}}));
    assert!(tools.check_client(V2026_07_28, &json!({"sampling": {"tools": {}}})).is_ok());
    let ctx = InputRequest::sample(json!({"messages": [], "maxTokens": 10, "includeContext": "thisServer"}))
        .unwrap();
    assert!(ctx.check_client(V2025_06_18, &json!({"sampling": {}})).is_ok());
    let e = ctx.check_client(V2025_11_25, &json!({"sampling": {}})).unwrap_err();
    assert_eq!(e.required_capabilities(), &json!({"sampling": {"context": {}}}));
    assert!(ctx.check_client(V2025_11_25, &json!({"sampling": {"context": {}}})).is_ok());
}

#[test]
fn required_capability_and_rpc_error_shape() {
    assert_eq!(form(json!({})).required_capability(), ("elicitation", json!({})));
    let url = InputRequest::elicit_url("go", "https://example.com").unwrap();
    assert_eq!(url.required_capability(), ("elicitation", json!({"url": {}})));
    assert_eq!(InputRequest::list_roots().required_capability(), ("roots", json!({})));
    let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 1})).unwrap();
    assert_eq!(sample.required_capability(), ("sampling", json!({})));
    let err = sample.check_client(V2026_07_28, &json!({})).unwrap_err().rpc_error();
    assert_eq!(
        serde_json::to_value(&err).unwrap(),
        json!({"code": -32021, "message": "the client did not declare the sampling capability",
            "data": {"requiredCapabilities": {"sampling": {}}}})
    );
}

// --- wire params ----------------------------------------------------------------------

// Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
#[cfg(feature = "exact-json")]
#[test]
fn june_lowers_titled_single_selects() {
    let req = InputRequest::elicit("m", sep1330()).unwrap();
    let june = req.params_for(V2025_06_18, None);
    let props = &june["requestedSchema"]["properties"];
    assert_eq!(
        props["titledSingle"],
        json!({"type": "string", "enum": ["value1", "value2"], "enumNames": ["First Option", "Second Option"]})
    );
    assert_eq!(props["legacyEnum"], sep1330()["properties"]["legacyEnum"]);
    assert_eq!(props["untitledSingle"], sep1330()["properties"]["untitledSingle"]);
    // Key order of the lowered property follows the original.
    let keys: Vec<&String> = props["titledSingle"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["type", "enum", "enumNames"]);
    // 2025-11-25 and 2026 send the schema exactly as written, with nothing added.
    for v in [V2025_11_25, V2026_07_28] {
        let p = req.params_for(v, None);
        assert_eq!(Value::Object(p), json!({"message": "m", "requestedSchema": sep1330()}));
    }
    // Defaults are only what the handler wrote.
    let p = InputRequest::elicit("m", sep1034()).unwrap().params_for(V2025_11_25, None);
    assert_eq!(p["requestedSchema"], sep1034());
    let p = form(json!({"a": {"type": "string"}})).params_for(V2025_06_18, None);
    assert_eq!(
        Value::Object(p),
        json!({"message": "Please fill in", "requestedSchema":
        {"type": "object", "properties": {"a": {"type": "string"}}}})
    );
}

#[test]
fn url_params_by_version() {
    let url = InputRequest::elicit_url("Sign in", "https://example.com/login").unwrap();
    assert_eq!(
        Value::Object(url.params_for(V2025_11_25, Some("el-1"))),
        json!({"mode": "url", "message": "Sign in", "url": "https://example.com/login", "elicitationId": "el-1"})
    );
    assert_eq!(
        url.to_input_request(V2026_07_28),
        json!({"method": "elicitation/create",
            "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/login"}})
    );
    assert!(!url.params_for(V2026_07_28, Some("el-1")).contains_key("elicitationId"));
    assert_eq!(
        InputRequest::list_roots().to_input_request(V2026_07_28),
        json!({"method": "roots/list", "params": {}})
    );
    let p =
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 100});
    let sample = InputRequest::sample(p.clone()).unwrap();
    assert_eq!(
        sample.to_input_request(V2026_07_28),
        json!({"method": "sampling/createMessage", "params": p})
    );
}

fn schema_validator(version: &str, pointer: &str) -> jsonschema::Validator {
    let path = format!("{}/../testkit/fixtures/schemas/{version}.json", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let map = jsonschema::validator_map_for(&doc).unwrap();
    map.get(pointer).unwrap_or_else(|| panic!("{version} has no {pointer}")).clone()
}

fn assert_valid(v: &jsonschema::Validator, instance: &Value, what: &str) {
    let errors: Vec<String> =
        v.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{what}: {instance}\n{errors:?}");
}

#[test]
fn wire_params_match_the_official_schemas() {
    let sample = InputRequest::sample(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}],
        "maxTokens": 100}))
    .unwrap();
    let june_form = InputRequest::elicit("m", {
        let mut s = sep1330();
        let props = s["properties"].as_object_mut().unwrap();
        props.remove("untitledMulti");
        props.remove("titledMulti");
        s
    })
    .unwrap();
    let full_form = InputRequest::elicit("m", sep1330()).unwrap();
    let defaults = InputRequest::elicit("m", sep1034()).unwrap();
    let url = InputRequest::elicit_url("go", "https://example.com/x").unwrap();
    let roots = InputRequest::list_roots();
    let as_request = |r: &InputRequest, v, id: Option<&str>| json!({"jsonrpc": "2.0", "id": 1, "method": r.method(), "params": Value::Object(r.params_for(v, id))});

    // 2025-03-26 and 2025-06-18 (draft-07, `definitions`): whole requests.
    for (version, v) in [("2025-03-26", V2025_03_26), ("2025-06-18", V2025_06_18)] {
        let check = |def: &str, r: &InputRequest| {
            assert_valid(
                &schema_validator(version, &format!("#/definitions/{def}")),
                &as_request(r, v, None),
                def,
            )
        };
        check("CreateMessageRequest", &sample);
        check("ListRootsRequest", &roots);
        if v == V2025_06_18 {
            check("ElicitRequest", &june_form);
            check("ElicitRequest", &defaults);
        }
    }
    // The lowering is what makes the titled single-select a June `EnumSchema`.
    let lowered = june_form.params_for(V2025_06_18, None);
    assert_valid(
        &schema_validator("2025-06-18", "#/definitions/EnumSchema"),
        &lowered["requestedSchema"]["properties"]["titledSingle"],
        "lowered oneOf",
    );

    // 2025-11-25: params defs and whole requests.
    let defs = |d: &str| schema_validator("2025-11-25", &format!("#/$defs/{d}"));
    for r in [&full_form, &defaults, &june_form] {
        assert_valid(
            &defs("ElicitRequestFormParams"),
            &Value::Object(r.params_for(V2025_11_25, None)),
            "form",
        );
        assert_valid(&defs("ElicitRequest"), &as_request(r, V2025_11_25, None), "form request");
    }
    assert_valid(
        &defs("ElicitRequestURLParams"),
        &Value::Object(url.params_for(V2025_11_25, Some("e1"))),
        "url",
    );
    let no_id = Value::Object(url.params_for(V2025_11_25, None));
    assert!(!defs("ElicitRequestURLParams").is_valid(&no_id), "2025-11-25 URL mode requires elicitationId");
    assert_valid(&defs("CreateMessageRequest"), &as_request(&sample, V2025_11_25, None), "sampling");
    assert_valid(&defs("ListRootsRequest"), &as_request(&roots, V2025_11_25, None), "roots");

    // 2026-07-28: `inputRequests` entries.
    let defs = |d: &str| schema_validator("2026-07-28", &format!("#/$defs/{d}"));
    for (r, def) in [
        (&full_form, "ElicitRequest"),
        (&defaults, "ElicitRequest"),
        (&url, "ElicitRequest"),
        (&sample, "CreateMessageRequest"),
        (&roots, "ListRootsRequest"),
    ] {
        let entry = r.to_input_request(V2026_07_28);
        assert_valid(&defs(def), &entry, def);
        assert_valid(&defs("InputRequest"), &entry, "InputRequest");
    }
    let result = json!({"resultType": "input_required",
        "inputRequests": {"user_name": full_form.to_input_request(V2026_07_28),
            "roots_request": roots.to_input_request(V2026_07_28)},
        "requestState": "v1.x.y"});
    assert_valid(&defs("InputRequiredResult"), &result, "InputRequiredResult");
    let err = sample.check_client(V2026_07_28, &json!({})).unwrap_err().rpc_error();
    let frame = json!({"jsonrpc": "2.0", "id": 3, "error": serde_json::to_value(&err).unwrap()});
    assert_valid(&defs("MissingRequiredClientCapabilityError"), &frame, "-32021");
}

// --- answers --------------------------------------------------------------------------

fn answer_err(req: &InputRequest, answer: Value) -> String {
    match req.validate_answer(&answer) {
        Err(e) => {
            assert_eq!(e.rpc_error().code, ErrorCode::InvalidParams);
            e.message().to_owned()
        }
        Ok(()) => panic!("accepted {answer}"),
    }
}

#[test]
fn elicitation_answers() {
    let req = InputRequest::elicit(
        "m",
        json!({"type": "object", "properties": {
            "username": {"type": "string", "minLength": 2},
            "email": {"type": "string", "format": "email"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "score": {"type": "number"},
            "ok": {"type": "boolean"},
            "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}},
            "day": {"type": "string", "format": "date-time"}
        }, "required": ["username", "email"]}),
    )
    .unwrap();
    let ok = json!({"action": "accept", "content": {"username": "testuser", "email": "test@example.com",
        "age": 30, "score": 95.5, "ok": true, "color": "g", "tags": ["a", "c"], "day": "2025-11-25T10:00:00.5+01:00"},
        "_meta": {"x": 1}});
    req.validate_answer(&ok).unwrap();
    req.validate_answer(&json!({"action": "accept", "content": {"username": "ab", "email": "a@b"}})).unwrap();
    req.validate_answer(&json!({"action": "decline"})).unwrap();
    req.validate_answer(&json!({"action": "cancel"})).unwrap();

    let accept = |content: Value| json!({"action": "accept", "content": content});
    let base = |k: &str, v: Value| {
        let mut c = json!({"username": "testuser", "email": "test@example.com"});
        c[k] = v;
        accept(c)
    };
    for (answer, needle) in [
        (json!(12345), "JSON object"),
        (json!({"content": {}}), "action"),
        (json!({"action": "ACCEPT"}), "action"),
        (json!({"action": "decline", "content": {}}), "only an accepted"),
        (json!({"action": "cancel", "content": null}), "only an accepted"),
        (json!({"action": "accept"}), "`username` is missing"),
        (json!({"action": "accept", "content": []}), "JSON object"),
        (accept(json!({"username": "testuser"})), "`email` is missing"),
        (base("nickname", json!("x")), "`nickname` was not asked for"),
        (base("username", json!(7)), "must be a string"),
        (base("username", json!("a")), "length"),
        (base("email", json!("not an email")), "email"),
        (base("age", json!(30.0)), "integer"),
        (base("age", json!("30")), "integer"),
        (base("age", parse("1e1")), "integer"),
        (base("age", json!(151)), "minimum"),
        (base("age", json!(-1)), "minimum"),
        (base("score", json!("95.5")), "number"),
        (base("ok", json!("true")), "boolean"),
        (base("color", json!("Green")), "options"),
        (base("tags", json!(["a", "z"])), "options"),
        (base("tags", json!(["a", "b", "c"])), "maxItems"),
        (base("tags", json!("a")), "array"),
        (base("day", json!("2025-11-25 10:00:00Z")), "date-time"),
        (base("day", json!("2025-11-25T24:00:00Z")), "date-time"),
    ] {
        let msg = answer_err(&req, answer.clone());
        assert!(msg.contains(needle), "{answer}: {msg:?} lacks {needle:?}");
    }
    // Nothing required: an accept without content is an empty submission.
    form(json!({"a": {"type": "string"}})).validate_answer(&json!({"action": "accept"})).unwrap();
    // Peer-chosen keys are clipped in messages.
    let long = "k".repeat(10_000);
    assert!(answer_err(&req, base(&long, json!(1))).len() < 200);
}

// Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
#[cfg(feature = "exact-json")]
#[test]
fn big_integers_are_checked_by_their_text_and_survive() {
    let req = form(json!({"n": {"type": "integer", "maximum": 1e30}}));
    let text = r#"{"action":"accept","content":{"n":123456789012345678901234567890}}"#;
    let answer = parse(text);
    req.validate_answer(&answer).unwrap();
    assert_eq!(serde_json::to_string(&answer).unwrap(), text);
    // Just above the bound, which f64 could not tell apart from it.
    let over = parse(r#"{"action":"accept","content":{"n":1000000000000000000000000000001}}"#);
    assert!(answer_err(&req, over).contains("maximum"));
    let exact = parse(r#"{"action":"accept","content":{"n":1000000000000000000000000000000}}"#);
    req.validate_answer(&exact).unwrap();
    let big_frac = form(json!({"x": {"type": "number", "minimum": 0.1}}));
    big_frac
        .validate_answer(&parse(r#"{"action":"accept","content":{"x":0.10000000000000000001}}"#))
        .unwrap();
    assert!(big_frac
        .validate_answer(&parse(r#"{"action":"accept","content":{"x":0.09999999999999999999}}"#))
        .is_err());
}

#[test]
fn decimal_comparison() {
    use Ordering::*;
    for (a, b, o) in [
        ("0", "-0", Equal),
        ("1", "1.0", Equal),
        ("1e2", "100", Equal),
        ("100E-2", "1", Equal),
        ("0.5", "5e-1", Equal),
        ("-1", "1", Less),
        ("-2", "-1", Less),
        ("12", "123", Less),
        ("99", "100", Less),
        ("1e30", "123456789012345678901234567890", Greater),
        ("0.001", "0.01", Less),
        ("1e99999999999999999999", "1e400", Greater),
    ] {
        assert_eq!(decimal_cmp(a, b), Some(o), "{a} vs {b}");
        assert_eq!(decimal_cmp(b, a), Some(o.reverse()), "{b} vs {a}");
    }
    for bad in ["", "-", "1.", ".5", "1e", "0x1", "1e+", "--1"] {
        assert_eq!(decimal_cmp(bad, "1"), None, "{bad}");
    }
}

#[test]
fn formats() {
    for ok in ["2024-02-29", "2000-02-29", "1999-12-31"] {
        assert!(is_date(ok), "{ok}");
    }
    for bad in ["1900-02-29", "2023-02-29", "2024-13-01", "2024-04-31", "2024-4-01", "2024-04-01x"] {
        assert!(!is_date(bad), "{bad}");
    }
    for ok in ["2024-02-29T23:59:60Z", "2024-02-29t00:00:00.123-05:30", "2024-01-01T00:00:00+00:00"] {
        assert!(is_date_time(ok), "{ok}");
    }
    for bad in
        ["2024-01-01T00:00:00", "2024-01-01T00:00:00.Z", "2024-01-01T00:60:00Z", "2024-01-01T00:00:00+0100"]
    {
        assert!(!is_date_time(bad), "{bad}");
    }
    assert!(is_email("a.b+c@example.com") && !is_email("@x") && !is_email("a@") && !is_email("a@b@c"));
    assert!(is_uri("urn:isbn:1") && is_uri("mailto:a@b") && !is_uri("no-scheme") && !is_uri("a b:c"));
}

#[test]
fn url_sampling_and_roots_answers() {
    let url = InputRequest::elicit_url("go", "https://example.com").unwrap();
    for a in ["accept", "decline", "cancel"] {
        url.validate_answer(&json!({"action": a})).unwrap();
    }
    assert!(answer_err(&url, json!({"action": "accept", "content": {}})).contains("no `content`"));
    assert!(answer_err(&url, json!({"action": "maybe"})).contains("action"));

    let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 100})).unwrap();
    let ok = json!({"role": "assistant", "content": {"type": "text", "text": "This is a test response from the client"},
        "model": "test-model", "stopReason": "endTurn"});
    sample.validate_answer(&ok).unwrap();
    sample
        .validate_answer(
            &json!({"role": "assistant", "content": [{"type": "text", "text": "a"}], "model": "m"}),
        )
        .unwrap();
    for (bad, needle) in [
        (json!({"content": {"type": "text"}, "model": "m"}), "role"),
        (json!({"role": "system", "content": {"type": "text"}, "model": "m"}), "role"),
        (json!({"role": "assistant", "content": "hi", "model": "m"}), "content"),
        (json!({"role": "assistant", "content": [{"text": "a"}], "model": "m"}), "content"),
        (json!({"role": "assistant", "content": {"type": "text"}}), "model"),
        (json!({"role": "assistant", "content": {"type": "text"}, "model": 1}), "model"),
        (
            json!({"role": "assistant", "content": {"type": "text"}, "model": "m", "stopReason": 1}),
            "stopReason",
        ),
    ] {
        assert!(answer_err(&sample, bad.clone()).contains(needle), "{bad}");
    }

    let roots = InputRequest::list_roots();
    roots.validate_answer(&json!({"roots": [{"uri": "file:///test/root", "name": "Test Root"}]})).unwrap();
    roots.validate_answer(&json!({"roots": []})).unwrap();
    for bad in [
        json!({}),
        json!({"roots": {}}),
        json!({"roots": [{"uri": "https://x"}]}),
        json!({"roots": [{"name": "x"}]}),
        json!({"roots": [{"uri": "file:///x", "name": 3}]}),
        json!({"roots": ["file:///x"]}),
    ] {
        assert!(answer_err(&roots, bad.clone()).contains("roots"), "{bad}");
    }
}

// --- request state --------------------------------------------------------------------

const NOW: u64 = 1_760_000_000_000;

fn ring() -> KeyRing {
    KeyRing::new([7; 32])
}

fn binding(args: &Value) -> StateBinding<'static> {
    StateBinding {
        caller: "alice",
        method: "tools/call",
        arguments_digest: arguments_digest(Some(args)),
        epoch: 0,
    }
}

fn state() -> RequestState {
    let answers = parse(
        r#"{"user_name": {"action": "accept", "content": {"n": 123456789012345678901234567890, "x": 1.50}}}"#,
    );
    RequestState { round: 2, answers: answers.as_object().unwrap().clone(), data: Some("step-2".into()) }
}

// Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
#[cfg(feature = "exact-json")]
#[test]
fn state_round_trip() {
    let args = json!({"name": "t", "arguments": {}});
    let b = binding(&args);
    let token = seal_state(&ring(), &b, &state(), NOW + 10 * 60 * 1000).unwrap();
    assert!(token.len() <= MAX_STATE_BYTES);
    let back = open_state(&ring(), &token, &b, NOW).unwrap();
    assert_eq!(back, state());
    // Exact number text survives the trip.
    assert_eq!(
        serde_json::to_string(&back.answers).unwrap(),
        r#"{"user_name":{"action":"accept","content":{"n":123456789012345678901234567890,"x":1.50}}}"#
    );
    let empty = RequestState::default();
    let t = seal_state(&ring(), &b, &empty, NOW + 1).unwrap();
    assert_eq!(open_state(&ring(), &t, &b, NOW).unwrap(), empty);
    // Rotation: a ring that only verifies the old key still opens it.
    let rotated = KeyRing::new([9; 32]).with_verify_key([7; 32]);
    assert_eq!(open_state(&rotated, &token, &b, NOW).unwrap(), state());
}

#[test]
fn state_refusals() {
    let args = json!({"q": 1});
    let b = binding(&args);
    let token = seal_state(&ring(), &b, &state(), NOW + 1000).unwrap();
    // Tampering: one character flipped anywhere after the version prefix.
    for i in 3..token.len() {
        let mut t: Vec<char> = token.chars().collect();
        if t[i] == '.' {
            continue;
        }
        t[i] = if t[i] == 'A' { 'B' } else { 'A' };
        let t: String = t.into_iter().collect();
        let e = open_state(&ring(), &t, &b, NOW).unwrap_err();
        assert!(matches!(e, StateError::Tampered | StateError::Malformed), "at {i}: {e:?}");
    }
    let suffixed = format!("{token}-TAMPERED");
    assert!(open_state(&ring(), &suffixed, &b, NOW).is_err());
    assert_eq!(open_state(&KeyRing::new([8; 32]), &token, &b, NOW), Err(StateError::Tampered));
    for junk in ["", "state-ok", "v1.", "v1.!!.??", "v2.a.b"] {
        assert_eq!(open_state(&ring(), junk, &b, NOW), Err(StateError::Malformed), "{junk}");
    }
    // Expiry: valid strictly before `expires_at_ms`.
    assert!(open_state(&ring(), &token, &b, NOW + 999).is_ok());
    assert_eq!(open_state(&ring(), &token, &b, NOW + 1000), Err(StateError::Expired));
    // Binding.
    let other = |caller, method, a: &Value| StateBinding {
        caller,
        method,
        arguments_digest: arguments_digest(Some(a)),
        epoch: 0,
    };
    assert_eq!(
        open_state(&ring(), &token, &other("bob", "tools/call", &args), NOW),
        Err(StateError::WrongCaller)
    );
    assert_eq!(
        open_state(&ring(), &token, &other("alice", "prompts/get", &args), NOW),
        Err(StateError::WrongMethod)
    );
    assert_eq!(
        open_state(&ring(), &token, &other("alice", "tools/call", &json!({"q": 2})), NOW),
        Err(StateError::WrongArguments)
    );
    // A binding failure wins over expiry, so only the rightful caller learns of it.
    assert_eq!(
        open_state(&ring(), &token, &other("bob", "tools/call", &args), NOW + 5000),
        Err(StateError::WrongCaller)
    );
}

#[test]
fn states_belong_to_their_epoch() {
    let args = json!({"q": 1});
    let b = binding(&args);
    let token = seal_state(&ring(), &b, &state(), NOW + 1000).unwrap();
    let next = StateBinding { epoch: 1, ..b };
    assert_eq!(open_state(&ring(), &token, &next, NOW), Err(StateError::Epoch));
    // The epoch is checked after the binding (a prober learns nothing) and before expiry.
    let bob = StateBinding { caller: "bob", ..next };
    assert_eq!(open_state(&ring(), &token, &bob, NOW), Err(StateError::WrongCaller));
    assert_eq!(open_state(&ring(), &token, &next, NOW + 5000), Err(StateError::Epoch));
    let later = seal_state(&ring(), &next, &state(), NOW + 1000).unwrap();
    assert_eq!(open_state_with_expiry(&ring(), &later, &next, NOW), Ok((state(), NOW + 1000)));
    assert_eq!(open_state(&ring(), &later, &b, NOW), Err(StateError::Epoch));
    // On the wire an epoch refusal reads as an expiry, with the reason in `data`.
    let e = StateError::Epoch.rpc_error();
    assert_eq!(
        (e.code.code(), e.message.as_str()),
        (-32602, StateError::Expired.rpc_error().message.as_str())
    );
    assert_eq!(e.data, Some(json!({"reason": "epoch"})));
}

#[test]
fn state_errors_are_generic_on_the_wire() {
    let all = [
        StateError::Malformed,
        StateError::Tampered,
        StateError::WrongCaller,
        StateError::WrongMethod,
        StateError::WrongArguments,
        StateError::TooLarge,
    ];
    for e in all {
        assert_eq!(e.rpc_error(), RpcError::invalid_params("invalid requestState"), "{e}");
    }
    let expired = StateError::Expired.rpc_error();
    assert_eq!(expired.code.code(), -32602);
    assert!(expired.message.contains("expired"));
    assert!(expired.data.is_none());
}

#[test]
fn digest_ignores_key_order_whitespace_and_escapes() {
    let a =
        parse(r#"{"b": [1, {"y": true, "x": null}], "a": "h\u00e9\"", "c": 123456789012345678901234567890}"#);
    let b = parse(r#"{ "c":123456789012345678901234567890 ,"a":"hé\u0022","b":[1,{"x":null,"y":true}] }"#);
    assert_eq!(arguments_digest(Some(&a)), arguments_digest(Some(&b)));
    let d = |t: &str| arguments_digest(Some(&parse(t)));
    assert_ne!(d(r#"{"a": 1}"#), d(r#"{"a": "1"}"#));
    assert_ne!(d(r#"{"a": 1}"#), d(r#"{"a": 1.0}"#));
    assert_ne!(d(r#"[1, 2]"#), d(r#"[2, 1]"#));
    assert_ne!(d(r#"{"a": {"b": 1}}"#), d(r#"{"a": {"b": 2}}"#));
    assert_ne!(d(r#"{"ab": 1}"#), d(r#"{"a": "b1"}"#));
    assert_ne!(d("{}"), arguments_digest(None));
    assert_ne!(d("null"), arguments_digest(None));
    assert_eq!(arguments_digest(None), arguments_digest(None));
}

#[test]
fn cursors_and_states_refuse_each_other() {
    let r = ring();
    let b = StateBinding {
        caller: "alice",
        method: "tools/list",
        arguments_digest: arguments_digest(None),
        epoch: 0,
    };
    let cursor_token = cursor::make(&r, "tools/list", "alice", "t");
    assert_eq!(open_state(&r, &cursor_token, &b, NOW), Err(StateError::Malformed));
    let state_token = seal_state(&r, &b, &RequestState::default(), NOW + 1000).unwrap();
    for method in ["tools/list", "tools/call"] {
        assert_eq!(cursor::read(&r, &state_token, method, "alice", 128), None);
    }
    assert_eq!(cursor::read(&r, &cursor_token, "tools/list", "alice", 128).as_deref(), Some("t"));
    assert!(open_state(&r, &state_token, &b, NOW).is_ok());
}

#[test]
fn state_size_is_bounded() {
    let b = binding(&json!({}));
    let big = RequestState { data: Some("x".repeat(MAX_STATE_BYTES)), ..RequestState::default() };
    assert_eq!(
        seal_state(&ring(), &b, &big, NOW + 1),
        Err(InteractionError::StateTooLarge { max: MAX_STATE_BYTES })
    );
    // Just under the pre-check but over after encoding.
    let edge =
        RequestState { data: Some("x".repeat(MAX_STATE_BYTES / 4 * 3 - 100)), ..RequestState::default() };
    assert!(matches!(seal_state(&ring(), &b, &edge, NOW + 1), Err(InteractionError::StateTooLarge { .. })));
    let fits = RequestState { data: Some("x".repeat(40 * 1024)), ..RequestState::default() };
    let token = seal_state(&ring(), &b, &fits, NOW + 1).unwrap();
    assert_eq!(open_state(&ring(), &token, &b, NOW).unwrap(), fits);
    let long = "v".repeat(MAX_STATE_BYTES + 1);
    assert_eq!(open_state(&ring(), &long, &b, NOW), Err(StateError::TooLarge));
}

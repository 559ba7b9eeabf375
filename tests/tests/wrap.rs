//! The output-schema wrapper against jsonschema (the validator the engine uses), case by case
//! from tests/wrap/cases.json; tests/wrap/run.sh checks the same cases against the official
//! SDKs' validators. See that file's "about" for what each case asserts.

use std::collections::BTreeSet;

use mcp_proto::wrap::{prepare, Dialect};
use serde_json::{json, Value};

fn cases() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/wrap/cases.json");
    let text = std::fs::read_to_string(path).expect("read tests/wrap/cases.json");
    let doc: Value = serde_json::from_str(&text).expect("tests/wrap/cases.json is JSON");
    doc["cases"].as_array().expect("a \"cases\" array").clone()
}

#[test]
fn every_case_keeps_its_meaning_under_jsonschema() {
    let cases = cases();
    assert!(cases.len() >= 15, "the case file lost cases");
    let mut names = BTreeSet::new();
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("a name");
        assert!(names.insert(name), "duplicate case name {name}");
        let app = &case["app"];
        let prepared = prepare(app, case.get("diagnostics")).unwrap_or_else(|e| panic!("{name}: {e}"));
        let wrapped = prepared.schema();

        // The wire schema is an object schema in the application's dialect.
        assert_eq!(wrapped["type"], "object", "{name}");
        let dialect = match case.get("dialect").and_then(Value::as_str) {
            Some("draft-07") => Dialect::Draft07,
            None => Dialect::Draft2020_12,
            Some(other) => panic!("{name}: unknown dialect {other}"),
        };
        assert_eq!(wrapped["$schema"], dialect.uri(), "{name}");

        let bare = jsonschema::options().build(app).unwrap_or_else(|e| panic!("{name}: bare schema: {e}"));
        // The prepared validator and a fresh compile of the wire schema agree.
        let fresh = jsonschema::options().build(wrapped).unwrap_or_else(|e| panic!("{name}: wrapped: {e}"));
        for v in case["values"].as_array().expect("values") {
            let (value, want) = (&v["value"], v["valid"].as_bool().expect("valid"));
            let envelope = json!({ "value": value });
            assert_eq!(bare.is_valid(value), want, "{name}: bare schema on {value}");
            assert_eq!(
                prepared.validator().is_valid(&envelope),
                want,
                "{name}: wrapper on {envelope}\n{wrapped:#}"
            );
            assert_eq!(fresh.is_valid(&envelope), want, "{name}: recompiled wrapper on {envelope}");
            checked += 1;
        }
        for e in case.get("envelopes").and_then(Value::as_array).into_iter().flatten() {
            let (envelope, want) = (&e["envelope"], e["valid"].as_bool().expect("valid"));
            assert_eq!(
                prepared.validator().is_valid(envelope),
                want,
                "{name}: wrapper on {envelope}\n{wrapped:#}"
            );
            checked += 1;
        }
    }
    assert!(checked > 60, "only {checked} verdicts checked");
}

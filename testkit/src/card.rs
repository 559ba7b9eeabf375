//! Validation of server cards (SEP-2127) against the extension's JSON Schema, copied into
//! `testkit/fixtures/server-card/` (its `SOURCE.md` says from where).

use std::sync::OnceLock;

use jsonschema::ValidatorMap;
use serde_json::Value;

const SCHEMA: &str = include_str!("../fixtures/server-card/schema.json");

fn compiled() -> Result<&'static ValidatorMap, String> {
    static CELL: OnceLock<Result<ValidatorMap, String>> = OnceLock::new();
    CELL.get_or_init(|| {
        let doc: Value = serde_json::from_str(SCHEMA).map_err(|e| format!("server card schema: {e}"))?;
        jsonschema::validator_map_for(&doc).map_err(|e| format!("server card schema: {e}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Validates `card` against the schema's `ServerCard`, naming at most five violations.
pub fn validate(card: &Value) -> Result<(), String> {
    let validator = compiled()?.get("#/$defs/ServerCard").ok_or("the schema has no ServerCard")?;
    let errors: Vec<String> =
        validator.iter_errors(card).take(5).map(|e| format!("at {}: {e}", e.instance_path())).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("not a valid server card: {}", errors.join("; ")))
    }
}

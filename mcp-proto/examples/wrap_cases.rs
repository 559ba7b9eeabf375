//! Wraps every application schema in an output-schema wrapper case file and prints the cases
//! with their wire schemas, for tests/wrap/run.sh to check against the official SDKs'
//! validators.
//!
//! Usage: `cargo run -p mcp-proto --example wrap_cases -- tests/wrap/cases.json > wrapped.json`.
//! Each printed case is the input case plus `"wrapped"`: the wire `outputSchema`.

use std::process::ExitCode;

use mcp_proto::wrap::{wrap_output_schema, wrap_output_schema_with_diagnostics};
use serde_json::Value;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: wrap_cases CASES.json");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("wrap_cases: {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut doc: Value = match serde_json::from_str(&text) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("wrap_cases: {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(cases) = doc.get_mut("cases").and_then(Value::as_array_mut) else {
        eprintln!("wrap_cases: {path}: no \"cases\" array");
        return ExitCode::FAILURE;
    };
    for case in cases {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?").to_owned();
        let app = case.get("app").cloned().unwrap_or(Value::Null);
        let wrapped = match case.get("diagnostics") {
            Some(d) => wrap_output_schema_with_diagnostics(&app, d),
            None => wrap_output_schema(&app),
        };
        match wrapped {
            Ok(w) => {
                if let Some(obj) = case.as_object_mut() {
                    obj.insert("wrapped".into(), w);
                }
            }
            Err(e) => {
                eprintln!("wrap_cases: case {name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{doc}");
    ExitCode::SUCCESS
}

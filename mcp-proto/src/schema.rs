//! JSON Schema checks: the one place the engine validates a value against a schema.
//!
//! With the `validation` feature (off by default) a [`Validator`] is a compiled
//! [`jsonschema`](https://docs.rs/jsonschema) validator, built without its HTTP and file
//! resolvers, so a remote `$ref` fails to compile instead of being fetched. The engine checks
//! with it a tool's arguments against its input schema (a mismatch is answered as invalid
//! params, or as a tool error where the protocol version says so), a tool's structured output
//! against its output schema (a mismatch is the generic internal error).
//!
//! Without the feature (the default), nothing is checked against a schema: a schema must still be a JSON
//! object or boolean to be accepted, but every value passes. That build leaves out
//! `jsonschema` and the regex engines it needs (about half of a small server's code and of its
//! first build). Typed tools still refuse arguments their type cannot be read from (serde
//! does), and their typed outputs match their schemas by construction; a tool registered with
//! a hand-written schema and a `Value` handler then gets its arguments unchecked, and must
//! check them itself, as the MCP specification requires of a server.

use serde_json::Value;

/// A compiled schema; see the module docs for what it checks in each build.
pub struct Validator {
    #[cfg(feature = "validation")]
    compiled: jsonschema::Validator,
}

impl Validator {
    /// Compiles `schema`. Fails with a readable reason when it is not a schema (with the
    /// `validation` feature: anything `jsonschema` refuses, a remote `$ref` included; without:
    /// anything but an object or a boolean).
    pub fn compile(schema: &Value) -> Result<Self, String> {
        #[cfg(feature = "validation")]
        {
            jsonschema::options().build(schema).map(|compiled| Self { compiled }).map_err(|e| e.to_string())
        }
        #[cfg(not(feature = "validation"))]
        {
            if schema.is_object() || schema.is_boolean() {
                Ok(Self {})
            } else {
                Err(format!("a schema is a JSON object or boolean, not {schema}"))
            }
        }
    }

    /// Whether `instance` satisfies the schema (always, without the `validation` feature).
    pub fn is_valid(&self, instance: &Value) -> bool {
        #[cfg(feature = "validation")]
        {
            self.compiled.is_valid(instance)
        }
        #[cfg(not(feature = "validation"))]
        {
            let _ = instance;
            true
        }
    }

    /// Up to `max` reasons `instance` fails the schema, each prefixed by the JSON pointer of the
    /// part that fails and cut to 200 bytes, so a reply built from them stays small whatever the
    /// input. Empty when it satisfies the schema.
    pub fn errors(&self, instance: &Value, max: usize) -> Vec<String> {
        #[cfg(feature = "validation")]
        {
            // Most instances are valid: the boolean walk stops at nothing and builds no error.
            if self.compiled.is_valid(instance) {
                return Vec::new();
            }
            self.compiled
                .iter_errors(instance)
                .take(max)
                .map(|e| {
                    let path = e.instance_path().to_string();
                    let msg = clip(e.to_string(), 200);
                    if path.is_empty() {
                        msg
                    } else {
                        format!("{path}: {msg}")
                    }
                })
                .collect()
        }
        #[cfg(not(feature = "validation"))]
        {
            let _ = (instance, max);
            Vec::new()
        }
    }
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Validator")
    }
}

/// `msg` cut to at most `max` bytes on a character boundary, with an ellipsis when cut.
#[cfg(feature = "validation")]
fn clip(mut msg: String, max: usize) -> String {
    if msg.len() > max {
        let mut end = max;
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg.truncate(end);
        msg.push('…');
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_is_an_object_or_a_boolean() {
        assert!(Validator::compile(&json!({"type": "object"})).is_ok());
        assert!(Validator::compile(&json!(true)).is_ok());
        assert!(Validator::compile(&json!("object")).is_err());
        assert!(Validator::compile(&json!([1])).is_err());
    }

    #[cfg(feature = "validation")]
    #[test]
    fn values_are_checked() {
        let v = Validator::compile(&json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(v.is_valid(&json!({"n": 1})));
        assert!(!v.is_valid(&json!({"n": "one"})));
        let errors = v.errors(&json!({"n": "one"}), 8);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("/n: "), "{errors:?}");
        assert!(v.errors(&json!({"n": 1}), 8).is_empty());
        assert!(Validator::compile(&json!({"$ref": "https://example.com/schema.json"})).is_err());
    }

    #[cfg(not(feature = "validation"))]
    #[test]
    fn without_validation_every_value_passes() {
        let v = Validator::compile(&json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(v.is_valid(&json!({"n": "one"})));
        assert!(v.errors(&json!({"n": "one"}), 8).is_empty());
    }
}

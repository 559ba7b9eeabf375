//! Protocol extensions a server declares (`capabilities.extensions`), such as MCP Apps
//! (`io.modelcontextprotocol/ui`) or Tasks (`io.modelcontextprotocol/tasks`).
//!
//! The 2026-07-28 schema defines `ServerCapabilities.extensions` and
//! `ClientCapabilities.extensions`: a map from extension id to a settings object (`{}` for "no
//! settings"), whose keys follow the `_meta` key rules with a mandatory prefix. The 2025-11-25
//! schema has no such field, but its capability objects accept extra fields, and the MCP Apps
//! extension (stable 2026-01-26) has clients and servers of that version negotiate through it
//! all the same; so the engine declares extensions to 2025-11-25 sessions too, and to no older
//! ones (see [`ProtocolVersion::has_extensions`](crate::version::ProtocolVersion::has_extensions)).

use serde_json::{Map, Value};

use crate::caller::Gate;
use crate::registry_error::RegistryError;

/// An extension the server declares, with its settings and an optional gate.
#[derive(Debug, Clone)]
pub struct Extension {
    id: String,
    settings: Value,
    pub(crate) gate: Option<Gate>,
}

impl Extension {
    /// An extension `id` (`io.modelcontextprotocol/ui`, `com.example/audit`) with its settings,
    /// which must be a JSON object (`json!({})` for none). Both are checked at registration
    /// ([`RegistryError::InvalidExtension`]).
    pub fn new(id: impl Into<String>, settings: Value) -> Self {
        Self { id: id.into(), settings, gate: None }
    }

    /// The extension's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The settings as declared.
    pub fn settings(&self) -> &Value {
        &self.settings
    }

    /// Declares the extension only to callers the gate admits; to the others it does not exist,
    /// as a gated tool does not.
    pub fn gate(mut self, gate: Gate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The gate set with [`gate`](Self::gate), if any.
    pub fn declared_gate(&self) -> Option<&Gate> {
        self.gate.as_ref()
    }

    /// The settings object, or why this extension cannot be declared.
    pub(crate) fn checked(&self) -> Result<&Map<String, Value>, RegistryError> {
        if !valid_id(&self.id) {
            return Err(RegistryError::InvalidExtension(format!(
                "{:?} is no extension id: write a prefix of dot-separated labels (each starting with \
                 a letter, ending with a letter or digit, hyphens inside), a slash, then a name \
                 (starting and ending with a letter or digit; `-`, `_` and `.` inside), such as \
                 \"com.example/audit\"",
                self.id
            )));
        }
        match &self.settings {
            Value::Object(m) => Ok(m),
            other => Err(RegistryError::InvalidExtension(format!(
                "the settings of extension {:?} must be a JSON object (`{{}}` for none), not {other}",
                self.id
            ))),
        }
    }
}

/// Whether `id` is a `_meta`-style key with a prefix, as the schema requires of extension ids:
/// `label(.label)*/name`. The key rules allow an empty name; an extension id without one names
/// no extension, so it is refused here.
pub(crate) fn valid_id(id: &str) -> bool {
    let Some((prefix, name)) = id.split_once('/') else { return false };
    let label = |l: &str| {
        let b = l.as_bytes();
        matches!(b.first(), Some(c) if c.is_ascii_alphabetic())
            && matches!(b.last(), Some(c) if c.is_ascii_alphanumeric())
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    let n = name.as_bytes();
    prefix.split('.').all(label)
        && matches!(n.first(), Some(c) if c.is_ascii_alphanumeric())
        && matches!(n.last(), Some(c) if c.is_ascii_alphanumeric())
        && n.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_follow_the_meta_key_rules_with_a_prefix() {
        for ok in ["io.modelcontextprotocol/ui", "com.example/x", "a/b", "com.ex-ample9/n_a.m-e", "x/1"] {
            assert!(valid_id(ok), "{ok}");
        }
        for bad in [
            "",
            "ui",
            "/ui",
            "com.example/",
            "com..example/x",
            "9com/x",
            "com-/x",
            "com.example/x/y",
            "com.example/-x",
            "com.example/x_",
            "com.exa mple/x",
            "com.example/ü",
            "com_example/x",
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn settings_must_be_an_object() {
        assert!(Extension::new("com.example/x", json!({})).checked().is_ok());
        for bad in [json!(null), json!([]), json!("on"), json!(true)] {
            let e = Extension::new("com.example/x", bad).checked().unwrap_err();
            assert!(matches!(&e, RegistryError::InvalidExtension(m) if m.contains("JSON object")), "{e}");
        }
        let e = Extension::new("x", json!({})).checked().unwrap_err();
        assert!(e.to_string().contains("\"x\" is no extension id"), "{e}");
    }
}

//! The output-schema wrapper: the `outputSchema` a direct-mode tool publishes when its results
//! travel in value/failure envelopes.
//!
//! With envelopes on, a tool's `structuredContent` is either `{"value": v}`, where `v` is what
//! the application's own output schema describes, or `{"failure": {"code", "message",
//! "retryable", "diagnostics"?}}`. [`wrap_output_schema`] turns the application's schema into
//! one schema for both:
//!
//! ```json
//! {
//!   "$schema": "https://json-schema.org/draft/2020-12/schema",
//!   "type": "object",
//!   "anyOf": [
//!     {"properties": {"value": {"$ref": "<id of the application schema>"}},
//!      "required": ["value"], "additionalProperties": false},
//!     {"properties": {"failure": {"type": "object",
//!        "properties": {"code": {"type": "string"}, "message": {"type": "string"},
//!                       "retryable": {"type": "boolean"}, "diagnostics": <see below>},
//!        "required": ["code", "message", "retryable"], "additionalProperties": false}},
//!      "required": ["failure"], "additionalProperties": false}
//!   ],
//!   "$defs": {"value": <the application schema, with an $id>}
//! }
//! ```
//!
//! # Strategy: the application schema is its own schema resource
//!
//! The application schema is copied once, under `$defs/value` (`definitions/value` in a
//! draft-07 wrapper), and the value branch reaches it by `$ref` to its `$id`. Because it keeps
//! or gets an `$id`, it stays a separate *schema resource*: its `#/…` JSON pointers, `$anchor`s,
//! relative `$ref`s and nested `$id`s resolve against its own base, exactly as when it was
//! published alone, never against the wrapper. Nothing inside it is rewritten.
//!
//! - **An application `$id` is kept.** The wrapper itself has no `$id`, so a relative `$id`
//!   (`"order.json"`) resolves against the same default base as before, and the value branch
//!   refers to it with the same string. An empty fragment (`"…#"`) is dropped; a non-empty
//!   fragment at the root (draft-07's `"$id": "#name"` anchor form, or anything 2020-12
//!   forbids) is refused ([`WrapError::FragmentId`]). A wrapper `$id` would also make the
//!   TypeScript SDK reuse one tool's compiled validator for every tool with the same `$id`.
//! - **Without an `$id` (or with `""`/`"#"`), one is generated**: [`GENERATED_VALUE_ID`]
//!   (a hierarchical URI under the reserved `.invalid` domain, so nothing can ever fetch it),
//!   with a numeric suffix if the schema already uses that string. The schema had the
//!   validator's default base before; relative references inside it now resolve against the
//!   generated one, and since its nested `$id`s move with it, what they point to is unchanged.
//! - **Boolean schemas** (`true`, `false`) cannot carry an `$id`; they are bundled as they are
//!   and referenced by JSON pointer (`#/$defs/value`). `false` admits no value, so only failure
//!   envelopes validate.
//!
//! # Dialects
//!
//! The wrapper is written in the application schema's dialect, so that every validator reads
//! the whole document with one set of rules; JSON Schema leaves switching dialects inside one
//! document to each implementation, and the validators that matter here differ on it.
//!
//! - **2020-12** (also when `$schema` is absent: MCP 2025-11-25 and later say output schemas
//!   default to 2020-12, and the registry compiles them that way): the wrapper says
//!   `"$schema": "https://json-schema.org/draft/2020-12/schema"` and bundles under `$defs`.
//!   `$dynamicAnchor`/`$dynamicRef` keep their meaning because the wrapper declares no anchor
//!   of its own: the outermost dynamic anchor a `$dynamicRef` can find is still the
//!   application's. `definitions` in a 2020-12 schema stays what it was there: a place `#/…`
//!   pointers can reach, not a keyword.
//! - **draft-07** (`"$schema": "http://json-schema.org/draft-07/schema#"`, with or without the
//!   `#`) forces a draft-07 wrapper, bundled under `definitions` (draft-07 does not know
//!   `$defs`, and would not find an `$id` inside it). In draft-07 a `$ref` hides every
//!   keyword beside it, `$id` included, so a root `$ref` (the usual `{"$ref":
//!   "#/definitions/Root", "definitions": {…}}` of generated schemas) could not keep the schema
//!   a resource of its own. Such a root is rewritten once: its `$ref` moves into
//!   `"allOf": [{"$ref": …}]` beside the generated or kept `$id`, which is the same assertion.
//!   (An `$id` beside that root `$ref`, which draft-07 ignores but Ajv honours, is kept: `#/…`
//!   pointers and anchors resolve the same under either reading.)
//!   This is done only when every sibling is one draft-07 ignores anyway and no validator
//!   applies (`definitions`, `$defs`, `$schema`, `$id`, `$comment`, `title`, `description`,
//!   `default`, `examples`, `readOnly`, `writeOnly`); any other sibling is refused
//!   ([`WrapError::Draft07RefSibling`]): draft-07 ignores it but the TypeScript SDK's Ajv
//!   applies it, so the schema has no single meaning to keep.
//!   A 2020-12 wrapper around a draft-07 schema would not do: the Python SDK checks an output
//!   schema against the metaschema its root `$schema` names before using it, so a draft-07
//!   tuple `items` inside a 2020-12 wrapper makes it refuse every result of the tool, and
//!   Ajv's 2020-12 class refuses to compile it.
//! - Any other `$schema` (draft-04, draft-06, 2019-09, an unknown URI) is refused
//!   ([`WrapError::UnsupportedDialect`]).
//!
//! # What the official clients make of it
//!
//! tests/wrap/run.sh checks every case against the Python SDK's validator (jsonschema, class
//! chosen by `$schema`) and the TypeScript SDK's (Ajv): for each, `{"value": v}` against the
//! wrapper gets the verdict `v` gets against the bare schema. The TypeScript SDK (1.32)
//! compiles every output schema with Ajv's default class, which reads draft-07 whatever
//! `$schema` says: it ignores `$dynamicRef`, `prefixItems` and `unevaluatedProperties` in the
//! bare schema and in the wrapper alike. The wrapper keeps that reading; it cannot correct
//! it. That client also compiles every tool's schema in one Ajv instance, where embedded
//! `$id`s share one table; bundled resources resolve within their own wrapper there, which
//! the case file checks by compiling all of them in one instance.
//!
//! # Failure diagnostics
//!
//! [`wrap_output_schema_with_diagnostics`] takes the schema a tool declares for its failures'
//! `diagnostics`; it is bundled the same way under `$defs/diagnostics` (generated id
//! [`GENERATED_DIAGNOSTICS_ID`]) and must be in the same dialect as the application schema. A
//! diagnostics schema equal to the application schema is not bundled twice: both branches
//! reference the one copy. A diagnostics schema may also `$ref` the application schema by its
//! `$id`, since both live in one document. Without a diagnostics schema
//! ([`wrap_output_schema`]) `diagnostics` may hold any JSON value.
//!
//! # `anyOf`, not `oneOf`
//!
//! The two branches cannot both match: each requires its own property and forbids every other.
//! So `anyOf` and `oneOf` accept exactly the same envelopes; `anyOf` lets a validator stop at
//! the first branch that matches instead of proving the other one fails.
//!
//! # Preparation
//!
//! [`prepare`] wraps and compiles (with the same options as the registry, which never fetch a
//! remote `$ref`); a failure is a [`WrapError`], never a panic. The engine prepares a tool's
//! wrapper on its first authorized access and keeps it (or its error) with the tool's entry, so
//! it goes when the tool does.

use std::fmt;

use serde_json::{Map, Value};

/// The `$id` given to an application schema that has none.
///
/// Under the reserved `.invalid` domain (RFC 2606), so it can never be fetched, and
/// hierarchical, so relative references inside the schema resolve the way RFC 3986 says in
/// every validator.
pub const GENERATED_VALUE_ID: &str = "https://mcp-rs.invalid/output/value";

/// The `$id` given to a diagnostics schema that has none; see [`GENERATED_VALUE_ID`].
pub const GENERATED_DIAGNOSTICS_ID: &str = "https://mcp-rs.invalid/output/diagnostics";

const URI_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
const URI_DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

/// Siblings of a draft-07 root `$ref` that no validator applies, so moving the `$ref` into an
/// `allOf` beside them changes nothing (see the module docs).
const INERT_REF_SIBLINGS: &[&str] = &[
    "$ref",
    "definitions",
    "$defs",
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
];

/// A JSON Schema dialect the wrapper can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// `http://json-schema.org/draft-07/schema#`; bundles under `definitions`.
    Draft07,
    /// `https://json-schema.org/draft/2020-12/schema`, also the default when `$schema` is
    /// absent; bundles under `$defs`.
    Draft2020_12,
}

impl Dialect {
    /// The `$schema` URI the wrapper declares for this dialect.
    pub fn uri(self) -> &'static str {
        match self {
            Dialect::Draft07 => URI_DRAFT_07,
            Dialect::Draft2020_12 => URI_2020_12,
        }
    }

    fn defs_keyword(self) -> &'static str {
        match self {
            Dialect::Draft07 => "definitions",
            Dialect::Draft2020_12 => "$defs",
        }
    }

    /// The dialect a schema declares, `None` for a boolean schema (which has none).
    fn of(schema: &Value, part: Part) -> Result<Option<Dialect>, WrapError> {
        let Value::Object(map) = schema else { return Ok(None) };
        match map.get("$schema") {
            None => Ok(Some(Dialect::Draft2020_12)),
            Some(Value::String(uri)) => match uri.strip_suffix('#').unwrap_or(uri) {
                "https://json-schema.org/draft/2020-12/schema" => Ok(Some(Dialect::Draft2020_12)),
                "http://json-schema.org/draft-07/schema" => Ok(Some(Dialect::Draft07)),
                _ => Err(WrapError::UnsupportedDialect { part, uri: uri.clone() }),
            },
            Some(_) => Err(WrapError::InvalidSchema { part, reason: "\"$schema\" is not a string".into() }),
        }
    }
}

/// Which schema a [`WrapError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Part {
    /// The application's output schema (the value branch).
    Value,
    /// The schema of failure diagnostics.
    Diagnostics,
    /// The wrapper as a whole.
    Wrapper,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Value => "output schema",
            Part::Diagnostics => "diagnostics schema",
            Part::Wrapper => "wrapped output schema",
        })
    }
}

/// Why a wrapper could not be prepared.
///
/// The text is for the server's log: it names the application's schema, so a server turns
/// this into a generic protocol error (an internal error) for the peer rather than sending it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WrapError {
    /// Not a schema: neither an object nor a boolean, or `$schema`/`$id` is not a string.
    InvalidSchema {
        /// Which schema.
        part: Part,
        /// What is wrong.
        reason: String,
    },
    /// `$schema` names a dialect other than draft-07 and 2020-12.
    UnsupportedDialect {
        /// Which schema.
        part: Part,
        /// The `$schema` as given.
        uri: String,
    },
    /// The diagnostics schema is in another dialect than the application schema, and one
    /// wrapper has one dialect (see the module docs).
    MixedDialects,
    /// The root `$id` has a non-empty fragment (draft-07's `"#name"` anchor form, or one
    /// 2020-12 forbids), so the schema cannot become a resource of its own.
    FragmentId {
        /// Which schema.
        part: Part,
        /// The `$id` as given.
        id: String,
    },
    /// A draft-07 root `$ref` has a sibling keyword that draft-07 ignores but some validators
    /// (the TypeScript SDK's Ajv) apply; the schema has no single meaning to keep.
    Draft07RefSibling {
        /// Which schema.
        part: Part,
        /// The sibling keyword.
        keyword: String,
    },
    /// The application and diagnostics schemas differ but declare the same `$id`.
    DuplicateId(String),
    /// The wrapper does not compile: usually the application schema itself does not (an
    /// invalid keyword value, a `$ref` to a schema that is not bundled).
    Compile(String),
}

impl fmt::Display for WrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WrapError::InvalidSchema { part, reason } => write!(f, "invalid {part}: {reason}"),
            WrapError::UnsupportedDialect { part, uri } => write!(
                f,
                "{part}: unsupported \"$schema\" {uri:?} (use draft-07 or 2020-12, or omit it for 2020-12)"
            ),
            WrapError::MixedDialects => {
                f.write_str("the output schema and the diagnostics schema declare different dialects")
            }
            WrapError::FragmentId { part, id } => {
                write!(
                    f,
                    "{part}: the root \"$id\" {id:?} has a fragment, so it cannot be bundled as a resource"
                )
            }
            WrapError::Draft07RefSibling { part, keyword } => write!(
                f,
                "{part}: a draft-07 root \"$ref\" beside {keyword:?}, which draft-07 ignores but Ajv applies"
            ),
            WrapError::DuplicateId(id) => {
                write!(f, "the output and diagnostics schemas differ but both declare \"$id\" {id:?}")
            }
            WrapError::Compile(e) => write!(f, "the wrapped output schema does not compile: {e}"),
        }
    }
}

impl std::error::Error for WrapError {}

/// The wire `outputSchema` for a direct-mode tool with envelopes, whose failures' `diagnostics`
/// may be any JSON value. See the module docs for what it looks like and why.
///
/// ```
/// use mcp_proto::wrap::wrap_output_schema;
/// use serde_json::json;
///
/// let app = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
/// let wire = wrap_output_schema(&app).unwrap();
/// assert_eq!(wire["type"], "object");
/// assert_eq!(wire["$defs"]["value"]["$id"], "https://mcp-rs.invalid/output/value");
/// let v = jsonschema::validator_for(&wire).unwrap();
/// assert!(v.is_valid(&json!({"value": {"n": 1}})));
/// assert!(!v.is_valid(&json!({"value": {"n": "one"}})));
/// assert!(v.is_valid(&json!({"failure": {"code": "busy", "message": "later", "retryable": true}})));
/// ```
pub fn wrap_output_schema(app: &Value) -> Result<Value, WrapError> {
    wrap(app, None)
}

/// [`wrap_output_schema`] for a tool that declares a schema for its failures' `diagnostics`.
pub fn wrap_output_schema_with_diagnostics(app: &Value, diagnostics: &Value) -> Result<Value, WrapError> {
    wrap(app, Some(diagnostics))
}

fn wrap(app: &Value, diagnostics: Option<&Value>) -> Result<Value, WrapError> {
    let app_dialect = Dialect::of(app, Part::Value)?;
    let diag_dialect = diagnostics.map(|d| Dialect::of(d, Part::Diagnostics)).transpose()?.flatten();
    let dialect = match (app_dialect, diag_dialect) {
        (Some(a), Some(d)) if a != d => return Err(WrapError::MixedDialects),
        (Some(a), _) => a,
        (None, Some(d)) => d,
        (None, None) => Dialect::Draft2020_12,
    };
    let defs_kw = dialect.defs_keyword();

    // Every `$id` string either schema uses, so a generated id never collides with one.
    let mut taken = Vec::new();
    collect_ids(app, &mut taken);
    if let Some(d) = diagnostics {
        collect_ids(d, &mut taken);
    }

    let mut defs = Map::new();
    let (app_resource, app_ref) =
        bundle(app, dialect, Part::Value, "value", defs_kw, GENERATED_VALUE_ID, &mut taken)?;
    defs.insert("value".into(), app_resource);

    let diagnostics_schema = match diagnostics {
        None => Value::Bool(true),
        Some(d) if d == app => app_ref.clone(),
        Some(d) => {
            let (resource, reference) = bundle(
                d,
                dialect,
                Part::Diagnostics,
                "diagnostics",
                defs_kw,
                GENERATED_DIAGNOSTICS_ID,
                &mut taken,
            )?;
            if let (Some(a), Some(r)) = (ref_target(&app_ref), ref_target(&reference)) {
                if a == r {
                    return Err(WrapError::DuplicateId(a.to_owned()));
                }
            }
            defs.insert("diagnostics".into(), resource);
            reference
        }
    };

    let value_branch = object_branch("value", app_ref);
    let failure = serde_json::json!({
        "type": "object",
        "properties": {
            "code": {"type": "string"},
            "message": {"type": "string"},
            "retryable": {"type": "boolean"},
            "diagnostics": diagnostics_schema,
        },
        "required": ["code", "message", "retryable"],
        "additionalProperties": false,
    });
    let failure_branch = object_branch("failure", failure);

    let mut root = Map::new();
    root.insert("$schema".into(), Value::String(dialect.uri().into()));
    root.insert("type".into(), Value::String("object".into()));
    root.insert("anyOf".into(), Value::Array(vec![value_branch, failure_branch]));
    root.insert(defs_kw.into(), Value::Object(defs));
    Ok(Value::Object(root))
}

/// `{"properties": {name: schema}, "required": [name], "additionalProperties": false}`.
fn object_branch(name: &str, schema: Value) -> Value {
    let mut props = Map::new();
    props.insert(name.into(), schema);
    let mut m = Map::new();
    m.insert("properties".into(), Value::Object(props));
    m.insert("required".into(), Value::Array(vec![Value::String(name.into())]));
    m.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(m)
}

/// The URI a `{"$ref": uri}` made by [`bundle`] points to, unless it is a local pointer.
fn ref_target(reference: &Value) -> Option<&str> {
    reference.get("$ref").and_then(Value::as_str).filter(|r| !r.starts_with('#'))
}

/// The schema as a resource to put under `defs_kw/slot`, and the `{"$ref": …}` that reaches it
/// from the wrapper.
fn bundle(
    schema: &Value,
    dialect: Dialect,
    part: Part,
    slot: &str,
    defs_kw: &str,
    generated: &str,
    taken: &mut Vec<String>,
) -> Result<(Value, Value), WrapError> {
    let map = match schema {
        Value::Bool(_) => {
            let pointer = format!("#/{defs_kw}/{slot}");
            return Ok((schema.clone(), reference(pointer)));
        }
        Value::Object(map) => map,
        _ => {
            return Err(WrapError::InvalidSchema {
                part,
                reason: "a schema must be an object or a boolean".into(),
            })
        }
    };
    let own_id = match map.get("$id") {
        None => None,
        Some(Value::String(id)) => {
            let id = id.strip_suffix('#').unwrap_or(id);
            if id.contains('#') {
                return Err(WrapError::FragmentId { part, id: id.to_owned() });
            }
            (!id.is_empty()).then(|| id.to_owned())
        }
        Some(_) => return Err(WrapError::InvalidSchema { part, reason: "\"$id\" is not a string".into() }),
    };
    let id = match own_id {
        Some(id) => id,
        None => {
            let id = fresh_id(generated, taken);
            taken.push(id.clone());
            id
        }
    };

    let mut resource = Map::new();
    if dialect == Dialect::Draft07 && map.contains_key("$ref") {
        if let Some(keyword) = map.keys().find(|k| !INERT_REF_SIBLINGS.contains(&k.as_str())) {
            return Err(WrapError::Draft07RefSibling { part, keyword: keyword.clone() });
        }
        for (k, v) in map {
            match k.as_str() {
                "$ref" => {
                    resource.insert("allOf".into(), Value::Array(vec![reference_value(v.clone())]));
                }
                "$id" => {
                    resource.insert("$id".into(), Value::String(id.clone()));
                }
                _ => {
                    resource.insert(k.clone(), v.clone());
                }
            }
        }
        // The `$id` goes first when the schema had none, where a reader looks for it.
        if !resource.contains_key("$id") {
            let mut with_id = Map::new();
            with_id.insert("$id".into(), Value::String(id.clone()));
            with_id.extend(resource);
            resource = with_id;
        }
    } else {
        resource.insert("$id".into(), Value::String(id.clone()));
        for (k, v) in map {
            if k != "$id" {
                resource.insert(k.clone(), v.clone());
            }
        }
    }
    Ok((Value::Object(resource), reference(id)))
}

fn reference(target: String) -> Value {
    reference_value(Value::String(target))
}

fn reference_value(target: Value) -> Value {
    let mut m = Map::new();
    m.insert("$ref".into(), target);
    Value::Object(m)
}

/// `base`, or `base-2`, `base-3`, … : the first not in `taken`.
fn fresh_id(base: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t == base) {
        return base.to_owned();
    }
    let mut n: u64 = 2;
    loop {
        let candidate = format!("{base}-{n}");
        if !taken.contains(&candidate) {
            return candidate;
        }
        n = n.saturating_add(1);
    }
}

/// Every `$id` string anywhere in `schema`, with an empty fragment dropped.
fn collect_ids(schema: &Value, out: &mut Vec<String>) {
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(id)) = m.get("$id") {
                    out.push(id.strip_suffix('#').unwrap_or(id).to_owned());
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a.iter()),
            _ => {}
        }
    }
}

/// A prepared wrapper: the wire schema and its compiled validator.
pub struct WrappedSchema {
    schema: Value,
    validator: crate::schema::Validator,
}

impl WrappedSchema {
    /// The wire `outputSchema`.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The wrapper compiled, for checking a whole envelope (`{"value": …}` or
    /// `{"failure": …}`) before it is sent.
    pub fn validator(&self) -> &crate::schema::Validator {
        &self.validator
    }
}

impl fmt::Debug for WrappedSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WrappedSchema").field("schema", &self.schema).finish_non_exhaustive()
    }
}

/// Wraps (see [`wrap_output_schema_with_diagnostics`] for `diagnostics`) and compiles the
/// result with the registry's options, which never fetch a remote `$ref`.
pub fn prepare(app: &Value, diagnostics: Option<&Value>) -> Result<WrappedSchema, WrapError> {
    let schema = wrap(app, diagnostics)?;
    let validator = crate::schema::Validator::compile(&schema).map_err(WrapError::Compile)?;
    Ok(WrappedSchema { schema, validator })
}

// The cases assert verdicts, which only a build that validates gives.
#[cfg(all(test, feature = "validation"))]
mod tests;

//! The fixed set of test tools every replay engine registers, and what they do in `! auto` mode.
//!
//! | tool         | input schema                                   | auto behaviour                                     |
//! |--------------|------------------------------------------------|----------------------------------------------------|
//! | `add`        | `{a: number, b: number}`, both required        | text: the exact decimal sum of `a` and `b`         |
//! | `big`        | `{n: integer >= 0}`, required                  | text: `n` times `x`                                |
//! | `boom`       | `{}`                                           | a private handler error (never on the wire)        |
//! | `echo`       | `{text: string}`, required                     | text: `arguments.text`                             |
//! | `link`       | `{}`                                           | one `resource_link` block                          |
//! | `list_items` | `{items: array}`; output schema `array<string>`| structured: `arguments.items` (2026-07-28 only)    |
//! | `measure`    | `{}`; output schema `{value: number, unit}`    | structured: the arguments object, as given         |
//! | `nested`     | `{user: {name: string, age: integer >= 0}}`    | text `ok`                                          |
//! | `panic`      | `{}`                                           | the handler panicked                               |
//! | `public_fail`| `{}`                                           | public error `-32001 "quota exceeded"` with data   |
//! | `slow`       | `{}`                                           | never completed automatically: use `! complete`    |
//!
//! `measure` is the "rich" tool: it has a title, annotations, icons, `execution` and `_meta`, so
//! `tools/list` shows which fields each protocol version keeps. Tools are listed by name, so the
//! order above is the order on the wire.
//!
//! Two more tools are registered only when a transcript names them (`! tools ... admin_tool`),
//! so that the default set stays the one the stdio servers serve:
//!
//! | tool         | input schema | gate          | auto behaviour |
//! |--------------|--------------|---------------|----------------|
//! | `admin_tool` | `{}`         | role `admin`  | text `ok`      |
//! | `lookup`     | `{id: integer}`, required; output schema `{id: integer, name: string}`; failure diagnostics `{field: string}` | | `id` 0: the failure `not_found` (diagnostics `{"field":"id"}`); any other: structured `{"id": id, "name": "first"}`, `id` exactly as given |
//!
//! # Resources, templates, prompts and completions
//!
//! Registered only when a transcript asks (`! resources`, `! templates`, `! prompts`), each with
//! a [`Fixture`] behaviour. Resources (listed in URI order):
//!
//! | URI                       | gate   | listing extras                                  | auto read                         |
//! |---------------------------|--------|-------------------------------------------------|-----------------------------------|
//! | `test://admin/secret`     | admin  | mimeType                                        | text `the admin secret`           |
//! | `test://empty`            |        |                                                 | no contents (answered not found)  |
//! | `test://files/secret`     | admin  | mimeType (overlaps `test://files/{+path}`)      | text `the admin file`             |
//! | `test://rich`             |        | title, description, mimeType, size, annotations (with lastModified), icons, `_meta` | text `rich` |
//! | `test://static-binary`    |        | description, mimeType `image/png`               | blob `iVBORw0KGgo=`               |
//! | `test://static-text`      |        | description, mimeType `text/plain`              | text (see [`STATIC_TEXT`])        |
//! | `test://watched-resource` |        | mimeType                                        | text `watched`                    |
//!
//! Templates (listed in `uriTemplate` order; a URI goes to an exact resource first, then to the
//! first matching template):
//!
//! | uriTemplate                 | gate  | completion                          | auto read                            |
//! |-----------------------------|-------|-------------------------------------|--------------------------------------|
//! | `test://files/{+path}`      |       | none (empty answer)                 | text: the variables, `path=a/b`      |
//! | `test://private/{id}`       | admin | `p1`, `p2` by prefix                | text: the variables, `id=7`          |
//! | `test://template/{id}/data` |       | `1`, `10`, `2`, `42` by prefix      | JSON text: the variables, `id=123`   |
//!
//! `test://template/{id}/data` also has a title, mimeType `application/json`, icons and `_meta`.
//!
//! Prompts (listed by name):
//!
//! | name                         | gate  | arguments                          | completion                       | auto get |
//! |------------------------------|-------|------------------------------------|----------------------------------|----------|
//! | `test_admin_prompt`          | admin | none                               | none                             | user text `admin only` |
//! | `test_prompt_with_arguments` |       | `arg1` (required), `arg2`          | `alpha`, `alpine`, `beta` by prefix | user text `arg1=…, arg2=…` (the arguments given, by name) |
//! | `test_simple_prompt`         |       | none                               | none                             | user text `This is a simple prompt.` |
//!
//! `test_prompt_with_arguments` also has a title, icons, `_meta` and an argument title.
//!
//! A name that is none of these registers a plain extra item (`! register`): a tool with an
//! empty object schema answering `ok`, a resource answering text `extra`, a template answering
//! its variables, a prompt answering user text `extra`.

use std::collections::BTreeMap;

use mcp_proto::{
    Completion, Content, Gate, HandlerError, Prompt, PromptArgument, PromptMessage, PromptOutput, Resource,
    ResourceContents, ResourceLink, ResourceTemplate, RpcError, TaskSupport, TemplateVar, Tool, ToolFailure,
    ToolOutput,
};
use serde_json::{json, Map, Value};

/// The handler type of the replay engine: which built-in behaviour a tool has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestHandler {
    /// `add`
    Add,
    /// `big`
    Big,
    /// `boom`
    Boom,
    /// `echo`
    Echo,
    /// `link`
    Link,
    /// `list_items`
    ListItems,
    /// `measure`
    Measure,
    /// `nested`
    Nested,
    /// `panic`
    Panic,
    /// `public_fail`
    PublicFail,
    /// `slow`
    Slow,
    /// `lookup`
    Lookup,
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Every test tool, in name order, with its handler.
pub fn all_tools() -> Vec<(Tool, TestHandler)> {
    let empty = json!({"type": "object"});
    vec![
        (
            Tool::new(
                "add",
                "Adds two numbers exactly",
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            ),
            TestHandler::Add,
        ),
        (
            Tool::new(
                "big",
                "Returns n bytes of text",
                json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}),
            ),
            TestHandler::Big,
        ),
        (Tool::new("boom", "Always fails privately", empty.clone()), TestHandler::Boom),
        (
            Tool::new(
                "echo",
                "Echoes text",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            TestHandler::Echo,
        ),
        (Tool::new("link", "Returns a resource link", empty.clone()), TestHandler::Link),
        (
            Tool::new(
                "list_items",
                "Returns its items as an array",
                json!({"type": "object", "properties": {"items": {"type": "array"}}}),
            )
            .output_schema(json!({"type": "array", "items": {"type": "string"}})),
            TestHandler::ListItems,
        ),
        (
            Tool::new("measure", "Returns a measurement", empty.clone())
                .title("Measure")
                .output_schema(json!({
                    "type": "object",
                    "properties": {"value": {"type": "number"}, "unit": {"type": "string"}},
                    "required": ["value", "unit"]
                }))
                .annotations(object(json!({"readOnlyHint": true, "idempotentHint": true})))
                .icons(json!([{"src": "https://example.com/m.png", "mimeType": "image/png"}]))
                .execution(json!({"taskSupport": "forbidden"}))
                .meta(object(json!({"example.com/origin": "replay"}))),
            TestHandler::Measure,
        ),
        (
            Tool::new(
                "nested",
                "Takes a nested object",
                json!({
                    "type": "object",
                    "properties": {"user": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
                        "required": ["name"]
                    }},
                    "required": ["user"]
                }),
            ),
            TestHandler::Nested,
        ),
        (Tool::new("panic", "Panics", empty.clone()), TestHandler::Panic),
        (Tool::new("public_fail", "Fails with a public error", empty.clone()), TestHandler::PublicFail),
        (Tool::new("slow", "Never finishes on its own", empty), TestHandler::Slow),
    ]
}

/// The auto-mode result of `handler` for `arguments`, or `None` for a tool that is never
/// completed automatically (`slow`).
pub fn auto_reply(
    handler: TestHandler,
    arguments: &Map<String, Value>,
) -> Option<Result<ToolOutput, HandlerError>> {
    Some(match handler {
        TestHandler::Add => {
            let a = arguments.get("a").map(number_text).unwrap_or_default();
            let b = arguments.get("b").map(number_text).unwrap_or_default();
            match decimal_add(&a, &b) {
                Some(sum) => Ok(ToolOutput::text(sum)),
                None => Ok(ToolOutput::error(format!("cannot add {a} and {b} exactly"))),
            }
        }
        TestHandler::Big => {
            let n = arguments.get("n").and_then(Value::as_u64).unwrap_or(0);
            Ok(ToolOutput::text("x".repeat(usize::try_from(n).unwrap_or(0))))
        }
        TestHandler::Boom => Err(HandlerError::private("database password is hunter2")),
        TestHandler::Echo => {
            Ok(ToolOutput::text(arguments.get("text").and_then(Value::as_str).unwrap_or_default()))
        }
        TestHandler::Link => Ok(ToolOutput::content(vec![Content::resource_link(ResourceLink {
            title: Some("Document One".into()),
            description: Some("the first document".into()),
            mime_type: Some("text/plain".into()),
            size: Some(42),
            ..ResourceLink::new("test://docs/1", "doc1")
        })])),
        TestHandler::ListItems => {
            Ok(ToolOutput::structured(arguments.get("items").cloned().unwrap_or(Value::Array(Vec::new()))))
        }
        TestHandler::Measure => Ok(ToolOutput::structured(Value::Object(arguments.clone()))),
        TestHandler::Nested => Ok(ToolOutput::text("ok")),
        TestHandler::Panic => Err(HandlerError::Panicked),
        TestHandler::PublicFail => Err(HandlerError::Public(
            RpcError::new(mcp_proto::ErrorCode::Other(-32001), "quota exceeded")
                .with_data(json!({"retryAfterMs": 1000})),
        )),
        TestHandler::Slow => return None,
        TestHandler::Lookup => {
            let id = arguments.get("id").cloned().unwrap_or(Value::Null);
            if id.as_u64() == Some(0) {
                Err(ToolFailure::new("not_found", "no record has id 0")
                    .with_diagnostics(json!({"field": "id"}))
                    .into())
            } else {
                Ok(ToolOutput::structured(json!({"id": id, "name": "first"})))
            }
        }
    })
}

/// The tools registered only when a transcript names them: `admin_tool`, gated by role `admin`,
/// `lookup`, the tool with typed failures, the task tools (`task_job`: a task when the request
/// declares the extension; `task_later`: the same, once its handler starts the task;
/// `task_only`: a task or nothing; none finishes on its own), and `draft4`, whose output schema
/// (draft-04) the envelope wrapper refuses.
pub fn gated_tools() -> Vec<(Tool, TestHandler)> {
    vec![
        (
            Tool::new("admin_tool", "Only for admins", json!({"type": "object"})).gate(Gate::role("admin")),
            TestHandler::Nested,
        ),
        (
            Tool::new(
                "lookup",
                "Finds a record by id",
                json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
            )
            .output_schema(json!({
                "type": "object",
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                "required": ["id", "name"]
            }))
            .failure_diagnostics_schema(json!({
                "type": "object",
                "properties": {"field": {"type": "string"}},
                "required": ["field"]
            })),
            TestHandler::Lookup,
        ),
        (
            Tool::new(
                "task_job",
                "Runs as a task when the request declares the tasks extension",
                json!({"type": "object"}),
            )
            .task_support(TaskSupport::Optional),
            TestHandler::Slow,
        ),
        (
            Tool::new("task_later", "May become a task when its handler says so", json!({"type": "object"}))
                .task_support(TaskSupport::Optional)
                .task_started_by_handler(),
            TestHandler::Slow,
        ),
        (
            Tool::new("task_only", "Runs only as a task", json!({"type": "object"}))
                .task_support(TaskSupport::Required),
            TestHandler::Slow,
        ),
        (
            Tool::new("draft4", "Declares a draft-04 output schema", json!({"type": "object"}))
                .output_schema(
                    json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}),
                ),
            TestHandler::Lookup,
        ),
    ]
}

/// The text of `test://static-text`.
pub const STATIC_TEXT: &str = "This is the content of the static text resource.";

/// What a resource, template, prompt or completion fixture does when it is completed
/// automatically (see the module docs). Tools keep their [`TestHandler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixture {
    /// A tool.
    Tool(TestHandler),
    /// A read answering one text contents item with this media type and text.
    Text(&'static str, &'static str),
    /// A read answering one blob contents item with this media type and base64 data.
    Blob(&'static str, &'static str),
    /// A read answering no contents at all.
    Empty,
    /// A template read answering its variables as text (`name=value`, comma-separated).
    Variables,
    /// A template read answering its variables as a JSON object, `application/json`.
    JsonVariables,
    /// A prompt answering one user text message.
    PromptText(&'static str),
    /// A prompt answering one user message listing its arguments (`name=value`, by name).
    PromptArguments,
    /// A completion answering the candidates that start with the typed value.
    Complete(&'static [&'static str]),
    /// An app's read (`! app`, `! shell`): one text contents item without a media type or
    /// `_meta`, so that the read inherits the app's declared ones.
    App(&'static str),
}

fn gated(admin: bool) -> Option<Gate> {
    admin.then(|| Gate::role("admin"))
}

/// The test resources, in URI order.
pub fn fixture_resources() -> Vec<(Resource, Fixture)> {
    let plain = |uri: &str, name: &str, mime: &str| Resource::new(uri, name).mime_type(mime);
    let with_gate = |r: Resource, admin: bool| match gated(admin) {
        Some(g) => r.gate(g),
        None => r,
    };
    vec![
        (
            with_gate(plain("test://admin/secret", "secret", "text/plain"), true),
            Fixture::Text("text/plain", "the admin secret"),
        ),
        (Resource::new("test://empty", "empty"), Fixture::Empty),
        (
            with_gate(plain("test://files/secret", "file-secret", "text/plain"), true),
            Fixture::Text("text/plain", "the admin file"),
        ),
        (
            Resource::new("test://rich", "rich")
                .title("Rich Resource")
                .description("Has every optional field")
                .mime_type("text/markdown")
                .size(4)
                .annotations(object(json!({
                    "audience": ["user"],
                    "priority": 0.5,
                    "lastModified": "2025-01-01T00:00:00Z"
                })))
                .icons(json!([{"src": "https://example.com/r.png", "mimeType": "image/png"}]))
                .meta(object(json!({"example.com/origin": "replay"}))),
            Fixture::Text("text/markdown", "rich"),
        ),
        (
            plain("test://static-binary", "static-binary", "image/png").description("A binary resource"),
            Fixture::Blob("image/png", "iVBORw0KGgo="),
        ),
        (
            plain("test://static-text", "static-text", "text/plain").description("A text resource"),
            Fixture::Text("text/plain", STATIC_TEXT),
        ),
        (
            plain("test://watched-resource", "watched-resource", "text/plain"),
            Fixture::Text("text/plain", "watched"),
        ),
    ]
}

/// The test templates, in `uriTemplate` order, with their read and completion behaviours.
pub fn fixture_templates() -> Vec<(ResourceTemplate, Fixture, Option<Fixture>)> {
    vec![
        (
            ResourceTemplate::new("test://files/{+path}", "files").description("Any file path"),
            Fixture::Variables,
            None,
        ),
        (
            ResourceTemplate::new("test://private/{id}", "private").gate(Gate::role("admin")),
            Fixture::Variables,
            Some(Fixture::Complete(&["p1", "p2"])),
        ),
        (
            ResourceTemplate::new("test://template/{id}/data", "template-data")
                .title("Template Data")
                .description("Data by id")
                .mime_type("application/json")
                .icons(json!([{"src": "https://example.com/t.png"}]))
                .meta(object(json!({"example.com/origin": "replay"}))),
            Fixture::JsonVariables,
            Some(Fixture::Complete(&["1", "10", "2", "42"])),
        ),
    ]
}

/// The test prompts, in name order, with their get and completion behaviours.
pub fn fixture_prompts() -> Vec<(Prompt, Fixture, Option<Fixture>)> {
    let mut arg1 = PromptArgument::required("arg1", "First argument");
    arg1.title = Some("First Argument".into());
    vec![
        (
            Prompt::new("test_admin_prompt").description("Only for admins").gate(Gate::role("admin")),
            Fixture::PromptText("admin only"),
            None,
        ),
        (
            Prompt::new("test_prompt_with_arguments")
                .title("Prompt With Arguments")
                .description("A prompt with arguments")
                .argument(arg1)
                .argument(PromptArgument::optional("arg2", "Second argument"))
                .icons(json!([{"src": "https://example.com/p.png"}]))
                .meta(object(json!({"example.com/origin": "replay"}))),
            Fixture::PromptArguments,
            Some(Fixture::Complete(&["alpha", "alpine", "beta"])),
        ),
        (
            Prompt::new("test_simple_prompt").description("A simple prompt"),
            Fixture::PromptText("This is a simple prompt."),
            None,
        ),
    ]
}

/// The automatic answer of a read fixture for `uri` (with the template's variables).
pub fn auto_read(
    fixture: Fixture,
    uri: &str,
    variables: &[TemplateVar],
) -> Option<Result<Vec<ResourceContents>, HandlerError>> {
    let listed =
        || variables.iter().map(|v| format!("{}={}", v.name, v.value)).collect::<Vec<_>>().join(", ");
    Some(Ok(match fixture {
        Fixture::Text(mime, text) => vec![ResourceContents::text(uri, mime, text)],
        Fixture::Blob(mime, blob) => vec![ResourceContents::blob(uri, mime, blob)],
        Fixture::Empty => Vec::new(),
        Fixture::App(html) => vec![ResourceContents::inheriting(uri, html)],
        Fixture::Variables => vec![ResourceContents::text(uri, "text/plain", listed())],
        Fixture::JsonVariables => {
            // A raw form that differs is shown beside the decoded value, as `<name>.raw`.
            let mut vars = Map::new();
            for v in variables {
                vars.insert(v.name.clone(), Value::String(v.value.clone()));
                if v.raw != v.value {
                    vars.insert(format!("{}.raw", v.name), Value::String(v.raw.clone()));
                }
            }
            vec![ResourceContents::text(uri, "application/json", Value::Object(vars).to_string())]
        }
        _ => return None,
    }))
}

/// The automatic answer of a prompt fixture.
pub fn auto_prompt(
    fixture: Fixture,
    arguments: &BTreeMap<String, String>,
) -> Option<Result<PromptOutput, HandlerError>> {
    let text = match fixture {
        Fixture::PromptText(t) => t.to_owned(),
        Fixture::PromptArguments => {
            arguments.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
        }
        _ => return None,
    };
    Some(Ok(PromptOutput::messages(vec![PromptMessage::user(Content::text(text))])))
}

/// The automatic answer of a completion fixture for the typed `value`.
pub fn auto_complete(fixture: Fixture, value: &str) -> Option<Result<Completion, HandlerError>> {
    let Fixture::Complete(candidates) = fixture else { return None };
    let values: Vec<String> =
        candidates.iter().filter(|c| c.starts_with(value)).map(|c| (*c).to_owned()).collect();
    Some(Ok(Completion::values(values)))
}

/// The exact text of a JSON number (mcp-tests builds mcp-proto with `exact-json`, hence
/// serde_json with `arbitrary_precision`).
fn number_text(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// Adds two decimal numbers given as text (`-12.5`, `9007199254740993`), exactly. `None` for
/// anything with an exponent.
pub fn decimal_add(a: &str, b: &str) -> Option<String> {
    let a = Decimal::parse(a)?;
    let b = Decimal::parse(b)?;
    let scale = a.frac.len().max(b.frac.len());
    let da = a.digits(scale);
    let db = b.digits(scale);
    let (neg, mag) = if a.neg == b.neg {
        (a.neg, add_digits(&da, &db))
    } else if cmp_digits(&da, &db) != std::cmp::Ordering::Less {
        (a.neg, sub_digits(&da, &db))
    } else {
        (b.neg, sub_digits(&db, &da))
    };
    // Split back into integer and fraction parts, trimming zeros on both ends.
    let split = mag.len().saturating_sub(scale);
    let (int, frac) = mag.split_at(split);
    let int = int.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let mut out = String::new();
    if neg && (int != "0" || !frac.is_empty()) {
        out.push('-');
    }
    out.push_str(int);
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    Some(out)
}

struct Decimal {
    neg: bool,
    int: String,
    frac: String,
}

impl Decimal {
    fn parse(s: &str) -> Option<Self> {
        let (neg, rest) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s),
        };
        let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
        let ok = !int.is_empty()
            && int.bytes().all(|b| b.is_ascii_digit())
            && frac.bytes().all(|b| b.is_ascii_digit());
        ok.then(|| Self { neg, int: int.to_owned(), frac: frac.to_owned() })
    }

    /// All digits, the fraction padded to `scale` places.
    fn digits(&self, scale: usize) -> String {
        let mut s = self.int.clone();
        s.push_str(&self.frac);
        s.extend(std::iter::repeat_n('0', scale - self.frac.len()));
        s
    }
}

fn pad(a: &str, b: &str) -> (Vec<u8>, Vec<u8>) {
    let n = a.len().max(b.len());
    let p = |s: &str| {
        let mut v = vec![0u8; n - s.len()];
        v.extend(s.bytes().map(|c| c - b'0'));
        v
    };
    (p(a), p(b))
}

fn cmp_digits(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = pad(a, b);
    a.cmp(&b)
}

fn add_digits(a: &str, b: &str) -> String {
    let (a, b) = pad(a, b);
    let mut out = Vec::with_capacity(a.len() + 1);
    let mut carry = 0;
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        let s = x + y + carry;
        out.push(b'0' + s % 10);
        carry = s / 10;
    }
    if carry > 0 {
        out.push(b'0' + carry);
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// `a - b` for `a >= b`.
fn sub_digits(a: &str, b: &str) -> String {
    let (a, b) = pad(a, b);
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i8;
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        let mut d = *x as i8 - *y as i8 - borrow;
        borrow = 0;
        if d < 0 {
            d += 10;
            borrow = 1;
        }
        out.push(b'0' + d as u8);
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::decimal_add;

    #[test]
    fn exact_sums() {
        assert_eq!(decimal_add("9007199254740993", "1").as_deref(), Some("9007199254740994"));
        assert_eq!(decimal_add("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(decimal_add("-5", "3").as_deref(), Some("-2"));
        assert_eq!(decimal_add("5", "-5").as_deref(), Some("0"));
        assert_eq!(decimal_add("-1.25", "-0.75").as_deref(), Some("-2"));
        assert_eq!(decimal_add("99999999999999999999", "1").as_deref(), Some("100000000000000000000"));
        assert_eq!(decimal_add("1e3", "1"), None);
    }
}

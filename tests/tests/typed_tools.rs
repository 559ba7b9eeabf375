//! Typed tools on a declaration of one's own (`typed_tool_with` and its blocking and run-time
//! forms) over real sockets, on both runtimes: the declaration's annotations, app link and task
//! support survive, a placeholder input schema becomes the argument type's, a declared one is
//! kept as written, and arguments it admits that the type refuses fail the call as a tool.

use mcp_proto::apps::Visibility;
use mcp_proto::http::HttpConfig;
use mcp_proto::{App, TaskSupport, Tool};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{each, ensure, modern, serve, Client};
use serde_json::{json, Value};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Greet {
    /// Whom to greet.
    name: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    word: String,
}

fn placeholder(name: &str, description: &str) -> Tool {
    Tool::new(name, description, json!({"type": "object"}))
}

/// Admits a `word` of any type (`maxLength` binds strings only), which `Shout` does not.
fn loose_schema() -> Value {
    json!({"type": "object", "properties": {"word": {"maxLength": 5}}, "required": ["word"]})
}

fn annotations() -> serde_json::Map<String, Value> {
    json!({"readOnlyHint": true}).as_object().cloned().unwrap_or_default()
}

/// One tool of each form: `greet` and `shout` from the builder (async, blocking), `later` and
/// `later_blocking` registered on the built server.
fn server() -> Result<Server, String> {
    let view = App::new("ui://greet/view", "Greeting", "<!doctype html><html><body>hi</body></html>");
    let server = Server::builder("typed-tools", "1")
        .app(view)
        .typed_tool_with(
            placeholder("greet", "Greets")
                .annotations(annotations())
                .ui("ui://greet/view", Visibility::ModelAndApp),
            |g: Greet, _: ToolCall| async move { format!("hello {}", g.name) },
        )
        .blocking_typed_tool_with(Tool::new("shout", "Shouts", loose_schema()), |s: Shout, _: ToolCall| {
            s.word.to_uppercase()
        })
        .build()
        .map_err(|e| e.to_string())?;
    server
        .add_typed_tool_with(
            placeholder("later", "Greets, registered at run time").task_support(TaskSupport::Optional),
            |g: Greet, _: ToolCall| async move { format!("later, {}", g.name) },
        )
        .map_err(|e| e.to_string())?;
    server
        .add_blocking_typed_tool_with(
            placeholder("later_blocking", "Shouts, registered at run time").annotations(annotations()),
            |s: Shout, _: ToolCall| format!("{}!", s.word),
        )
        .map_err(|e| e.to_string())?;
    Ok(server)
}

fn call(client: &mut Client, id: u64, name: &str, arguments: Value) -> Result<Value, String> {
    client.request(&modern(id, "tools/call", json!({"name": name, "arguments": arguments})))?.json()
}

fn text_of(reply: &Value) -> Option<&str> {
    reply["result"]["content"][0]["text"].as_str()
}

#[test]
fn typed_tools_keep_their_declaration_and_take_the_argument_schema() {
    each(|shim| {
        let addr = serve(shim, server()?, HttpConfig::default());
        let mut client = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
        let list = client.request(&modern(1, "tools/list", json!({})))?.json()?;
        let tools = list["result"]["tools"].as_array().ok_or_else(|| format!("tools/list: {list}"))?;
        let tool = |name: &str| {
            tools.iter().find(|t| t["name"] == name).cloned().ok_or_else(|| format!("no {name} in {list}"))
        };

        // Derived from the type, over the placeholder, on every form that was given one.
        for name in ["greet", "later"] {
            let t = tool(name)?;
            let schema = &t["inputSchema"];
            ensure(
                schema["type"] == "object"
                    && schema["properties"]["name"]
                        == json!({"type": "string", "description": "Whom to greet."})
                    && schema["required"] == json!(["name"]),
                || format!("{name}'s inputSchema: {t}"),
            )?;
        }
        let shouted = tool("later_blocking")?;
        ensure(shouted["inputSchema"]["required"] == json!(["word"]), || {
            format!("later_blocking: {shouted}")
        })?;
        // What else was declared is still there.
        let greet = tool("greet")?;
        ensure(
            greet["annotations"]["readOnlyHint"] == true
                && greet["_meta"]["ui"]["resourceUri"] == "ui://greet/view",
            || format!("greet lost its declaration: {greet}"),
        )?;
        ensure(shouted["annotations"]["readOnlyHint"] == true, || format!("later_blocking: {shouted}"))?;
        // A declared schema is kept exactly.
        let shout = tool("shout")?;
        ensure(shout["inputSchema"] == loose_schema(), || {
            format!("shout's own schema was replaced: {shout}")
        })?;

        for (id, name, arguments, expected) in [
            (2, "greet", json!({"name": "Ada"}), "hello Ada"),
            (3, "shout", json!({"word": "hey"}), "HEY"),
            (4, "later", json!({"name": "Bo"}), "later, Bo"),
            (5, "later_blocking", json!({"word": "go"}), "go!"),
        ] {
            let reply = call(&mut client, id, name, arguments)?;
            ensure(text_of(&reply) == Some(expected) && reply["result"].get("isError").is_none(), || {
                format!("{name}: {reply}")
            })?;
        }

        // The declared schema admits a number; `Shout` does not: a tool failure, not a crash.
        let reply = call(&mut client, 6, "shout", json!({"word": 5}))?;
        ensure(
            reply["result"]["isError"] == true
                && text_of(&reply).is_some_and(|t| t.starts_with("invalid arguments:")),
            || format!("shout with a number: {reply}"),
        )?;
        // The schema itself still binds: too long a word never reaches the handler.
        let reply = call(&mut client, 7, "shout", json!({"word": "toolong"}))?;
        ensure(reply.get("error").is_some() || reply["result"]["isError"] == true, || {
            format!("shout past maxLength: {reply}")
        })
    });
}

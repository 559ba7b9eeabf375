//! Tools made by `#[tool]` and `#[tools]` (the `macros` feature), served over real sockets on
//! both runtimes: what `tools/list` shows of them (the name from the fn, the description from
//! its doc comment, the input schema from its parameters and their doc comments, the output
//! schema from `Json<T>`, the annotations and title from the attribute) and what their calls
//! answer (async, blocking, a method sharing its value between calls, a context parameter, a
//! gate, a required task). The macros are used through mcp-tokio, mcp-smol and mcp-server
//! alike, and the server built once serves on either runtime: the expansion names nothing of
//! the crate it came through but paths that crate offers.

use std::sync::atomic::{AtomicU64, Ordering};

use mcp_proto::http::HttpConfig;
use mcp_proto::ToolFailure;
use mcp_server::{Json, RequestContext, Server, ToolCall};
use mcp_tests::http::{each, ensure, modern, serve, Client};
use mcp_tokio::{App, Gate};
use serde_json::{json, Value};

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Sum {
    /// The two terms added.
    sum: i64,
}

/// Adds two integers.
///
/// Saturates instead of overflowing.
#[mcp_tokio::tool(read_only, idempotent, open_world = false, title = "Addition")]
async fn add(
    /// The first term.
    a: i64,
    /// The second term.
    b: i64,
) -> Json<Sum> {
    Json(Sum { sum: a.saturating_add(b) })
}

/// Not read: `description` overrides it.
#[mcp_smol::tool(name = "upper", description = "Upper-cases a text", blocking)]
fn shout(
    /// What to upper-case.
    text: String,
    /// How many times to repeat it (once when left out).
    #[serde(default)]
    times: Option<usize>,
    call: ToolCall,
) -> String {
    // Blocking tools run off the runtime's task threads: the call's own name comes along.
    format!("{} ({})", text.to_uppercase().repeat(times.unwrap_or(1)), call.name)
}

/// Divides `a` by `b`, failing as a tool on zero.
#[mcp_server::tool]
async fn divide(a: i64, b: i64, ctx: &RequestContext) -> Result<String, ToolFailure> {
    let _ = ctx.version;
    a.checked_div(b).map(|q| q.to_string()).ok_or_else(|| ToolFailure::new("division_by_zero", "b is 0"))
}

/// Only for administrators.
#[mcp_tokio::tool(gate = Gate::role("admin"), crate = mcp_smol)]
async fn secret() -> &'static str {
    "hidden"
}

/// Runs only as a task.
#[mcp_tokio::tool(task_support = Required)]
async fn long_job() -> &'static str {
    "done"
}

/// Shows the board.
#[mcp_tokio::tool(app = "ui://macros/board", visibility = Model)]
async fn board() -> String {
    "the board".to_owned()
}

struct Counter {
    count: AtomicU64,
}

#[mcp_tokio::tools]
impl Counter {
    /// Adds `by` to the counter and returns the new count.
    #[tool(destructive = false)]
    async fn bump(
        &self,
        /// How much to add.
        by: u64,
    ) -> String {
        (self.count.fetch_add(by, Ordering::Relaxed) + by).to_string()
    }

    /// Reads the counter, on the blocking pool.
    #[tool(blocking, read_only)]
    fn peek(&self) -> String {
        self.count.load(Ordering::Relaxed).to_string()
    }

    /// Says which counter this is, without touching it.
    #[tool]
    async fn kind() -> String {
        "counter".to_owned()
    }

    /// Not a tool: left as it is.
    fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
    }
}

fn server() -> Result<Server, String> {
    let counter = Counter { count: AtomicU64::new(0) };
    counter.reset();
    Server::builder("macros", "1")
        .app(App::new("ui://macros/board", "board", "<!doctype html><p>board</p>"))
        .register(board_tool)
        .register(add_tool)
        .register(shout_tool)
        .register(divide_tool)
        .register(secret_tool)
        .register(long_job_tool)
        .register(counter.tools())
        .build()
        .map_err(|e| e.to_string())
}

fn call(client: &mut Client, id: u64, name: &str, arguments: Value) -> Result<Value, String> {
    client.request(&modern(id, "tools/call", json!({"name": name, "arguments": arguments})))?.json()
}

/// The text of a call's first content block.
fn text(reply: &Value) -> Result<&str, String> {
    reply["result"]["content"][0]["text"].as_str().ok_or_else(|| format!("no text: {reply}"))
}

#[test]
fn macro_tools_are_listed_as_their_functions_declare_them() {
    each(|shim| {
        let addr = serve(shim, server()?, HttpConfig::default());
        let mut client = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
        let list = client.request(&modern(1, "tools/list", json!({})))?.json()?;
        let tools = list["result"]["tools"].as_array().ok_or_else(|| format!("tools/list: {list}"))?;
        let tool = |name: &str| tools.iter().find(|t| t["name"] == name).ok_or(format!("no {name}: {list}"));

        let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        names.sort_unstable();
        ensure(names == ["add", "board", "bump", "divide", "kind", "long_job", "peek", "upper"], || {
            format!("the gated `secret` is hidden from an anonymous caller, the rest listed: {names:?}")
        })?;

        let add = tool("add")?;
        ensure(add["description"] == "Adds two integers.\n\nSaturates instead of overflowing.", || {
            format!("the doc comment, paragraphs kept: {add}")
        })?;
        ensure(add["title"] == "Addition", || format!("title: {add}"))?;
        ensure(
            add["annotations"]
                == json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}),
            || format!("annotations: {add}"),
        )?;
        let input = &add["inputSchema"];
        ensure(
            input["type"] == "object"
                && input["properties"]["a"]
                    == json!({"type": "integer", "format": "int64", "description": "The first term."})
                && input["properties"]["b"]["description"] == "The second term."
                && input["required"] == json!(["a", "b"]),
            || format!("add's inputSchema, from its parameters: {input}"),
        )?;
        let output = &add["outputSchema"];
        ensure(
            output["type"] == "object"
                && output["properties"]["sum"]["description"] == "The two terms added."
                && output["required"] == json!(["sum"]),
            || format!("add's outputSchema, from Json<Sum>: {output}"),
        )?;

        let upper = tool("upper")?;
        let input = &upper["inputSchema"];
        ensure(
            upper["description"] == "Upper-cases a text"
                && input["required"] == json!(["text"])
                && input["properties"]["times"]["description"]
                    == "How many times to repeat it (once when left out)."
                && input["properties"].get("call").is_none()
                && upper.get("outputSchema").is_none()
                && upper.get("annotations").is_none(),
            || {
                format!("upper: the name and description given, the context no property, no output schema: {upper}")
            },
        )?;

        let board = tool("board")?;
        ensure(
            board["_meta"]["ui"] == json!({"resourceUri": "ui://macros/board", "visibility": ["model"]}),
            || format!("board's app link: {board}"),
        )?;

        let divide = tool("divide")?;
        ensure(divide["inputSchema"]["properties"].as_object().map(|p| p.len()) == Some(2), || {
            format!("divide's context parameter is no property: {divide}")
        })?;

        let (bump, peek, kind) = (tool("bump")?, tool("peek")?, tool("kind")?);
        ensure(
            bump["description"] == "Adds `by` to the counter and returns the new count."
                && bump["inputSchema"]["properties"]["by"]["description"] == "How much to add."
                && bump["annotations"] == json!({"destructiveHint": false})
                && peek["annotations"] == json!({"readOnlyHint": true})
                && kind["inputSchema"]["properties"].as_object().is_none_or(|p| p.is_empty()),
            || format!("the methods: {bump} {peek} {kind}"),
        )
    })
}

#[test]
fn macro_tools_answer_calls_through_the_functions() {
    each(|shim| {
        let addr = serve(shim, server()?, HttpConfig::default());
        let mut client = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;

        let reply = call(&mut client, 1, "add", json!({"a": 2, "b": 3}))?;
        ensure(reply["result"]["structuredContent"] == json!({"sum": 5}), || format!("add: {reply}"))?;

        let reply = call(&mut client, 2, "upper", json!({"text": "hi", "times": 2}))?;
        ensure(text(&reply)? == "HIHI (upper)", || format!("upper, blocking, with its call: {reply}"))?;
        let reply = call(&mut client, 3, "upper", json!({"text": "hi"}))?;
        ensure(text(&reply)? == "HI (upper)", || format!("upper, `times` left out: {reply}"))?;

        let reply = call(&mut client, 4, "divide", json!({"a": 7, "b": 2}))?;
        ensure(text(&reply)? == "3" && reply["result"].get("isError").is_none(), || {
            format!("divide: {reply}")
        })?;
        let reply = call(&mut client, 5, "divide", json!({"a": 7, "b": 0}))?;
        ensure(reply["result"]["isError"] == true && text(&reply)? == "b is 0", || {
            format!("divide by zero, a tool failure: {reply}")
        })?;

        // One value serves every call of its methods.
        let first = call(&mut client, 6, "bump", json!({"by": 2}))?;
        let second = call(&mut client, 7, "bump", json!({"by": 3}))?;
        let peek = call(&mut client, 8, "peek", json!({}))?;
        let kind = call(&mut client, 9, "kind", json!({}))?;
        ensure(
            (text(&first)?, text(&second)?, text(&peek)?, text(&kind)?) == ("2", "5", "5", "counter"),
            || format!("bump, bump, peek, kind: {first} {second} {peek} {kind}"),
        )?;

        let reply = call(&mut client, 13, "board", json!({}))?;
        ensure(text(&reply)? == "the board", || format!("the app-linked tool: {reply}"))?;

        let reply = call(&mut client, 10, "secret", json!({}))?;
        ensure(reply.get("result").is_none() && reply["error"]["code"].is_i64(), || {
            format!("the gated tool is unknown to an anonymous caller: {reply}")
        })?;
        let reply = call(&mut client, 11, "long_job", json!({}))?;
        ensure(
            reply["error"]["code"] == -32021
                && reply["error"]["data"]["requiredCapabilities"]
                    .to_string()
                    .contains("io.modelcontextprotocol/tasks"),
            || format!("a task-only tool refuses a request without the tasks extension: {reply}"),
        )?;

        let reply = call(&mut client, 12, "add", json!({"a": "two", "b": 3}))?;
        ensure(reply.get("result").is_none_or(|r| r["isError"] == true), || {
            format!("arguments that break the generated schema are refused: {reply}")
        })
    })
}

//! Private diagnostics a real server logs over HTTP on both runtimes, captured by a recording
//! `tracing` subscriber: one progress diagnostic per invocation (seed 000, row PC6), and the
//! stack of a panicking handler and the log of a panicking gate (seed 004, row O3).
//!
//! The servers' tasks run on runtime threads of their own, so the recorder is the process's
//! global subscriber, which is why these tests have a binary of their own; each test's tools
//! have names of their own, so tests running in parallel never read each other's events.
//! `RUST_BACKTRACE` is set before anything in the process takes a stack, and a counting panic
//! hook is installed before any server is built, as an application's own hook would be.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use mcp_proto::http::HttpConfig;
use mcp_proto::{Gate, Tool, ToolOutput};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{each, ensure, event_data, modern, serve, Client, Outcome, Req, Shim};
use serde_json::{json, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One event: its message and fields, and the fields of the spans it was logged in (the
/// `mcp::request` span's `name`, say), all as text.
#[derive(Debug, Clone, Default)]
struct Event {
    fields: HashMap<String, String>,
    spans: HashMap<String, String>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// A span's fields, kept in its extensions.
struct SpanFields(HashMap<String, String>);

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Event>>>);

impl<S> Layer<S> for Recorder
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(f) = span.extensions_mut().get_mut::<SpanFields>() {
                values.record(&mut Fields(&mut f.0));
            }
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut seen = Event::default();
        event.record(&mut Fields(&mut seen.fields));
        for span in ctx.event_scope(event).into_iter().flatten() {
            if let Some(f) = span.extensions().get::<SpanFields>() {
                for (k, v) in &f.0 {
                    seen.spans.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        self.0.lock().unwrap().push(seen);
    }
}

/// The process's recorder, and the panic messages the application's own hook saw.
struct Process {
    events: Recorder,
    hooked: Arc<Mutex<Vec<String>>>,
}

fn process() -> &'static Process {
    static PROCESS: OnceLock<Process> = OnceLock::new();
    PROCESS.get_or_init(|| {
        // Before any stack is taken: std reads the variable once per process.
        std::env::set_var("RUST_BACKTRACE", "1");
        let hooked = Arc::new(Mutex::new(Vec::new()));
        let seen = hooked.clone();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            seen.lock().unwrap().push(text);
            previous(info);
        }));
        let events = Recorder::default();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(events.clone()))
            .expect("the only subscriber of this process");
        Process { events, hooked }
    })
}

/// The events whose message is `message` and for which `pick` holds.
fn events(message: &str, pick: impl Fn(&Event) -> bool) -> Vec<Event> {
    let all = process().events.0.lock().unwrap();
    all.iter().filter(|e| e.fields.get("message").is_some_and(|m| m == message) && pick(e)).cloned().collect()
}

/// A 2026-07-28 `tools/call` of `name`, with a progress token when `token` is given.
fn call(id: u64, name: &str, token: Option<&str>) -> Req {
    match token {
        None => modern(id, "tools/call", json!({"name": name, "arguments": {}})),
        Some(token) => {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": name, "arguments": {},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "progressToken": token,
                },
            }});
            Req::post(body.to_string())
                .header("MCP-Protocol-Version", "2026-07-28")
                .header("Mcp-Method", "tools/call")
                .header("Mcp-Name", name)
        }
    }
}

/// The JSON-RPC answer to `req`, whether it came as JSON or as the last event of an SSE
/// stream (a call that sent progress), and the progress notifications before it.
fn answer(addr: std::net::SocketAddr, req: &Req) -> Result<(Value, Vec<Value>), String> {
    let resp = Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(req)?;
    if let Ok(v) = resp.json() {
        return Ok((v, Vec::new()));
    }
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    let mut messages: Vec<Value> = text.split("\n\n").filter_map(event_data).collect();
    let last = messages.pop().ok_or_else(|| format!("no answer in {text}"))?;
    Ok((last, messages))
}

/// The text of a tool result.
fn text(v: &Value) -> String {
    v["result"]["content"][0]["text"].as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// Reports progress `reports` times (1, 2, 3, ...) with a message that must never reach the
/// log, and answers what became of each report.
fn reporter(reports: u32) -> impl Fn(ToolCall) -> std::future::Ready<ToolOutput> + Send + Sync + 'static {
    move |call: ToolCall| {
        let outcomes: Vec<String> = (1..=reports)
            .map(|step| format!("{:?}", call.ctx.progress(f64::from(step), None, Some("secret-message"))))
            .collect();
        std::future::ready(ToolOutput::text(outcomes.join(",")))
    }
}

fn progress_diagnostics(shim: Shim) -> Outcome {
    process();
    let schema = json!({"type": "object"});
    let quiet = format!("quiet-{shim:?}");
    let paced = format!("paced-{shim:?}");
    let once = format!("once-{shim:?}");
    let nan = format!("nan-{shim:?}");
    let mut builder = Server::builder("diagnostics", "1")
        .tool(Tool::new(&quiet, "Reports three times", schema.clone()), reporter(3))
        .tool(Tool::new(&paced, "Reports three times", schema.clone()), reporter(3))
        .tool(Tool::new(&once, "Reports once", schema.clone()), reporter(1))
        .tool(Tool::new(&nan, "Reports no number", schema), |call: ToolCall| {
            let outcome =
                (call.ctx.progress(f64::NAN, None, None), call.ctx.progress(f64::INFINITY, None, None));
            std::future::ready(ToolOutput::text(format!("{outcome:?}")))
        });
    // So long that the second report of a call is always too soon, however slow the machine.
    builder.config_mut().limits.progress_interval(std::time::Duration::from_secs(3600));
    let addr = serve(shim, builder.build().map_err(|e| e.to_string())?, HttpConfig::default());
    let diagnostics = |tool: &str| {
        let tool = tool.to_owned();
        events("progress not delivered", move |e| e.spans.get("gen_ai.tool.name") == Some(&tool))
    };

    // No token: all three undelivered, one diagnostic.
    let (v, _) = answer(addr, &call(1, &quiet, None))?;
    ensure(text(&v) == "NoToken,NoToken,NoToken", || v.to_string())?;
    let told = diagnostics(&quiet);
    ensure(told.len() == 1 && told[0].fields["code"] == "no_token", || format!("{told:#?}"))?;

    // A token: the first sent, the next two too soon, one diagnostic, without the token.
    let token = format!("token-{shim:?}-secret");
    let (v, progress) = answer(addr, &call(2, &paced, Some(&token)))?;
    ensure(text(&v) == "Sent,TooSoon,TooSoon" && progress.len() == 1, || format!("{v} after {progress:?}"))?;
    let told = diagnostics(&paced);
    ensure(told.len() == 1 && told[0].fields["code"] == "too_soon", || format!("{told:#?}"))?;
    let logged = format!("{:?}", told[0].fields);
    ensure(!logged.contains("secret"), || format!("the token or the message was logged: {logged}"))?;

    // A second call of the same tool is an invocation of its own.
    answer(addr, &call(3, &quiet, None))?;
    ensure(diagnostics(&quiet).len() == 2, || format!("{:#?}", diagnostics(&quiet)))?;

    // Not a number, though the token is there: said so, once.
    let (v, _) = answer(addr, &call(4, &nan, Some(&token)))?;
    ensure(text(&v) == "(NoToken, NoToken)", || v.to_string())?;
    let told = diagnostics(&nan);
    ensure(told.len() == 1 && told[0].fields["code"] == "not_finite", || format!("{told:#?}"))?;

    // Delivered: nothing logged.
    let (v, progress) = answer(addr, &call(5, &once, Some(&token)))?;
    ensure(text(&v) == "Sent" && progress.len() == 1, || format!("{v} after {progress:?}"))?;
    ensure(diagnostics(&once).is_empty(), || format!("{:#?}", diagnostics(&once)))
}

#[test]
fn an_invocation_logs_one_progress_diagnostic_without_its_token_or_message() {
    each(progress_diagnostics);
}

/// Named, and kept out of line, so that the stack is seen to name it.
#[inline(never)]
fn explode_in_handler(shim: Shim) -> ToolOutput {
    panic!("handler bug on {shim:?}")
}

fn handler_panic_stack(shim: Shim) -> Outcome {
    process();
    let tool = format!("explodes-{shim:?}");
    // A blocking tool panics on a thread of the blocking pool, not on the handler's task.
    let blocking = format!("explodes-blocking-{shim:?}");
    let schema = json!({"type": "object"});
    let server = Server::builder("diagnostics", "1")
        .tool(Tool::new(&tool, "Panics", schema.clone()), move |_: ToolCall| async move {
            explode_in_handler(shim)
        })
        .blocking_tool(Tool::new(&blocking, "Panics while blocking", schema), move |_: ToolCall| {
            explode_in_handler(shim)
        })
        .build()
        .map_err(|e| e.to_string())?;
    let addr = serve(shim, server, HttpConfig::default());
    for (id, name) in [(1, &tool), (2, &blocking)] {
        let (v, _) = answer(addr, &call(id, name, None))?;
        ensure(v["error"]["code"] == -32603, || v.to_string())?;
        let handler = format!("tool {name}");
        let logged = events("handler panicked", |e| e.fields.get("handler") == Some(&handler));
        ensure(logged.len() == 1, || format!("{logged:#?}"))?;
        let backtrace = logged[0].fields.get("backtrace").cloned().unwrap_or_default();
        ensure(backtrace.contains("explode_in_handler"), || {
            format!("no stack of the panic: {:#?}", logged[0])
        })?;
        ensure(logged[0].fields["panic"] == format!("handler bug on {shim:?}"), || {
            format!("{:#?}", logged[0])
        })?;
    }
    let hooked = process().hooked.lock().unwrap().clone();
    let ran = hooked.iter().filter(|m| **m == format!("handler bug on {shim:?}")).count();
    ensure(ran == 2, || format!("the application's own hook did not run for each panic: {hooked:?}"))
}

#[test]
fn a_handler_panic_is_logged_with_its_stack_and_the_previous_hook_still_runs() {
    each(handler_panic_stack);
}

fn gate_panic(shim: Shim) -> Outcome {
    process();
    let tool = format!("gated-{shim:?}");
    let server = Server::builder("diagnostics", "1")
        .tool(
            Tool::new(&tool, "Behind a broken gate", json!({"type": "object"}))
                .gate(Gate::new(|_| panic!("gate bug\nforged log line"))),
            |_: ToolCall| async { ToolOutput::text("reached") },
        )
        // Beside it, so that the server has tools to list at all.
        .tool(Tool::new("open", "Ungated", json!({"type": "object"})), |_: ToolCall| async {
            ToolOutput::text("open")
        })
        .build()
        .map_err(|e| e.to_string())?;
    let addr = serve(shim, server, HttpConfig::default());

    let (listed, _) = answer(addr, &modern(1, "tools/list", json!({})))?;
    let tools = listed["result"]["tools"].as_array().ok_or_else(|| listed.to_string())?;
    ensure(tools.len() == 1 && tools[0]["name"] == "open", || format!("the gated tool is listed: {listed}"))?;
    let (refused, _) = answer(addr, &call(2, &tool, None))?;
    let (unknown, _) = answer(addr, &call(3, &format!("unknown-{shim:?}"), None))?;
    ensure(refused["error"]["code"] == unknown["error"]["code"] && refused["error"].is_object(), || {
        format!("refused {refused}, unknown {unknown}")
    })?;

    let item = format!("tool {tool}");
    let logged = events("gate panicked; the caller is refused", |e| e.fields.get("gate") == Some(&item));
    ensure(logged.len() >= 2, || format!("one event per panic, the listing's and the call's: {logged:#?}"))?;
    for e in &logged {
        ensure(e.fields["panic"] == "gate bug\\nforged log line", || format!("not scrubbed: {e:#?}"))?;
        ensure(e.fields.contains_key("caller") && e.fields.contains_key("backtrace"), || format!("{e:#?}"))?;
    }
    Ok(())
}

#[test]
fn a_panicking_gate_is_logged_and_still_refuses() {
    each(gate_panic);
}

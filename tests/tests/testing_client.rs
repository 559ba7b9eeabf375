//! The in-process test client (`mcp_server::testing`, as `mcp_tokio::testing` and
//! `mcp_smol::testing`): every scenario on both runtimes, each a server built here and a client
//! connected to it in memory, with no socket and no clock.

use std::future::Future;

use mcp_proto::interaction::InputRequest;
use mcp_proto::{AskError, Caller, Gate, HandlerError, Prompt, PromptArgument, PromptMessage, PromptOutput};
use mcp_proto::{Content, LogLevel, ProtocolVersion, Resource, ResourceContents, Tool, ToolOutput};
use mcp_server::testing::{Client, ClientBuilder, ClientError, ErrorResponse};
use mcp_server::{ReadResource, Server, ServerBuilder, StdioEnd, ToolCall};
use mcp_tests::http::{tokio_runtime, Shim, SHIMS};
use serde_json::{json, Value};

type Outcome = Result<(), Box<dyn std::error::Error>>;

/// Runs `scenario` on each runtime, tokio's under `block_on` and smol's under `smol::block_on`.
fn both<F, Fut>(scenario: F)
where
    F: Fn(Shim) -> Fut,
    Fut: Future<Output = Outcome>,
{
    for shim in SHIMS {
        let outcome = match shim {
            Shim::Tokio => tokio_runtime().block_on(scenario(shim)),
            Shim::Smol => smol::block_on(scenario(shim)),
        };
        if let Err(e) = outcome {
            panic!("{shim:?}: {e}");
        }
    }
}

/// A client of `server` on `shim`, through that shim's `testing` module.
async fn connect(shim: Shim, server: &Server, options: ClientBuilder) -> Result<Client, ClientError> {
    match shim {
        Shim::Tokio => mcp_tokio::testing::connect_with(server, options).await,
        Shim::Smol => mcp_smol::testing::connect_with(server, options).await,
    }
}

fn object() -> Value {
    json!({"type": "object"})
}

/// `echo`, an `admin_echo` only admins see, a `fail` tool whose result is an error, a resource,
/// a prompt, and `ask`, which asks for a name.
fn builder() -> ServerBuilder {
    let text_arg =
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    Server::builder("testing-client", "1.0.0")
        .logging()
        .tool(Tool::new("echo", "Echoes its text", text_arg.clone()), |call: ToolCall| async move {
            ToolOutput::text(call.arguments["text"].as_str().unwrap_or_default())
        })
        .tool(
            Tool::new("admin_echo", "Echoes, for admins", text_arg).gate(Gate::role("admin")),
            |call: ToolCall| async move {
                ToolOutput::text(format!("admin: {}", call.arguments["text"].as_str().unwrap_or_default()))
            },
        )
        .tool(Tool::new("fail", "Always fails", object()), |_| async { ToolOutput::error("it failed") })
        .tool(
            Tool::new("slow", "Reports progress and logs, then answers", object()),
            |call: ToolCall| async move {
                call.ctx.progress(1.0, Some(2.0), Some("half way"));
                call.ctx.log(LogLevel::Info, Some("slow"), json!("working"));
                ToolOutput::text("done")
            },
        )
        .tool(Tool::new("ask", "Asks the user's name", object()), ask)
        .tool(Tool::new("consult", "Asks for the roots, then for a sample", object()), consult)
        .resource_subscriptions()
        .resource(Resource::new("test://greeting", "greeting"), |r: ReadResource| async move {
            Ok(vec![ResourceContents::text(&r.uri, "text/plain", "Hello, world")])
        })
        .prompt(
            Prompt::new("greet").argument(PromptArgument::required("name", "Who to greet")),
            |p| async move {
                let name = p.arguments.get("name").cloned().unwrap_or_default();
                Ok(PromptOutput::messages(vec![PromptMessage::user(Content::text(format!("Greet {name}")))]))
            },
        )
}

fn server() -> Server {
    builder().build().unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

async fn ask(call: ToolCall) -> Result<ToolOutput, HandlerError> {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let request = InputRequest::elicit("What is your name?", schema)
        .map_err(|e| HandlerError::private(e.to_string()))?;
    if !call.ctx.can_ask(&request) {
        return Ok(ToolOutput::text("cannot ask"));
    }
    let answer = match call.ctx.ask_one("name", request).await {
        Ok(answer) => answer,
        Err(AskError::Suspended) => return Err(HandlerError::Cancelled),
        Err(e) => return Err(e.into()),
    };
    Ok(ToolOutput::text(format!("hello {}", answer["content"]["name"].as_str().unwrap_or("nobody"))))
}

/// Asks for the client's roots and then for a sample, and reports both answers.
async fn consult(call: ToolCall) -> Result<ToolOutput, HandlerError> {
    let roots = call.ctx.ask_one("roots", InputRequest::list_roots()).await?;
    let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "6 x 7?"}}], "maxTokens": 5});
    let sample = InputRequest::sample(params).map_err(|e| HandlerError::private(e.to_string()))?;
    let answer = call.ctx.ask_one("sample", sample).await?;
    let root = roots["roots"][0]["uri"].as_str().unwrap_or("none");
    Ok(ToolOutput::text(format!("{root}: {}", answer["content"]["text"].as_str().unwrap_or("none"))))
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().filter_map(|t| t["name"].as_str()).collect()
}

/// The handshake happened at the default version, a tool answers with its text, and the
/// session ends at end of input.
#[test]
fn calls_a_tool_and_lists_tools() {
    both(|shim| async move {
        let server = server();
        let mut client = connect(shim, &server, Client::builder()).await?;
        assert_eq!(client.initialized()["protocolVersion"], "2025-11-25");
        assert_eq!(client.initialized()["serverInfo"]["name"], "testing-client");
        let reply = client.call_tool("echo", json!({"text": "hi"})).await?;
        assert_eq!(reply.text(), Some("hi"));
        assert_eq!(reply.content().len(), 1);
        assert!(!reply.is_error());
        assert_eq!(names(&client.list_tools().await?), ["ask", "consult", "echo", "fail", "slow"]);
        assert_eq!(client.close().await?, StdioEnd::EndOfInput);
        Ok(())
    });
}

/// `initialize` goes out at the version the test chose, and a stateless version is refused with
/// a reason rather than sent.
#[test]
fn speaks_the_version_chosen() {
    both(|shim| async move {
        let server = server();
        let options = Client::builder().version(ProtocolVersion::V2025_03_26);
        let client = connect(shim, &server, options).await?;
        assert_eq!(client.initialized()["protocolVersion"], "2025-03-26");
        let refused = connect(shim, &server, Client::builder().version(ProtocolVersion::V2026_07_28)).await;
        match refused {
            Err(ClientError::Unsupported(why)) => assert!(why.contains("2026-07-28"), "{why}"),
            other => panic!("2026-07-28 is not a session version: {other:?}"),
        }
        Ok(())
    });
}

/// A resource reads as its text, a prompt gets its messages.
#[test]
fn reads_a_resource_and_gets_a_prompt() {
    both(|shim| async move {
        let server = server();
        let mut client = connect(shim, &server, Client::builder()).await?;
        let listed = client.list_resources().await?;
        assert_eq!(listed.first().map(|r| &r["uri"]), Some(&json!("test://greeting")));
        let read = client.read_resource("test://greeting").await?;
        assert_eq!(read.text(), Some("Hello, world"));
        let prompt = client.get_prompt("greet", json!({"name": "Ada"})).await?;
        assert_eq!(prompt.text(), Some("Greet Ada"));
        assert_eq!(names(&client.list_prompts().await?), ["greet"]);
        Ok(())
    });
}

/// The caller the test chose is the one the gates see: an admin sees and calls `admin_echo`,
/// an anonymous caller neither sees it nor may call it.
#[test]
fn a_gate_hides_a_tool_from_one_caller() {
    both(|shim| async move {
        let server = server();
        let mut admin = Caller::identified("ada");
        admin.roles.push("admin".into());
        let mut ada = connect(shim, &server, Client::builder().caller(admin)).await?;
        assert!(names(&ada.list_tools().await?).contains(&"admin_echo"));
        assert_eq!(ada.call_tool("admin_echo", json!({"text": "x"})).await?.text(), Some("admin: x"));

        let mut anonymous = connect(shim, &server, Client::builder()).await?;
        assert!(!names(&anonymous.list_tools().await?).contains(&"admin_echo"));
        match anonymous.call_tool("admin_echo", json!({"text": "x"})).await {
            Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32602, "{e:?}"),
            other => panic!("a hidden tool is unknown to whoever cannot see it: {other:?}"),
        }
        Ok(())
    });
}

/// An unknown tool is a JSON-RPC error (-32602); a tool's own failure is `ClientError::Tool`
/// with its result; the session goes on after both.
#[test]
fn errors_are_told_apart() {
    both(|shim| async move {
        let server = server();
        let mut client = connect(shim, &server, Client::builder()).await?;
        match client.call_tool("nope", json!({})).await {
            Err(ClientError::Rpc(e)) => {
                assert_eq!(e.code, -32602, "{e:?}");
                assert!(e.message.contains("nope"), "{e:?}");
            }
            other => panic!("an unknown tool: {other:?}"),
        }
        match client.call_tool("fail", json!({})).await {
            Err(ClientError::Tool(reply)) => {
                assert!(reply.is_error());
                assert_eq!(reply.text(), Some("it failed"));
            }
            other => panic!("a failing tool: {other:?}"),
        }
        assert_eq!(client.call_tool("echo", json!({"text": "still here"})).await?.text(), Some("still here"));
        Ok(())
    });
}

/// An answerer given before the call answers the server's `elicitation/create` during it, and
/// declared the capability: the tool sees the answer. Without one the server may not ask.
#[test]
fn answers_an_elicitation() {
    both(|shim| async move {
        let server = server();
        let (asked_tx, asked) = std::sync::mpsc::channel();
        let options = Client::builder().on_elicitation(move |params| {
            let _ = asked_tx.send(params.clone());
            Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
        });
        let mut client = connect(shim, &server, options).await?;
        assert_eq!(client.call_tool("ask", json!({})).await?.text(), Some("hello Ada"));
        let params = asked.try_recv()?;
        assert_eq!(params["message"], "What is your name?");

        let mut mute = connect(shim, &server, Client::builder()).await?;
        assert_eq!(mute.call_tool("ask", json!({})).await?.text(), Some("cannot ask"));
        Ok(())
    });
}

/// `roots` and `on_sampling` answer `roots/list` and `sampling/createMessage` during one call,
/// in the order the tool asks, and the sample request carries the tool's params.
#[test]
fn answers_roots_and_sampling() {
    both(|shim| async move {
        let server = server();
        let options = Client::builder()
            .roots(vec![json!({"uri": "file:///work", "name": "work"})])
            .on_sampling(|params| {
                assert_eq!(params["messages"][0]["content"]["text"], "6 x 7?");
                Ok(json!({"role": "assistant", "content": {"type": "text", "text": "42"}, "model": "test"}))
            });
        let mut client = connect(shim, &server, options).await?;
        assert_eq!(client.call_tool("consult", json!({})).await?.text(), Some("file:///work: 42"));
        Ok(())
    });
}

/// A subscribed resource's update arrives as `notifications/resources/updated` with its URI.
#[test]
fn sees_a_resource_update() {
    both(|shim| async move {
        let server = server();
        let mut client = connect(shim, &server, Client::builder()).await?;
        client.subscribe("test://greeting").await?;
        server.notify_resource_updated("test://greeting");
        let updated = client.notification("notifications/resources/updated").await?;
        assert_eq!(updated.params["uri"], "test://greeting");
        Ok(())
    });
}

/// An answerer's refusal goes back to the server as a JSON-RPC error, which the call then fails
/// with.
#[test]
fn an_answerer_may_refuse() {
    both(|shim| async move {
        let server = server();
        let options = Client::builder().on_elicitation(|_| Err(ErrorResponse::new(-32603, "no user here")));
        let mut client = connect(shim, &server, options).await?;
        let refused = client.call_tool("ask", json!({})).await;
        assert_eq!(refused, Err(ClientError::Rpc(ErrorResponse::new(-32603, "no user here"))));
        Ok(())
    });
}

/// A tool added while the session runs is announced with `notifications/tools/list_changed`,
/// and then listed and callable.
#[test]
fn sees_list_changed_after_a_run_time_add_tool() {
    both(|shim| async move {
        let server = server();
        let mut client = connect(shim, &server, Client::builder()).await?;
        assert!(client.notifications()?.is_empty());
        server
            .add_tool(Tool::new("late", "Added later", object()), |_| async { ToolOutput::text("late") })?;
        let changed = client.notification("notifications/tools/list_changed").await?;
        assert_eq!(changed.params, Value::Null);
        assert!(names(&client.list_tools().await?).contains(&"late"));
        assert_eq!(client.call_tool("late", json!({})).await?.text(), Some("late"));
        Ok(())
    });
}

/// A call that asks for progress sees the tool's `notifications/progress` under its token, and
/// a session that set a log level sees the tool's log message; both before the answer.
#[test]
fn sees_progress_and_log_messages() {
    both(|shim| async move {
        let server = server();
        let mut client = connect(shim, &server, Client::builder()).await?;
        client.request("logging/setLevel", json!({"level": "info"})).await?;
        let reply = client.call_tool_with_progress("slow", json!({}), "tok").await?;
        assert_eq!(reply.text(), Some("done"));
        let seen = client.notifications()?;
        let progress = seen.iter().find(|n| n.method == "notifications/progress");
        let progress = progress.ok_or_else(|| format!("no progress among {seen:?}"))?;
        assert_eq!(progress.params["progressToken"], "tok");
        assert_eq!(progress.params["message"], "half way");
        let log = seen.iter().find(|n| n.method == "notifications/message");
        let log = log.ok_or_else(|| format!("no log message among {seen:?}"))?;
        assert_eq!(log.params["data"], "working");
        assert_eq!(log.params["logger"], "slow");
        // Without a token the same tool reports nothing.
        client.call_tool("slow", json!({})).await?;
        assert!(client.notifications()?.iter().all(|n| n.method != "notifications/progress"));
        Ok(())
    });
}

/// A session the server closes ends the client's waiting with `ClientError::Closed`.
#[test]
fn a_closed_session_is_told() {
    both(|shim| async move {
        let server = server();
        let mut client = connect(shim, &server, Client::builder()).await?;
        server.shutdown(std::time::Duration::ZERO).await;
        match client.next_notification().await {
            Err(ClientError::Closed) => {}
            other => panic!("after shutdown: {other:?}"),
        }
        assert_eq!(client.call_tool("echo", json!({"text": "x"})).await, Err(ClientError::Closed));
        Ok(())
    });
}

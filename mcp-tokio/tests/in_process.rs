//! The in-process API: calling a tool and listing as a given caller, through the same gates as
//! a remote client, and the unfiltered introspection listing.

use mcp_tokio::{Caller, Gate, HandlerError, Server, Tool, ToolOutput};
use serde_json::{json, Map};

fn server() -> Server {
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    Server::builder("in-process", "1.0.0")
        .tool(Tool::new("public_echo", "Echoes", schema.clone()), |call| async move {
            ToolOutput::text(call.arguments["text"].as_str().unwrap_or_default().to_owned())
        })
        .tool(Tool::new("admin_echo", "Echoes for admins", schema).gate(Gate::role("admin")), |_| async {
            ToolOutput::text("admin")
        })
        .build()
        .expect("valid server")
}

fn args(v: serde_json::Value) -> Map<String, serde_json::Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[tokio::test]
async fn calls_go_through_gates_and_validation() {
    let server = server();
    let out = server.call_tool_as(Caller::anonymous(), "public_echo", args(json!({"text": "hi"}))).await;
    assert_eq!(out.expect("admitted"), ToolOutput::text("hi"));

    let refused = server.call_tool_as(Caller::anonymous(), "admin_echo", args(json!({"text": "hi"}))).await;
    let Err(HandlerError::Public(e)) = refused else { panic!("a refused call must fail: {refused:?}") };
    assert_eq!(e.message, "unknown tool: admin_echo", "refused exactly like an unknown tool");

    let admin = Caller::identified("root").with_role("admin");
    assert_eq!(
        server.call_tool_as(admin, "admin_echo", args(json!({"text": "x"}))).await.expect("admin"),
        ToolOutput::text("admin")
    );

    let invalid = server.call_tool_as(Caller::anonymous(), "public_echo", args(json!({"text": 5}))).await;
    assert!(matches!(invalid, Err(HandlerError::Public(e)) if e.code.code() == -32602));
}

#[tokio::test]
async fn listings_per_caller_and_unfiltered() {
    let server = server();
    let names = |tools: Vec<Tool>| tools.iter().map(|t| t.name().to_owned()).collect::<Vec<_>>();
    assert_eq!(names(server.visible_to(&Caller::anonymous()).tools), ["public_echo"]);
    assert_eq!(
        names(server.visible_to(&Caller::anonymous().with_role("admin")).tools),
        ["admin_echo", "public_echo"]
    );
    assert_eq!(names(server.introspect().tools), ["admin_echo", "public_echo"]);
}

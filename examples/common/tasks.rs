//! The Tasks extension fixtures of the conformance suite's `tasks-*` scenarios (SEP-2663), under
//! the names rmcp's conformance server gives them, which the scenarios call: `greet` (never a
//! task), `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input`
//! and `test_tool_with_task`. Included by everything.rs.

use mcp_proto::interaction::InputRequest;
use mcp_proto::{ErrorCode, HandlerError, RpcError, TaskSupport, Tool, ToolOutput};
use mcp_server::{ServerBuilder, ToolCall};
use serde_json::{json, Value};
use std::time::Duration;

/// Longest `slow_compute` sleep, in seconds: a request for more sleeps this long. The suite asks
/// for at most 60 (and cancels those).
const SLOW_COMPUTE_MAX_SECONDS: f64 = 600.0;

/// A form of boolean `confirm` and string `name` fields, neither required: the suite's answers
/// to `multi_input` carry both.
fn name_and_confirm(message: &str) -> Result<InputRequest, HandlerError> {
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "confirm": {"type": "boolean"}}});
    InputRequest::elicit(message, schema).map_err(HandlerError::private)
}

fn text_arg<'a>(call: &'a ToolCall, key: &str, default: &'a str) -> &'a str {
    call.arguments.get(key).and_then(Value::as_str).unwrap_or(default)
}

/// Registers the task fixtures.
pub(crate) fn task_tools(builder: ServerBuilder) -> ServerBuilder {
    builder
        .tool(
            Tool::new(
                "greet",
                "Sync-only greeting: Hello, {name}!",
                json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            ),
            |call: ToolCall| async move {
                Ok::<_, HandlerError>(ToolOutput::text(format!("Hello, {}!", text_arg(&call, "name", "World"))))
            },
        )
        .tool(
            Tool::new(
                "slow_compute",
                "Sleeps `seconds` (at most 600), then answers; a task when the client declares the tasks extension",
                json!({"type": "object", "properties": {
                    "seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}}}),
            )
            .task_support(TaskSupport::Optional),
            |call: ToolCall| async move {
                let seconds =
                    call.arguments.get("seconds").and_then(Value::as_f64).unwrap_or(1.0).clamp(0.0, SLOW_COMPUTE_MAX_SECONDS);
                let label = text_arg(&call, "label", "unlabelled").to_owned();
                // A cancelled task's handler is dropped here, mid-sleep.
                call.ctx.sleep(Duration::from_secs_f64(seconds)).await;
                Ok::<_, HandlerError>(ToolOutput::text(format!("slow_compute({label}) done after {seconds}s")))
            },
        )
        .tool(
            Tool::new("failing_job", "A task that ends in a tool error after about a second", json!({"type": "object"}))
                .task_support(TaskSupport::Required),
            |call: ToolCall| async move {
                call.ctx.sleep(Duration::from_secs(1)).await;
                Ok::<_, HandlerError>(ToolOutput::error("failing_job: intentional tool execution error"))
            },
        )
        .tool(
            Tool::new("protocol_error_job", "A task that ends in a protocol error", json!({"type": "object"}))
                .task_support(TaskSupport::Optional),
            |call: ToolCall| async move {
                call.ctx.sleep(Duration::from_millis(100)).await;
                Err::<ToolOutput, _>(HandlerError::Public(RpcError::new(
                    ErrorCode::InternalError,
                    "protocol_error_job: intentional protocol-level failure",
                )))
            },
        )
        .tool(
            Tool::new(
                "confirm_delete",
                "A task that asks the client to confirm deleting `filename`",
                json!({"type": "object", "properties": {"filename": {"type": "string"}}}),
            )
            .task_support(TaskSupport::Required),
            |call: ToolCall| async move {
                let filename = text_arg(&call, "filename", "file").to_owned();
                let schema = json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]});
                let ask = InputRequest::elicit(format!("Delete {filename}?"), schema).map_err(HandlerError::private)?;
                let answer = call.ctx.ask_one("confirm", ask).await?;
                let confirmed = answer["action"] == "accept" && answer["content"]["confirm"] == true;
                Ok::<_, HandlerError>(ToolOutput::text(format!(
                    "confirm_delete({filename}): confirmed = {confirmed}"
                )))
            },
        )
        .tool(
            Tool::new("multi_input", "A task that asks two questions at once", json!({"type": "object"}))
                .task_support(TaskSupport::Required),
            |call: ToolCall| async move {
                let answers = call
                    .ctx
                    .ask(vec![
                        ("first".to_owned(), name_and_confirm("First input?")?),
                        ("second".to_owned(), name_and_confirm("Second input?")?),
                    ])
                    .await?;
                let name = |k: &str| answers.get(k).and_then(|a| a["content"]["name"].as_str()).unwrap_or("").to_owned();
                Ok::<_, HandlerError>(ToolOutput::text(format!(
                    "multi_input: a = {}, b = {}",
                    name("first"),
                    name("second")
                )))
            },
        )
        .tool(
            Tool::new(
                "test_tool_with_task",
                "Asks for user_name over 2026-07-28 input rounds, then finishes as a task",
                json!({"type": "object", "properties": {}}),
            )
            .task_support(TaskSupport::Required)
            .task_started_by_handler(),
            |call: ToolCall| async move {
                let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
                let ask = InputRequest::elicit("What is your name?", schema).map_err(HandlerError::private)?;
                let answer = call.ctx.ask_one("user_name", ask).await?;
                let name = answer["content"]["name"].as_str().unwrap_or("stranger").to_owned();
                // Every input is in: the rest runs as a task the client polls.
                call.ctx.start_task().map_err(HandlerError::private)?;
                call.ctx.sleep(Duration::from_millis(200)).await;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Hello, {name}! (from a task)")))
            },
        )
}

//! Handler types: async closures and typed tools.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{CallId, Caller, HandlerError, ProtocolVersion, Tool, ToolOutput};

/// A boxed, sendable future: what every handler returns once erased.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a tool handler returns.
pub type ToolResult = Result<ToolOutput, HandlerError>;

/// Everything a tool handler is told about its call.
#[derive(Debug)]
#[non_exhaustive]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Validated arguments (`{}` when the request had none).
    pub arguments: Map<String, Value>,
    /// Who is calling.
    pub caller: Arc<Caller>,
    /// The protocol version of the request.
    pub version: ProtocolVersion,
    /// The call's id (for progress and cancellation).
    pub call: CallId,
}

/// Converts a handler's return value into a tool result, so handlers can return a `String`,
/// a [`ToolOutput`] or a `Result` of either.
pub trait IntoToolResult {
    /// The conversion.
    fn into_tool_result(self) -> ToolResult;
}

impl IntoToolResult for ToolOutput {
    fn into_tool_result(self) -> ToolResult {
        Ok(self)
    }
}

impl IntoToolResult for String {
    fn into_tool_result(self) -> ToolResult {
        Ok(ToolOutput::text(self))
    }
}

impl IntoToolResult for &'static str {
    fn into_tool_result(self) -> ToolResult {
        Ok(ToolOutput::text(self))
    }
}

impl<T: IntoToolResult, E: Into<HandlerError>> IntoToolResult for Result<T, E> {
    fn into_tool_result(self) -> ToolResult {
        self.map_err(Into::into).and_then(IntoToolResult::into_tool_result)
    }
}

/// A type-erased tool handler.
pub(crate) trait ToolFn: Send + Sync + 'static {
    fn call(&self, call: ToolCall) -> BoxFuture<ToolResult>;
}

pub(crate) struct ClosureTool<F>(pub(crate) F);

impl<F, Fut, R> ToolFn for ClosureTool<F>
where
    F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoToolResult,
{
    fn call(&self, call: ToolCall) -> BoxFuture<ToolResult> {
        let fut = (self.0)(call);
        Box::pin(async move { fut.await.into_tool_result() })
    }
}

pub(crate) struct TypedTool<A, F> {
    pub(crate) f: F,
    pub(crate) _args: std::marker::PhantomData<fn() -> A>,
}

impl<A, F, Fut, R> ToolFn for TypedTool<A, F>
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoToolResult,
{
    fn call(&self, mut call: ToolCall) -> BoxFuture<ToolResult> {
        let args = std::mem::take(&mut call.arguments);
        match serde_json::from_value::<A>(Value::Object(args)) {
            Ok(a) => {
                let fut = (self.f)(a, call);
                Box::pin(async move { fut.await.into_tool_result() })
            }
            // The schema derived from `A` already passed; this is a type the schema cannot fully
            // express (a custom Deserialize, a number out of range). The model can fix it.
            Err(e) => Box::pin(std::future::ready(Ok(ToolOutput::error(format!("invalid arguments: {e}"))))),
        }
    }
}

/// The JSON Schema of `A`, for a typed tool's `inputSchema`.
pub(crate) fn schema_of<A: schemars::JsonSchema>() -> Value {
    let schema = schemars::schema_for!(A);
    let mut v = serde_json::to_value(&schema).unwrap_or_else(|_| Value::Object(Map::new()));
    if let Value::Object(m) = &mut v {
        // The tool's name already says what `title` would.
        m.remove("title");
    }
    v
}

/// Declares a typed tool: its input schema is derived from `A`.
pub fn typed_tool<A: schemars::JsonSchema>(name: impl Into<String>, description: impl Into<String>) -> Tool {
    Tool::new(name, description, schema_of::<A>())
}

/// What the engine stores per registered item.
#[derive(Clone)]
pub struct Handler(pub(crate) HandlerKind);

#[derive(Clone)]
pub(crate) enum HandlerKind {
    Tool(Arc<dyn ToolFn>),
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            HandlerKind::Tool(_) => f.write_str("Handler::Tool"),
        }
    }
}

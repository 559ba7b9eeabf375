//! An in-process client for tests of a server: connect it to a [`Server`] in memory, call tools,
//! read resources, answer the server's asks and see its notifications, on either runtime.
//!
//! The [`Client`] speaks the line transport to [`serve_lines`] over an in-memory pipe (two
//! channels, no socket, no OS pipe), so what it sees is what a stdio client sees, byte path and
//! all. It performs the `initialize` handshake itself, at the version and as the [`Caller`] the
//! test chooses ([`ClientBuilder`]), so gates and version differences can be tested. It speaks
//! the session-based versions only (2025-11-25 and older): 2026-07-28 has no session, each
//! request carrying its own `_meta` and an ask answered by a retry of the call. A test of that
//! wire builds such requests itself and sends them with [`Client::request`] (a line session
//! serves both eras).
//!
//! It needs no clock: nothing in it sleeps or times out, awaiting a response just awaits it. The
//! test drives it with the runtime its server runs on (`#[tokio::test]`, or `smol::block_on`),
//! through the shims' `testing::connect`, and bounds a test that may hang with that harness's
//! own timeout. The module adds no dependency to the crate (it is built on the channels the
//! driver uses), so it is always compiled rather than behind a feature.
//!
//! The pipe takes every byte the server writes at once: the server never waits on this client,
//! so [`Limits::stall_timeout`](mcp_proto::Limits::stall_timeout) cannot fire here.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::io::{AsyncRead, AsyncWrite};
use futures_util::stream::Stream;
use serde_json::{json, Map, Value};

use crate::runtime::Runtime;
use crate::server::Server;
use crate::stdio::{serve_lines, StdioEnd};
use mcp_proto::{Caller, ProtocolVersion};

/// What answers one kind of server→client request: given its `params`, the `result` to send, or
/// the error response.
type Answerer = Box<dyn FnMut(&Value) -> Result<Value, ErrorResponse> + Send>;

/// A JSON-RPC error response, as the server sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorResponse {
    /// The error code (`-32602` for invalid params, say).
    pub code: i64,
    /// The message.
    pub message: String,
    /// The structured detail, if the server gave any.
    pub data: Option<Value>,
}

impl ErrorResponse {
    /// An error response with no data, for an answerer that refuses an ask.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

/// Why a request through the [`Client`] did not give a result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with a JSON-RPC error.
    Rpc(ErrorResponse),
    /// The tool ran and reported a failure: a result with `isError: true` (which includes
    /// argument errors on 2025-11-25).
    Tool(ToolReply),
    /// The session ended before the answer came: the server closed it, or shut down.
    Closed,
    /// The server wrote something that is not a valid answer (not JSON, a response that is
    /// neither a result nor an error, a result of the wrong shape, a cursor repeated).
    Protocol(String),
    /// The test asked for something this client does not do (a version it does not speak).
    Unsupported(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rpc(e) => match &e.data {
                Some(data) => write!(f, "JSON-RPC error {}: {} ({data})", e.code, e.message),
                None => write!(f, "JSON-RPC error {}: {}", e.code, e.message),
            },
            Self::Tool(reply) => write!(f, "the tool reported an error: {}", reply.value()),
            Self::Closed => f.write_str("the session ended before the answer came"),
            Self::Protocol(what) => write!(f, "the server broke the protocol: {what}"),
            Self::Unsupported(what) => write!(f, "the test client does not support this: {what}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// A notification the server sent: a list change, progress, a log message, a resource update.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// Its method, such as `notifications/tools/list_changed`.
    pub method: String,
    /// Its params (`Value::Null` when it had none).
    pub params: Value,
}

/// The text of the first `text` block in `blocks`.
fn first_text(blocks: &[Value]) -> Option<&str> {
    blocks.iter().find(|b| b["type"] == "text").and_then(|b| b["text"].as_str())
}

/// A `tools/call` result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply(Value);

impl ToolReply {
    /// Its content blocks.
    pub fn content(&self) -> &[Value] {
        self.0["content"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The text of its first text block: the whole answer of most tools.
    pub fn text(&self) -> Option<&str> {
        first_text(self.content())
    }

    /// Its `structuredContent`, for tools with an output schema.
    pub fn structured(&self) -> Option<&Value> {
        self.0.get("structuredContent")
    }

    /// Whether the tool reported a failure (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.0["isError"] == true
    }

    /// The whole result, as the server sent it.
    pub fn value(&self) -> &Value {
        &self.0
    }

    /// The whole result, owned.
    pub fn into_value(self) -> Value {
        self.0
    }
}

/// A `resources/read` result.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceReply(Value);

impl ResourceReply {
    /// Its contents, one per resource read (a template may give several).
    pub fn contents(&self) -> &[Value] {
        self.0["contents"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The text of its first text contents.
    pub fn text(&self) -> Option<&str> {
        self.contents().iter().find_map(|c| c["text"].as_str())
    }

    /// The whole result, as the server sent it.
    pub fn value(&self) -> &Value {
        &self.0
    }
}

/// A `prompts/get` result.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptReply(Value);

impl PromptReply {
    /// Its messages.
    pub fn messages(&self) -> &[Value] {
        self.0["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The text of the first message whose content is a text block.
    pub fn text(&self) -> Option<&str> {
        self.messages().iter().find_map(|m| first_text(std::slice::from_ref(&m["content"])))
    }

    /// The whole result, as the server sent it.
    pub fn value(&self) -> &Value {
        &self.0
    }
}

/// How a [`Client`] connects: the version it asks for, who it is, what it declares and how it
/// answers the server's asks. From [`Client::builder`].
pub struct ClientBuilder {
    version: ProtocolVersion,
    caller: Caller,
    capabilities: Map<String, Value>,
    answerers: Vec<(&'static str, Answerer)>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("version", &self.version)
            .field("caller", &self.caller)
            .field("capabilities", &self.capabilities)
            .field("answers", &self.answerers.iter().map(|(m, _)| *m).collect::<Vec<_>>())
            .finish()
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            version: ProtocolVersion::NEWEST_LEGACY,
            caller: Caller::anonymous(),
            capabilities: Map::new(),
            answerers: Vec::new(),
        }
    }
}

impl ClientBuilder {
    /// The version to ask for in `initialize` (default: the newest session-based one,
    /// [`ProtocolVersion::NEWEST_LEGACY`]). A stateless version is refused at connect
    /// ([`ClientError::Unsupported`]): it has no session to initialize.
    pub fn version(mut self, version: ProtocolVersion) -> Self {
        self.version = version;
        self
    }

    /// Who the session's caller is, as an auth layer would have found it (default anonymous):
    /// what the server's gates see.
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// Declares a client capability in `initialize` as given (replacing what an answerer
    /// declared for it): URL-mode elicitation (`"elicitation", {"form": {}, "url": {}}`), an
    /// extension (`"extensions", {...}`), or one the client then does not answer, to see how the
    /// server copes.
    pub fn capability(mut self, name: impl Into<String>, value: Value) -> Self {
        self.capabilities.insert(name.into(), value);
        self
    }

    /// Answers `elicitation/create` with `answer` (given the request's params, it returns the
    /// result, such as `{"action": "accept", "content": {...}}`), and declares form elicitation.
    pub fn on_elicitation(
        self,
        answer: impl FnMut(&Value) -> Result<Value, ErrorResponse> + Send + 'static,
    ) -> Self {
        self.answer("elicitation/create", "elicitation", Box::new(answer))
    }

    /// Answers `sampling/createMessage` with `answer`, and declares sampling.
    pub fn on_sampling(
        self,
        answer: impl FnMut(&Value) -> Result<Value, ErrorResponse> + Send + 'static,
    ) -> Self {
        self.answer("sampling/createMessage", "sampling", Box::new(answer))
    }

    /// Answers `roots/list` with these roots (each `{"uri": "file:///...", "name": ...}`), and
    /// declares roots.
    pub fn roots(self, roots: Vec<Value>) -> Self {
        let result = json!({"roots": roots});
        self.answer("roots/list", "roots", Box::new(move |_| Ok(result.clone())))
    }

    fn answer(mut self, method: &'static str, capability: &str, answerer: Answerer) -> Self {
        self.capabilities.entry(capability).or_insert_with(|| json!({}));
        self.answerers.retain(|(m, _)| *m != method);
        self.answerers.push((method, answerer));
        self
    }

    /// Serves a new line session of `server` on `rt` (spawned there) and initializes it:
    /// `initialize`, `notifications/initialized`, then a `ping` answered, so that the session is
    /// ready for what the test does next. The shims' `testing::connect_with` pass their own
    /// runtime.
    pub async fn connect<R: Runtime + Clone>(self, server: &Server, rt: R) -> Result<Client, ClientError> {
        if self.version.is_modern() {
            return Err(ClientError::Unsupported(format!(
                "{} has no session to initialize; this client speaks {} and older",
                self.version.as_str(),
                ProtocolVersion::NEWEST_LEGACY.as_str()
            )));
        }
        let (to_server, input) = async_channel::unbounded();
        let (output, from_server) = async_channel::unbounded();
        let (ended_tx, ended) = async_channel::bounded(1);
        let served = server.clone();
        let session_rt = rt.clone();
        let caller = self.caller;
        rt.spawn(Box::pin(async move {
            let input = PipeReader { chunks: Box::pin(input), pending: Vec::new(), offset: 0 };
            let end = serve_lines(&served, session_rt, caller, input, PipeWriter(output)).await;
            let _ = ended_tx.send(end).await;
        }));
        let mut client = Client {
            to_server,
            from_server,
            buf: Vec::new(),
            next_id: 0,
            notifications: VecDeque::new(),
            answerers: self.answerers,
            initialized: Value::Null,
            ended,
        };
        let asked = self.version.as_str();
        let params = json!({
            "protocolVersion": asked,
            "capabilities": self.capabilities,
            "clientInfo": {"name": "mcp-server-testing", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = client.request("initialize", params).await?;
        if result["protocolVersion"] != asked {
            return Err(ClientError::Protocol(format!(
                "initialize asked for {asked} and was answered {}",
                result["protocolVersion"]
            )));
        }
        client.notify("notifications/initialized", Value::Null)?;
        // A connection's frames are handled in order, so once this ping is answered the session
        // is initialized: a change the test makes next (a run-time `add_tool`) is told to it,
        // where before `initialized` the server would tell it nothing.
        client.request("ping", Value::Null).await?;
        client.initialized = result;
        Ok(client)
    }
}

/// A test's client of one line session of a [`Server`], in memory. Made by the shims'
/// `testing::connect` (or [`ClientBuilder::connect`]), already initialized.
///
/// One request at a time: each method sends its request and reads the session until its answer
/// comes, answering the server's asks on the way (with the [`ClientBuilder`]'s answerers; an
/// ask with none gets `-32601`) and keeping its notifications for
/// [`notifications`](Self::notifications), [`next_notification`](Self::next_notification) and
/// [`notification`](Self::notification). Dropping the client ends the session's input, as a
/// stdio client exiting would.
pub struct Client {
    to_server: async_channel::Sender<Vec<u8>>,
    from_server: async_channel::Receiver<Vec<u8>>,
    /// Bytes read from the server not yet split into lines.
    buf: Vec<u8>,
    /// The id of the next request; a response to one at or past it is the server's mistake.
    next_id: u64,
    notifications: VecDeque<Notification>,
    answerers: Vec<(&'static str, Answerer)>,
    initialized: Value,
    ended: async_channel::Receiver<io::Result<StdioEnd>>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("next_id", &self.next_id)
            .field("notifications", &self.notifications.len())
            .finish_non_exhaustive()
    }
}

/// What one line from the server was.
enum Incoming {
    /// The answer to our request `id` (`None`: an error with a null id, for the request just
    /// sent, as for a frame the server could not read).
    Reply(Option<u64>, Result<Value, ErrorResponse>),
    /// A request or notification of the server's, handled already.
    Handled,
}

impl Client {
    /// The options of a new client: version, caller, capabilities, answerers.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The server's `initialize` result: its `serverInfo`, `capabilities`, `instructions`.
    pub fn initialized(&self) -> &Value {
        &self.initialized
    }

    /// Sends `method` with `params` (left out when `Value::Null`) and returns the result, for
    /// what the typed methods do not cover (`completion/complete`, `logging/setLevel`, a raw
    /// 2026-07-28 request).
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            frame["params"] = params;
        }
        self.send(&frame)?;
        loop {
            let line = self.next_line().await?;
            match self.handle(line)? {
                Incoming::Reply(Some(of), outcome) if of == id => return outcome.map_err(ClientError::Rpc),
                Incoming::Reply(None, outcome) => return outcome.map_err(ClientError::Rpc),
                // The answer to a request whose future was dropped before it came.
                Incoming::Reply(Some(_), _) | Incoming::Handled => {}
            }
        }
    }

    /// Sends a notification (`params` left out when `Value::Null`), such as
    /// `notifications/cancelled` or `notifications/roots/list_changed`.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), ClientError> {
        let mut frame = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            frame["params"] = params;
        }
        self.send(&frame)
    }

    /// Calls tool `name` with `arguments` (an object; `Value::Null` sends none). A result with
    /// `isError: true` is [`ClientError::Tool`].
    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Result<ToolReply, ClientError> {
        self.call(name, arguments, None).await
    }

    /// [`call_tool`](Self::call_tool) asking for progress under `token` (a string or an
    /// integer): the server's `notifications/progress` then arrive among the notifications.
    pub async fn call_tool_with_progress(
        &mut self,
        name: &str,
        arguments: Value,
        token: impl Into<Value>,
    ) -> Result<ToolReply, ClientError> {
        self.call(name, arguments, Some(token.into())).await
    }

    async fn call(
        &mut self,
        name: &str,
        arguments: Value,
        token: Option<Value>,
    ) -> Result<ToolReply, ClientError> {
        let mut params = json!({"name": name});
        if !arguments.is_null() {
            params["arguments"] = arguments;
        }
        if let Some(token) = token {
            params["_meta"] = json!({"progressToken": token});
        }
        let reply = ToolReply(object("tools/call", self.request("tools/call", params).await?)?);
        if reply.is_error() {
            return Err(ClientError::Tool(reply));
        }
        Ok(reply)
    }

    /// Every tool this caller may see, every page of `tools/list` followed.
    pub async fn list_tools(&mut self) -> Result<Vec<Value>, ClientError> {
        self.list("tools/list", "tools").await
    }

    /// Every resource this caller may see, every page of `resources/list` followed.
    pub async fn list_resources(&mut self) -> Result<Vec<Value>, ClientError> {
        self.list("resources/list", "resources").await
    }

    /// Every resource template this caller may see, every page followed.
    pub async fn list_resource_templates(&mut self) -> Result<Vec<Value>, ClientError> {
        self.list("resources/templates/list", "resourceTemplates").await
    }

    /// Every prompt this caller may see, every page of `prompts/list` followed.
    pub async fn list_prompts(&mut self) -> Result<Vec<Value>, ClientError> {
        self.list("prompts/list", "prompts").await
    }

    async fn list(&mut self, method: &str, key: &str) -> Result<Vec<Value>, ClientError> {
        let mut items = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.as_ref().map_or(Value::Null, |c| json!({"cursor": c}));
            let mut page = object(method, self.request(method, params).await?)?;
            match page.get_mut(key).map(Value::take) {
                Some(Value::Array(more)) => items.extend(more),
                _ => return Err(ClientError::Protocol(format!("{method}: the result has no `{key}` array"))),
            }
            cursor = match page.get("nextCursor") {
                None | Some(Value::Null) => return Ok(items),
                Some(Value::String(next)) if seen.insert(next.clone()) => Some(next.clone()),
                // A server that hands a cursor back twice would be followed for ever.
                Some(other) => {
                    return Err(ClientError::Protocol(format!("{method}: nextCursor {other} repeated")))
                }
            };
        }
    }

    /// Reads the resource at `uri`.
    pub async fn read_resource(&mut self, uri: &str) -> Result<ResourceReply, ClientError> {
        let result = self.request("resources/read", json!({"uri": uri})).await?;
        Ok(ResourceReply(object("resources/read", result)?))
    }

    /// Subscribes to updates of the resource at `uri`: `notifications/resources/updated` then
    /// arrive among the notifications.
    pub async fn subscribe(&mut self, uri: &str) -> Result<(), ClientError> {
        self.request("resources/subscribe", json!({"uri": uri})).await.map(drop)
    }

    /// Gets prompt `name` with `arguments` (an object of strings; `Value::Null` sends none).
    pub async fn get_prompt(&mut self, name: &str, arguments: Value) -> Result<PromptReply, ClientError> {
        let mut params = json!({"name": name});
        if !arguments.is_null() {
            params["arguments"] = arguments;
        }
        Ok(PromptReply(object("prompts/get", self.request("prompts/get", params).await?)?))
    }

    /// The notifications received so far, taking also those already written to the pipe; waits
    /// for nothing.
    pub fn notifications(&mut self) -> Result<Vec<Notification>, ClientError> {
        while let Ok(chunk) = self.from_server.try_recv() {
            self.buf.extend_from_slice(&chunk);
        }
        while let Some(line) = self.take_line() {
            self.handle(line)?;
        }
        Ok(self.notifications.drain(..).collect())
    }

    /// The next notification: the oldest one kept, else the next to come (answering asks while
    /// it waits). [`ClientError::Closed`] once the session ended without one.
    pub async fn next_notification(&mut self) -> Result<Notification, ClientError> {
        loop {
            if let Some(n) = self.notifications.pop_front() {
                return Ok(n);
            }
            let line = self.next_line().await?;
            self.handle(line)?;
        }
    }

    /// The first notification whose method is `method`, kept or to come; the others stay kept,
    /// in order.
    pub async fn notification(&mut self, method: &str) -> Result<Notification, ClientError> {
        let mut checked = 0;
        loop {
            if let Some(at) = self.notifications.iter().skip(checked).position(|n| n.method == method) {
                let found = self.notifications.remove(checked + at);
                return found.ok_or_else(|| ClientError::Protocol("a kept notification vanished".into()));
            }
            checked = self.notifications.len();
            let line = self.next_line().await?;
            self.handle(line)?;
        }
    }

    /// Ends the session's input and waits until the server ended the session: how it ended
    /// (normally [`StdioEnd::EndOfInput`]). Asks and notifications that come meanwhile are
    /// answered and dropped.
    pub async fn close(mut self) -> io::Result<StdioEnd> {
        self.to_server.close();
        while let Ok(line) = self.next_line().await {
            let _ = self.handle(line);
        }
        match self.ended.recv().await {
            Ok(end) => end,
            Err(_) => Err(io::Error::other("the session's task ended without saying how")),
        }
    }

    fn send(&mut self, frame: &Value) -> Result<(), ClientError> {
        let mut bytes = frame.to_string().into_bytes();
        bytes.push(b'\n');
        self.to_server.try_send(bytes).map_err(|_| ClientError::Closed)
    }

    /// The next complete line already read, without its newline.
    fn take_line(&mut self) -> Option<Vec<u8>> {
        let end = self.buf.iter().position(|&b| b == b'\n')?;
        let mut line: Vec<u8> = self.buf.drain(..=end).collect();
        line.pop();
        Some(line)
    }

    /// The next line from the server, waiting for it; [`ClientError::Closed`] once its output ended.
    async fn next_line(&mut self) -> Result<Vec<u8>, ClientError> {
        loop {
            if let Some(line) = self.take_line() {
                return Ok(line);
            }
            match self.from_server.recv().await {
                Ok(chunk) => self.buf.extend_from_slice(&chunk),
                Err(_) => return Err(ClientError::Closed),
            }
        }
    }

    /// Makes sense of one line: an answer is returned, a notification kept, an ask answered.
    fn handle(&mut self, line: Vec<u8>) -> Result<Incoming, ClientError> {
        let text = || String::from_utf8_lossy(&line).into_owned();
        let mut message: Value = serde_json::from_slice(&line)
            .map_err(|e| ClientError::Protocol(format!("a line that is not JSON ({e}): {}", text())))?;
        let Some(fields) = message.as_object_mut() else {
            return Err(ClientError::Protocol(format!("a line that is not a JSON-RPC message: {}", text())));
        };
        let id = fields.remove("id");
        if let Some(method) = fields.get("method").and_then(Value::as_str).map(str::to_owned) {
            let params = fields.remove("params").unwrap_or(Value::Null);
            match id {
                Some(id) => self.answer(id, &method, &params)?,
                None => self.notifications.push_back(Notification { method, params }),
            }
            return Ok(Incoming::Handled);
        }
        let of = match &id {
            Some(Value::Null) => None,
            Some(id) => match id.as_u64().filter(|n| *n < self.next_id) {
                Some(n) => Some(n),
                None => {
                    return Err(ClientError::Protocol(format!("a response to an id never sent: {}", text())))
                }
            },
            None => {
                return Err(ClientError::Protocol(format!(
                    "a message with neither method nor id: {}",
                    text()
                )))
            }
        };
        let outcome = match (fields.remove("result"), fields.remove("error")) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => Err(error_response(&error).ok_or_else(|| {
                ClientError::Protocol(format!("an error without an integer code and a message: {}", text()))
            })?),
            _ => {
                return Err(ClientError::Protocol(format!(
                    "a response with not exactly one of result and error: {}",
                    text()
                )))
            }
        };
        Ok(Incoming::Reply(of, outcome))
    }

    /// Answers the server's request `id`.
    fn answer(&mut self, id: Value, method: &str, params: &Value) -> Result<(), ClientError> {
        let outcome = match self.answerers.iter_mut().find(|(m, _)| *m == method) {
            Some((_, answerer)) => answerer(params),
            None if method == "ping" => Ok(json!({})),
            None => Err(ErrorResponse::new(-32601, format!("the test client does not answer {method}"))),
        };
        let frame = match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}),
        };
        self.send(&frame)
    }
}

/// `result` if it is an object, as every result of the methods above must be.
fn object(method: &str, result: Value) -> Result<Value, ClientError> {
    if result.is_object() {
        Ok(result)
    } else {
        Err(ClientError::Protocol(format!("{method}: the result is not an object: {result}")))
    }
}

fn error_response(error: &Value) -> Option<ErrorResponse> {
    Some(ErrorResponse {
        code: error.get("code")?.as_i64()?,
        message: error.get("message")?.as_str()?.to_owned(),
        data: error.get("data").cloned(),
    })
}

/// The session's input: the frames the client sent, as bytes.
struct PipeReader {
    /// Boxed: a receiver is not `Unpin` (it may hold a pinned listener).
    chunks: Pin<Box<async_channel::Receiver<Vec<u8>>>>,
    pending: Vec<u8>,
    offset: usize,
}

impl AsyncRead for PipeReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        while this.offset >= this.pending.len() {
            match this.chunks.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                // The client closed its end (or was dropped): end of input.
                Poll::Ready(None) => return Poll::Ready(Ok(0)),
                Poll::Ready(Some(chunk)) => {
                    this.pending = chunk;
                    this.offset = 0;
                }
            }
        }
        let rest = this.pending.get(this.offset..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        if let (Some(to), Some(from)) = (buf.get_mut(..n), rest.get(..n)) {
            to.copy_from_slice(from);
        }
        this.offset += n;
        Poll::Ready(Ok(n))
    }
}

/// The session's output: what the server writes goes to the client whole, at once.
struct PipeWriter(async_channel::Sender<Vec<u8>>);

impl AsyncWrite for PipeWriter {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.0.try_send(buf.to_vec()) {
            Ok(()) => Poll::Ready(Ok(buf.len())),
            Err(_) => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.close();
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client with no session behind it, and the server's ends of its pipe: what it sends,
    /// and where the test writes the server's lines.
    fn detached() -> (Client, async_channel::Receiver<Vec<u8>>, async_channel::Sender<Vec<u8>>) {
        let (to_server, sent) = async_channel::unbounded();
        let (server_out, from_server) = async_channel::unbounded();
        let (_, ended) = async_channel::bounded(1);
        let client = Client {
            to_server,
            from_server,
            buf: Vec::new(),
            next_id: 1,
            notifications: VecDeque::new(),
            answerers: Vec::new(),
            initialized: Value::Null,
            ended,
        };
        (client, sent, server_out)
    }

    fn sent_json(sent: &async_channel::Receiver<Vec<u8>>) -> Value {
        let bytes = sent.try_recv().unwrap_or_default();
        assert_eq!(bytes.last(), Some(&b'\n'), "one frame a line");
        serde_json::from_slice(&bytes).unwrap_or_default()
    }

    fn protocol_error(client: &mut Client, line: &str) -> String {
        match client.handle(line.as_bytes().to_vec()) {
            Err(ClientError::Protocol(why)) => why,
            Err(other) => panic!("{line}: {other:?}"),
            Ok(_) => panic!("{line} was taken"),
        }
    }

    /// What no server may write is a protocol error that names what was wrong, never a
    /// result.
    #[test]
    fn malformed_lines_are_refused_by_name() {
        let (mut client, _sent, _out) = detached();
        assert!(protocol_error(&mut client, "{oops").contains("not JSON"));
        assert!(protocol_error(&mut client, "[1]").contains("not a JSON-RPC message"));
        assert!(protocol_error(&mut client, r#"{"jsonrpc":"2.0"}"#).contains("neither method nor id"));
        assert!(protocol_error(&mut client, r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).contains("never sent"));
        assert!(protocol_error(&mut client, r#"{"jsonrpc":"2.0","id":0,"result":{},"error":{}}"#)
            .contains("exactly one of result and error"));
        assert!(protocol_error(&mut client, r#"{"jsonrpc":"2.0","id":0,"error":{"code":"x"}}"#)
            .contains("integer code"));
        let Ok(Incoming::Reply(Some(0), Err(e))) = client
            .handle(br#"{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"m","data":1}}"#.to_vec())
        else {
            panic!("an error response to a request sent");
        };
        assert_eq!(e, ErrorResponse { code: -32602, message: "m".into(), data: Some(json!(1)) });
    }

    /// A ping is answered, an ask with no answerer is refused with -32601, notifications are kept
    /// in order.
    #[test]
    fn server_requests_are_answered_and_notifications_kept() {
        let (mut client, sent, _out) = detached();
        assert!(client.handle(br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#.to_vec()).is_ok());
        assert_eq!(sent_json(&sent), json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
        let ask = br#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{}}"#;
        assert!(client.handle(ask.to_vec()).is_ok());
        let refused = sent_json(&sent);
        assert_eq!(refused["id"], 3);
        assert_eq!(refused["error"]["code"], -32601);
        for method in ["notifications/a", "notifications/b"] {
            let note = json!({"jsonrpc": "2.0", "method": method}).to_string();
            assert!(client.handle(note.into_bytes()).is_ok());
        }
        let kept: Vec<String> =
            client.notifications().unwrap_or_default().into_iter().map(|n| n.method).collect();
        assert_eq!(kept, ["notifications/a", "notifications/b"]);
    }

    /// Lines are split wherever the server's writes broke them, and a notification written but
    /// not yet read is found without waiting.
    #[test]
    fn lines_split_across_writes() {
        let (mut client, _sent, out) = detached();
        for part in
            [&br#"{"jsonrpc":"2.0","meth"#[..], br#"od":"notifications/x"}"#, b"\n{\"jsonrpc\":\"2.0\","]
        {
            assert!(out.try_send(part.to_vec()).is_ok());
        }
        let kept = client.notifications().unwrap_or_default();
        assert_eq!(kept, [Notification { method: "notifications/x".into(), params: Value::Null }]);
        assert_eq!(client.buf, b"{\"jsonrpc\":\"2.0\",", "the partial line waits for its end");
    }

    /// The session's input hands out each chunk however small the reads, then ends when the
    /// client closes it.
    #[test]
    fn the_pipe_reads_every_byte_then_ends() {
        let (tx, rx) = async_channel::unbounded();
        let mut reader = PipeReader { chunks: Box::pin(rx), pending: Vec::new(), offset: 0 };
        assert!(tx.try_send(b"abc".to_vec()).is_ok() && tx.try_send(b"de".to_vec()).is_ok());
        tx.close();
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let mut got = Vec::new();
        let mut buf = [0u8; 2];
        loop {
            match Pin::new(&mut reader).poll_read(&mut cx, &mut buf) {
                Poll::Ready(Ok(0)) => break,
                Poll::Ready(Ok(n)) => got.extend_from_slice(buf.get(..n).unwrap_or_default()),
                other => panic!("a closed pipe with data is never {other:?}"),
            }
        }
        assert_eq!(got, b"abcde");
    }
}

//! Replay transcripts: a text file of frames in, exact frames out and clock steps, fed to a bare
//! [`Engine`] with a fixed configuration and compared byte for byte.
//!
//! # Format
//!
//! One item per line; blank lines and lines starting with `#` are ignored.
//!
//! | line | meaning |
//! |------|---------|
//! | `> {json}` | a frame in, on connection 1 (the bytes after `> `, exactly) |
//! | `< {json}` | the next output must be exactly this frame, on connection 1 |
//! | `>2 {json}`, `<2 {json}`, `=2 ...` | the same on connection 2 (see `! open`) |
//! | `@ +15s`, `@ +250ms` | advance the virtual clock, then call `handle_timeout` |
//! | `= invoke <method> <name> <id>` | the next output is an `Invoke` for request `<id>`: `tools/call <tool>`, `resources/read <uri>`, `prompts/get <prompt>`, `completion/complete <prompt or uriTemplate>` |
//! | `= cancel <id>` | the next output is an `Output::Cancel` of the call for request `<id>` |
//! | `= close end-of-input` / `closed` / `frame-too-large` | the next output is `Output::Close` |
//! | `= stale` | the last `! complete` (or `! log`) was refused as `Stale` (nothing sent) |
//! | `= unknown-connection` | `handle_frame` answered `UnknownConnection` (the connection is gone) |
//! | `= asked pending` / `= asked answered {json}` / `= asked error <kind> [detail]` | what `Engine::ask` returned to the last `! ask` (see below) |
//! | `= answer <id> {json}` / `= answer <id> error <kind> [detail]` | the next output is an `Output::Answer` for the call of request `<id>`: the answers by key, or why there are none |
//! | `! <directive>` | see below |
//! | `>> POST /mcp [as <caller>]` | starts an HTTP request (any upper-case method, any path; the caller defaults to `! caller`'s) |
//! | `>> Name: value` | a request header, sent exactly as written, in order (none is added: write `Host`) |
//! | `>> {json}` | the request body, one line: the first `>>` line that is no header (after a bare `>>`, whatever it looks like) |
//! | `<<N 200` | exchange N (the N-th HTTP request, from 1; `<<` alone: the last one) got this status |
//! | `<<N Name: value` | ... then this response header, name and value exactly as sent, in order |
//! | `<<N {json}` | ... then this whole body (a complete response with a non-empty body) |
//! | `<<N \| id: 0-1`, `<<N \|` | one line of an SSE frame on N's stream; a bare `\|` is the blank line that ends an event |
//! | `<<N close <reason>` | N's stream ended (`Output::Close`): `end-of-input`, `deleted`, `replaced`, `expired`, ... |
//! | `=0 invoke ...` | an invocation for an HTTP request (connection 0: no stdio connection) |
//!
//! Every output must be matched by an expectation line before the next input line, and every
//! expectation must be met: nothing is implied, nothing may be left over. `<id>` is a JSON
//! request id (`3`, `"abc"`), compared as a JSON value. Outputs of every connection come in the
//! one order the engine emitted them.
//!
//! Inside `>` and `<` lines (and the reply of `! complete`), `{{repeat N "text"}}` stands for
//! `text` repeated `N` times (the text is a JSON string literal, so `"\\"` is one backslash), to
//! keep long frames readable.
//!
//! The same lines may name a sealed 2026-07-28 `requestState` the engine emitted, which no
//! transcript can spell out: `{{state}}` is the `requestState` of the last `input_required`
//! result emitted so far, `{{state N}}` the N-th (from 1). In a `>` line it lets the client
//! retry with the state, or tamper with it (`"{{state}}-TAMPERED"`); in a `<` line it matches
//! the state just emitted. Only this runner knows states: the stdio pipe runner
//! ([`crate::pipe`]) skips transcripts with `! ask` anyway.
//!
//! ## HTTP
//!
//! A request is its `>>` lines; it is sent at the first line that is not one (a blank line, an
//! expectation, another request line), as a shim would send it: [`check_head`] with the default
//! [`HttpConfig`] (loopback `Host` names, no extra origins) and the configured [`Limits`] (bodies
//! bound by the frame size), a
//! refusal written as the server layer writes it (its headers, then `content-type:
//! application/json` and the JSON-RPC error body, none on 404); else [`Engine::handle_http`].
//! A `Full` reply is the exchange's lines at once; a `Pending` one's come from `poll_output`
//! (`Respond`: status, headers, body; `Stream`: status and headers, then SSE frames, then
//! `close`). Expectations are compared line by line and exactly, like `<` lines; every line the
//! engine sent must be expected, in the order sent. Body and header lines may use
//! `{{session}}` (the last `Mcp-Session-Id` a response carried) or `{{session N}}` (the N-th),
//! besides `{{state}}` and `{{repeat}}`. Session ids come from the engine's fixed seed, so they
//! are the same on every run: a transcript writes the minted one literally and refers to it
//! with `{{session}}` afterwards.
//!
//! Checked on every HTTP exchange: a pending exchange gets one `Respond`, or one `Stream` then
//! frames then one `Close`, and nothing after; a stream's head says `text/event-stream`; each
//! SSE frame is one event or comment ending in its only blank line, without CR; a body is JSON
//! under a JSON content type; a session id is valid and never handed out twice. Frames inside
//! HTTP bodies are not schema-validated or counted for replies (the stdio invariants below).
//!
//! Ask results and answers: `<kind>` is one of `unsupported`, `rejected`, `invalid`,
//! `too-many-rounds`, `unreachable`, `busy`, `stale`, `suspended`, `timed-out` (the [`AskError`]
//! variants).
//! The runner prints a detail after some kinds: the required capabilities for `unsupported`
//! (`{"sampling":{}}`), the client's code and message for `rejected` (`-1 "no"`), the reason for
//! `invalid` (`"field ..."`). An expectation may leave the detail out; when it gives one, the
//! detail must match exactly. Answers are compared as compact JSON text in the engine's order,
//! numbers exactly as the client wrote them.
//!
//! ## Directives
//!
//! Configuration, only before the first input (the engine is built at the first input):
//!
//! - `! page-size N`, `! max-frame-bytes N`, `! max-id-bytes N`, `! max-method-bytes N`,
//!   `! max-depth N`, `! max-in-flight N`, `! max-batch-len N`, `! max-response-bytes N`,
//!   `! max-uri-bytes N`, `! max-subscribed-uris N`, `! max-subscriptions N`, `! max-listens N`,
//!   `! max-connections N`: the [`Limits`] setters;
//! - `! call-timeout 10s` (or `ms`), `! cache-ttl-ms N`, `! max-input-rounds N`, `! state-ttl 5s`
//!   (or `ms`), `! max-ledger-entries N`: the [`Limits`] setters `call_timeout`, `cache_ttl`,
//!   `max_input_rounds` (default 10), `state_ttl` (default 10 minutes) and `max_ledger_entries`
//!   (default 4096);
//! - `! max-tasks N`, `! task-ttl 5s`, `! task-poll-interval 200ms` (or `s`): the [`Limits`]
//!   setters `max_tasks` (default 1024), `task_ttl` (default 5 minutes) and
//!   `task_poll_interval` (default 500 ms);
//! - `! state-epoch N`: [`Config::state_epoch`] (default 0);
//! - `! shareable <uri|uriTemplate> <ttl>` (ttl `30s` or `ms`): registers that resource or
//!   template (a fixture, or one `! register` adds later) with `CacheHint::shared(ttl)`
//!   (default: every read is private with TTL 0);
//! - `! discover-cache shared|private <ttl>`: [`Config::discover_cache`] (default private, 0);
//! - `! resume-window 5s` (or `ms`): the [`Limits`] setter `resume_window` (default 30 s);
//! - `! instructions "text"`;
//! - `! logging off`, `! subscriptions off`: [`Config::logging`] and
//!   [`Config::resource_subscriptions`] (default: both on, as the fixture server logs and can
//!   report resource changes; off shows what a server that does neither advertises);
//! - `! server-info full`: adds a title, description and website to the server's
//!   `Implementation` (default: only name `replay`, version `1.0.0`);
//! - `! envelopes on|off`: [`Config::envelopes`] (default off);
//! - `! mode compact|direct`: [`Config::mode`] (default direct);
//! - `! extension <id> {settings} [role <role>]`: declares that extension at start, gated by
//!   that role when one is given (default: none declared); a refused declaration is a
//!   transcript error;
//! - `! tools echo add ...`: register only these test tools (default: all of
//!   [`crate::tools::all_tools`]; `admin_tool`, `lookup`, `draft4` and the task tools
//!   `task_job`, `task_only` and `task_later` only when named);
//! - `! resources URI... | all`, `! templates URITEMPLATE... | all`, `! prompts NAME... | all`,
//!   `! skills NAME... | all`: register these test fixtures (default: none; see
//!   [`crate::tools`] and, for skills, named by their last root segment, [`crate::skills`]);
//! - `! caller <identity|anonymous> [role...]`: the caller of connection 1 (default anonymous,
//!   no roles);
//! - `! known-bug <text>`: this transcript documents an engine bug and is expected to fail
//!   until the engine is fixed; when it passes, the suite fails so that the marker is removed.
//!   Such transcripts are named `bug-*.txt` and say in comments what is wrong and where.
//!
//! Actions, anywhere (each drains the engine's output once, at its end):
//!
//! - `! auto` / `! manual`: in auto mode every `Invoke` with an automatic behaviour is completed
//!   at once with it and is not shown; `slow` never is. In manual mode (the default) every
//!   `Invoke` is an output to expect with `= invoke`.
//! - `! complete <ref> <reply>`: completes a held invocation. `<ref>` is the request id as JSON
//!   (`3`, `"abc"`; the oldest held call with that id) or `#N`, the N-th invocation of the
//!   transcript (from 1). `<reply>` is one of:
//!   - tool results: `text "..."`, `error-text "..."` (a result with `isError: true`),
//!     `structured {json}`, `failure {"code":..,"message":..,"retryable":..,"diagnostics":..,"content":[...]}`
//!     (a [`ToolFailure`]), `result {"content":[...],"structuredContent":..,"isError":..,"_meta":{..}}`
//!     (content blocks `text`, `image`, `audio`, `resource_link`, `resource`);
//!   - `contents [{"uri":..,"mimeType":..,"text"|"blob":..,"_meta":..}, ...]` (a read; `[]` is
//!     an empty answer), `prompt {"description":..,"messages":[{"role":..,"content":{block}}]}`,
//!     `completion {"values":[..],"total":N,"hasMore":bool}`;
//!   - for any call: `public-error CODE "message" [{data}]`, `private-error "detail"`, `panic`,
//!     `cancelled` (the handler's future was dropped), or `auto` (the built-in behaviour).
//!
//!   A reply of another kind than the call's is passed on as it is (the engine must refuse it).
//! - `! ask <ref> <key> <request> [; <key> <request>]...`: `Engine::ask` for that held call,
//!   each request under the handler's key (a word, or a JSON string). `<request>` is one of
//!   `elicit {requestedSchema} "message"`, `elicit-url "url" "message"`,
//!   `sample {sampling/createMessage params}` or `roots`; a request its constructor refuses is a
//!   transcript error. What `ask` returned is the next event (`= asked ...`), before whatever
//!   the engine emitted: on a legacy session the server→client requests (`<` frames), on
//!   2026-07-28 nothing (answered from the retry) or `= cancel` and the call's
//!   `input_required` or error reply. The client answers a server→client request with a
//!   response frame (`> {"jsonrpc":"2.0","id":N,"result":{..}}` or `"error"`), which gets no
//!   reply; once all are in (or at the first failure) comes `= answer`.
//! - `! start-task <ref>`: `Engine::start_task` for that held call; the next event is
//!   `= start-task "<task id>"` or `= start-task error <kind>` (`stale`, `already-task`,
//!   `not-eligible`, `refused`), before whatever the engine emitted (the `resultType: "task"`
//!   reply). A call whose request was answered `resultType: "task"` runs on as a task: a
//!   2026-07-28 `! ask` of it returns `pending`, and `tasks/update` brings its `= answer`.
//! - `! log <ref> <level> [logger=<name>] <json>`: `Engine::log` for that held call.
//! - `! progress <ref> <progress> [<total>]`: `Engine::progress` for that held call.
//! - `! shutdown`: `Engine::shutdown`.
//! - `! open N <identity|anonymous> [role...]`: opens connection N with that caller.
//! - `! close [N]` (`Engine::close`), `! close-input [N]` (`Engine::close_input`); N defaults to 1.
//! - `! drop N`: the client goes away from HTTP request N's pending response (`Engine::close` on
//!   its connection, as a shim does when the client disconnects).
//! - `! server-gate role <role>` / `identified` / `none`: `RegistryMut::set_gate`.
//! - `! register <tool|resource|template|prompt|skill> NAME...` and `! unregister ...`:
//!   (un)registers each named item, in order, then drains once, so a burst is one line. A
//!   fixture name registers that fixture; any other name a plain extra item (see
//!   [`crate::tools`]; an extra skill is `skill://extra/NAME` with only its `SKILL.md`).
//! - `! notify-updated <uri>`: `Engine::notify_resource_updated`.
//! - `! app {json}` / `! shell {json}`: `RegistryMut::add_app` / `mount_apps_shell` with that
//!   app (`uri`, `name`, `html`, and optionally `title`, `description`, `views`, `csp` by its
//!   wire lists, `permissions` by name, `prefersBorder`, `domain`); its reads answer the HTML
//!   without a media type or `_meta`, which the read inherits. A refusal is a transcript error.
//! - `! app-tool NAME URI model|app|model+app`: registers a tool linked to that app with that
//!   visibility (an empty object schema; auto behaviour: text `ok`).
//! - `! bump-epoch`, `! set-epoch N`: `Engine::bump_epoch`, `Engine::set_epoch`.
//!
//! # Invariants checked on every run
//!
//! Beside the exact comparison, the runner checks, independently of the expectation lines:
//!
//! - every request gets exactly one reply and notifications and responses get none. The runner
//!   classifies each frame itself (JSON-RPC 2.0: an object with an `id` member is a request, one
//!   with `method` and no `id` a notification, one with `result`/`error` and no `method` a
//!   response; a frame serde_json cannot decode, a non-object, a refused batch, or an
//!   unreadable, ambiguous or over-long id is answered once with a `null` id), and counts
//!   replies by connection and id, matching requests that share an id in the order they came;
//!   a request may go unanswered only if its call was cancelled;
//! - a `subscriptions/listen` request is answered either by an error or by a
//!   `notifications/subscriptions/acknowledged` tagged with its id (its "reply"), whose filter
//!   asks for nothing the request did not; the stream is then open and gets no response. Every
//!   other notification tagged with a subscription id must belong to an open stream of its
//!   connection (acknowledged, not cancelled by the client) and be of a kind its acknowledged
//!   filter names; an untagged `list_changed` or `resources/updated` may only go to a
//!   connection with an initialized legacy session;
//! - a frame the server sends with both `id` and `method` is a server→client request, never a
//!   reply: its id is the server's own and is not counted against the client's requests. It
//!   may only go to a connection whose legacy session is initialized (never 2026-07-28), only
//!   while the `! ask` that asked for it drains (an ask that returned `pending` must send
//!   exactly its requests, in order, on the call's connection; `ping` aside; an HTTP call's
//!   requests travel in SSE bodies, which are only compared line by line), only with a
//!   capability the client declared in `initialize` (`elicitation` for a form, and from
//!   2025-11-25 not when only `url` was declared; `elicitation.url` and 2025-11-25 for URL
//!   mode; multi-select fields only from 2025-11-25; `sampling`, with `sampling.tools` for tool
//!   use and, from 2025-11-25, `sampling.context` for `includeContext`; `roots`), and with an id
//!   (string or integer) no other unanswered request of the server on that connection uses.
//!   The client's response to it (a frame with `result` or `error` and no `method`) is an input
//!   that gets no reply; it settles the request of that id;
//! - `Output::Answer` comes only for a call with a legacy ask pending, never after its call was
//!   cancelled; a 2026-07-28 ask never returns `pending`, a legacy one never `answered` or
//!   `suspended`. The `Output::Cancel` that follows a `suspended` ask excuses no reply: the
//!   engine answered the call itself;
//! - a result with `resultType: "input_required"` is the reply to its request, which must be a
//!   2026-07-28 `tools/call`, `prompts/get` or `resources/read`. It must hold `inputRequests`
//!   or `requestState` (or both), carry no caching hints (`ttlMs`, `cacheScope`), be a valid
//!   `InputRequiredResult`, and ask only for what the request's own
//!   `_meta["io.modelcontextprotocol/clientCapabilities"]` allows (the rules above);
//! - `handle_frame`'s [`FrameOutcome`] agrees with that classification;
//! - no request is still in flight when the transcript ends;
//! - every reply fits in `max_response_bytes`;
//! - every emitted frame is valid against the wire schema of the version in force (see
//!   [`crate::wire`]): the version of the request it answers (2026-07-28 for a request carrying
//!   `_meta["io.modelcontextprotocol/protocolVersion"]`, else the version the connection's
//!   session negotiated, else 2025-11-25); for a notification, 2026-07-28 when it carries a
//!   subscription id, the version of the call it is about for a log message, else the
//!   session's; for a server→client request, the session's.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mcp_proto::http::{check_body_len, check_head, HttpConfig, HttpRefusal, RequestHead, SESSION_ID_HEADER};
use mcp_proto::interaction::InputRequest;
use mcp_proto::{
    AskError, Asked as AskOutcome, CacheHint, CallId, Caller, CloseReason, Completion, CompletionRef, Config,
    ConnId, ConnKind, Content, Engine, Extension, FrameOutcome, Gate, HandlerError, HttpHead, HttpReply,
    HttpRequest, Implementation, KeyRing, Limits, LogLevel, Output, PromptMessage, PromptOutput,
    ProtocolVersion, RegistryMut, Reply, Request, ResourceContents, ResourceLink, RpcError, Seed, TaskError,
    Ticket, ToolFailure, ToolOutput,
};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::tools::{
    all_tools, auto_complete, auto_prompt, auto_read, auto_reply, fixture_prompts, fixture_resources,
    fixture_templates, gated_tools, Fixture, TestHandler,
};
use crate::wire;

const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_CAPABILITIES_POINTER: &str = "/_meta/io.modelcontextprotocol~1clientCapabilities";
const SUBSCRIPTION_ID_POINTER: &str = "/params/_meta/io.modelcontextprotocol~1subscriptionId";
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Every failure, each starting with its line number.
    pub failures: Vec<String>,
    /// The text of `! known-bug`, if the transcript carries one.
    pub known_bug: Option<String>,
}

impl Report {
    /// No failure.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for fail in &self.failures {
            writeln!(f, "{fail}")?;
        }
        Ok(())
    }
}

/// Runs a transcript and reports every failure.
pub fn run(source: &str) -> Report {
    Runner::new(false).run(source).0
}

/// Runs only the inputs of a transcript and writes what the engine emitted, in transcript
/// syntax, after each input: a starting point for a new transcript, to be checked line by line
/// against the spec, never accepted blindly.
pub fn record(source: &str) -> (Report, String) {
    Runner::new(true).run(source)
}

/// A transcript driven line by line from Rust, for tests that compute their next input from
/// the last output (following cursors, comparing two runs). Expectation lines are not needed:
/// [`Live::line`] returns what the engine emitted instead. The invariants are checked as in
/// [`run`]; [`Live::finish`] reports them.
pub struct Live {
    runner: Runner,
    line: usize,
}

impl Live {
    /// A run whose configuration and setup are the lines of `setup` (anything a transcript
    /// holds); what they emitted is dropped.
    pub fn new(setup: &str) -> Result<Self, String> {
        let mut live = Live { runner: Runner::new(false), line: 0 };
        for text in setup.lines() {
            live.line(text)?;
        }
        live.runner.start()?;
        Ok(live)
    }

    /// Feeds one transcript line (an input or a directive) and returns every event it caused,
    /// in transcript syntax (`< {json}`, `<2 {json}`, `= invoke ...`).
    pub fn line(&mut self, text: &str) -> Result<Vec<String>, String> {
        self.line += 1;
        let text = text.trim_end();
        if text.starts_with('<') || text.starts_with('=') {
            return Err(format!("Live takes no expectation lines: {text:?}"));
        }
        self.runner.line(self.line, text)?;
        Ok(self.runner.observed.drain(..).map(|e| e.to_string()).collect())
    }

    /// Sends `frame` on connection `conn` and returns the frames emitted, as JSON text (any
    /// other event is an error).
    pub fn send(&mut self, conn: usize, frame: &str) -> Result<Vec<String>, String> {
        let mark = if conn == 1 { ">".to_owned() } else { format!(">{conn}") };
        self.line(&format!("{mark} {frame}"))?
            .into_iter()
            .map(|e| match e.split_once(' ') {
                Some((m, json)) if m.starts_with('<') => Ok(json.to_owned()),
                _ => Err(format!("an event that is not a frame: {e}")),
            })
            .collect()
    }

    /// Ends the run: the end-of-transcript checks, and every invariant failure seen.
    pub fn finish(mut self) -> Report {
        if let Err(e) = self.runner.send_draft() {
            self.runner.failures.push(format!("end: {e}"));
        }
        self.runner.finish();
        Report { failures: self.runner.failures, known_bug: None }
    }
}

/// Something the engine did, as a transcript states it. Connections are transcript numbers.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Frame(usize, Vec<u8>),
    Invoke {
        conn: usize,
        method: String,
        name: String,
        id: Value,
    },
    Cancel {
        conn: usize,
        id: Value,
    },
    Close(usize, &'static str),
    Stale,
    UnknownConnection(usize),
    /// What `Engine::ask` returned to the last `! ask`.
    Asked(AskResult),
    /// An `Output::Answer` for the call of request `id`.
    Answer {
        conn: usize,
        id: Value,
        result: AskResult,
    },
    /// One line of what HTTP exchange `N` (the N-th `>>` request) received.
    Http(usize, HttpLine),
    /// What `Engine::start_task` returned to the last `! start-task`: the task id, or the
    /// error's kind.
    StartTask(Result<String, String>),
}

/// One line of an HTTP response, as a transcript writes it after `<<N `.
#[derive(Debug, Clone, PartialEq)]
enum HttpLine {
    /// The status line: `200`.
    Status(u16),
    /// A header, name and value exactly as sent: `Content-Type: application/json`.
    Header(String, String),
    /// A whole non-empty JSON body (of a complete response), one line.
    Body(Vec<u8>),
    /// One line of an SSE frame, without its `\n` (`| id: 0-1`); empty for the blank line that
    /// ends an event (`|`).
    Sse(Vec<u8>),
    /// The stream ended (`Output::Close`): `close end-of-input`.
    Close(&'static str),
}

impl fmt::Display for HttpLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpLine::Status(s) => write!(f, "{s}"),
            HttpLine::Header(n, v) if v.is_empty() => write!(f, "{n}:"),
            HttpLine::Header(n, v) => write!(f, "{n}: {v}"),
            HttpLine::Body(b) => f.write_str(&String::from_utf8_lossy(b)),
            HttpLine::Sse(l) if l.is_empty() => f.write_str("|"),
            HttpLine::Sse(l) => write!(f, "| {}", String::from_utf8_lossy(l)),
            HttpLine::Close(r) => write!(f, "close {r}"),
        }
    }
}

/// Whether `s` is a header line, `Name: value` or `Name:`, with a token for a name.
fn header_line(s: &str) -> Option<(&str, &str)> {
    let (name, value) = s.split_once(':')?;
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return None;
    }
    match value {
        "" => Some((name, "")),
        v => v.strip_prefix(' ').map(|v| (name, v)),
    }
}

impl HttpLine {
    /// The text after `<<N `: see the module docs.
    fn parse(s: &str) -> Result<Self, String> {
        if s == "|" {
            return Ok(HttpLine::Sse(Vec::new()));
        }
        if let Some(l) = s.strip_prefix("| ") {
            return Ok(HttpLine::Sse(l.as_bytes().to_vec()));
        }
        if let Some(r) = s.strip_prefix("close ") {
            return match parse_event(1, &format!("close {r}"))? {
                Event::Close(_, reason) => Ok(HttpLine::Close(reason)),
                _ => Err(format!("unknown close reason {r:?}")),
            };
        }
        if s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()) {
            return s.parse().map(HttpLine::Status).map_err(|e| format!("status {s}: {e}"));
        }
        if let Some((n, v)) = header_line(s) {
            return Ok(HttpLine::Header(n.to_owned(), v.to_owned()));
        }
        Ok(HttpLine::Body(s.as_bytes().to_vec()))
    }
}

/// An HTTP request being read from `>>` lines; sent at the first line that is not one.
struct HttpDraft {
    line: usize,
    method: String,
    path: String,
    caller: Caller,
    headers: Vec<(String, Vec<u8>)>,
    body: Option<Vec<u8>>,
    /// A bare `>>` ended the head: the next line is the body, whatever it looks like.
    head_done: bool,
}

/// Where an exchange is: waiting for its response, streaming, or over.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ExState {
    Waiting,
    Streaming,
    Done,
}

/// What an ask came to: `Engine::ask`'s return value, or an `Output::Answer`.
#[derive(Debug, Clone, PartialEq)]
enum AskResult {
    Pending,
    /// The answers by key, as compact JSON text (numbers exactly as the client wrote them).
    Answered(String),
    /// An [`AskError`]: its kind (`busy`, `unsupported`, ...) and a detail (the required
    /// capabilities, the client's error code and message, the reason an answer is invalid),
    /// which an expectation may leave out.
    Error {
        kind: &'static str,
        detail: String,
    },
}

impl AskResult {
    fn of(r: &Result<AskOutcome, AskError>) -> Self {
        match r {
            Ok(AskOutcome::Pending) => AskResult::Pending,
            Ok(AskOutcome::Answered(m)) => AskResult::Answered(Value::Object(m.clone()).to_string()),
            Err(e) => ask_error(e),
        }
    }

    fn of_answer(r: &Result<Map<String, Value>, AskError>) -> Self {
        match r {
            Ok(m) => AskResult::Answered(Value::Object(m.clone()).to_string()),
            Err(e) => ask_error(e),
        }
    }

    /// `pending`, `answered {json}`, `error <kind> [detail]`.
    fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (word, rest) = s.split_once(' ').map_or((s, ""), |(a, b)| (a, b.trim()));
        match word {
            "pending" if rest.is_empty() => Ok(AskResult::Pending),
            "answered" => {
                let v: Value = serde_json::from_str(rest).map_err(|e| format!("answers {rest}: {e}"))?;
                if !v.is_object() {
                    return Err("the answers are a JSON object".into());
                }
                Ok(AskResult::Answered(v.to_string()))
            }
            "error" => {
                let (kind, detail) = rest.split_once(' ').map_or((rest, ""), |(a, b)| (a, b.trim()));
                let kind = ASK_ERROR_KINDS.iter().find(|k| **k == kind).ok_or_else(|| {
                    format!("unknown ask error kind {kind:?}: one of {}", ASK_ERROR_KINDS.join(", "))
                })?;
                Ok(AskResult::Error { kind, detail: detail.to_owned() })
            }
            _ => Err(format!("an ask result is `pending`, `answered {{json}}` or `error <kind>`, not {s:?}")),
        }
    }

    /// Whether `self` (actual) meets `expected`: an expected error without a detail takes any.
    fn meets(&self, expected: &AskResult) -> bool {
        match (self, expected) {
            (AskResult::Error { kind, .. }, AskResult::Error { kind: k, detail }) if detail.is_empty() => {
                kind == k
            }
            _ => self == expected,
        }
    }
}

impl fmt::Display for AskResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskResult::Pending => f.write_str("pending"),
            AskResult::Answered(json) => write!(f, "answered {json}"),
            AskResult::Error { kind, detail } if detail.is_empty() => write!(f, "error {kind}"),
            AskResult::Error { kind, detail } => write!(f, "error {kind} {detail}"),
        }
    }
}

/// The kinds of [`AskError`], as transcripts name them.
const ASK_ERROR_KINDS: [&str; 10] = [
    "unsupported",
    "rejected",
    "invalid",
    "too-many-rounds",
    "unreachable",
    "busy",
    "stale",
    "suspended",
    "timed-out",
    "other",
];

fn ask_error(e: &AskError) -> AskResult {
    let quoted = |s: &str| Value::String(s.to_owned()).to_string();
    let (kind, detail) = match e {
        AskError::Unsupported(u) => ("unsupported", u.required_capabilities().to_string()),
        AskError::Rejected(r) => ("rejected", format!("{} {}", r.code.code(), quoted(&r.message))),
        AskError::Invalid(i) => ("invalid", quoted(i.message())),
        AskError::TooManyRounds => ("too-many-rounds", String::new()),
        AskError::Unreachable => ("unreachable", String::new()),
        AskError::Busy => ("busy", String::new()),
        AskError::Stale => ("stale", String::new()),
        AskError::Suspended => ("suspended", String::new()),
        AskError::TimedOut => ("timed-out", String::new()),
        other => ("other", format!("{other:?}")),
    };
    AskResult::Error { kind, detail }
}

impl Event {
    /// Whether `self` (what the engine did) meets the expectation `expected`.
    fn meets(&self, expected: &Event) -> bool {
        match (self, expected) {
            (Event::Asked(a), Event::Asked(e)) => a.meets(e),
            (Event::Answer { conn, id, result }, Event::Answer { conn: c, id: i, result: r }) => {
                conn == c && id == i && result.meets(r)
            }
            _ => self == expected,
        }
    }
}

/// `<`, `<2`, `=3`: the mark of a line, with the connection number unless it is 1.
fn mark(c: char, conn: usize) -> String {
    if conn == 1 {
        c.to_string()
    } else {
        format!("{c}{conn}")
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Frame(c, b) => write!(f, "{} {}", mark('<', *c), String::from_utf8_lossy(b)),
            Event::Invoke { conn, method, name, id } => {
                write!(f, "{} invoke {method} {name} {id}", mark('=', *conn))
            }
            Event::Cancel { conn, id } => write!(f, "{} cancel {id}", mark('=', *conn)),
            Event::Close(c, r) => write!(f, "{} close {r}", mark('=', *c)),
            Event::Stale => f.write_str("= stale"),
            Event::UnknownConnection(c) => write!(f, "{} unknown-connection", mark('=', *c)),
            Event::Asked(r) => write!(f, "= asked {r}"),
            Event::Answer { conn, id, result: AskResult::Answered(json) } => {
                write!(f, "{} answer {id} {json}", mark('=', *conn))
            }
            Event::Answer { conn, id, result } => write!(f, "{} answer {id} {result}", mark('=', *conn)),
            Event::Http(ex, l) => write!(f, "<<{ex} {l}"),
            Event::StartTask(Ok(id)) => write!(f, "= start-task {}", Value::String(id.clone())),
            Event::StartTask(Err(kind)) => write!(f, "= start-task error {kind}"),
        }
    }
}

/// Splits a `>`, `<` or `=` line into its connection number and the rest: `>2 {..}` is
/// connection 2, `> {..}` connection 1.
fn prefixed(text: &str, c: char) -> Option<(usize, &str)> {
    let rest = text.strip_prefix(c)?;
    let digits = rest.len() - rest.trim_start_matches(|x: char| x.is_ascii_digit()).len();
    let (n, rest) = rest.split_at(digits);
    let rest = rest.strip_prefix(' ')?;
    let n = if n.is_empty() { 1 } else { n.parse().ok().filter(|n| *n > 0)? };
    Some((n, rest))
}

fn close_reason(r: CloseReason) -> &'static str {
    match r {
        CloseReason::EndOfInput => "end-of-input",
        CloseReason::Closed => "closed",
        CloseReason::FrameTooLarge => "frame-too-large",
        CloseReason::Shutdown => "shutdown",
        CloseReason::Expired => "expired",
        CloseReason::Deleted => "deleted",
        CloseReason::Evicted => "evicted",
        CloseReason::Revoked => "revoked",
        CloseReason::Replaced => "replaced",
        CloseReason::Displaced => "displaced",
        _ => "other",
    }
}

/// Which test items to register: `None` is the default, `Some` names them.
type Selection = Option<Vec<String>>;

/// The configuration directives, gathered before the engine is built.
#[derive(Debug, Clone)]
struct Settings {
    limits: Limits,
    instructions: Option<String>,
    full_info: bool,
    tools: Selection,
    resources: Selection,
    templates: Selection,
    prompts: Selection,
    /// Skill fixtures by name ([`crate::skills`]).
    skills: Selection,
    caller: Caller,
    /// `Config::state_epoch`.
    state_epoch: u64,
    /// Resources and templates (by URI or `uriTemplate`) registered with `CacheHint::shared`.
    shareable: Vec<(String, Duration)>,
    /// `Config::discover_cache`.
    discover_cache: CacheHint,
    /// `Config::logging`.
    logging: bool,
    /// `Config::resource_subscriptions`.
    subscriptions: bool,
    /// `Config::envelopes`.
    envelopes: bool,
    /// `Config::mode`.
    mode: mcp_proto::Mode,
    /// Extensions declared at start: id, settings, and the role their gate asks for.
    extensions: Vec<(String, Value, Option<String>)>,
    /// Mirrors of the limits `Limits` has no getter for.
    max_batch_len: usize,
    max_depth: usize,
    max_id_bytes: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            instructions: None,
            full_info: false,
            tools: None,
            resources: None,
            templates: None,
            prompts: None,
            skills: None,
            caller: Caller::anonymous(),
            state_epoch: 0,
            shareable: Vec::new(),
            discover_cache: CacheHint::private(),
            logging: true,
            subscriptions: true,
            envelopes: false,
            mode: mcp_proto::Mode::Direct,
            extensions: Vec::new(),
            max_batch_len: 64,
            max_depth: 64,
            max_id_bytes: 256,
        }
    }
}

/// `<id> {settings} [role <role>]`.
fn parse_extension(s: &str) -> Result<(String, Value, Option<String>), String> {
    let usage = "`! extension <id> {settings} [role <role>]`";
    let (id, rest) = s.split_once(' ').ok_or(usage)?;
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    let settings = match values.next() {
        Some(Ok(v)) => v,
        _ => return Err(usage.into()),
    };
    let tail = rest.get(values.byte_offset()..).unwrap_or_default().trim();
    let role = match tail.split_whitespace().collect::<Vec<_>>().as_slice() {
        [] => None,
        ["role", role] => Some((*role).to_owned()),
        _ => return Err(usage.into()),
    };
    Ok((id.to_owned(), settings, role))
}

/// `<identity|anonymous> [role...]`.
fn parse_caller(s: &str) -> Result<Caller, String> {
    let mut words = s.split_whitespace();
    let mut caller = match words.next() {
        None => return Err("a caller is `<identity|anonymous> [role...]`".into()),
        Some("anonymous") => Caller::anonymous(),
        Some(id) => Caller::identified(id),
    };
    for role in words {
        caller = caller.with_role(role);
    }
    Ok(caller)
}

/// What a held call asked for, to build its automatic answer.
#[derive(Debug, Clone)]
enum Asked {
    Tool(Map<String, Value>),
    Read { uri: String, variables: Vec<(String, String)> },
    Prompt(BTreeMap<String, String>),
    Complete { value: String },
}

/// One invocation the runner has seen.
struct Held {
    index: usize,
    conn: usize,
    call: CallId,
    ticket: Option<Ticket>,
    id: Value,
    version: ProtocolVersion,
    handler: Fixture,
    asked: Asked,
    cancelled: bool,
    /// A legacy `! ask` is waiting for its `Output::Answer`.
    asking: bool,
    /// A modern `! ask` answered the request (`input_required` or an error) and the engine
    /// cancels the handler: that `Cancel` excuses no reply.
    suspended: bool,
    /// Its request was answered `resultType: "task"`: it runs on as a task, and its asks wait
    /// for `tasks/update` (`pending`, then `= answer`).
    task: bool,
}

/// A request of the current input that may become an `Invoke`.
struct Candidate {
    conn: usize,
    id: Value,
    method: String,
    name: String,
    arguments: Value,
}

/// What one request expects, for the reply accounting.
struct Awaiting {
    method: String,
    version: Option<ProtocolVersion>,
    /// The `notifications` filter of a `subscriptions/listen`.
    filter: Option<Value>,
    /// The client's capabilities: `params.capabilities` of an `initialize`, or
    /// `_meta["io.modelcontextprotocol/clientCapabilities"]` of a 2026-07-28 request.
    caps: Option<Value>,
}

/// The honoured filter of an open listen stream.
#[derive(Debug, Default)]
struct Stream {
    lists: Vec<&'static str>,
    uris: Vec<String>,
    /// Tasks whose `notifications/tasks` it takes (Tasks extension `taskIds`).
    tasks: Vec<String>,
}

/// A connection the transcript opened.
struct Conn {
    id: ConnId,
    open: bool,
    session: Option<ProtocolVersion>,
    initialized: bool,
    /// The capabilities the client declared in the `initialize` its session came from.
    client_caps: Option<Value>,
    /// Server→client requests the client has not answered, by canonical id: their method.
    outbound: HashMap<String, String>,
    /// Acknowledged listen streams the client has not cancelled, by canonical id.
    listens: HashMap<String, Stream>,
}

/// The process-wide start of virtual time: taken once, then only ever advanced.
fn epoch() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

struct Runner {
    record: bool,
    recorded: String,
    settings: Settings,
    known_bug: Option<String>,
    engine: Option<Engine<Fixture>>,
    conns: BTreeMap<usize, Conn>,
    now: Instant,
    auto: bool,
    held: Vec<Held>,
    /// Auto answers, given once the output is drained (the engine takes no input before).
    answers: Vec<(Ticket, Reply, String)>,
    invocations: usize,
    candidates: Vec<Candidate>,
    observed: VecDeque<Event>,
    /// The line that caused the observed events (for messages).
    cause: usize,
    /// Requests awaiting a reply, by connection and canonical id.
    awaiting: HashMap<(usize, String), VecDeque<Awaiting>>,
    /// Replies with a `null` id still owed, by connection.
    awaiting_null: HashMap<usize, usize>,
    /// Cancelled calls, by connection and canonical id: each excuses one missing reply.
    excused: HashMap<(usize, String), usize>,
    /// `! shutdown` ran: listen streams may receive their final result.
    shutting_down: bool,
    /// The connection and version of the call `! log` is logging for.
    log_call: Option<(usize, ProtocolVersion)>,
    /// Every `requestState` of an `input_required` result, in the order emitted.
    states: Vec<String>,
    /// Requests answered `resultType: "task"` before their `Invoke` was seen (a task made at
    /// dispatch is answered before the engine hands out the call): marked on the held call
    /// when it comes.
    task_replies: Vec<(usize, Value)>,
    /// The server→client requests the last `! ask` must send (it returned `pending`): their
    /// connection and method, in order.
    ask_sends: VecDeque<(usize, &'static str)>,
    /// The HTTP request the `>>` lines so far describe, not sent yet.
    draft: Option<HttpDraft>,
    /// The transport rules `check_head` applies (the defaults, bodies bound by the frame size).
    http: Option<HttpConfig>,
    /// HTTP requests made so far: the last one's number is what a bare `<<` names.
    exchanges: usize,
    /// Each pending exchange or `GET` stream: its number and where it is.
    http_conns: HashMap<ConnId, (usize, ExState)>,
    /// Every `Mcp-Session-Id` a response carried, in order (`{{session}}`, `{{session N}}`).
    sessions: Vec<String>,
    failures: Vec<String>,
}

fn key(id: &Value) -> String {
    id.to_string()
}

/// The list-changed notification a filter flag asks for.
const LIST_FLAGS: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("resourcesListChanged", "notifications/resources/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
];

impl Runner {
    fn new(record: bool) -> Self {
        Self {
            record,
            recorded: String::new(),
            settings: Settings::default(),
            known_bug: None,
            engine: None,
            conns: BTreeMap::new(),
            now: epoch(),
            auto: false,
            held: Vec::new(),
            answers: Vec::new(),
            invocations: 0,
            candidates: Vec::new(),
            observed: VecDeque::new(),
            cause: 0,
            awaiting: HashMap::new(),
            awaiting_null: HashMap::new(),
            excused: HashMap::new(),
            shutting_down: false,
            log_call: None,
            states: Vec::new(),
            task_replies: Vec::new(),
            ask_sends: VecDeque::new(),
            draft: None,
            http: None,
            exchanges: 0,
            http_conns: HashMap::new(),
            sessions: Vec::new(),
            failures: Vec::new(),
        }
    }

    fn run(mut self, source: &str) -> (Report, String) {
        let mut stopped = false;
        for (i, raw) in source.lines().enumerate() {
            let line = i + 1;
            let text = raw.trim_end();
            if self.record {
                let is_expectation = prefixed(text, '<').is_some()
                    || prefixed(text, '=').is_some()
                    || text == "<"
                    || text.starts_with("<<");
                let starts_request =
                    text.strip_prefix(">> ").is_some_and(|r| matches!(request_line(r), Ok(Some(_))));
                if !text.starts_with(">>") || starts_request {
                    if let Err(e) = self.send_draft() {
                        self.failures.push(format!("line {line}: {e}"));
                        stopped = true;
                        break;
                    }
                }
                if !is_expectation {
                    // Outputs are drained synchronously after each input, so everything the
                    // previous input caused is already observed.
                    self.flush_recorded();
                    self.recorded.push_str(raw);
                    self.recorded.push('\n');
                }
            }
            if let Err(e) = self.line(line, text) {
                self.failures.push(format!("line {line}: {e}"));
                stopped = true;
                break;
            }
        }
        if !stopped {
            if let Err(e) = self.send_draft() {
                self.failures.push(format!("end: {e}"));
            }
            if self.record {
                self.flush_recorded();
            }
            self.finish();
        }
        let report = Report { failures: self.failures, known_bug: self.known_bug };
        (report, self.recorded)
    }

    fn flush_recorded(&mut self) {
        while let Some(e) = self.observed.pop_front() {
            self.recorded.push_str(&e.to_string());
            self.recorded.push('\n');
        }
    }

    /// Fails when outputs of the previous input were not all expected.
    fn settle(&mut self) -> Result<(), String> {
        if self.record || self.observed.is_empty() {
            return Ok(());
        }
        let rest: Vec<String> = self.observed.iter().map(|e| format!("  {e}")).collect();
        Err(format!(
            "the engine emitted output that no line expects (after line {}):\n{}",
            self.cause,
            rest.join("\n")
        ))
    }

    fn line(&mut self, line: usize, text: &str) -> Result<(), String> {
        if let Some(rest) = text.strip_prefix(">>") {
            return self.http_line(line, rest);
        }
        // Any other line ends the request `>>` lines describe.
        self.send_draft()?;
        if text.is_empty() || text.starts_with('#') {
            return Ok(());
        }
        if let Some(rest) = text.strip_prefix("<<") {
            let digits = rest.len() - rest.trim_start_matches(|x: char| x.is_ascii_digit()).len();
            let (n, rest) = rest.split_at(digits);
            let rest = rest.strip_prefix(' ').ok_or("an HTTP expectation is `<<[N] <line>`")?;
            let ex = if n.is_empty() {
                self.exchanges
            } else {
                n.parse().map_err(|_| format!("bad exchange number {n:?}"))?
            };
            if ex == 0 || ex > self.exchanges {
                return Err(format!("`<<{n}`: no HTTP request {ex} was made ({} so far)", self.exchanges));
            }
            let expected = Event::Http(ex, HttpLine::parse(&self.expand(rest)?)?);
            return self.expect(expected);
        }
        if let Some(rest) = text.strip_prefix("=0 ") {
            let expected = parse_event(0, rest)?;
            return self.expect(expected);
        }
        if let Some((conn, frame)) = prefixed(text, '>') {
            self.settle()?;
            let frame = self.expand(frame)?;
            self.cause = line;
            return self.frame_in(conn, frame.as_bytes());
        }
        if let Some((conn, expected)) = prefixed(text, '<') {
            let expected = Event::Frame(conn, self.expand(expected)?.into_bytes());
            return self.expect(expected);
        }
        if let Some((conn, rest)) = prefixed(text, '=') {
            let expected = parse_event(conn, rest)?;
            return self.expect(expected);
        }
        if let Some(step) = text.strip_prefix("@ ") {
            self.settle()?;
            let d = parse_duration(
                step.trim().strip_prefix('+').ok_or("a clock step is `@ +<n>s` or `@ +<n>ms`")?,
            )?;
            self.start()?;
            self.cause = line;
            self.now += d;
            let now = self.now;
            if let Some(engine) = self.engine.as_mut() {
                engine.handle_timeout(now);
            }
            return self.drain();
        }
        if let Some(d) = text.strip_prefix("! ") {
            return self.directive(line, d.trim());
        }
        Err(format!("cannot read this line: {text:?}"))
    }

    fn expect(&mut self, expected: Event) -> Result<(), String> {
        if self.record {
            return Ok(());
        }
        match self.observed.pop_front() {
            None => Err(format!("expected\n  {expected}\nbut the engine emitted nothing more")),
            Some(actual) if actual.meets(&expected) => Ok(()),
            Some(actual) => Err(format!(
                "expected\n  {expected}\nbut the engine emitted\n  {actual}{}",
                diff(&expected, &actual)
            )),
        }
    }

    fn directive(&mut self, line: usize, d: &str) -> Result<(), String> {
        let (name, rest) = d.split_once(' ').map_or((d, ""), |(a, b)| (a, b.trim()));
        let config = |s: &mut Self| -> Result<(), String> {
            if s.engine.is_some() {
                Err(format!("`! {name}` configures the engine and must come before the first input"))
            } else {
                Ok(())
            }
        };
        let number = || rest.parse::<usize>().map_err(|_| format!("`! {name}` takes a number, not {rest:?}"));
        let names = || Some(rest.split_whitespace().map(str::to_owned).collect::<Vec<_>>());
        match name {
            "page-size" => {
                config(self)?;
                self.settings.limits.page_size(number()?);
            }
            "max-frame-bytes" => {
                config(self)?;
                self.settings.limits.max_frame_bytes(number()?);
            }
            "max-id-bytes" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_id_bytes(n);
                self.settings.max_id_bytes = n;
            }
            "max-method-bytes" => {
                config(self)?;
                self.settings.limits.max_method_bytes(number()?);
            }
            "max-depth" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_depth(n);
                self.settings.max_depth = n;
            }
            "max-in-flight" => {
                config(self)?;
                self.settings.limits.max_in_flight(number()?);
            }
            "max-batch-len" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_batch_len(n);
                self.settings.max_batch_len = n;
            }
            "max-response-bytes" => {
                config(self)?;
                self.settings.limits.max_response_bytes(number()?);
            }
            "max-uri-bytes" => {
                config(self)?;
                self.settings.limits.max_uri_bytes(number()?);
            }
            "max-subscribed-uris" => {
                config(self)?;
                self.settings.limits.max_subscribed_uris(number()?);
            }
            "max-subscriptions" => {
                config(self)?;
                self.settings.limits.max_subscriptions(number()?);
            }
            "max-listens" => {
                config(self)?;
                self.settings.limits.max_listens(number()?);
            }
            "max-connections" => {
                config(self)?;
                self.settings.limits.max_connections(number()?);
            }
            "call-timeout" => {
                config(self)?;
                self.settings.limits.call_timeout(Some(parse_duration(rest)?));
            }
            "cache-ttl-ms" => {
                config(self)?;
                self.settings.limits.cache_ttl(Duration::from_millis(number()? as u64));
            }
            "max-input-rounds" => {
                config(self)?;
                let n = number()?;
                self.settings
                    .limits
                    .max_input_rounds(u32::try_from(n).map_err(|_| format!("{n} is too large"))?);
            }
            "state-ttl" => {
                config(self)?;
                self.settings.limits.state_ttl(parse_duration(rest)?);
            }
            "resume-window" => {
                config(self)?;
                self.settings.limits.resume_window(parse_duration(rest)?);
            }
            "state-epoch" => {
                config(self)?;
                self.settings.state_epoch = number()? as u64;
            }
            "shareable" => {
                config(self)?;
                let (item, ttl) = rest.rsplit_once(' ').ok_or("`! shareable <uri|uriTemplate> <ttl>`")?;
                self.settings.shareable.push((item.trim().to_owned(), parse_duration(ttl)?));
            }
            "discover-cache" => {
                config(self)?;
                self.settings.discover_cache = match rest.split_once(' ') {
                    Some(("shared", ttl)) => CacheHint::shared(parse_duration(ttl)?),
                    Some(("private", ttl)) => CacheHint::private_for(parse_duration(ttl)?),
                    _ => return Err("`! discover-cache <shared|private> <ttl>`".into()),
                };
            }
            "max-ledger-entries" => {
                config(self)?;
                self.settings.limits.max_ledger_entries(number()?);
            }
            "max-tasks" => {
                config(self)?;
                self.settings.limits.max_tasks(number()?);
            }
            "task-ttl" => {
                config(self)?;
                self.settings.limits.task_ttl(parse_duration(rest)?);
            }
            "task-poll-interval" => {
                config(self)?;
                self.settings.limits.task_poll_interval(parse_duration(rest)?);
            }
            "instructions" => {
                config(self)?;
                let (s, _) = json_string(rest)?;
                self.settings.instructions = Some(s);
            }
            "logging" | "subscriptions" => {
                config(self)?;
                if rest != "off" {
                    return Err(format!("`! {name}` takes `off` (it is on by default)"));
                }
                if name == "logging" {
                    self.settings.logging = false;
                } else {
                    self.settings.subscriptions = false;
                }
            }
            "envelopes" => {
                config(self)?;
                self.settings.envelopes = match rest {
                    "on" => true,
                    "off" => false,
                    _ => return Err("`! envelopes on|off`".into()),
                };
            }
            "mode" => {
                config(self)?;
                self.settings.mode = match rest {
                    "compact" => mcp_proto::Mode::Compact,
                    "direct" => mcp_proto::Mode::Direct,
                    _ => return Err("`! mode compact|direct`".into()),
                };
            }
            "extension" => {
                config(self)?;
                self.settings.extensions.push(parse_extension(rest)?);
            }
            "server-info" => {
                config(self)?;
                if rest != "full" {
                    return Err("`! server-info` takes `full`".into());
                }
                self.settings.full_info = true;
            }
            "tools" => {
                config(self)?;
                self.settings.tools = names();
            }
            "resources" => {
                config(self)?;
                self.settings.resources = names();
            }
            "templates" => {
                config(self)?;
                self.settings.templates = names();
            }
            "prompts" => {
                config(self)?;
                self.settings.prompts = names();
            }
            "skills" => {
                config(self)?;
                self.settings.skills = names();
            }
            "caller" => {
                config(self)?;
                self.settings.caller = parse_caller(rest)?;
            }
            "known-bug" => self.known_bug = Some(rest.to_owned()),
            "auto" => self.auto = true,
            "manual" => self.auto = false,
            _ => {
                // Every other directive acts on the engine, after what came before is matched.
                self.settle()?;
                self.start()?;
                self.cause = line;
                self.action(name, rest)?;
                self.drain()?;
                let unsent: Vec<String> =
                    self.ask_sends.drain(..).map(|(c, m)| format!("{m} (connection {c})")).collect();
                if !unsent.is_empty() {
                    self.invariant(format!(
                        "`! ask` returned pending, but these requests were never sent: {}",
                        unsent.join(", ")
                    ));
                }
                return Ok(());
            }
        }
        Ok(())
    }

    /// The directives that act on the engine; the caller drains afterwards.
    fn action(&mut self, name: &str, rest: &str) -> Result<(), String> {
        let now = self.now;
        match name {
            "complete" => self.complete(rest),
            "ask" => self.ask(rest),
            "start-task" => self.start_task(rest),
            "log" => self.log(rest),
            "progress" => self.progress(rest),
            "shutdown" => {
                self.shutting_down = true;
                let engine = self.engine_mut()?;
                engine.shutdown(now);
                Ok(())
            }
            "close-input" | "close" => {
                let n = if rest.is_empty() {
                    1
                } else {
                    rest.parse().map_err(|_| format!("bad connection {rest:?}"))?
                };
                let id = self.conn(n)?.id;
                let engine = self.engine_mut()?;
                if name == "close" {
                    engine.close(now, id);
                } else {
                    engine.close_input(now, id);
                }
                Ok(())
            }
            "drop" => {
                let n: usize =
                    rest.parse().map_err(|_| format!("`! drop N` takes a request number, not {rest:?}"))?;
                let conn = self
                    .http_conns
                    .iter()
                    .find(|(_, (ex, _))| *ex == n)
                    .map(|(conn, _)| *conn)
                    .ok_or_else(|| format!("HTTP request {n} has no pending response"))?;
                self.engine_mut()?.close(now, conn);
                Ok(())
            }
            "open" => {
                let (n, who) = rest.split_once(' ').ok_or("`! open N <identity|anonymous> [role...]`")?;
                let n: usize = n.parse().map_err(|_| format!("bad connection number {n:?}"))?;
                if n == 0 || self.conns.contains_key(&n) {
                    return Err(format!("connection {n} is already used (numbers are never reused)"));
                }
                let caller = parse_caller(who)?;
                let id = self
                    .engine_mut()?
                    .open(now, ConnKind::Stdio, caller)
                    .map_err(|e| format!("open: {e:?}"))?;
                self.conns.insert(n, Conn::new(id));
                Ok(())
            }
            "server-gate" => {
                let gate = match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
                    ["role", role] => Some(Gate::role(*role)),
                    ["identified"] => Some(Gate::identified()),
                    ["none"] => None,
                    _ => return Err("`! server-gate role <role>` / `identified` / `none`".into()),
                };
                self.engine_mut()?.registry_mut(now).set_gate(gate);
                Ok(())
            }
            "register" | "unregister" => {
                let (kind, names) = rest.split_once(' ').ok_or("`! register <kind> NAME...`")?;
                let engine = self.engine.as_mut().ok_or("no engine")?;
                // One input for the whole line, as one registry edit.
                let mut r = engine.registry_mut(now);
                for n in names.split_whitespace() {
                    if name == "register" {
                        register(&mut r, kind, n, &self.settings.shareable)?;
                    } else {
                        unregister(&mut r, kind, n)?;
                    }
                }
                Ok(())
            }
            "app" | "shell" => {
                let app = parse_app(rest)?;
                let html: &'static str = Box::leak(app.html().to_owned().into_boxed_str());
                let mut r = self.engine_mut()?.registry_mut(now);
                let done = if name == "app" {
                    r.add_app(app, Fixture::App(html))
                } else {
                    r.mount_apps_shell(app, Fixture::App(html))
                };
                done.map_err(|e| format!("`! {name}`: {e}"))
            }
            "app-tool" => {
                let usage = "`! app-tool NAME URI model|app|model+app`";
                let [tool, uri, vis] = rest.split_whitespace().collect::<Vec<_>>()[..] else {
                    return Err(usage.into());
                };
                let visibility = match vis {
                    "model" => mcp_proto::Visibility::Model,
                    "app" => mcp_proto::Visibility::App,
                    "model+app" => mcp_proto::Visibility::ModelAndApp,
                    _ => return Err(usage.into()),
                };
                let t = mcp_proto::Tool::new(tool, "An app tool", serde_json::json!({"type": "object"}))
                    .ui(uri, visibility);
                let mut r = self.engine_mut()?.registry_mut(now);
                r.add_tool(t, Fixture::Tool(crate::tools::TestHandler::Nested))
                    .map_err(|e| format!("`! app-tool`: {e}"))
            }
            "notify-updated" => {
                if rest.is_empty() {
                    return Err("`! notify-updated <uri>`".into());
                }
                self.engine_mut()?.notify_resource_updated(now, rest);
                Ok(())
            }
            "bump-epoch" => {
                self.engine_mut()?.bump_epoch(now);
                Ok(())
            }
            "set-epoch" => {
                let epoch =
                    rest.parse().map_err(|_| format!("`! set-epoch` takes a number, not {rest:?}"))?;
                self.engine_mut()?.set_epoch(now, epoch);
                Ok(())
            }
            _ => Err(format!("unknown directive `! {name}`")),
        }
    }

    fn engine_mut(&mut self) -> Result<&mut Engine<Fixture>, String> {
        self.engine.as_mut().ok_or_else(|| "no engine".to_owned())
    }

    fn conn(&self, n: usize) -> Result<&Conn, String> {
        self.conns
            .get(&n)
            .ok_or_else(|| format!("connection {n} was never opened (use `! open {n} <caller>`)"))
    }

    /// The transcript number of an engine connection.
    fn number(&self, id: ConnId) -> Option<usize> {
        self.conns.iter().find(|(_, c)| c.id == id).map(|(n, _)| *n)
    }

    /// Builds the engine on first use.
    fn start(&mut self) -> Result<(), String> {
        if self.engine.is_some() {
            return Ok(());
        }
        let s = &self.settings;
        let mut info = Implementation::new("replay", "1.0.0");
        if s.full_info {
            info.title = Some("Replay Server".into());
            info.description = Some("Replays transcripts".into());
            info.website_url = Some("https://example.com/replay".into());
        }
        let mut config = Config::new(info, KeyRing::new([7; 32]));
        config.limits = s.limits.clone();
        config.instructions = s.instructions.clone();
        config.state_epoch = s.state_epoch;
        config.discover_cache = s.discover_cache;
        config.logging = s.logging;
        config.resource_subscriptions = s.subscriptions;
        config.envelopes = s.envelopes;
        config.mode = s.mode;
        // Session ids come from the seed: a fixed one makes them the same on every run.
        config.seed = Some(Seed([11; 32]));
        self.http = Some(HttpConfig::default());
        let mut engine = Engine::new(config, self.now);
        // The default tool set is `all_tools`; `admin_tool` only when named.
        let known: Vec<String> =
            all_tools().into_iter().chain(gated_tools()).map(|(t, _)| t.name().to_owned()).collect();
        let tools: Vec<String> = match &s.tools {
            Some(w) => {
                if let Some(bad) = w.iter().find(|n| !known.contains(n)) {
                    return Err(format!("`! tools`: no test tool named {bad:?}"));
                }
                // Registered in the fixture order, whatever the order named.
                known.iter().filter(|n| w.contains(n)).cloned().collect()
            }
            None => all_tools().into_iter().map(|(t, _)| t.name().to_owned()).collect(),
        };
        let select = |sel: &Selection, all: Vec<String>, what: &str| -> Result<Vec<String>, String> {
            let Some(w) = sel else { return Ok(Vec::new()) };
            if w.iter().any(|n| n == "all") {
                return Ok(all);
            }
            if let Some(bad) = w.iter().find(|n| !all.contains(n)) {
                return Err(format!("`! {what}`: no test fixture named {bad:?}"));
            }
            Ok(w.clone())
        };
        let resources = select(
            &s.resources,
            fixture_resources().into_iter().map(|(r, _)| r.uri().to_owned()).collect(),
            "resources",
        )?;
        let templates = select(
            &s.templates,
            fixture_templates().into_iter().map(|(t, _, _)| t.uri_template().to_owned()).collect(),
            "templates",
        )?;
        let prompts = select(
            &s.prompts,
            fixture_prompts().into_iter().map(|(p, _, _)| p.name().to_owned()).collect(),
            "prompts",
        )?;
        let skills = select(
            &s.skills,
            crate::skills::fixture_skills().iter().map(|s| s.name().to_owned()).collect(),
            "skills",
        )?;
        for (kind, list) in [
            ("tool", tools),
            ("resource", resources),
            ("template", templates),
            ("prompt", prompts),
            ("skill", skills),
        ] {
            for name in list {
                register(&mut engine.registry_mut(self.now), kind, &name, &s.shareable)?;
            }
        }
        for (id, settings, role) in &s.extensions {
            let mut e = Extension::new(id.clone(), settings.clone());
            if let Some(role) = role {
                e = e.gate(Gate::role(role.clone()));
            }
            engine.registry_mut(self.now).add_extension(e).map_err(|e| format!("`! extension`: {e}"))?;
        }
        let conn = engine
            .open(self.now, ConnKind::Stdio, self.settings.caller.clone())
            .map_err(|e| format!("{e:?}"))?;
        // Nothing is open yet, so registering told nobody; drop whatever it queued.
        while engine.poll_output().is_some() {}
        self.engine = Some(engine);
        self.conns.insert(1, Conn::new(conn));
        Ok(())
    }

    fn frame_in(&mut self, conn: usize, bytes: &[u8]) -> Result<(), String> {
        self.start()?;
        let id = self.conn(conn)?.id;
        let plan = self.classify(conn, bytes);
        // The client's side of the notifications it sends: a cancelled listen stream is over
        // for it at once, and `initialized` completes its handshake.
        if let Some(c) = self.conns.get_mut(&conn) {
            for l in &plan.cancelled {
                c.listens.remove(l);
            }
            if plan.initialized && c.session.is_some() {
                c.initialized = true;
            }
            for id in &plan.responses {
                c.outbound.remove(id);
            }
        }
        let now = self.now;
        let engine = self.engine_mut()?;
        let outcome = engine.handle_frame(now, id, bytes);
        match outcome {
            FrameOutcome::UnknownConnection => {
                self.observed.push_back(Event::UnknownConnection(conn));
                return Ok(());
            }
            FrameOutcome::Reply | FrameOutcome::NoReply => {}
        }
        let replies = plan.nulls + plan.requests.len();
        if (outcome == FrameOutcome::Reply) != (replies > 0) {
            self.invariant(format!(
                "handle_frame returned {outcome:?}, but the frame holds {} request(s) and {} unreadable message(s)",
                plan.requests.len(),
                plan.nulls
            ));
        }
        *self.awaiting_null.entry(conn).or_default() += plan.nulls;
        for (id, a) in plan.requests {
            self.awaiting.entry((conn, key(&id))).or_default().push_back(a);
        }
        self.candidates = plan.calls;
        let cancelled = plan.cancelled;
        self.drain()?;
        // A request the client cancelled before it ever reached a handler (a later member of the
        // same batch cancelling it) is owed nothing either.
        for id in cancelled {
            let invoked = self.held.iter().any(|h| h.conn == conn && key(&h.id) == id);
            let waiting = self.awaiting.get(&(conn, id.clone())).map_or(0, |l| l.len());
            let excused = self.excused.entry((conn, id)).or_default();
            if !invoked && waiting > *excused {
                *excused += 1;
            }
        }
        Ok(())
    }

    fn invariant(&mut self, msg: String) {
        self.failures.push(format!("line {}: invariant: {msg}", self.cause));
    }

    /// Drains `poll_output`, then completes the auto invocations it held, until neither leaves
    /// anything.
    fn drain(&mut self) -> Result<(), String> {
        loop {
            let Some(engine) = self.engine.as_mut() else { return Ok(()) };
            let Some(out) = engine.poll_output() else {
                if self.answers.is_empty() {
                    return Ok(());
                }
                // One at a time: each completion is an input, whose output is drained first.
                let (ticket, reply, what) = self.answers.remove(0);
                let now = self.now;
                if engine.complete(now, ticket, reply).is_err() {
                    return Err(format!("auto completion of {what} was Stale"));
                }
                continue;
            };
            match out {
                Output::Frame { conn, bytes, .. } if self.http_conns.contains_key(&conn) => {
                    self.http_frame(conn, &bytes);
                }
                Output::Respond { conn, head, body } => self.http_respond(conn, &head, &body),
                Output::Stream { conn, head } => self.http_stream(conn, &head),
                Output::Close { conn, reason, .. } if self.http_conns.contains_key(&conn) => {
                    self.http_close(conn, reason);
                }
                Output::Frame { conn, bytes, .. } => {
                    let Some(n) = self.number(conn) else {
                        self.invariant("a frame for a connection the transcript never opened".into());
                        continue;
                    };
                    if !self.conns.get(&n).is_some_and(|c| c.open) {
                        self.invariant(format!("a frame for connection {n} after it closed"));
                    }
                    self.check_frame(n, &bytes);
                    self.observed.push_back(Event::Frame(n, bytes));
                }
                Output::Invoke(inv) => self.invoked(inv)?,
                Output::Cancel { call, .. } => {
                    let Some(h) = self.held.iter_mut().find(|h| h.call == call) else {
                        self.invariant(format!("Cancel of a call the engine never invoked: {call:?}"));
                        continue;
                    };
                    h.cancelled = true;
                    h.asking = false;
                    let (conn, id, suspended) = (h.conn, h.id.clone(), h.suspended);
                    if !suspended {
                        // A modern ask that suspended the call answered it itself.
                        *self.excused.entry((conn, key(&id))).or_default() += 1;
                    }
                    self.observed.push_back(Event::Cancel { conn, id });
                }
                Output::Answer { call, answers } => {
                    let Some(h) = self.held.iter_mut().find(|h| h.call == call) else {
                        self.invariant(format!("Answer for a call the engine never invoked: {call:?}"));
                        continue;
                    };
                    let waiting = std::mem::replace(&mut h.asking, false);
                    let (conn, id, cancelled) = (h.conn, h.id.clone(), h.cancelled);
                    if !waiting {
                        self.invariant(format!("an Answer for call {id}, which is waiting for none"));
                    }
                    if cancelled {
                        self.invariant(format!("an Answer for call {id}, which was cancelled"));
                    }
                    self.observed.push_back(Event::Answer {
                        conn,
                        id,
                        result: AskResult::of_answer(&answers),
                    });
                }
                Output::Close { conn, reason, .. } => {
                    let Some(n) = self.number(conn) else {
                        self.invariant("Close of a connection the transcript never opened".into());
                        continue;
                    };
                    let was_open = self.conns.get_mut(&n).is_some_and(|c| {
                        c.listens.clear();
                        std::mem::replace(&mut c.open, false)
                    });
                    if !was_open {
                        self.invariant(format!("a second Close of connection {n}"));
                    }
                    self.observed.push_back(Event::Close(n, close_reason(reason)));
                }
            }
        }
    }

    fn invoked(&mut self, inv: mcp_proto::Invocation<Fixture>) -> Result<(), String> {
        // A connection the transcript did not open is an HTTP session or exchange: 0.
        let conn = self.number(inv.conn).unwrap_or(0);
        let (method, name, arguments, asked) = match &inv.request {
            Request::CallTool { name, arguments } => {
                ("tools/call", name.clone(), Value::Object(arguments.clone()), Asked::Tool(arguments.clone()))
            }
            Request::ReadResource { uri, variables, .. } => (
                "resources/read",
                uri.clone(),
                Value::Null,
                Asked::Read { uri: uri.clone(), variables: variables.clone() },
            ),
            Request::GetPrompt { name, arguments } => {
                let args: Map<String, Value> =
                    arguments.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
                ("prompts/get", name.clone(), Value::Object(args), Asked::Prompt(arguments.clone()))
            }
            Request::Complete { reference, argument, value, .. } => {
                let name = match reference {
                    CompletionRef::Prompt(n) | CompletionRef::Template(n) => n.clone(),
                    _ => return Err("a completion of an unknown reference kind".into()),
                };
                let args = serde_json::json!({"name": argument, "value": value});
                ("completion/complete", name, args, Asked::Complete { value: value.clone() })
            }
            _ => return Err("an invocation of a kind this runner does not know".into()),
        };
        let pos = self
            .candidates
            .iter()
            .position(|c| c.conn == conn && c.method == method && c.name == name && c.arguments == arguments);
        let Some(pos) = pos else {
            return Err(format!(
                "an Invoke of {method} {name} with arguments {arguments} on connection {conn} matches no request of this input"
            ));
        };
        let cand = self.candidates.remove(pos);
        self.invocations += 1;
        let handler = inv.handler;
        let call = inv.ticket.call();
        let mut held = Held {
            index: self.invocations,
            conn,
            call,
            ticket: None,
            id: cand.id,
            version: inv.version,
            handler,
            asked,
            cancelled: false,
            asking: false,
            suspended: false,
            task: false,
        };
        if let Some(at) = self.task_replies.iter().position(|(c, id)| *c == conn && *id == held.id) {
            self.task_replies.remove(at);
            held.task = true;
        }
        if self.auto {
            if let Some(reply) = auto(handler, &held.asked) {
                self.held.push(held);
                self.answers.push((inv.ticket, reply, format!("{method} {name}")));
                return Ok(());
            }
        }
        self.observed.push_back(Event::Invoke { conn, method: method.to_owned(), name, id: held.id.clone() });
        held.ticket = Some(inv.ticket);
        self.held.push(held);
        Ok(())
    }

    /// The held call `reference` names: `#N` or a request id.
    fn find_held(&self, reference: &str) -> Result<usize, String> {
        let pos = if let Some(n) = reference.strip_prefix('#') {
            let n: usize = n.parse().map_err(|_| format!("bad invocation number {reference}"))?;
            self.held.iter().position(|h| h.index == n)
        } else {
            let id: Value =
                serde_json::from_str(reference).map_err(|e| format!("bad request id {reference}: {e}"))?;
            // A call still running first: an id may come back once its call is cancelled or
            // suspended (a 2026-07-28 retry may reuse it).
            let live = |h: &Held| h.id == id && h.ticket.is_some() && !h.cancelled;
            self.held
                .iter()
                .position(live)
                .or_else(|| self.held.iter().position(|h| h.id == id && h.ticket.is_some()))
        };
        pos.ok_or_else(|| format!("no held invocation {reference}"))
    }

    fn complete(&mut self, spec: &str) -> Result<(), String> {
        let spec = self.expand(spec)?;
        let (reference, rest) = split_token(&spec)?;
        let pos = self.find_held(reference)?;
        let h = self.held.get_mut(pos).ok_or("no such invocation")?;
        let reply = parse_reply(rest.trim(), h.handler, &h.asked)?;
        let ticket = h.ticket.take().ok_or_else(|| format!("invocation {reference} is already completed"))?;
        let now = self.now;
        if self.engine_mut()?.complete(now, ticket, reply).is_err() {
            self.observed.push_back(Event::Stale);
        }
        Ok(())
    }

    /// `! log <ref> <level> [logger=<name>] <json>`.
    /// `! progress <ref> <progress> [<total>]`: calls Engine::progress; an update that is not
    /// sent (no token, too soon, not increasing, too large) emits nothing.
    fn progress(&mut self, spec: &str) -> Result<(), String> {
        let (reference, rest) = split_token(spec)?;
        let mut numbers = rest.split_whitespace().map(|n| {
            serde_json::from_str::<serde_json::Number>(n).map_err(|e| format!("progress value {n:?}: {e}"))
        });
        let progress = numbers.next().ok_or("`! progress <ref> <progress> [<total>]`")??;
        let total = numbers.next().transpose()?;
        let pos = self.find_held(reference)?;
        let h = self.held.get(pos).ok_or("no such invocation")?;
        let (call, conn, version) = (h.call, h.conn, h.version);
        self.log_call = Some((conn, version));
        let now = self.now;
        if self.engine_mut()?.progress(now, call, progress, total, None).is_err() {
            self.observed.push_back(Event::Stale);
        }
        Ok(())
    }

    fn log(&mut self, spec: &str) -> Result<(), String> {
        let usage = "`! log <ref> <level> [logger=<name>] <json>`";
        let (reference, rest) = split_token(spec)?;
        let (level, rest) = rest.trim().split_once(' ').ok_or(usage)?;
        let level = match level {
            "debug" => LogLevel::Debug,
            "info" => LogLevel::Info,
            "notice" => LogLevel::Notice,
            "warning" => LogLevel::Warning,
            "error" => LogLevel::Error,
            "critical" => LogLevel::Critical,
            "alert" => LogLevel::Alert,
            "emergency" => LogLevel::Emergency,
            _ => return Err(format!("unknown log level {level:?}")),
        };
        let rest = rest.trim();
        let (logger, data) = match rest.strip_prefix("logger=") {
            Some(r) => {
                let (l, d) = r.split_once(' ').ok_or(usage)?;
                (Some(l.to_owned()), d.trim())
            }
            None => (None, rest),
        };
        let data: Value = serde_json::from_str(data).map_err(|e| format!("log data: {e}"))?;
        let pos = self.find_held(reference)?;
        let h = self.held.get(pos).ok_or("no such invocation")?;
        let (call, conn, version) = (h.call, h.conn, h.version);
        self.log_call = Some((conn, version));
        let now = self.now;
        if self.engine_mut()?.log(now, call, level, logger.as_deref(), data).is_err() {
            self.observed.push_back(Event::Stale);
        }
        Ok(())
    }

    /// `! start-task <ref>`: `Engine::start_task` for that held call.
    fn start_task(&mut self, reference: &str) -> Result<(), String> {
        let pos = self.find_held(reference.trim())?;
        let call = self.held.get(pos).ok_or("no such invocation")?.call;
        let now = self.now;
        let result = self.engine_mut()?.start_task(now, call).map_err(|e| {
            match e {
                TaskError::Stale => "stale",
                TaskError::AlreadyTask => "already-task",
                TaskError::NotEligible => "not-eligible",
                TaskError::Refused(_) => "refused",
                _ => "other",
            }
            .to_owned()
        });
        self.observed.push_back(Event::StartTask(result));
        Ok(())
    }

    /// `! ask <ref> <key> <request> [; <key> <request>]...`: `Engine::ask` for that held call.
    fn ask(&mut self, spec: &str) -> Result<(), String> {
        let (reference, rest) = split_token(spec)?;
        let requests = parse_requests(rest)?;
        let pos = self.find_held(reference)?;
        let h = self.held.get(pos).ok_or("no such invocation")?;
        let (call, conn, version, task) = (h.call, h.conn, h.version, h.task);
        let methods: Vec<&'static str> = requests.iter().map(|(_, r)| r.method()).collect();
        let now = self.now;
        let result = self.engine_mut()?.ask(now, call, requests);
        match &result {
            Ok(AskOutcome::Pending) if task => {
                // A task's questions are shown on tasks/get, never sent.
                if let Some(h) = self.held.get_mut(pos) {
                    h.asking = true;
                }
            }
            Ok(AskOutcome::Pending) if version.is_modern() => {
                self.invariant(
                    "a 2026-07-28 ask returned pending (no server→client requests in 2026)".into(),
                );
            }
            Ok(AskOutcome::Pending) => {
                if let Some(h) = self.held.get_mut(pos) {
                    h.asking = true;
                }
                // Frames inside HTTP bodies (connection 0) are not classified, so an HTTP
                // call's requests are matched by its transcript lines alone.
                if conn != 0 {
                    self.ask_sends = methods.into_iter().map(|m| (conn, m)).collect();
                }
            }
            Ok(AskOutcome::Answered(_)) | Err(AskError::Suspended) if !version.is_modern() => {
                self.invariant(format!(
                    "a {version} ask returned {result:?}, which only 2026-07-28 asks can"
                ));
            }
            Err(AskError::Suspended) => {
                if let Some(h) = self.held.get_mut(pos) {
                    h.suspended = true;
                }
            }
            _ => {}
        }
        self.observed.push_back(Event::Asked(AskResult::of(&result)));
        Ok(())
    }

    /// Expands `{{session}}`, `{{session N}}`, `{{state}}`, `{{state N}}` and then
    /// `{{repeat N "text"}}`.
    fn expand(&self, line: &str) -> Result<String, String> {
        const OPEN: &str = "{{state";
        let line = placeholder(line, "session", "Mcp-Session-Id", &self.sessions)?;
        let mut out = String::with_capacity(line.len());
        let mut rest = line.as_str();
        while let Some(at) = rest.find(OPEN) {
            let (before, after) = rest.split_at(at);
            out.push_str(before);
            let after = after.split_at(OPEN.len()).1;
            let (inner, after) = after.split_once("}}").ok_or("`{{state` must end with `}}`")?;
            let state = match inner.trim() {
                "" => self.states.last(),
                n => {
                    let n: usize =
                        n.parse().map_err(|_| format!("bad state number {n:?} in `{{{{state N}}}}`"))?;
                    n.checked_sub(1).and_then(|i| self.states.get(i))
                }
            };
            let state = state.ok_or_else(|| {
                format!(
                    "`{{{{state{inner}}}}}`: the engine has emitted {} requestState(s) so far",
                    self.states.len()
                )
            })?;
            out.push_str(state);
            rest = after;
        }
        out.push_str(rest);
        expand(&out)
    }

    /// A request the server sent the client (`elicitation/create`, ...): see the module docs.
    fn server_request(&mut self, conn: usize, frame: &Value) {
        let method = frame.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let id = frame.get("id").cloned().unwrap_or(Value::Null);
        let Some(c) = self.conns.get(&conn) else { return };
        let (session, initialized, caps) = (c.session, c.initialized, c.client_caps.clone());
        let k = key(&id);
        let reused = c.outbound.contains_key(&k);
        let version = session.unwrap_or(ProtocolVersion::NEWEST_LEGACY);
        match session {
            Some(v) if initialized && !v.is_modern() => {}
            _ => self.invariant(format!(
                "a server→client request on connection {conn}, which has no initialized legacy session (2026-07-28 has no server→client requests): {frame}"
            )),
        }
        if !is_request_id(&k) {
            self.invariant(format!("a server→client request whose id is no string or integer: {frame}"));
        }
        if reused {
            self.invariant(format!(
                "a server→client request reusing id {id}, which the client has not answered yet: {frame}"
            ));
        }
        if let Err(e) = permits(version, caps.as_ref(), &method, frame.get("params")) {
            self.invariant(format!("a server→client request the client may not be sent ({e}): {frame}"));
        }
        if method != "ping" {
            match self.ask_sends.pop_front() {
                Some((c, m)) if c == conn && m == method => {}
                Some((c, m)) => self.invariant(format!(
                    "the ask should send {m} on connection {c} next, but the engine sent: {frame}"
                )),
                None => self.invariant(format!("a server→client request no `! ask` asked for: {frame}")),
            }
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.outbound.insert(k, method);
        }
        if let Err(e) = wire::validate_request(version, frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
    }

    /// A `resultType: "task"` result: it answers a 2026-07-28 `tools/call` whose call runs on
    /// as a task (its later asks wait for `tasks/update`); it carries no `requestState`.
    fn task_created(&mut self, conn: usize, version: ProtocolVersion, method: Option<&str>, frame: &Value) {
        if !version.is_modern() || method != Some("tools/call") {
            return self.invariant(format!("a task result answers a {version} {method:?} request: {frame}"));
        }
        if frame.pointer("/result/requestState").is_some() {
            self.invariant(format!("a task result carries a requestState: {frame}"));
        }
        let id = frame.get("id").cloned().unwrap_or_default();
        let live =
            self.held.iter_mut().find(|h| h.conn == conn && h.id == id && h.ticket.is_some() && !h.cancelled);
        match live {
            Some(h) => h.task = true,
            None => self.task_replies.push((conn, id)),
        }
    }

    /// An `input_required` result, the reply to its request: see the module docs.
    fn input_required(
        &mut self,
        version: ProtocolVersion,
        method: Option<&str>,
        caps: Option<&Value>,
        frame: &Value,
    ) {
        let result = frame.get("result").cloned().unwrap_or(Value::Null);
        if !version.is_modern() {
            return self.invariant(format!("an input_required result answers a {version} request: {frame}"));
        }
        if !matches!(method, Some("tools/call" | "prompts/get" | "resources/read")) {
            self.invariant(format!(
                "an input_required result answers {} (only tools/call, prompts/get and resources/read may): {frame}",
                method.unwrap_or("an unknown request")
            ));
        }
        if let Err(e) = wire::validate_response(version, None, frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
        if let Err(e) = wire::validate_def(version, "InputRequiredResult", &result) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
        let requests = result.get("inputRequests");
        let state = result.get("requestState");
        if requests.is_none() && state.is_none() {
            self.invariant(format!(
                "an input_required result with neither inputRequests nor requestState: {frame}"
            ));
        }
        for k in ["ttlMs", "cacheScope"] {
            if result.get(k).is_some() {
                self.invariant(format!("an input_required result carrying {k}: {frame}"));
            }
        }
        for (k, r) in requests.and_then(Value::as_object).into_iter().flatten() {
            let m = r.get("method").and_then(Value::as_str).unwrap_or_default();
            if let Err(e) = permits(version, caps, m, r.get("params")) {
                self.invariant(format!(
                    "input request {k:?} is one the client may not be sent ({e}): {frame}"
                ));
            }
        }
        if let Some(Value::String(s)) = state {
            self.states.push(s.clone());
        }
    }

    /// Accounting, size bound and schema validation of one emitted frame.
    fn check_frame(&mut self, conn: usize, bytes: &[u8]) {
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => return self.invariant(format!("the engine emitted a frame that is not JSON: {e}")),
        };
        if bytes.contains(&b'\n') {
            self.invariant("an emitted frame contains a raw newline".into());
        }
        let max = self.settings.limits.response_bytes();
        // The workspace's independent output checker: JSON-RPC shape and no repeated keys (batch
        // members are checked one by one below, against the same ceiling).
        if let Err(e) = mcp_testkit::check::try_message(bytes, usize::MAX, true) {
            self.invariant(format!("output checker: {e}"));
        }
        match &value {
            Value::Array(items) => {
                let v = self.session(conn).unwrap_or(ProtocolVersion::NEWEST_LEGACY);
                if let Err(e) = wire::validate_batch(v, &value) {
                    self.invariant(format!("schema: {e}"));
                }
                if items.is_empty() {
                    self.invariant("an empty batch reply".into());
                }
                for item in items {
                    if item.to_string().len() > max {
                        self.invariant(format!("a batch member over max_response_bytes ({max})"));
                    }
                    if item.get("method").is_some() {
                        self.invariant(format!("a notification inside a batch reply: {item}"));
                        continue;
                    }
                    self.reply(conn, item);
                }
            }
            _ => {
                if bytes.len() > max {
                    self.invariant(format!(
                        "a reply of {} bytes, over max_response_bytes ({max})",
                        bytes.len()
                    ));
                }
                self.reply(conn, &value);
            }
        }
    }

    fn session(&self, conn: usize) -> Option<ProtocolVersion> {
        self.conns.get(&conn).and_then(|c| c.session)
    }

    fn reply(&mut self, conn: usize, frame: &Value) {
        let Some(obj) = frame.as_object() else {
            return self.invariant(format!("an emitted message that is not an object: {frame}"));
        };
        if obj.contains_key("method") {
            if obj.contains_key("id") {
                return self.server_request(conn, frame);
            }
            return self.notification(conn, frame);
        }
        let session = self.session(conn);
        let (version, method, caps) = match obj.get("id") {
            None => return self.invariant(format!("a reply without an id: {frame}")),
            Some(Value::Null) => {
                let owed = self.awaiting_null.entry(conn).or_default();
                if *owed == 0 {
                    self.invariant(format!("a null-id reply, but no unreadable message awaits one: {frame}"));
                } else {
                    *owed -= 1;
                }
                (session.unwrap_or(ProtocolVersion::NEWEST_LEGACY), None, None)
            }
            Some(id) => {
                let k = key(id);
                let open_listen = self.conns.get(&conn).is_some_and(|c| c.listens.contains_key(&k));
                if open_listen && self.shutting_down {
                    // Engine::shutdown ends each listen stream with its final result, once.
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.listens.remove(&k);
                    }
                    if let Err(e) = wire::validate_response(ProtocolVersion::V2026_07_28, None, frame) {
                        self.invariant(format!("schema: {e}\n  frame: {frame}"));
                    }
                    return;
                }
                let Some(a) = self.awaiting.get_mut(&(conn, k)).and_then(VecDeque::pop_front) else {
                    if open_listen {
                        return self.invariant(format!(
                            "a response for id {id}, a subscriptions/listen stream that is open (it gets no response): {frame}"
                        ));
                    }
                    return self.invariant(format!("a reply for id {id}, which awaits no reply (a second reply, or an id never sent): {frame}"));
                };
                let mut version = a.version.or(session).unwrap_or(ProtocolVersion::NEWEST_LEGACY);
                if a.method == "initialize" && a.version.is_none() {
                    let negotiated = obj
                        .get("result")
                        .and_then(|r| r.get("protocolVersion"))
                        .and_then(Value::as_str)
                        .and_then(ProtocolVersion::parse);
                    if let Some(n) = negotiated {
                        version = n;
                        if let Some(c) = self.conns.get_mut(&conn) {
                            c.session = Some(n);
                            c.client_caps = a.caps.clone();
                        }
                    }
                }
                (version, Some(a.method), a.caps)
            }
        };
        let result = obj.get("result");
        if result.and_then(|r| r.get("resultType")).and_then(Value::as_str) == Some("task") {
            self.task_created(conn, version, method.as_deref(), frame);
        }
        if result.and_then(|r| r.get("resultType")).and_then(Value::as_str) == Some("input_required") {
            return self.input_required(version, method.as_deref(), caps.as_ref(), frame);
        }
        if let Err(e) = wire::validate_response(version, method.as_deref(), frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
    }

    /// The rules of server notifications; see the module docs.
    fn notification(&mut self, conn: usize, frame: &Value) {
        let method = frame.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let session = self.session(conn);
        let version = match frame.pointer(SUBSCRIPTION_ID_POINTER) {
            Some(tag) => {
                self.tagged(conn, &method, tag, frame);
                ProtocolVersion::V2026_07_28
            }
            None => match method.as_str() {
                "notifications/message" => match self.log_call {
                    Some((c, v)) if c == conn => v,
                    _ => {
                        self.invariant(format!("a log message no `! log` asked for: {frame}"));
                        session.unwrap_or(ProtocolVersion::NEWEST_LEGACY)
                    }
                },
                ACKNOWLEDGED => {
                    self.invariant(format!("an acknowledgement without a subscription id: {frame}"));
                    ProtocolVersion::V2026_07_28
                }
                _ => {
                    let legacy = self.conns.get(&conn).is_some_and(|c| c.initialized && c.session.is_some());
                    if !legacy {
                        self.invariant(format!(
                            "an untagged {method} on a connection without an initialized legacy session: {frame}"
                        ));
                    }
                    session.unwrap_or(ProtocolVersion::NEWEST_LEGACY)
                }
            },
        };
        if let Err(e) = wire::validate_notification(version, frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
    }

    /// A notification carrying a subscription id: an acknowledgement opens the stream it
    /// answers; anything else must belong to an open stream and be of a kind it asked for.
    fn tagged(&mut self, conn: usize, method: &str, tag: &Value, frame: &Value) {
        let k = key(tag);
        let params = frame.get("params");
        if method == ACKNOWLEDGED {
            let queue = self.awaiting.get_mut(&(conn, k.clone()));
            let pending = queue
                .as_ref()
                .and_then(|q| q.iter().position(|a| a.method == "subscriptions/listen"))
                .and_then(|i| queue.and_then(|q| q.remove(i)));
            let Some(pending) = pending else {
                return self.invariant(format!(
                    "an acknowledgement for subscription {tag}, which is no pending subscriptions/listen request: {frame}"
                ));
            };
            let honoured = params.and_then(|p| p.get("notifications")).cloned().unwrap_or(Value::Null);
            let requested = pending.filter.unwrap_or(Value::Null);
            let mut stream = Stream::default();
            for (flag, list) in LIST_FLAGS {
                if honoured.get(flag).and_then(Value::as_bool) == Some(true) {
                    if requested.get(flag).and_then(Value::as_bool) != Some(true) {
                        self.invariant(format!(
                            "the acknowledgement honours {flag}, which was not asked for"
                        ));
                    }
                    stream.lists.push(list);
                }
            }
            let asked: Vec<&str> = requested
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for uri in honoured.get("resourceSubscriptions").and_then(Value::as_array).into_iter().flatten() {
                let uri = uri.as_str().unwrap_or_default();
                if !asked.contains(&uri) {
                    self.invariant(format!(
                        "the acknowledgement subscribes to {uri:?}, which was not asked for"
                    ));
                }
                stream.uris.push(uri.to_owned());
            }
            let asked: Vec<&str> = requested
                .get("taskIds")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for id in honoured.get("taskIds").and_then(Value::as_array).into_iter().flatten() {
                let id = id.as_str().unwrap_or_default();
                if !asked.contains(&id) {
                    self.invariant(format!(
                        "the acknowledgement follows task {id:?}, which was not asked for"
                    ));
                }
                stream.tasks.push(id.to_owned());
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.listens.insert(k, stream);
            }
            return;
        }
        let Some(stream) = self.conns.get(&conn).and_then(|c| c.listens.get(&k)) else {
            return self.invariant(format!(
                "a notification tagged with subscription {tag}, which is not open on connection {conn} (never acknowledged, or cancelled): {frame}"
            ));
        };
        let wanted = if method == "notifications/resources/updated" {
            let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or_default();
            stream.uris.iter().any(|u| u == uri)
        } else if method == "notifications/tasks" {
            let id = params.and_then(|p| p.get("taskId")).and_then(Value::as_str).unwrap_or_default();
            stream.tasks.iter().any(|t| t == id)
        } else {
            stream.lists.contains(&method)
        };
        if !wanted {
            self.invariant(format!("subscription {tag} did not ask for this notification: {frame}"));
        }
    }

    fn finish(&mut self) {
        if self.record {
            return;
        }
        if let Err(e) = self.settle() {
            self.failures.push(format!("end: {e}"));
            return;
        }
        self.cause = usize::MAX;
        let mut owed: Vec<String> = Vec::new();
        for ((conn, id), list) in &self.awaiting {
            let excused = self.excused.get(&(*conn, id.clone())).copied().unwrap_or(0);
            if list.len() > excused {
                owed.push(if *conn == 1 { id.clone() } else { format!("{id} (connection {conn})") });
            }
        }
        owed.sort();
        for id in owed {
            self.failures.push(format!("end: invariant: request {id} never got a reply"));
        }
        let nulls: usize = self.awaiting_null.values().sum();
        if nulls > 0 {
            self.failures.push(format!("end: invariant: {nulls} null-id replies never came"));
        }
        let held: Vec<String> = self
            .held
            .iter()
            .filter(|h| h.ticket.is_some() && !h.cancelled)
            .map(|h| h.id.to_string())
            .collect();
        if !held.is_empty() {
            self.failures.push(format!(
                "end: the transcript ends with call(s) {} in flight: complete them or close",
                held.join(", ")
            ));
        }
    }

    /// What a frame on `conn` must produce, decided from the bytes alone.
    fn classify(&self, conn: usize, bytes: &[u8]) -> Plan {
        let mut plan = Plan::default();
        let limits = &self.settings.limits;
        if bytes.len() > limits.frame_bytes() {
            plan.nulls = 1;
            return plan;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            plan.nulls = 1;
            return plan;
        };
        // serde_json's recursion limit (128) makes a frame unreadable for the engine when its
        // own max_depth lets it descend that far (below it, the rest is skipped unparsed).
        // Otherwise a frame is readable when serde_json can decode all of it (escapes included).
        let readable = if nesting(text) > 128 {
            self.settings.max_depth < 128
        } else {
            serde_json::from_str::<Value>(text).is_ok()
        };
        let raw = match serde_json::from_str::<&RawValue>(text) {
            Ok(raw) if readable => raw,
            _ => {
                plan.nulls = 1;
                return plan;
            }
        };
        let t = raw.get().trim_start();
        if t.starts_with('[') {
            let items: Vec<&RawValue> = serde_json::from_str(raw.get()).unwrap_or_default();
            let allowed = self.session(conn).is_some_and(ProtocolVersion::allows_batches);
            if !allowed || items.is_empty() || items.len() > self.settings.max_batch_len {
                plan.nulls = 1;
                return plan;
            }
            for item in items {
                self.classify_message(conn, item, &mut plan);
            }
        } else {
            self.classify_message(conn, raw, &mut plan);
        }
        plan
    }

    fn classify_message(&self, conn: usize, raw: &RawValue, plan: &mut Plan) {
        let Some(members) = members(raw.get()) else {
            plan.nulls += 1;
            return;
        };
        let ids: Vec<&(String, Box<RawValue>)> = members.iter().filter(|(k, _)| k == "id").collect();
        let folded_ids = members.iter().filter(|(k, _)| k.eq_ignore_ascii_case("id")).count();
        let has = |name: &str| members.iter().any(|(k, _)| k == name);
        let is_response = !has("method") && (has("result") || has("error"));
        if is_response {
            // A response (to a server-to-client request) is never answered. A readable id
            // settles the server's request of that id, if one is outstanding.
            if let [(_, id)] = ids.as_slice() {
                if let Ok(id) = serde_json::from_str::<Value>(id.get()) {
                    plan.responses.push(key(&id));
                }
            }
            return;
        }
        let Some((_, id_raw)) = ids.first() else {
            if !has("method") || folded_ids > 0 {
                // Neither a request, a notification nor a response; or a member that case-folds
                // onto "id" ("Id"), which may be a request whose sender waits for an answer.
                plan.nulls += 1;
                return;
            }
            // A notification: never answered, even when malformed. Note what it means for the
            // client's own view of the connection.
            let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
            match value.get("method").and_then(Value::as_str) {
                Some("notifications/cancelled") => {
                    if let Some(id) = value.pointer("/params/requestId") {
                        plan.cancelled.push(key(id));
                    }
                }
                Some("notifications/initialized") => plan.initialized = true,
                _ => {}
            }
            return;
        };
        let id_text = id_raw.get();
        let well_formed = is_request_id(id_text);
        if ids.len() > 1 || folded_ids > 1 || !well_formed || id_text.len() > self.settings.max_id_bytes {
            plan.nulls += 1;
            return;
        }
        let Ok(id) = serde_json::from_str::<Value>(id_text) else {
            plan.nulls += 1;
            return;
        };
        let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
        let method = value.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let params = value.get("params");
        let modern = params
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION));
        let version = modern.then_some(ProtocolVersion::V2026_07_28);
        let param = |k: &str| params.and_then(|p| p.get(k));
        let object_or_empty = |v: Option<&Value>| match v {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(a) => a.clone(),
        };
        let call = match method.as_str() {
            "tools/call" => param("name")
                .and_then(Value::as_str)
                .map(|n| (n.to_owned(), object_or_empty(param("arguments")))),
            "resources/read" => param("uri").and_then(Value::as_str).map(|u| (u.to_owned(), Value::Null)),
            "prompts/get" => param("name")
                .and_then(Value::as_str)
                .map(|n| (n.to_owned(), object_or_empty(param("arguments")))),
            "completion/complete" => {
                let r = param("ref");
                let name = r.and_then(|r| r.get("name").or_else(|| r.get("uri"))).and_then(Value::as_str);
                name.map(|n| (n.to_owned(), param("argument").cloned().unwrap_or(Value::Null)))
            }
            _ => None,
        };
        // A compact `call_tool` invokes the tool it names, with the arguments it carries.
        let inner = match (method.as_str(), &call) {
            ("tools/call", Some((outer, args))) if outer == "call_tool" => args
                .get("name")
                .and_then(Value::as_str)
                .map(|n| (n.to_owned(), object_or_empty(args.get("arguments")))),
            _ => None,
        };
        for (name, arguments) in call.into_iter().chain(inner) {
            plan.calls.push(Candidate { conn, id: id.clone(), method: method.clone(), name, arguments });
        }
        let filter = (method == "subscriptions/listen")
            .then(|| param("notifications").cloned().unwrap_or(Value::Null));
        let caps = if modern {
            params.and_then(|p| p.pointer(META_CLIENT_CAPABILITIES_POINTER)).cloned()
        } else if method == "initialize" {
            param("capabilities").cloned()
        } else {
            None
        };
        plan.requests.push((id, Awaiting { method, version, filter, caps }));
    }
}

/// Expands `{{<word>}}` (the last of `values`) and `{{<word> N}}` (the N-th, from 1) in `line`.
fn placeholder(line: &str, word: &str, what: &str, values: &[String]) -> Result<String, String> {
    let open = format!("{{{{{word}");
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(&open) {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let after = after.split_at(open.len()).1;
        let (inner, after) =
            after.split_once("}}").ok_or_else(|| format!("`{open}` must end with `}}}}`"))?;
        let value = match inner.trim() {
            "" => values.last(),
            n => {
                let n: usize = n.parse().map_err(|_| format!("bad number {n:?} in `{open} N}}}}`"))?;
                n.checked_sub(1).and_then(|i| values.get(i))
            }
        };
        let value = value.ok_or_else(|| {
            format!("`{open}{inner}}}}}`: the engine has emitted {} {what}(s) so far", values.len())
        })?;
        out.push_str(value);
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// The HTTP side of the runner: `>>` requests through `check_head` and `handle_http`, and the
/// responses, streams and closes that come back, as `<<N` lines.
impl Runner {
    /// One `>>` line (`rest` follows the `>>`): a request line, a header, the body, or a bare
    /// `>>` ending the head.
    fn http_line(&mut self, line: usize, rest: &str) -> Result<(), String> {
        if rest.is_empty() {
            let d = self.draft.as_mut().ok_or("a bare `>>` outside a request")?;
            if d.head_done || d.body.is_some() {
                return Err("a second bare `>>` in one request".into());
            }
            d.head_done = true;
            return Ok(());
        }
        let rest = rest.strip_prefix(' ').ok_or("an HTTP request line is `>> <text>`")?;
        let forced = self.draft.as_ref().is_some_and(|d| d.head_done && d.body.is_none());
        if !forced {
            if let Some((method, path, caller)) = request_line(rest)? {
                self.send_draft()?;
                self.settle()?;
                let caller = caller.unwrap_or_else(|| self.settings.caller.clone());
                self.draft = Some(HttpDraft {
                    line,
                    method,
                    path,
                    caller,
                    headers: Vec::new(),
                    body: None,
                    head_done: false,
                });
                return Ok(());
            }
        }
        let expanded = self.expand(rest)?;
        let d = self.draft.as_mut().ok_or("a `>>` line before any request line (`>> POST /mcp`)")?;
        if d.body.is_some() {
            return Err("a request has one body line; end it with a blank line".into());
        }
        match header_line(rest).filter(|_| !forced) {
            Some(_) => {
                let (n, v) = header_line(&expanded).ok_or("a header line that expands to no header")?;
                d.headers.push((n.to_owned(), v.as_bytes().to_vec()));
            }
            None => d.body = Some(expanded.into_bytes()),
        }
        Ok(())
    }

    /// Sends the request the `>>` lines described, if any, as a shim would: `check_head`, the
    /// body bound, then `handle_http`; and drains.
    fn send_draft(&mut self) -> Result<(), String> {
        let Some(d) = self.draft.take() else { return Ok(()) };
        self.start()?;
        self.exchanges += 1;
        let ex = self.exchanges;
        self.cause = d.line;
        let http = self.http.clone().unwrap_or_default();
        let headers: Vec<(&str, &[u8])> = d.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())).collect();
        let head = RequestHead { method: &d.method, path: &d.path, headers: &headers };
        let body = d.body.unwrap_or_default();
        let limits = self.settings.limits.clone();
        let route = match check_head(&http, &limits, &head) {
            Ok(route) => route,
            Err(refusal) => {
                self.http_refused(ex, &refusal);
                return Ok(());
            }
        };
        if let mcp_proto::http::Route::Post { .. } = route {
            if let Err(refusal) = check_body_len(&limits, body.len()) {
                self.http_refused(ex, &refusal);
                return Ok(());
            }
        }
        // A request's tool calls may become invocations (connection 0: not a stdio one).
        self.candidates = self.classify(0, &body).calls;
        let now = self.now;
        let req = HttpRequest { head: &head, route, body: &body, caller: d.caller };
        let reply = self.engine_mut()?.handle_http(now, req);
        match reply {
            HttpReply::Full { head, body } => self.http_response(ex, &head, &body),
            HttpReply::Pending(conn) => {
                if self.http_conns.insert(conn, (ex, ExState::Waiting)).is_some() {
                    self.invariant(format!("exchange {ex} was handed a connection still in use"));
                }
            }
        }
        self.drain()
    }

    /// A `check_head` (or body bound) refusal, written as the server layer writes it: the
    /// refusal's headers, then a JSON body under `content-type: application/json` (none on 404).
    fn http_refused(&mut self, ex: usize, refusal: &HttpRefusal) {
        let mut head = HttpHead { status: refusal.status, headers: refusal.headers.clone() };
        let body = refusal.body().unwrap_or_default();
        if !body.is_empty() {
            head.headers.push(("content-type", "application/json".to_owned()));
        }
        self.http_response(ex, &head, &body);
    }

    /// A status line and headers; remembers a session id a response carries.
    fn http_head(&mut self, ex: usize, head: &HttpHead) {
        self.observed.push_back(Event::Http(ex, HttpLine::Status(head.status)));
        for (name, value) in &head.headers {
            if name.eq_ignore_ascii_case(SESSION_ID_HEADER) {
                if !mcp_proto::http::is_valid_session_id(value) {
                    self.invariant(format!("an invalid session id {value:?}"));
                }
                if self.sessions.contains(value) {
                    self.invariant(format!("session id {value} was handed out twice"));
                }
                self.sessions.push(value.clone());
            }
            self.observed.push_back(Event::Http(ex, HttpLine::Header((*name).to_owned(), value.clone())));
        }
    }

    /// A complete response: head, then the body when there is one.
    fn http_response(&mut self, ex: usize, head: &HttpHead, body: &[u8]) {
        self.http_head(ex, head);
        if body.is_empty() {
            return;
        }
        let typed = head
            .headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("content-type") && v.starts_with("application/json"));
        if !typed {
            self.invariant(format!("a body without a JSON content type on exchange {ex}"));
        }
        if serde_json::from_slice::<Value>(body).is_err() {
            self.invariant(format!("a body that is not JSON on exchange {ex}"));
        }
        self.observed.push_back(Event::Http(ex, HttpLine::Body(body.to_vec())));
    }

    /// Moves the exchange of `conn` from `from` to `to`; `None` when it is no known exchange
    /// (after an invariant failure).
    fn http_step(&mut self, conn: ConnId, what: &str, from: ExState, to: ExState) -> Option<usize> {
        let Some((ex, state)) = self.http_conns.get(&conn).copied() else {
            self.invariant(format!("{what} for a connection no HTTP request was handed"));
            return None;
        };
        if state != from {
            self.invariant(format!("{what} for exchange {ex}, which is {state:?}"));
        }
        self.http_conns.insert(conn, (ex, to));
        Some(ex)
    }

    fn http_respond(&mut self, conn: ConnId, head: &HttpHead, body: &[u8]) {
        if let Some(ex) = self.http_step(conn, "a Respond", ExState::Waiting, ExState::Done) {
            self.http_response(ex, head, body);
        }
    }

    fn http_stream(&mut self, conn: ConnId, head: &HttpHead) {
        let Some(ex) = self.http_step(conn, "a Stream", ExState::Waiting, ExState::Streaming) else { return };
        let sse = head
            .headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("content-type") && v == mcp_proto::sse::CONTENT_TYPE);
        if !sse {
            self.invariant(format!("a stream on exchange {ex} without content-type text/event-stream"));
        }
        self.http_head(ex, head);
    }

    /// One SSE frame: each line as `| line`, the blank line that ends an event as `|`.
    fn http_frame(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(ex) = self.http_step(conn, "an SSE frame", ExState::Streaming, ExState::Streaming) else {
            return;
        };
        let well_formed = bytes.ends_with(b"\n\n")
            && !bytes.contains(&b'\r')
            && !bytes.get(..bytes.len() - 2).unwrap_or_default().windows(2).any(|w| w == b"\n\n");
        if !well_formed {
            self.invariant(format!(
                "exchange {ex}: an SSE frame that is not one event or comment ending in one blank line: {:?}",
                String::from_utf8_lossy(bytes)
            ));
        }
        let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        for l in body.split(|b| *b == b'\n') {
            self.observed.push_back(Event::Http(ex, HttpLine::Sse(l.to_vec())));
        }
    }

    fn http_close(&mut self, conn: ConnId, reason: CloseReason) {
        if let Some(ex) = self.http_step(conn, "a Close", ExState::Streaming, ExState::Done) {
            self.observed.push_back(Event::Http(ex, HttpLine::Close(close_reason(reason))));
        }
    }
}

/// A request line, `METHOD /path [as <identity|anonymous> [role...]]`: `None` when `s` is none.
fn request_line(s: &str) -> Result<Option<(String, String, Option<Caller>)>, String> {
    let mut words = s.splitn(3, ' ');
    let (Some(method), Some(path)) = (words.next(), words.next()) else { return Ok(None) };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) || !path.starts_with('/') {
        return Ok(None);
    }
    let caller = match words.next() {
        None => None,
        Some(rest) => {
            let who = rest
                .strip_prefix("as ")
                .ok_or_else(|| format!("after the path, `as <caller>`, not {rest:?}"))?;
            Some(parse_caller(who)?)
        }
    };
    Ok(Some((method.to_owned(), path.to_owned(), caller)))
}

impl Conn {
    fn new(id: ConnId) -> Self {
        Self {
            id,
            open: true,
            session: None,
            initialized: false,
            client_caps: None,
            outbound: HashMap::new(),
            listens: HashMap::new(),
        }
    }
}

#[derive(Default)]
struct Plan {
    /// Replies with a `null` id this frame must produce.
    nulls: usize,
    /// Requests with a readable id.
    requests: Vec<(Value, Awaiting)>,
    /// Requests that may become invocations.
    calls: Vec<Candidate>,
    /// Request ids the client's `notifications/cancelled` name.
    cancelled: Vec<String>,
    /// The frame holds `notifications/initialized`.
    initialized: bool,
    /// Canonical ids of the responses (to server→client requests) it holds.
    responses: Vec<String>,
}

/// Registers the test item `name` of `kind` (a fixture, or a plain extra item).
fn register(
    r: &mut RegistryMut<'_, Fixture>,
    kind: &str,
    name: &str,
    shareable: &[(String, Duration)],
) -> Result<(), String> {
    let hint = shareable
        .iter()
        .find(|(n, _)| n == name)
        .map_or(CacheHint::private(), |(_, ttl)| CacheHint::shared(*ttl));
    let result = match kind {
        "tool" => {
            let found = all_tools().into_iter().chain(gated_tools()).find(|(t, _)| t.name() == name);
            let (tool, handler) = found.unwrap_or_else(|| {
                (
                    mcp_proto::Tool::new(name, "An extra tool", serde_json::json!({"type": "object"})),
                    TestHandler::Nested,
                )
            });
            r.add_tool(tool, Fixture::Tool(handler))
        }
        "resource" => {
            let found = fixture_resources().into_iter().find(|(x, _)| x.uri() == name);
            let (res, f) = found.unwrap_or_else(|| {
                (mcp_proto::Resource::new(name, name), Fixture::Text("text/plain", "extra"))
            });
            r.add_resource(res.cache(hint), f)
        }
        "template" => {
            let found = fixture_templates().into_iter().find(|(t, _, _)| t.uri_template() == name);
            let (t, f, c) = found.unwrap_or_else(|| {
                (mcp_proto::ResourceTemplate::new(name, "extra"), Fixture::Variables, None)
            });
            r.add_template(t.cache(hint), f, c)
        }
        "prompt" => {
            let found = fixture_prompts().into_iter().find(|(p, _, _)| p.name() == name);
            let (p, f, c) =
                found.unwrap_or_else(|| (mcp_proto::Prompt::new(name), Fixture::PromptText("extra"), None));
            r.add_prompt(p, f, c)
        }
        "skill" => r.add_skill(crate::skills::skill(name)),
        _ => return Err(format!("unknown item kind {kind:?}: tool, resource, template, prompt or skill")),
    };
    result.map_err(|e| format!("registering {kind} {name}: {e}"))
}

/// An app from the JSON of `! app` and `! shell`: `uri`, `name` and `html` (required),
/// `title`, `description`, `views` (strings), `csp` (the four lists by their wire names),
/// `permissions` (names: `camera`, `microphone`, `geolocation`, `clipboardWrite`),
/// `prefersBorder`, `domain`.
fn parse_app(text: &str) -> Result<mcp_proto::App, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("app JSON: {e}"))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let strings = |x: Option<&Value>| -> Vec<String> {
        x.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let (Some(uri), Some(name), Some(html)) = (s("uri"), s("name"), s("html")) else {
        return Err("an app needs \"uri\", \"name\" and \"html\"".into());
    };
    let mut app = mcp_proto::App::new(uri, name, html).views(strings(v.get("views")));
    if let Some(t) = s("title") {
        app = app.title(t);
    }
    if let Some(d) = s("description") {
        app = app.description(d);
    }
    if let Some(d) = s("domain") {
        app = app.domain(d);
    }
    if let Some(b) = v.get("prefersBorder").and_then(Value::as_bool) {
        app = app.prefers_border(b);
    }
    let csp = v.get("csp");
    let mut c = mcp_proto::AppCsp::new();
    for o in strings(csp.and_then(|c| c.get("connectDomains"))) {
        c = c.connect_domain(o);
    }
    for o in strings(csp.and_then(|c| c.get("resourceDomains"))) {
        c = c.resource_domain(o);
    }
    for o in strings(csp.and_then(|c| c.get("frameDomains"))) {
        c = c.frame_domain(o);
    }
    for o in strings(csp.and_then(|c| c.get("baseUriDomains"))) {
        c = c.base_uri_domain(o);
    }
    let mut p = mcp_proto::AppPermissions::new();
    for name in strings(v.get("permissions")) {
        p = match name.as_str() {
            "camera" => p.camera(),
            "microphone" => p.microphone(),
            "geolocation" => p.geolocation(),
            "clipboardWrite" => p.clipboard_write(),
            other => return Err(format!("unknown app permission {other:?}")),
        };
    }
    Ok(app.csp(c).permissions(p))
}

fn unregister(r: &mut RegistryMut<'_, Fixture>, kind: &str, name: &str) -> Result<(), String> {
    let found = match kind {
        "tool" => r.remove_tool(name).is_some(),
        "resource" => r.remove_resource(name).is_some(),
        "template" => r.remove_template(name).is_some(),
        "prompt" => r.remove_prompt(name).is_some(),
        "skill" => r.remove_skill(&crate::skills::skill(name).uri()).is_some(),
        _ => return Err(format!("unknown item kind {kind:?}: tool, resource, template, prompt or skill")),
    };
    if found {
        Ok(())
    } else {
        Err(format!("unregistering {kind} {name}: it is not registered"))
    }
}

/// The automatic answer of a fixture, or `None` when it has none (`slow`).
fn auto(handler: Fixture, asked: &Asked) -> Option<Reply> {
    Some(match (handler, asked) {
        (Fixture::Tool(t), Asked::Tool(args)) => Reply::Tool(auto_reply(t, args)?),
        (f, Asked::Read { uri, variables }) => Reply::Resource(auto_read(f, uri, variables)?),
        (f, Asked::Prompt(args)) => Reply::Prompt(auto_prompt(f, args)?),
        (f, Asked::Complete { value }) => Reply::Completion(auto_complete(f, value)?),
        _ => return None,
    })
}

/// The deepest nesting of arrays and objects in JSON text.
fn nesting(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A JSON string or integer literal (no fraction, no exponent).
fn is_request_id(raw: &str) -> bool {
    let b = raw.as_bytes();
    match b.first() {
        Some(b'"') => true,
        Some(b'-') => b.len() > 1 && b.iter().skip(1).all(u8::is_ascii_digit),
        Some(c) if c.is_ascii_digit() => b.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// The members of a JSON object in order, repeated keys included; `None` for a non-object.
fn members(raw: &str) -> Option<Vec<(String, Box<RawValue>)>> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<(String, Box<RawValue>)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = map.next_key::<String>()? {
                out.push((k, map.next_value::<Box<RawValue>>()?));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw);
    let r: Result<_, serde_json::Error> = (&mut de).deserialize_map(V);
    r.ok()
}

/// The requests of `! ask`: `<key> <request> [; <key> <request>]...`, where a request is
/// `elicit {schema} "message"`, `elicit-url "url" "message"`, `sample {params}` or `roots`.
fn parse_requests(s: &str) -> Result<Vec<(String, InputRequest)>, String> {
    const USAGE: &str = "`! ask <ref> <key> <request> [; <key> <request>]...` with a request `elicit {schema} \"message\"`, `elicit-url \"url\" \"message\"`, `sample {params}` or `roots`";
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    loop {
        let (key, r) = split_token(rest)?;
        if key.is_empty() {
            return Err(USAGE.into());
        }
        let key = if key.starts_with('"') { json_string(key)?.0 } else { key.to_owned() };
        let r = r.trim_start();
        let end = r.find(|c: char| c.is_whitespace() || c == ';').unwrap_or(r.len());
        let (kind, r) = r.split_at(end);
        let built =
            |e: mcp_proto::interaction::InteractionError| format!("request {key:?} cannot be built: {e}");
        let (request, r) = match kind {
            "elicit" => {
                let (schema, r) = json_value(r)?;
                let (message, r) = json_string(r)?;
                (InputRequest::elicit(message, schema).map_err(built)?, r)
            }
            "elicit-url" => {
                let (url, r) = json_string(r)?;
                let (message, r) = json_string(r)?;
                (InputRequest::elicit_url(message, url).map_err(built)?, r)
            }
            "sample" => {
                let (params, r) = json_value(r)?;
                (InputRequest::sample(params).map_err(built)?, r)
            }
            "roots" => (InputRequest::list_roots(), r),
            _ => return Err(format!("unknown request kind {kind:?}: {USAGE}")),
        };
        out.push((key, request));
        let r = r.trim_start();
        if r.is_empty() {
            return Ok(out);
        }
        rest = r.strip_prefix(';').ok_or_else(|| format!("expected `;` or the end at {r:?}: {USAGE}"))?;
    }
}

/// Reads one JSON value at the start of `s`; returns it and the rest.
fn json_value(s: &str) -> Result<(Value, &str), String> {
    let s = s.trim_start();
    let mut stream = serde_json::Deserializer::from_str(s).into_iter::<Value>();
    match stream.next() {
        Some(Ok(v)) => Ok((v, s.get(stream.byte_offset()..).unwrap_or_default())),
        Some(Err(e)) => Err(format!("bad JSON at {s:?}: {e}")),
        None => Err("expected a JSON value".into()),
    }
}

/// Whether a client that declared `caps` (a `ClientCapabilities` object) on `version` may be
/// sent a request of `method` with `params` (VERSIONS.md §2, §8). `Err` says what is missing.
fn permits(
    version: ProtocolVersion,
    caps: Option<&Value>,
    method: &str,
    params: Option<&Value>,
) -> Result<(), String> {
    let declared = |path: &str| caps.and_then(|c| c.pointer(path)).is_some_and(Value::is_object);
    let param = |k: &str| params.and_then(|p| p.get(k));
    let november = version >= ProtocolVersion::V2025_11_25;
    match method {
        "ping" => Ok(()),
        "elicitation/create" => {
            if version < ProtocolVersion::V2025_06_18 {
                return Err(format!("elicitation does not exist in {version}"));
            }
            if !declared("/elicitation") {
                return Err("the client did not declare elicitation".into());
            }
            if param("mode").and_then(Value::as_str) == Some("url") {
                if !november {
                    return Err(format!("URL-mode elicitation does not exist in {version}"));
                }
                if !declared("/elicitation/url") {
                    return Err("the client did not declare elicitation.url".into());
                }
                return Ok(());
            }
            if november && declared("/elicitation/url") && !declared("/elicitation/form") {
                return Err("the client declared only URL-mode elicitation".into());
            }
            let props = param("requestedSchema").and_then(|s| s.get("properties")).and_then(Value::as_object);
            let multi = props
                .into_iter()
                .flatten()
                .any(|(_, p)| p.get("type").and_then(Value::as_str) == Some("array"));
            if multi && !november {
                return Err(format!("multi-select fields do not exist in {version}"));
            }
            Ok(())
        }
        "sampling/createMessage" => {
            if !declared("/sampling") {
                return Err("the client did not declare sampling".into());
            }
            let tools = param("tools").is_some() || param("toolChoice").is_some();
            if tools && !(november && declared("/sampling/tools")) {
                return Err("tool use in sampling needs 2025-11-25 and sampling.tools".into());
            }
            let context =
                matches!(param("includeContext").and_then(Value::as_str), Some("thisServer" | "allServers"));
            if november && context && !declared("/sampling/context") {
                return Err("includeContext needs sampling.context".into());
            }
            Ok(())
        }
        "roots/list" => {
            if declared("/roots") {
                Ok(())
            } else {
                Err("the client did not declare roots".into())
            }
        }
        _ => Err(format!("{method:?} is no server→client request")),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (n, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, ""), |i| s.split_at(i));
    let n: u64 = n.parse().map_err(|_| format!("bad duration {s:?}"))?;
    match unit {
        "s" => Ok(Duration::from_secs(n)),
        "ms" => Ok(Duration::from_millis(n)),
        _ => Err(format!("bad duration {s:?}: use s or ms")),
    }
}

/// Reads a JSON string literal at the start of `s`; returns it and the rest.
fn json_string(s: &str) -> Result<(String, &str), String> {
    let s = s.trim_start();
    if !s.starts_with('"') {
        return Err(format!("expected a JSON string at {s:?}"));
    }
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => {
                let (lit, rest) = s.split_at(i + 1);
                let v: String = serde_json::from_str(lit).map_err(|e| format!("bad string {lit}: {e}"))?;
                return Ok((v, rest));
            }
            _ => {}
        }
    }
    Err(format!("unterminated string {s:?}"))
}

/// The first token of `s`: a JSON string literal (raw) or a run of non-space characters.
fn split_token(s: &str) -> Result<(&str, &str), String> {
    let s = s.trim_start();
    if s.starts_with('"') {
        let (_, rest) = json_string(s)?;
        let len = s.len() - rest.len();
        return Ok((s.split_at(len).0, rest));
    }
    Ok(s.split_once(' ').unwrap_or((s, "")))
}

/// Expands `{{repeat N "text"}}` in the text of a `>` or `<` line exactly as this runner does,
/// for other runners of the same transcripts (see [`crate::pipe`]).
pub fn expand_frame(line: &str) -> Result<String, String> {
    expand(line)
}

/// Expands `{{repeat N "text"}}`.
fn expand(line: &str) -> Result<String, String> {
    const OPEN: &str = "{{repeat ";
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(OPEN) {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let after = after.split_at(OPEN.len()).1;
        let (n, after) = after.split_once(' ').ok_or("`{{repeat N \"text\"}}` needs a count")?;
        let n: usize = n.parse().map_err(|_| format!("bad repeat count {n:?}"))?;
        let (text, after) = json_string(after)?;
        let after = after.strip_prefix("}}").ok_or("`{{repeat` must end with `}}`")?;
        out.push_str(&text.repeat(n));
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

fn parse_event(conn: usize, s: &str) -> Result<Event, String> {
    if let Some(rest) = s.strip_prefix("asked ") {
        if conn != 1 {
            return Err("`= asked` takes no connection number".into());
        }
        return Ok(Event::Asked(AskResult::parse(rest)?));
    }
    if let Some(rest) = s.strip_prefix("answer ") {
        let (id, rest) = split_token(rest)?;
        let id: Value = serde_json::from_str(id).map_err(|e| format!("bad id {id}: {e}"))?;
        let rest = rest.trim();
        // `{json}` is short for `answered {json}`.
        let result = if rest.starts_with('{') {
            AskResult::parse(&format!("answered {rest}"))?
        } else {
            AskResult::parse(rest)?
        };
        return Ok(Event::Answer { conn, id, result });
    }
    let words: Vec<&str> = s.split_whitespace().collect();
    let id = |w: &[&str]| -> Result<Value, String> {
        let id = w.join(" ");
        serde_json::from_str(&id).map_err(|e| format!("bad id {id}: {e}"))
    };
    match words.as_slice() {
        ["invoke", method, name, rest @ ..] if !rest.is_empty() => {
            Ok(Event::Invoke { conn, method: (*method).to_owned(), name: (*name).to_owned(), id: id(rest)? })
        }
        ["cancel", rest @ ..] if !rest.is_empty() => Ok(Event::Cancel { conn, id: id(rest)? }),
        ["close", "end-of-input"] => Ok(Event::Close(conn, "end-of-input")),
        ["close", "closed"] => Ok(Event::Close(conn, "closed")),
        ["close", "frame-too-large"] => Ok(Event::Close(conn, "frame-too-large")),
        ["close", "shutdown"] => Ok(Event::Close(conn, "shutdown")),
        ["close", reason @ ("expired" | "deleted" | "evicted" | "revoked" | "replaced")] => {
            let r: &'static str = match *reason {
                "expired" => "expired",
                "deleted" => "deleted",
                "evicted" => "evicted",
                "revoked" => "revoked",
                _ => "replaced",
            };
            Ok(Event::Close(conn, r))
        }
        ["stale"] => Ok(Event::Stale),
        ["start-task", "error", kind] => Ok(Event::StartTask(Err((*kind).to_owned()))),
        ["start-task", id] => {
            let id: String = serde_json::from_str(id).map_err(|e| format!("bad task id {id}: {e}"))?;
            Ok(Event::StartTask(Ok(id)))
        }
        ["unknown-connection"] => Ok(Event::UnknownConnection(conn)),
        _ => Err(format!("unknown expectation `= {s}`")),
    }
}

/// A failure, as the reply of the call's kind.
fn failure(asked: &Asked, e: HandlerError) -> Reply {
    match asked {
        Asked::Tool(_) => Reply::Tool(Err(e)),
        Asked::Read { .. } => Reply::Resource(Err(e)),
        Asked::Prompt(_) => Reply::Prompt(Err(e)),
        Asked::Complete { .. } => Reply::Completion(Err(e)),
    }
}

fn parse_reply(s: &str, handler: Fixture, asked: &Asked) -> Result<Reply, String> {
    let (kind, rest) = s.split_once(' ').map_or((s, ""), |(a, b)| (a, b.trim()));
    let json = |what: &str| -> Result<Value, String> {
        serde_json::from_str(rest).map_err(|e| format!("{what}: {e}"))
    };
    Ok(match kind {
        "text" => Reply::Tool(Ok(ToolOutput::text(json_string(rest)?.0))),
        "error-text" => Reply::Tool(Ok(ToolOutput::error(json_string(rest)?.0))),
        "structured" => Reply::Tool(Ok(ToolOutput::structured(json("structured")?))),
        "result" => Reply::Tool(Ok(tool_output(&json("result")?)?)),
        "failure" => failure(asked, tool_failure(&json("failure")?)?.into()),
        "contents" => {
            let v = json("contents")?;
            let items = v.as_array().ok_or("contents is a JSON array")?;
            Reply::Resource(Ok(items.iter().map(resource_contents).collect::<Result<_, _>>()?))
        }
        "prompt" => Reply::Prompt(Ok(prompt_output(&json("prompt")?)?)),
        "completion" => {
            let v = json("completion")?;
            let values = v.get("values").and_then(Value::as_array).ok_or("completion needs \"values\"")?;
            Reply::Completion(Ok(Completion {
                values: values.iter().map(|x| x.as_str().unwrap_or_default().to_owned()).collect(),
                total: v.get("total").and_then(Value::as_u64),
                has_more: v.get("hasMore").and_then(Value::as_bool).unwrap_or(false),
            }))
        }
        "public-error" => {
            let (code, rest) = rest.split_once(' ').ok_or("public-error CODE \"message\" [{data}]")?;
            let code: i64 = code.parse().map_err(|_| format!("bad code {code}"))?;
            let (message, rest) = json_string(rest)?;
            let mut e = RpcError::new(mcp_proto::ErrorCode::Other(code), message);
            if !rest.trim().is_empty() {
                e = e.with_data(serde_json::from_str(rest.trim()).map_err(|e| format!("data: {e}"))?);
            }
            failure(asked, HandlerError::Public(e))
        }
        "private-error" => {
            failure(asked, HandlerError::private(json_string(rest).map(|x| x.0).unwrap_or_default()))
        }
        "panic" => failure(asked, HandlerError::Panicked),
        "cancelled" => failure(asked, HandlerError::Cancelled),
        "auto" => auto(handler, asked).ok_or("this call has no automatic behaviour")?,
        _ => return Err(format!("unknown reply kind {kind:?}")),
    })
}

/// A `TextResourceContents` or `BlobResourceContents` object.
fn resource_contents(r: &Value) -> Result<ResourceContents, String> {
    let rs = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
    let uri = rs("uri").ok_or_else(|| format!("contents {r} need \"uri\""))?;
    let mut contents = match (rs("text"), rs("blob")) {
        (Some(t), _) => ResourceContents::text(uri, "", t),
        (None, Some(bl)) => ResourceContents::blob(uri, "", bl),
        _ => return Err(format!("contents {r} need \"text\" or \"blob\"")),
    };
    contents.mime_type = rs("mimeType");
    contents.meta = r.get("_meta").and_then(Value::as_object).cloned();
    Ok(contents)
}

/// A `GetPromptResult`-shaped JSON object as a [`PromptOutput`].
fn prompt_output(v: &Value) -> Result<PromptOutput, String> {
    let mut out = PromptOutput {
        description: v.get("description").and_then(Value::as_str).map(str::to_owned),
        messages: Vec::new(),
    };
    for m in v.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let content = content_block(m.get("content").ok_or("a prompt message needs \"content\"")?)?;
        out.messages.push(match m.get("role").and_then(Value::as_str) {
            Some("user") => PromptMessage::user(content),
            Some("assistant") => PromptMessage::assistant(content),
            other => return Err(format!("a prompt message role is user or assistant, not {other:?}")),
        });
    }
    Ok(out)
}

/// A `CallToolResult`-shaped JSON object as a [`ToolOutput`].
/// `{"code", "message", "retryable"?, "diagnostics"?, "content"?: [...]}` as a [`ToolFailure`].
fn tool_failure(v: &Value) -> Result<ToolFailure, String> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).ok_or_else(|| format!("failure {v} needs {k:?}"));
    let mut f = ToolFailure::new(s("code")?, s("message")?)
        .retryable(v.get("retryable").and_then(Value::as_bool).unwrap_or(false));
    if let Some(d) = v.get("diagnostics") {
        f = f.with_diagnostics(d.clone());
    }
    let content = v.get("content").and_then(Value::as_array).into_iter().flatten();
    Ok(f.with_content(content.map(content_block).collect::<Result<_, _>>()?))
}

fn tool_output(v: &Value) -> Result<ToolOutput, String> {
    let mut out = ToolOutput::default();
    for block in v.get("content").and_then(Value::as_array).into_iter().flatten() {
        out.content.push(content_block(block)?);
    }
    out.structured = v.get("structuredContent").cloned();
    out.is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
    out.meta = v.get("_meta").and_then(Value::as_object).cloned();
    Ok(out)
}

fn content_block(b: &Value) -> Result<Content, String> {
    let s = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_owned);
    let need = |k: &str| s(k).ok_or_else(|| format!("content block {b} needs {k:?}"));
    let annotations = b.get("annotations").and_then(Value::as_object).cloned();
    Ok(match s("type").as_deref() {
        Some("text") => Content::Text { text: need("text")?, annotations },
        Some("image") => Content::Image { data: need("data")?, mime_type: need("mimeType")?, annotations },
        Some("audio") => Content::Audio { data: need("data")?, mime_type: need("mimeType")?, annotations },
        Some("resource_link") => Content::ResourceLink(ResourceLink {
            uri: need("uri")?,
            name: need("name")?,
            title: s("title"),
            description: s("description"),
            mime_type: s("mimeType"),
            size: b.get("size").and_then(Value::as_u64),
        }),
        Some("resource") => {
            let r = b.get("resource").ok_or("a resource block needs \"resource\"")?;
            let rs = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
            let uri = rs("uri").ok_or("resource needs uri")?;
            let mut contents = match (rs("text"), rs("blob")) {
                (Some(t), _) => ResourceContents::text(uri, "", t),
                (None, Some(bl)) => ResourceContents::blob(uri, "", bl),
                _ => return Err("resource needs text or blob".into()),
            };
            contents.mime_type = rs("mimeType");
            contents.meta = r.get("_meta").and_then(Value::as_object).cloned();
            Content::Resource { resource: contents, annotations }
        }
        _ => return Err(format!("unknown content block {b}")),
    })
}

/// Where two frames first differ, with a little context.
fn diff(expected: &Event, actual: &Event) -> String {
    let (Event::Frame(_, e), Event::Frame(_, a)) = (expected, actual) else { return String::new() };
    let at = e.iter().zip(a.iter()).position(|(x, y)| x != y).unwrap_or(e.len().min(a.len()));
    let from = at.saturating_sub(30);
    let show = |b: &[u8]| {
        let end = (at + 40).min(b.len());
        String::from_utf8_lossy(b.get(from..end).unwrap_or_default()).into_owned()
    };
    let byte = |b: &[u8]| b.get(at).map_or("end".to_owned(), |x| format!("0x{x:02x}"));
    format!(
        "\n  first difference at byte {at} (expected {}, actual {}):\n    expected …{}…\n    actual   …{}…",
        byte(e),
        byte(a),
        show(e),
        show(a)
    )
}

/// Every transcript of the corpus (`tests/transcripts/*.txt`), sorted by name.
pub fn transcript_files() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A runner with its engine built and connection 1 open, and a `subscriptions/listen`
    /// request with id 1 and this filter awaiting its acknowledgement.
    fn listening(filter: Value) -> Runner {
        let mut r = Runner::new(false);
        r.start().unwrap();
        let a = Awaiting {
            method: "subscriptions/listen".into(),
            version: Some(ProtocolVersion::V2026_07_28),
            filter: Some(filter),
            caps: None,
        };
        r.awaiting.entry((1, key(&json!(1)))).or_default().push_back(a);
        r
    }

    fn ack(id: Value, notifications: Value) -> Value {
        json!({"jsonrpc":"2.0","method":ACKNOWLEDGED,"params":{
            "_meta":{"io.modelcontextprotocol/subscriptionId":id},"notifications":notifications}})
    }

    fn tagged(method: &str, id: Value) -> Value {
        json!({"jsonrpc":"2.0","method":method,"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":id}}})
    }

    #[test]
    fn an_acknowledged_stream_takes_what_it_asked_for() {
        let mut r = listening(json!({"toolsListChanged": true}));
        r.reply(1, &ack(json!(1), json!({"toolsListChanged": true})));
        r.reply(1, &tagged("notifications/tools/list_changed", json!(1)));
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        assert!(r.awaiting.values().all(VecDeque::is_empty));
    }

    #[test]
    fn stream_violations_are_caught() {
        // Tagged before any acknowledgement.
        let mut r = listening(json!({"toolsListChanged": true}));
        r.reply(1, &tagged("notifications/tools/list_changed", json!(1)));
        assert!(r.failures.iter().any(|f| f.contains("not open")), "{:?}", r.failures);
        // A kind the stream did not ask for.
        let mut r = listening(json!({"toolsListChanged": true}));
        r.reply(1, &ack(json!(1), json!({"toolsListChanged": true})));
        r.reply(1, &tagged("notifications/prompts/list_changed", json!(1)));
        assert!(r.failures.iter().any(|f| f.contains("did not ask")), "{:?}", r.failures);
        // An acknowledgement honouring more than was asked.
        let mut r = listening(json!({"resourceSubscriptions": ["a://1"]}));
        r.reply(1, &ack(json!(1), json!({"promptsListChanged": true, "resourceSubscriptions": ["a://2"]})));
        assert_eq!(r.failures.len(), 2, "{:?}", r.failures);
        // A response to an open stream.
        let mut r = listening(json!({}));
        r.reply(1, &ack(json!(1), json!({})));
        r.reply(1, &json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}));
        assert!(r.failures.iter().any(|f| f.contains("stream that is open")), "{:?}", r.failures);
        // An acknowledgement nobody asked for.
        let mut r = listening(json!({}));
        r.reply(1, &ack(json!(2), json!({})));
        assert!(r.failures.iter().any(|f| f.contains("no pending")), "{:?}", r.failures);
    }

    #[test]
    fn free_floating_notifications_need_a_legacy_session() {
        let mut r = listening(json!({}));
        r.reply(1, &json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
        assert!(
            r.failures.iter().any(|f| f.contains("without an initialized legacy session")),
            "{:?}",
            r.failures
        );
        let mut r = listening(json!({}));
        r.reply(
            1,
            &json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1}}),
        );
        assert!(r.failures.iter().any(|f| f.contains("no `! log` asked for")), "{:?}", r.failures);
    }

    /// A runner whose connection 1 has an initialized 2025-11-25 session with these client
    /// capabilities.
    fn legacy(caps: Value) -> Runner {
        let mut r = Runner::new(false);
        r.start().unwrap();
        if let Some(c) = r.conns.get_mut(&1) {
            c.session = Some(ProtocolVersion::V2025_11_25);
            c.initialized = true;
            c.client_caps = Some(caps);
        }
        r
    }

    fn failed(r: &Runner, what: &str) -> bool {
        r.failures.iter().any(|f| f.contains(what))
    }

    #[test]
    fn server_requests_are_checked() {
        let roots = json!({"jsonrpc":"2.0","id":1,"method":"roots/list","params":{}});
        // Asked for and allowed: no reply is counted, nothing fails.
        let mut r = legacy(json!({"roots": {}}));
        r.ask_sends.extend([(1, "roots/list"), (1, "roots/list")]);
        r.reply(1, &roots);
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        // The same id again while the client has not answered it.
        r.reply(1, &roots);
        assert!(failed(&r, "reusing id"), "{:?}", r.failures);
        // Nobody asked.
        let mut r = legacy(json!({"roots": {}}));
        r.reply(1, &roots);
        assert!(failed(&r, "no `! ask` asked for"), "{:?}", r.failures);
        // A capability the client did not declare; URL mode with only form mode.
        let mut r = legacy(json!({"elicitation": {}}));
        r.ask_sends.extend([(1, "roots/list"), (1, "elicitation/create")]);
        r.reply(1, &roots);
        let url = json!({"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{
            "mode":"url","message":"m","url":"https://example.com","elicitationId":"2"}});
        r.reply(1, &url);
        assert_eq!(
            r.failures.iter().filter(|f| f.contains("may not be sent")).count(),
            2,
            "{:?}",
            r.failures
        );
        // No initialized legacy session.
        let mut r = Runner::new(false);
        r.start().unwrap();
        r.ask_sends.push_back((1, "roots/list"));
        r.reply(1, &roots);
        assert!(failed(&r, "no initialized legacy session"), "{:?}", r.failures);
        // Schema: elicitation without requestedSchema.
        let mut r = legacy(json!({"elicitation": {}}));
        r.ask_sends.push_back((1, "elicitation/create"));
        r.reply(1, &json!({"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"m"}}));
        assert!(failed(&r, "schema"), "{:?}", r.failures);
    }

    fn awaiting_call(r: &mut Runner, version: Option<ProtocolVersion>, caps: Value) {
        let a = Awaiting { method: "tools/call".into(), version, filter: None, caps: Some(caps) };
        r.awaiting.entry((1, key(&json!(1)))).or_default().push_back(a);
    }

    #[test]
    fn input_required_is_checked() {
        let modern = Some(ProtocolVersion::V2026_07_28);
        let result = |extra: Value| {
            let mut r = json!({"resultType": "input_required", "requestState": "s1"});
            if let (Some(r), Some(extra)) = (r.as_object_mut(), extra.as_object()) {
                r.extend(extra.clone());
            }
            json!({"jsonrpc": "2.0", "id": 1, "result": r})
        };
        // A good one is the reply, and its state is remembered.
        let mut r = Runner::new(false);
        r.start().unwrap();
        awaiting_call(&mut r, modern, json!({"roots": {}}));
        r.reply(1, &result(json!({"inputRequests": {"r": {"method": "roots/list"}}})));
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        assert_eq!(r.states, ["s1"]);
        assert!(r.awaiting.values().all(VecDeque::is_empty));
        // Caching hints; a request the capabilities rule out.
        let mut r = Runner::new(false);
        r.start().unwrap();
        awaiting_call(&mut r, modern, json!({}));
        r.reply(1, &result(json!({"ttlMs": 5, "inputRequests": {"r": {"method": "roots/list"}}})));
        assert!(failed(&r, "carrying ttlMs"), "{:?}", r.failures);
        assert!(failed(&r, "may not be sent"), "{:?}", r.failures);
        // On a legacy request.
        let mut r = legacy(json!({}));
        awaiting_call(&mut r, None, json!({}));
        r.reply(1, &result(json!({})));
        assert!(failed(&r, "answers a 2025-11-25 request"), "{:?}", r.failures);
    }

    #[test]
    fn ask_lines() {
        let reqs = parse_requests(
            r#"a roots ; "b c" sample {"messages":[],"maxTokens":1};d elicit-url "https://example.com" "go""#,
        )
        .unwrap();
        let keys: Vec<&str> = reqs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b c", "d"]);
        assert!(parse_requests("a bogus").is_err());
        assert!(parse_requests("a roots b roots").is_err());
        assert!(
            parse_requests(r#"a elicit {"type":"object","properties":{"x":{"type":"object"}}} "m""#).is_err()
        );
        let busy = AskResult::parse("error busy").unwrap();
        let unsupported = AskResult::Error { kind: "unsupported", detail: r#"{"roots":{}}"#.into() };
        assert!(unsupported.meets(&AskResult::parse("error unsupported").unwrap()));
        assert!(unsupported.meets(&AskResult::parse(r#"error unsupported {"roots":{}}"#).unwrap()));
        assert!(!unsupported.meets(&AskResult::parse(r#"error unsupported {"sampling":{}}"#).unwrap()));
        assert!(!unsupported.meets(&busy));
        assert!(AskResult::parse("error nope").is_err());
        assert_eq!(parse_event(1, "answer 3 {\"k\": 1}").unwrap().to_string(), "= answer 3 {\"k\":1}");
    }

    #[test]
    fn states_expand() {
        let mut r = Runner::new(false);
        assert!(r.expand("{{state}}").is_err());
        r.states = vec!["s1".into(), "s2".into()];
        assert_eq!(r.expand(r#""{{state}}-{{state 1}}" {{repeat 2 "x"}}"#).unwrap(), r#""s2-s1" xx"#);
        assert!(r.expand("{{state 3}}").is_err());
        assert!(r.expand("{{state").is_err());
    }

    #[test]
    fn http_lines_are_compared_exactly() {
        let head = ">> POST /mcp\n>> Host: localhost\n>> Content-Type: application/json\n>> Accept: application/json\n>> Mcp-Session-Id: nope\n>> {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
        let body = r#"<< {"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"session not found"}}"#;
        let good = format!("{head}<< 404\n<< Content-Type: application/json\n{body}\n");
        assert!(run(&good).passed(), "{}", run(&good));
        // A header name in another case, a missing body line, a wrong exchange.
        let case = format!("{head}<< 404\n<< content-type: application/json\n{body}\n");
        assert!(!run(&case).passed());
        let short = format!("{head}<< 404\n<< Content-Type: application/json\n");
        assert!(run(&short).failures.iter().any(|f| f.contains("no line expects")), "{}", run(&short));
        assert!(!run(&format!("{head}<<2 404\n")).passed());
        assert_eq!(HttpLine::parse("|").unwrap(), HttpLine::Sse(Vec::new()));
        assert_eq!(HttpLine::parse("| data:").unwrap(), HttpLine::Sse(b"data:".to_vec()));
        assert_eq!(HttpLine::parse("Allow: GET").unwrap(), HttpLine::Header("Allow".into(), "GET".into()));
        assert_eq!(HttpLine::parse("close deleted").unwrap(), HttpLine::Close("deleted"));
        assert!(matches!(HttpLine::parse("{}").unwrap(), HttpLine::Body(_)));
    }

    #[test]
    fn connection_prefixes() {
        assert_eq!(prefixed("> {}", '>'), Some((1, "{}")));
        assert_eq!(prefixed(">2 {}", '>'), Some((2, "{}")));
        assert_eq!(prefixed(">12 x", '>'), Some((12, "x")));
        assert_eq!(prefixed(">0 {}", '>'), None);
        assert_eq!(prefixed(">2{}", '>'), None);
        assert_eq!(prefixed("<", '<'), None);
    }
}

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
//! `too-many-rounds`, `unreachable`, `busy`, `stale`, `suspended`, `timed-out`, `too-large` (the
//! [`AskError`] variants).
//! The runner prints a detail after some kinds: the required capabilities for `unsupported`
//! (`{"sampling":{}}`), the client's code and message for `rejected` (`-1 "no"`), the reason for
//! `invalid` (`"field ..."`), the frame's size and the ceiling for `too-large` (`412 300`). An expectation may leave the detail out; when it gives one, the
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
//! - `! call-timeout 10s` (or `ms`), `! max-input-rounds N`, `! state-ttl 5s`
//!   (or `ms`), `! max-ledger-entries N`: the [`Limits`] setters `call_timeout`,
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
//! - `! list-cache shared|private <ttl>`: [`Config::list_cache`] (default private, 0);
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
//! - `! recheck <binding> gone` / `! recheck <binding> as <identity|anonymous> [role...]`:
//!   `RegistryMut::set_recheck` with a re-check that finds the caller bound to `<binding>` gone,
//!   or now that caller (every binding not named stays as it is).
//! - `! register <tool|resource|template|prompt|skill> NAME...` and `! unregister ...`:
//!   (un)registers each named item, in order, then drains once, so a burst is one line. A
//!   fixture name registers that fixture; any other name a plain extra item (see
//!   [`crate::tools`]; an extra skill is `skill://extra/NAME` with only its `SKILL.md`).
//! - `! notify-updated <uri>`: `Engine::notify_resource_updated`.
//! - `! notify-list-changed tools|resources|prompts`: `Engine::notify_list_changed`.
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

mod checks;
mod directives;
mod grammar;
mod http;
mod replies;
mod runner;

use directives::*;
use grammar::*;
use http::*;
use replies::*;
use runner::*;

pub use grammar::expand_frame;
pub use runner::{record, run, Live, Report};

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

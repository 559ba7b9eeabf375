//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on 2026-07-28: a
//! `tools/call` answered at once with `resultType: "task"` while its handler goes on running,
//! and `tasks/get`, `tasks/update` and `tasks/cancel` to follow it.
//!
//! A task is a call the engine detached from the request that made it: the call keeps running
//! (its handler, its deadline, its asks), but its outcome goes to the task table instead of a
//! connection. The table is the engine's, bounded by [`Limits::max_tasks`] with a fair share
//! per caller that running tasks count in too (one caller's flood gives way to another's task,
//! newest first); an ended task is kept for [`Limits::task_ttl`] (a timer in the one queue),
//! then forgotten, and what ended tasks hold is bounded in bytes, per task
//! ([`Limits::max_task_result_bytes`]) and in all, shared fairly
//! ([`Limits::max_ended_task_bytes`]). Task ids come from the engine's seed (an HMAC of a counter, like session ids), so
//! they are unguessable and the same for the same inputs; a task answers only the caller that
//! made it, and any other caller is told it does not exist, exactly as for an unknown id.
//!
//! While a task waits for input (its handler called [`Engine::ask`]), the requests are shown
//! on `tasks/get` under `inputRequests`, and `tasks/update` delivers answers, possibly a few
//! at a time; once all are in, the handler resumes with them ([`Output::Answer`]), as a legacy
//! ask would.
//!
//! [`Limits::max_tasks`]: crate::limits::Limits::max_tasks
//! [`Limits::task_ttl`]: crate::limits::Limits::task_ttl
//! [`Limits::max_task_result_bytes`]: crate::limits::Limits::max_task_result_bytes
//! [`Limits::max_ended_task_bytes`]: crate::limits::Limits::max_ended_task_bytes

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::blame::Bound;
use crate::engine::state::streams::Transport;
use crate::engine::state::task_table::{Pending, Task};
use crate::engine::state::timers::Timer;
use crate::engine::{Answer, AskError, Asked, CallId, CancelReason, Ctx, Engine, Output, META_SERVER_INFO};
use crate::engine::{TaskRecord, TaskStatus};
use crate::interaction::InputRequest;
use crate::jsonrpc::{encode_result, Encoded, ErrorCode, RequestId, RpcError};
use crate::registry::TaskSupport;

/// The extension id, under `capabilities.extensions` on both sides.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Ended-task records ([`Output::TaskEnded`]) waiting in the output queue before the oldest is
/// dropped.
const ENDED_QUEUE_CAP: usize = 1024;

/// The status message of a running task cancelled to make room for another caller's.
const DISPLACED_MESSAGE: &str = "cancelled by the server to make room for another caller's task";

/// Why [`Engine::start_task`] made no task.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskError {
    /// The call is not in flight.
    Stale,
    /// The call is already a task.
    AlreadyTask,
    /// The call cannot become a task: not a 2026-07-28 `tools/call` of a task-capable tool
    /// whose request declared the extension.
    NotEligible,
    /// The engine refused it (the task table is full, or it has no seed to mint ids with);
    /// the call goes on as an ordinary call.
    Refused(RpcError),
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskError::Stale => f.write_str("the call is no longer in flight"),
            TaskError::AlreadyTask => f.write_str("the call already runs as a task"),
            TaskError::NotEligible => f.write_str("the call cannot run as a task"),
            TaskError::Refused(e) => write!(f, "no task: {}", e.message),
        }
    }
}

impl std::error::Error for TaskError {}

/// Bytes of `value` serialized as JSON, counted without building the text.
fn json_len(value: &(impl serde::Serialize + ?Sized)) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Only a Serialize impl that reports its own failure fails; JSON values never do.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// ISO-8601 UTC with milliseconds, from Unix milliseconds.
pub(in crate::engine) fn iso8601(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let ms = unix_ms % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// Milliseconds for a wire field that must be a positive integer.
fn positive_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).clamp(1, i64::MAX as u64)
}

/// `-32021` naming the extension: the request did not declare it.
pub(in crate::engine) fn missing_extension(what: &str) -> RpcError {
    RpcError::incompatible(
        ErrorCode::MissingClientCapability,
        format!("{what} needs the {TASKS_EXTENSION} extension in the request's client capabilities"),
    )
    .with_data(serde_json::json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}))
}

fn unknown_task() -> RpcError {
    RpcError::invalid_params("unknown task")
}

impl<H: Clone> Engine<H> {
    /// Whether this server serves the Tasks extension: some tool may run as a task, or the
    /// application declared the extension itself.
    pub(in crate::engine) fn serves_tasks(&self) -> bool {
        self.registry.task_tools > 0 || self.registry.extensions.contains_key(TASKS_EXTENSION)
    }

    /// Whether the modern request of `ctx` declared the extension in its client capabilities.
    pub(in crate::engine) fn declares_tasks(ctx: Ctx<'_>) -> bool {
        ctx.version.is_modern()
            && ctx
                .client_caps
                .and_then(|c| c.get("extensions"))
                .and_then(Value::as_object)
                .is_some_and(|e| e.contains_key(TASKS_EXTENSION))
    }

    /// What `tools/call` of a tool with `support` does for the request of `ctx`: `Ok(true)` to
    /// make a task before the handler runs, `Ok(false)` to run it as a call, or the `-32021`
    /// of a required task the request cannot receive.
    pub(in crate::engine) fn task_decision(
        &self,
        ctx: Ctx<'_>,
        support: TaskSupport,
        by_handler: bool,
        batched: bool,
    ) -> Result<bool, RpcError> {
        let declared = Self::declares_tasks(ctx);
        match support {
            TaskSupport::Never => Ok(false),
            TaskSupport::Required if !declared => Err(missing_extension("this tool")),
            _ => Ok(declared && !by_handler && !batched),
        }
    }

    /// Makes room for one more task of `owner` under [`crate::limits::Limits::max_tasks`] (see there
    /// for the rule), or says why there is none.
    pub(in crate::engine) fn task_room(&mut self, now: Instant, owner: &str) -> Result<(), RpcError> {
        if self.config.seed.is_none() {
            return Err(RpcError::new(ErrorCode::InternalError, "tasks need an engine seed (Config::seed)"));
        }
        let max = self.config.limits.max_tasks;
        if max == 0 {
            return Err(RpcError::limit(Bound::Capacity, "too many tasks (the server keeps none)"));
        }
        if self.tasks.len() < max {
            return Ok(());
        }
        if let Some(serial) = self.tasks.oldest_ended(owner, None) {
            self.drop_task(serial);
            return Ok(());
        }
        let holders = self.tasks.held.len() + usize::from(!self.tasks.held.contains_key(owner));
        let share = crate::limits::Limits::fair_share(max, holders);
        if self.tasks.holding(owner).0 >= share {
            let msg = format!("too many tasks (server-wide limit {max}, this caller's share {share})");
            return Err(RpcError::limit(Bound::Share, msg));
        }
        // Below its share, the caller takes a place from those above theirs: an ended task if
        // any of them has one, else the greediest one's newest running task.
        let above = self.tasks.above(owner, share, |h| h.tasks);
        if let Some(serial) = above.iter().find_map(|b| self.tasks.oldest_ended(b, None)) {
            self.drop_task(serial);
            return Ok(());
        }
        if let Some(serial) = above.first().and_then(|b| self.tasks.newest_running(b)) {
            self.displace_task(now, serial);
            return Ok(());
        }
        // More callers hold tasks than there are places, each within its share of 1.
        let msg =
            format!("too many tasks (server-wide limit {max}, held by {holders} callers within their share)");
        Err(RpcError::limit(Bound::Capacity, msg))
    }

    /// Cancels the running task `serial` to make room for another caller's, as `tasks/cancel`
    /// would (its handler is told to stop), and forgets it: its caller learns of it from its
    /// listen streams and the task store.
    fn displace_task(&mut self, now: Instant, serial: u64) {
        let call = self.tasks.by_serial.get_mut(&serial).and_then(|t| t.call.take());
        if let Some(call) = call {
            if self.finish_call(call).is_some() {
                self.out.push_back(Output::Cancel { call, reason: CancelReason::Displaced });
            }
        }
        self.end_task(now, serial, TaskStatus::Cancelled, None, Some(DISPLACED_MESSAGE.into()));
        self.drop_task(serial);
        self.refusals.displaced += 1;
    }

    fn drop_task(&mut self, serial: u64) {
        if let Some(t) = self.tasks.remove(serial) {
            if let Some(at) = t.expires {
                self.timers.disarm(at, Timer::Task(serial));
            }
        }
    }

    fn mint_task_id(&mut self) -> Option<String> {
        use base64::Engine as _;
        use hmac::{Hmac, Mac};
        let seed = self.config.seed.as_ref()?;
        loop {
            let mut mac = <Hmac<sha2::Sha256> as hmac::digest::KeyInit>::new_from_slice(&seed.0).ok()?;
            mac.update(b"mcp-proto/task-id/v1");
            mac.update(&self.tasks.minted.to_be_bytes());
            self.tasks.minted = self.tasks.minted.wrapping_add(1);
            let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
            // A repeat would take 2^128 ids; it must still never join two tasks.
            if !self.tasks.by_id.contains_key(&id) {
                return Some(id);
            }
        }
    }

    /// Turns the admitted `call` into a task and answers its request with the
    /// `CreateTaskResult`. Room was made beforehand ([`task_room`](Self::task_room)).
    pub(in crate::engine) fn begin_task(&mut self, now: Instant, call: CallId) -> Result<(), RpcError> {
        let id = self.mint_task_id().ok_or_else(RpcError::misuse)?;
        let now_ms = self.unix_ms(now);
        let c = self.calls.get_mut(call).ok_or_else(RpcError::misuse)?;
        let serial = self.tasks.minted;
        c.task = Some(serial);
        let (conn, reply_to, request_id, version, used, claiming) =
            (c.conn, c.reply_to, c.id.clone(), c.version, c.used.take(), c.claiming);
        let owner = self.conns.get(conn.0).map(|k| k.caller.binding().to_owned()).unwrap_or_default();
        // The request is answered now: its connection no longer waits for the call, and may
        // close or reuse the id while the task runs on.
        if let Some(k) = self.conns.get_mut(conn.0) {
            k.calls.release(&request_id);
            if k.draining && k.calls.in_flight() == 0 {
                self.pending_close.push(conn);
            }
        }
        let task = Task {
            id,
            owner,
            status: TaskStatus::Working,
            created_ms: now_ms,
            updated_ms: now_ms,
            call: Some(call),
            version,
            outcome: None,
            bytes: 0,
            status_message: None,
            pending: Vec::new(),
            answers: Map::new(),
            keys: BTreeSet::new(),
            rounds: 0,
            ask_deadline: None,
            expires: None,
        };
        let mut r = self.task_fields(&task);
        r.insert("resultType".into(), "task".into());
        let mut meta = Map::new();
        meta.insert(META_SERVER_INFO.into(), self.server_info_modern.clone());
        r.insert("_meta".into(), Value::Object(meta));
        let answer: Encoded = encode_result(&request_id, &r).into();
        self.report_holding(crate::engine::HeldKind::Task, &task.id, true);
        if let Some(Transport::Exchange(x)) = self.conns.get_mut(reply_to.0).map(|c| &mut c.transport) {
            x.hold(crate::engine::HeldKind::Task, task.id.clone());
        }
        self.tasks.insert(serial, task);
        // A copy of the MRTR retry that made the task gets the same task again.
        if let Some(used) = used {
            self.settle_state(now_ms, used, &request_id, Some(&answer), claiming);
        }
        self.send(reply_to, answer, true);
        self.close_drained();
        Ok(())
    }

    /// Makes the call of `call` a task now, from its handler (a tool registered with
    /// [`Tool::task_started_by_handler`](crate::registry::Tool::task_started_by_handler)): the request is
    /// answered `resultType: "task"` at once, and the handler's eventual answer goes to the
    /// task. Returns the task id. Only a 2026-07-28 `tools/call` of a task-capable tool whose
    /// request declared the extension can become one ([`TaskError::NotEligible`] otherwise);
    /// a full table refuses it ([`TaskError::Refused`]) and the call goes on as it was.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn start_task(&mut self, now: Instant, call: CallId) -> Result<String, TaskError> {
        self.input(now);
        let c = self.calls.get(call).ok_or(TaskError::Stale)?;
        if c.task.is_some() {
            return Err(TaskError::AlreadyTask);
        }
        let crate::engine::state::calls::CallKind::Tool(name, _) = &c.kind else {
            return Err(TaskError::NotEligible);
        };
        let supports = self.registry.tools.get(name).is_some_and(|t| t.tool.task != TaskSupport::Never);
        let declared = c.version.is_modern()
            && c.input
                .as_ref()
                .and_then(|i| i.mrtr.as_ref())
                .and_then(|(_, caps)| caps.get("extensions"))
                .and_then(Value::as_object)
                .is_some_and(|e| e.contains_key(TASKS_EXTENSION));
        if !supports || !declared || c.batch().is_some() {
            return Err(TaskError::NotEligible);
        }
        let owner = self.caller(c.conn).binding().to_owned();
        self.task_room(now, &owner).map_err(TaskError::Refused)?;
        self.begin_task(now, call).map_err(TaskError::Refused)?;
        let serial = self.calls.get(call).and_then(|c| c.task).ok_or(TaskError::Stale)?;
        self.tasks.by_serial.get(&serial).map(|t| t.id.clone()).ok_or(TaskError::Stale)
    }

    /// The fields every view of a task shares: id, status, times, TTL and poll interval.
    fn task_fields(&self, t: &Task) -> Map<String, Value> {
        let limits = &self.config.limits;
        let mut r = Map::new();
        r.insert("taskId".into(), t.id.clone().into());
        r.insert("status".into(), t.status.as_str().into());
        if let Some(m) = &t.status_message {
            r.insert("statusMessage".into(), m.clone().into());
        }
        r.insert("createdAt".into(), iso8601(t.created_ms).into());
        r.insert("lastUpdatedAt".into(), iso8601(t.updated_ms).into());
        r.insert("ttlMs".into(), positive_ms(limits.task_ttl).into());
        r.insert("pollIntervalMs".into(), positive_ms(limits.task_poll_interval).into());
        r
    }

    /// The `DetailedTask` fields: the shared ones, plus the pending input requests, the result
    /// or the error.
    fn detailed(&self, t: &Task) -> Map<String, Value> {
        let mut r = self.task_fields(t);
        if t.status == TaskStatus::InputRequired {
            let requests: Map<String, Value> =
                t.pending.iter().map(|p| (p.wire.clone(), p.request.to_input_request(t.version))).collect();
            r.insert("inputRequests".into(), Value::Object(requests));
        }
        if let Some((field, value)) = &t.outcome {
            r.insert((*field).into(), value.clone());
        }
        r
    }

    /// Whether `owner` holds task `id` here.
    pub(in crate::engine) fn owns_task(&self, owner: &str, id: &str) -> bool {
        self.owned_task(owner, id).is_ok()
    }

    /// Task `serial` changed status: every listen stream of its caller that follows it is
    /// owed a `notifications/tasks` with the task as `tasks/get` shows it now.
    fn task_changed(&mut self, serial: u64) {
        let Some(t) = self.tasks.by_serial.get(&serial) else { return };
        let (id, owner) = (t.id.clone(), t.owner.clone());
        let task = self.detailed(t);
        let max = self.config.limits.max_subscribed_uris;
        for (_, c) in self.conns.iter_mut() {
            if c.caller.binding() == owner && c.listens.iter().any(|l| l.filter.tasks.contains(&id)) {
                self.notes.owe_task(&mut c.pending, &id, task.clone(), max);
            }
        }
    }

    /// The task `id` as `owner` may see it: another caller's is unknown to it.
    fn owned_task(&self, owner: &str, id: &str) -> Result<u64, RpcError> {
        let serial = *self.tasks.by_id.get(id).ok_or_else(unknown_task)?;
        match self.tasks.by_serial.get(&serial) {
            Some(t) if t.owner == owner => Ok(serial),
            _ => Err(unknown_task()),
        }
    }

    /// `tasks/get`, `tasks/update` and `tasks/cancel` of a 2026-07-28 request.
    pub(in crate::engine) fn task_method(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        method: &str,
        params: Option<&Map<String, Value>>,
    ) -> Result<Answer<H>, RpcError> {
        if !self.serves_tasks() {
            return Err(RpcError::method_not_found(method));
        }
        self.check_server_gate(ctx)?;
        if !Self::declares_tasks(ctx) {
            return Err(missing_extension(method));
        }
        let id = match params.and_then(|p| p.get("taskId")) {
            Some(Value::String(id)) => id.as_str(),
            _ => return Err(RpcError::invalid_params("\"taskId\" must be a string")),
        };
        let owner = self.caller(ctx.conn).binding().to_owned();
        let serial = match self.owned_task(&owner, id) {
            Ok(serial) => serial,
            Err(e) => {
                // An id this engine does not hold may be in the store kept beyond it (an ended
                // task another replica ran, or one that outlived its place here).
                let lookup = self.registry.task_lookup.clone().filter(|_| method == "tasks/get");
                let Some(handler) = lookup else { return Err(e) };
                let kind = crate::engine::state::calls::CallKind::TaskLookup(id.to_owned(), owner);
                let request = crate::engine::Request::GetTask { task_id: id.to_owned() };
                return self.invoke(now, ctx, kind, None, request, handler);
            }
        };
        let body = match method {
            "tasks/get" => {
                let t = self.tasks.by_serial.get(&serial).ok_or_else(unknown_task)?;
                self.detailed(t)
            }
            "tasks/update" => {
                let responses = match params.and_then(|p| p.get("inputResponses")) {
                    Some(Value::Object(m)) => m,
                    _ => return Err(RpcError::invalid_params("\"inputResponses\" must be an object")),
                };
                self.task_update(now, serial, responses)?;
                Map::new()
            }
            _ => {
                self.task_cancel(now, serial);
                Map::new()
            }
        };
        Ok(Answer::Now(self.complete_result(ctx.id, body).into()))
    }

    /// The answer to a `tasks/get` the task store answered: the record if it is the caller's,
    /// of that id and within its TTL, else `-32602` as for any unknown id.
    pub(in crate::engine) fn looked_up_task(
        &self,
        request: &RequestId,
        id: &str,
        owner: &str,
        record: Option<TaskRecord>,
    ) -> Encoded {
        let now_ms = self.unix_ms(self.clock);
        match record {
            Some(r)
                if r.task_id == id
                    && r.owner == owner
                    && r.ended_unix_ms.saturating_add(r.ttl_ms) > now_ms =>
            {
                let mut task = r.task;
                task.remove("resultType");
                task.remove("_meta");
                self.complete_result(request, task).into()
            }
            _ => unknown_task().encode(Some(request)),
        }
    }

    /// A `resultType: "complete"` result with the server's `_meta`.
    fn complete_result(&self, id: &RequestId, mut r: Map<String, Value>) -> Vec<u8> {
        r.insert("resultType".into(), "complete".into());
        let mut meta = Map::new();
        meta.insert(META_SERVER_INFO.into(), self.server_info_modern.clone());
        r.insert("_meta".into(), Value::Object(meta));
        encode_result(id, &r)
    }

    /// Delivers answers to a task waiting for input. Keys it does not wait on are ignored (the
    /// extension is cooperative: a late or repeated answer is no error); an answer that does
    /// not fit its request refuses the whole update with `-32602`, and nothing is taken.
    fn task_update(
        &mut self,
        now: Instant,
        serial: u64,
        responses: &Map<String, Value>,
    ) -> Result<(), RpcError> {
        let now_ms = self.unix_ms(now);
        let Some(t) = self.tasks.by_serial.get_mut(&serial) else { return Err(unknown_task()) };
        if t.status != TaskStatus::InputRequired {
            return Ok(());
        }
        for p in &t.pending {
            if let Some(answer) = responses.get(&p.wire) {
                p.request.validate_answer(answer).map_err(|e| e.rpc_error())?;
            }
        }
        let before = t.pending.len();
        let mut kept = Vec::with_capacity(before);
        for p in std::mem::take(&mut t.pending) {
            match responses.get(&p.wire) {
                Some(answer) => {
                    t.answers.insert(p.key, answer.clone());
                }
                None => kept.push(p),
            }
        }
        t.pending = kept;
        if t.pending.len() == before {
            return Ok(());
        }
        t.updated_ms = now_ms;
        if !t.pending.is_empty() {
            return Ok(());
        }
        t.status = TaskStatus::Working;
        let answers = std::mem::take(&mut t.answers);
        let deadline = t.ask_deadline.take();
        let call = t.call;
        self.task_changed(serial);
        if let Some(call) = call {
            if let Some(at) = deadline {
                self.timers.disarm(at, Timer::Ask(call));
            }
            self.out.push_back(Output::Answer { call, answers: Ok(answers) });
        }
        Ok(())
    }

    /// Cancels a running task (its handler is stopped); an ended task is left as it is.
    fn task_cancel(&mut self, now: Instant, serial: u64) {
        let Some(t) = self.tasks.by_serial.get_mut(&serial) else { return };
        if t.status.is_terminal() {
            return;
        }
        let call = t.call.take();
        if let Some(call) = call {
            if self.finish_call(call).is_some() {
                self.out.push_back(Output::Cancel { call, reason: CancelReason::Peer });
            }
        }
        self.end_task(now, serial, TaskStatus::Cancelled, None, Some("cancelled by the client".into()));
        self.close_drained();
    }

    /// The task call ended with `answer` (its handler's, or the engine's on its behalf).
    pub(in crate::engine) fn task_settled(&mut self, serial: u64, answer: &Encoded) {
        let parsed: Value = serde_json::from_slice(&answer.bytes).unwrap_or_default();
        let (status, outcome) = match (parsed.get("result"), parsed.get("error")) {
            (Some(result), _) => {
                let mut result = result.clone();
                if let Some(m) = result.as_object_mut() {
                    // The task's own envelope says these; the inlined result is the tool's.
                    m.remove("resultType");
                    m.remove("_meta");
                }
                (TaskStatus::Completed, Some(("result", result)))
            }
            (None, Some(error)) => (TaskStatus::Failed, Some(("error", error.clone()))),
            _ => (
                TaskStatus::Failed,
                Some(("error", serde_json::json!({"code": -32603, "message": "internal error"}))),
            ),
        };
        let message = (status == TaskStatus::Failed).then(|| {
            outcome
                .as_ref()
                .and_then(|(_, e)| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("failed")
                .to_owned()
        });
        let now = self.clock;
        if let Some(t) = self.tasks.by_serial.get_mut(&serial) {
            t.call = None;
        }
        self.end_task(now, serial, status, outcome, message);
    }

    /// The task call ended without an answer (cancelled by the engine, its connection closed
    /// before it became a task cannot happen): the task is cancelled.
    pub(in crate::engine) fn task_interrupted(&mut self, serial: u64) {
        let now = self.clock;
        if let Some(t) = self.tasks.by_serial.get_mut(&serial) {
            t.call = None;
        }
        self.end_task(now, serial, TaskStatus::Cancelled, None, Some("cancelled by the server".into()));
    }

    fn end_task(
        &mut self,
        now: Instant,
        serial: u64,
        status: TaskStatus,
        outcome: Option<(&'static str, Value)>,
        message: Option<String>,
    ) {
        let now_ms = self.unix_ms(now);
        let ttl = self.config.limits.task_ttl;
        let Some(t) = self.tasks.by_serial.get_mut(&serial) else { return };
        if t.status.is_terminal() {
            return;
        }
        t.status = status;
        t.outcome = outcome;
        t.status_message = message;
        t.pending.clear();
        t.answers.clear();
        t.updated_ms = now_ms;
        t.ask_deadline = None;
        let id = t.id.clone();
        let kept = self.keep_ended(serial);
        // Its caller's listen streams learn how it ended, even when nothing of it is kept.
        self.task_changed(serial);
        self.report_holding(crate::engine::HeldKind::Task, &id, false);
        let Some(bytes) = kept else {
            self.tasks.remove(serial);
            return;
        };
        let Some(t) = self.tasks.by_serial.get_mut(&serial) else { return };
        // Same rounding as every engine timer: a zero TTL still waits 1 ms.
        t.expires = now.checked_add(ttl.max(Duration::from_millis(1)));
        if let Some(at) = t.expires {
            self.timers.arm(at, Timer::Task(serial));
        }
        let Some(t) = self.tasks.by_serial.get(&serial) else { return };
        let record = TaskRecord {
            task_id: id,
            owner: t.owner.clone(),
            task: self.detailed(t),
            ended_unix_ms: now_ms,
            ttl_ms: positive_ms(ttl),
        };
        let max = self.config.limits.max_ended_task_bytes;
        self.out.push_evicting(Output::TaskEnded(record), ENDED_QUEUE_CAP, bytes, max);
    }

    /// Bytes of the JSON view of the ended task `t` (what [`detailed`](Self::detailed) gives),
    /// counted without building it: its fields, then its outcome.
    fn measure(&self, t: &Task) -> usize {
        let fields = json_len(&self.task_fields(t));
        match &t.outcome {
            // `{..}` becomes `{..,"field":value}`: the map has fields, so a comma comes first.
            Some((field, value)) => fields + 1 + json_len(*field) + 1 + json_len(value),
            None => fields,
        }
    }

    /// Keeps the task `serial`, which just ended, under [`crate::limits::Limits::max_task_result_bytes`]
    /// and [`crate::limits::Limits::max_ended_task_bytes`] (see there for the rule): the bytes it is
    /// counted for, having become the `result_too_large` failure if its outcome did not fit, or
    /// `None` when not even that fits.
    fn keep_ended(&mut self, serial: u64) -> Option<usize> {
        let per_task = self.config.limits.max_task_result_bytes;
        let mut bytes = self.measure(self.tasks.by_serial.get(&serial)?);
        if bytes > per_task {
            self.too_large(serial, bytes, format!("the {per_task}-byte limit"), per_task);
            bytes = self.measure(self.tasks.by_serial.get(&serial)?);
            if bytes > per_task {
                return None;
            }
        }
        if let Err(share) = self.room_for_bytes(serial, bytes) {
            self.too_large(serial, bytes, format!("this caller's {share}-byte share of ended tasks"), share);
            bytes = self.measure(self.tasks.by_serial.get(&serial)?);
            if bytes > per_task || self.room_for_bytes(serial, bytes).is_err() {
                return None;
            }
        }
        self.tasks.keep(serial, bytes);
        Some(bytes)
    }

    /// Makes room for `bytes` more of ended tasks for the caller of the task `serial`, by
    /// forgetting other ended tasks under the share rule; `Err` with the caller's share when
    /// nobody may be made to forget one for it.
    fn room_for_bytes(&mut self, serial: u64, bytes: usize) -> Result<(), usize> {
        let max = self.config.limits.max_ended_task_bytes;
        let owner = self.tasks.by_serial.get(&serial).map(|t| t.owner.clone()).unwrap_or_default();
        loop {
            if self.tasks.bytes.saturating_add(bytes) <= max {
                return Ok(());
            }
            let holders = self.tasks.held.iter().filter(|(b, h)| h.bytes > 0 || **b == owner).count();
            let share = crate::limits::Limits::fair_share(max, holders);
            let own = if self.tasks.holding(&owner).1.saturating_add(bytes) >= share {
                self.tasks.oldest_ended(&owner, Some(serial))
            } else {
                None
            };
            let victim = own.or_else(|| {
                let greediest = self.tasks.above(&owner, share, |h| h.bytes).into_iter().next()?;
                self.tasks.oldest_ended(&greediest, Some(serial))
            });
            let Some(victim) = victim else { return Err(share) };
            self.drop_task(victim);
        }
    }

    /// The ended task `serial` failed to fit in `limit` bytes (`what` names the bound): it
    /// becomes a `-32603` failure saying so, its outcome dropped.
    fn too_large(&mut self, serial: u64, bytes: usize, what: String, limit: usize) {
        let Some(t) = self.tasks.by_serial.get_mut(&serial) else { return };
        let message = format!("task result of {bytes} bytes exceeds {what}");
        let error = serde_json::json!({
            "code": ErrorCode::InternalError.code(),
            "message": message,
            "data": {"reason": crate::engine::protocol::encode::RESULT_TOO_LARGE, "bytes": bytes, "limit": limit},
        });
        t.status = TaskStatus::Failed;
        t.outcome = Some(("error", error));
        t.status_message = Some(message);
    }

    /// Whether task `id` is in the table, whoever holds it.
    pub(in crate::engine) fn holds_task(&self, id: &str) -> bool {
        self.tasks.by_id.contains_key(id)
    }

    /// An ended task's TTL passed: it is forgotten.
    pub(in crate::engine) fn task_expired(&mut self, now: Instant, serial: u64) {
        let due = self
            .tasks
            .by_serial
            .get(&serial)
            .is_some_and(|t| t.status.is_terminal() && t.expires.is_some_and(|at| at <= now));
        if due {
            self.tasks.remove(serial);
        }
    }

    /// Tasks held (running and ended), for an operator's view.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// The handler of task call `call` asks for input: the task shows the requests and waits
    /// for `tasks/update` (see [`Engine::ask`]).
    pub(in crate::engine) fn ask_task(
        &mut self,
        now: Instant,
        call: CallId,
        requests: Vec<(String, InputRequest)>,
    ) -> Result<Asked, AskError> {
        let max_rounds = self.config.limits.max_input_rounds;
        let timeout = self.config.limits.ask_timeout;
        let now_ms = self.unix_ms(now);
        let c = self.calls.get(call).ok_or(AskError::Stale)?;
        let serial = c.task.ok_or(AskError::Stale)?;
        let version = c.version;
        let caps =
            c.input.as_ref().and_then(|i| i.mrtr.as_ref()).map(|(_, caps)| caps.clone()).unwrap_or_default();
        for (_, req) in &requests {
            req.check_client(version, &caps).map_err(AskError::Unsupported)?;
        }
        let t = self.tasks.by_serial.get_mut(&serial).ok_or(AskError::Stale)?;
        if !t.pending.is_empty() {
            return Err(AskError::Busy);
        }
        if t.rounds >= max_rounds {
            return Err(AskError::TooManyRounds);
        }
        if requests.is_empty() {
            self.out.push_back(Output::Answer { call, answers: Ok(Map::new()) });
            return Ok(Asked::Pending);
        }
        t.rounds += 1;
        for (key, request) in requests {
            let mut wire = key.clone();
            let mut n = t.rounds;
            while t.keys.contains(&wire) {
                wire = format!("{key}.{n}");
                n = n.saturating_add(1);
            }
            t.keys.insert(wire.clone());
            t.pending.push(Pending { wire, key, request });
        }
        t.status = TaskStatus::InputRequired;
        t.updated_ms = now_ms;
        // Same rounding as every engine timer: a zero timeout still waits 1 ms.
        t.ask_deadline = now.checked_add(timeout.max(Duration::from_millis(1)));
        if let Some(at) = t.ask_deadline {
            self.timers.arm(at, Timer::Ask(call));
        }
        self.task_changed(serial);
        Ok(Asked::Pending)
    }

    /// The ask deadline of a task call passed: if it still waits, it stops waiting and its
    /// handler is told [`AskError::TimedOut`]. Returns whether `call` is a task call.
    pub(in crate::engine) fn task_ask_expired(&mut self, now: Instant, call: CallId) -> bool {
        let Some(serial) = self.calls.get(call).and_then(|c| c.task) else { return false };
        let now_ms = self.unix_ms(now);
        let Some(t) = self.tasks.by_serial.get_mut(&serial) else { return true };
        if t.status != TaskStatus::InputRequired || t.ask_deadline.is_none_or(|d| d > now) {
            return true;
        }
        t.ask_deadline = None;
        t.pending.clear();
        t.answers.clear();
        t.status = TaskStatus::Working;
        t.updated_ms = now_ms;
        self.out.push_back(Output::Answer { call, answers: Err(AskError::TimedOut) });
        self.task_changed(serial);
        true
    }
}

#[cfg(test)]
mod bounds_tests;

#[cfg(test)]
mod tests {
    use super::{iso8601, positive_ms};
    use crate::caller::Caller;
    use crate::cursor::KeyRing;
    use crate::engine::{Config, ConnKind, Engine, Implementation, Output, Seed};
    use crate::registry::{TaskSupport, Tool};
    use serde_json::{json, Value};
    use std::time::{Duration, Instant};

    /// The first task id an engine with `seed` hands to a `tools/call` of a task tool.
    fn first_task_id(seed: Option<[u8; 32]>) -> Value {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32]));
        config.seed = seed.map(Seed);
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine: Engine<u32> = Engine::new(config, now);
        let tool = Tool::new("job", "A task", json!({"type": "object"})).task_support(TaskSupport::Optional);
        engine.registry_mut(now).add_tool(tool, 1).unwrap();
        let conn = engine.open(now, ConnKind::Stdio, Caller::anonymous()).unwrap();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "job",
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {super::TASKS_EXTENSION: {}}}}}});
        engine.handle_frame(now, conn, call.to_string().as_bytes());
        let reply = std::iter::from_fn(|| engine.poll_output())
            .find_map(|o| match o {
                Output::Frame { bytes, .. } => serde_json::from_slice::<Value>(&bytes).ok(),
                _ => None,
            })
            .unwrap();
        reply.pointer("/result/taskId").cloned().unwrap_or_else(|| reply["error"].clone())
    }

    #[test]
    fn task_ids_come_from_the_seed_and_nothing_else() {
        let a = first_task_id(Some([1; 32]));
        assert_eq!(a, first_task_id(Some([1; 32])), "the same seed and inputs give the same id");
        assert_ne!(a, first_task_id(Some([2; 32])), "another seed, another id");
        // 32 bytes of HMAC, base64url: nothing of the counter shows.
        assert_eq!(a.as_str().map(str::len), Some(43));
        // Without a seed no id can be unguessable: no task is made.
        assert_eq!(first_task_id(None)["code"], -32603);
    }

    #[test]
    fn wire_durations_are_positive_integers() {
        assert_eq!(positive_ms(Duration::ZERO), 1);
        assert_eq!(positive_ms(Duration::from_millis(1500)), 1500);
        assert_eq!(positive_ms(Duration::MAX), i64::MAX as u64);
    }

    #[test]
    fn iso8601_formats_unix_milliseconds() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
    }
}

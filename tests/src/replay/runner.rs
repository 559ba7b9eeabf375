//! The runner: a transcript driven line by line against a bare engine, its outputs drained and
//! matched, and the entry points [`run`], [`record`] and [`Live`].

use super::*;

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
    pub(super) runner: Runner,
    pub(super) line: usize,
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

/// What a held call asked for, to build its automatic answer.
#[derive(Debug, Clone)]
pub(super) enum Asked {
    Tool(Map<String, Value>),
    Read { uri: String, variables: Vec<mcp_proto::TemplateVar> },
    Prompt(BTreeMap<String, String>),
    Complete { value: String },
}

/// One invocation the runner has seen.
pub(super) struct Held {
    index: usize,
    pub(super) conn: usize,
    pub(super) call: CallId,
    pub(super) ticket: Option<Ticket>,
    pub(super) id: Value,
    pub(super) version: ProtocolVersion,
    pub(super) handler: Fixture,
    pub(super) asked: Asked,
    pub(super) cancelled: bool,
    /// A legacy `! ask` is waiting for its `Output::Answer`.
    asking: bool,
    /// A modern `! ask` answered the request (`input_required` or an error) and the engine
    /// cancels the handler: that `Cancel` excuses no reply.
    pub(super) suspended: bool,
    /// Its request was answered `resultType: "task"`: it runs on as a task, and its asks wait
    /// for `tasks/update` (`pending`, then `= answer`).
    pub(super) task: bool,
}

/// A request of the current input that may become an `Invoke`.
pub(super) struct Candidate {
    pub(super) conn: usize,
    pub(super) id: Value,
    pub(super) method: String,
    pub(super) name: String,
    pub(super) arguments: Value,
}

/// What one request expects, for the reply accounting.
pub(super) struct Awaiting {
    pub(super) method: String,
    pub(super) version: Option<ProtocolVersion>,
    /// The `notifications` filter of a `subscriptions/listen`.
    pub(super) filter: Option<Value>,
    /// The client's capabilities: `params.capabilities` of an `initialize`, or
    /// `_meta["io.modelcontextprotocol/clientCapabilities"]` of a 2026-07-28 request.
    pub(super) caps: Option<Value>,
}

/// The honoured filter of an open listen stream.
#[derive(Debug, Default)]
pub(super) struct Stream {
    pub(super) lists: Vec<&'static str>,
    pub(super) uris: Vec<String>,
    /// Tasks whose `notifications/tasks` it takes (Tasks extension `taskIds`).
    pub(super) tasks: Vec<String>,
}

/// A connection the transcript opened.
pub(super) struct Conn {
    pub(super) id: ConnId,
    pub(super) open: bool,
    pub(super) session: Option<ProtocolVersion>,
    pub(super) initialized: bool,
    /// The capabilities the client declared in the `initialize` its session came from.
    pub(super) client_caps: Option<Value>,
    /// Server→client requests the client has not answered, by canonical id: their method.
    pub(super) outbound: HashMap<String, String>,
    /// Acknowledged listen streams the client has not cancelled, by canonical id.
    pub(super) listens: HashMap<String, Stream>,
}

/// The process-wide start of virtual time: taken once, then only ever advanced.
pub(super) fn epoch() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

pub(super) struct Runner {
    pub(super) record: bool,
    recorded: String,
    pub(super) settings: Settings,
    pub(super) known_bug: Option<String>,
    pub(super) engine: Option<Engine<Fixture>>,
    pub(super) conns: BTreeMap<usize, Conn>,
    pub(super) now: Instant,
    pub(super) auto: bool,
    pub(super) held: Vec<Held>,
    /// Auto answers, given once the output is drained (the engine takes no input before).
    pub(super) answers: Vec<(Ticket, Reply, String)>,
    pub(super) invocations: usize,
    pub(super) candidates: Vec<Candidate>,
    pub(super) observed: VecDeque<Event>,
    /// The line that caused the observed events (for messages).
    pub(super) cause: usize,
    /// Requests awaiting a reply, by connection and canonical id.
    pub(super) awaiting: HashMap<(usize, String), VecDeque<Awaiting>>,
    /// Replies with a `null` id still owed, by connection.
    pub(super) awaiting_null: HashMap<usize, usize>,
    /// Cancelled calls, by connection and canonical id: each excuses one missing reply.
    pub(super) excused: HashMap<(usize, String), usize>,
    /// `! shutdown` ran: listen streams may receive their final result.
    pub(super) shutting_down: bool,
    /// The connection and version of the call `! log` is logging for.
    pub(super) log_call: Option<(usize, ProtocolVersion)>,
    /// Every `requestState` of an `input_required` result, in the order emitted.
    pub(super) states: Vec<String>,
    /// Requests answered `resultType: "task"` before their `Invoke` was seen (a task made at
    /// dispatch is answered before the engine hands out the call): marked on the held call
    /// when it comes.
    pub(super) task_replies: Vec<(usize, Value)>,
    /// The server→client requests the last `! ask` must send (it returned `pending`): their
    /// connection and method, in order.
    pub(super) ask_sends: VecDeque<(usize, &'static str)>,
    /// The HTTP request the `>>` lines so far describe, not sent yet.
    pub(super) draft: Option<HttpDraft>,
    /// The transport rules `check_head` applies (the defaults, bodies bound by the frame size).
    pub(super) http: Option<HttpConfig>,
    /// HTTP requests made so far: the last one's number is what a bare `<<` names.
    pub(super) exchanges: usize,
    /// Each pending exchange or `GET` stream: its number and where it is.
    pub(super) http_conns: HashMap<ConnId, (usize, ExState)>,
    /// Every `Mcp-Session-Id` a response carried, in order (`{{session}}`, `{{session N}}`).
    pub(super) sessions: Vec<String>,
    /// What `! recheck` says each binding's caller is now (`None`: gone); a binding it never
    /// named is re-checked unchanged.
    pub(super) rechecks: std::sync::Arc<std::sync::Mutex<HashMap<String, Option<Caller>>>>,
    pub(super) failures: Vec<String>,
}

pub(super) fn key(id: &Value) -> String {
    id.to_string()
}

impl Runner {
    pub(super) fn new(record: bool) -> Self {
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
            rechecks: Default::default(),
            failures: Vec::new(),
        }
    }

    pub(super) fn run(mut self, source: &str) -> (Report, String) {
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
    pub(super) fn settle(&mut self) -> Result<(), String> {
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

    pub(super) fn line(&mut self, line: usize, text: &str) -> Result<(), String> {
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

    pub(super) fn expect(&mut self, expected: Event) -> Result<(), String> {
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

    pub(super) fn engine_mut(&mut self) -> Result<&mut Engine<Fixture>, String> {
        self.engine.as_mut().ok_or_else(|| "no engine".to_owned())
    }

    pub(super) fn conn(&self, n: usize) -> Result<&Conn, String> {
        self.conns
            .get(&n)
            .ok_or_else(|| format!("connection {n} was never opened (use `! open {n} <caller>`)"))
    }

    /// The transcript number of an engine connection.
    pub(super) fn number(&self, id: ConnId) -> Option<usize> {
        self.conns.iter().find(|(_, c)| c.id == id).map(|(n, _)| *n)
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

    pub(super) fn invariant(&mut self, msg: String) {
        self.failures.push(format!("line {}: invariant: {msg}", self.cause));
    }

    /// Drains `poll_output`, then completes the auto invocations it held, until neither leaves
    /// anything.
    pub(super) fn drain(&mut self) -> Result<(), String> {
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
                // A transcript's engine has no cluster, task store or tracer: what it gives them
                // is not part of the wire.
                Output::Change(_)
                | Output::Holding(_)
                | Output::Claim(_)
                | Output::Record(_)
                | Output::TaskEnded(_)
                | Output::Answered(_) => {}
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

    pub(super) fn complete(&mut self, spec: &str) -> Result<(), String> {
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
    pub(super) fn progress(&mut self, spec: &str) -> Result<(), String> {
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

    pub(super) fn log(&mut self, spec: &str) -> Result<(), String> {
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
    pub(super) fn start_task(&mut self, reference: &str) -> Result<(), String> {
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
    pub(super) fn ask(&mut self, spec: &str) -> Result<(), String> {
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
    pub(super) fn expand(&self, line: &str) -> Result<String, String> {
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
}

impl Conn {
    pub(super) fn new(id: ConnId) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_expand() {
        let mut r = Runner::new(false);
        assert!(r.expand("{{state}}").is_err());
        r.states = vec!["s1".into(), "s2".into()];
        assert_eq!(r.expand(r#""{{state}}-{{state 1}}" {{repeat 2 "x"}}"#).unwrap(), r#""s2-s1" xx"#);
        assert!(r.expand("{{state 3}}").is_err());
        assert!(r.expand("{{state").is_err());
    }
}

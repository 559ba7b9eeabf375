//! The grammar of transcript lines: the events a transcript expects (`<`, `=`, `<<N` lines),
//! their parsing and printing, and the small parsers of directive arguments.

use super::*;

/// Something the engine did, as a transcript states it. Connections are transcript numbers.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Event {
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
pub(super) enum HttpLine {
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
pub(super) fn header_line(s: &str) -> Option<(&str, &str)> {
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
    pub(super) fn parse(s: &str) -> Result<Self, String> {
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

/// What an ask came to: `Engine::ask`'s return value, or an `Output::Answer`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AskResult {
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
    pub(super) fn of(r: &Result<AskOutcome, AskError>) -> Self {
        match r {
            Ok(AskOutcome::Pending) => AskResult::Pending,
            Ok(AskOutcome::Answered(m)) => AskResult::Answered(Value::Object(m.clone()).to_string()),
            Err(e) => ask_error(e),
        }
    }

    pub(super) fn of_answer(r: &Result<Map<String, Value>, AskError>) -> Self {
        match r {
            Ok(m) => AskResult::Answered(Value::Object(m.clone()).to_string()),
            Err(e) => ask_error(e),
        }
    }

    /// `pending`, `answered {json}`, `error <kind> [detail]`.
    pub(super) fn parse(s: &str) -> Result<Self, String> {
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
    pub(super) fn meets(&self, expected: &AskResult) -> bool {
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
const ASK_ERROR_KINDS: [&str; 11] = [
    "unsupported",
    "rejected",
    "invalid",
    "too-many-rounds",
    "unreachable",
    "busy",
    "stale",
    "suspended",
    "timed-out",
    "too-large",
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
        AskError::TooLarge { size, limit } => ("too-large", format!("{size} {limit}")),
        other => ("other", format!("{other:?}")),
    };
    AskResult::Error { kind, detail }
}

impl Event {
    /// Whether `self` (what the engine did) meets the expectation `expected`.
    pub(super) fn meets(&self, expected: &Event) -> bool {
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
pub(super) fn mark(c: char, conn: usize) -> String {
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
pub(super) fn prefixed(text: &str, c: char) -> Option<(usize, &str)> {
    let rest = text.strip_prefix(c)?;
    let digits = rest.len() - rest.trim_start_matches(|x: char| x.is_ascii_digit()).len();
    let (n, rest) = rest.split_at(digits);
    let rest = rest.strip_prefix(' ')?;
    let n = if n.is_empty() { 1 } else { n.parse().ok().filter(|n| *n > 0)? };
    Some((n, rest))
}

pub(super) fn close_reason(r: CloseReason) -> &'static str {
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

/// Expands `{{<word>}}` (the last of `values`) and `{{<word> N}}` (the N-th, from 1) in `line`.
pub(super) fn placeholder(line: &str, word: &str, what: &str, values: &[String]) -> Result<String, String> {
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

/// A request line, `METHOD /path [as <identity|anonymous> [role...]]`: `None` when `s` is none.
pub(super) fn request_line(s: &str) -> Result<Option<(String, String, Option<Caller>)>, String> {
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

/// The requests of `! ask`: `<key> <request> [; <key> <request>]...`, where a request is
/// `elicit {schema} "message"`, `elicit-url "url" "message"`, `sample {params}` or `roots`.
pub(super) fn parse_requests(s: &str) -> Result<Vec<(String, InputRequest)>, String> {
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

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
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
pub(super) fn json_string(s: &str) -> Result<(String, &str), String> {
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
pub(super) fn split_token(s: &str) -> Result<(&str, &str), String> {
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
pub(super) fn expand(line: &str) -> Result<String, String> {
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

pub(super) fn parse_event(conn: usize, s: &str) -> Result<Event, String> {
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

/// Where two frames first differ, with a little context.
pub(super) fn diff(expected: &Event, actual: &Event) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn connection_prefixes() {
        assert_eq!(prefixed("> {}", '>'), Some((1, "{}")));
        assert_eq!(prefixed(">2 {}", '>'), Some((2, "{}")));
        assert_eq!(prefixed(">12 x", '>'), Some((12, "x")));
        assert_eq!(prefixed(">0 {}", '>'), None);
        assert_eq!(prefixed(">2{}", '>'), None);
        assert_eq!(prefixed("<", '<'), None);
    }
}

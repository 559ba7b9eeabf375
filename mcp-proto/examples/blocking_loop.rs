//! A complete MCP stdio server on the bare engine, with std threads and no async runtime.
//!
//! ```sh
//! cargo run -p mcp-proto --example blocking_loop
//! cargo run -p mcp-proto --example blocking_loop -- --call-timeout-ms 500 --max-frame-bytes 4096
//! ```
//!
//! Three threads, and only the main one touches the engine:
//!
//! - the **reader** reads stdin, splits it into lines with [`LineFramer`] (bounded: a line over
//!   the frame limit is reported, never buffered) and decodes each line ([`Decoded::new`]), so a
//!   huge frame costs the reader, not the loop; at end of input it says so;
//! - the **worker** runs tool handlers one at a time and sends their replies back;
//! - the **main loop** owns the [`Engine`]: it waits for the next event or for the engine's next
//!   deadline ([`Engine::poll_timeout`]), hands the event to the engine, then drains
//!   [`Engine::poll_output`]: frames to stdout, invocations to the worker.
//!
//! Everything arrives on one channel, so the loop sleeps in one place. Tools: `add` (two
//! integers) and `sleep` (blocks its worker for `ms` milliseconds: with `--call-timeout-ms` it
//! shows a call timed out by the engine's timer while its handler still runs). The process
//! exits 0 at end of input once every call is answered, 2 after a line over the frame limit.
//!
//! What a production loop adds: a pool of workers (one slow handler here holds up the rest),
//! and parking frames while a connection is at [`Limits::max_in_flight`] instead of letting the
//! engine refuse them (as `mcp-server` does).

use std::io::{self, BufWriter, Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcp_proto::stdio::LineFramer;
use mcp_proto::{
    Caller, CloseReason, Config, ConnKind, Decoded, Engine, HandlerError, Implementation, KeyRing, Limits,
    Output, Reply, Request, RpcError, Ticket, Tool, ToolOutput,
};
use serde_json::{json, Map, Value};

/// A tool handler: plain blocking code, run on the worker thread.
type Handler = fn(&Map<String, Value>) -> Result<ToolOutput, HandlerError>;

/// What the main loop waits for.
enum Event {
    /// A line, already decoded under the engine's limits (boxed: a decoded frame is large, and
    /// every queued event would otherwise take its size).
    Frame(Box<Decoded>),
    /// A line over the frame limit: the stream cannot find the next frame, so it ends.
    TooLong(usize),
    /// Stdin ended (or failed, which ends it just the same).
    End,
    /// A handler finished.
    Done(Ticket, Reply),
}

/// Work for the worker thread.
struct Job {
    ticket: Ticket,
    handler: Handler,
    request: Request,
}

/// Events queued before the reader waits: back-pressure on a client that sends faster than the
/// loop works. Handler replies share the queue; the worker may wait too, never the loop.
const EVENT_QUEUE: usize = 64;
/// Largest single read from stdin.
const READ_CHUNK: usize = 64 * 1024;

fn add(args: &Map<String, Value>) -> Result<ToolOutput, HandlerError> {
    let int = |k: &str| args.get(k).and_then(Value::as_i64).unwrap_or(0);
    let sum = int("a").checked_add(int("b")).ok_or_else(|| RpcError::invalid_params("the sum overflows"))?;
    Ok(ToolOutput::text(sum.to_string()))
}

fn sleep(args: &Map<String, Value>) -> Result<ToolOutput, HandlerError> {
    let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0).min(60_000);
    thread::sleep(Duration::from_millis(ms));
    Ok(ToolOutput::text(format!("slept {ms} ms")))
}

/// A cursor key nobody else knows. A constant [`KeyRing`] (`KeyRing::new([42; 32])`) lets
/// anyone who reads this source forge pagination cursors; the engine takes randomness as an
/// input, so the program draws it (here with `getrandom`, the OS source).
fn random_keys() -> io::Result<KeyRing> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| io::Error::other(format!("no random cursor key: {e}")))?;
    Ok(KeyRing::new(key))
}

/// The engine never reads a clock: this program is its clock.
#[allow(clippy::disallowed_methods)] // the loop is the shim side: it reads the clock
fn now() -> Instant {
    Instant::now()
}

#[allow(clippy::disallowed_methods)] // the loop is the shim side: it reads the clock
fn unix_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

fn engine(limits: Limits) -> io::Result<Engine<Handler>> {
    let mut config = Config::new(Implementation::new("blocking-loop", "1.0.0"), random_keys()?);
    config.limits = limits;
    // 2026-07-28 request states expire by the wall clock.
    config.unix_ms_at_start = unix_ms();
    let mut engine = Engine::new(config, now());
    let mut reg = engine.registry_mut(now());
    let ints = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                      "required": ["a", "b"]});
    reg.add_tool(Tool::new("add", "Adds two integers", ints), add as Handler).map_err(io::Error::other)?;
    let ms = json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}});
    reg.add_tool(Tool::new("sleep", "Blocks its worker for ms milliseconds", ms), sleep as Handler)
        .map_err(io::Error::other)?;
    Ok(engine)
}

/// Reads `input` into lines and decodes them, until it ends or a line is too long.
fn reader(mut input: impl Read, limits: Limits, events: SyncSender<Event>) {
    let mut framer = LineFramer::new(limits.frame_bytes());
    loop {
        let spare = framer.spare(READ_CHUNK);
        let n = match input.read(spare) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                framer.commit(READ_CHUNK, 0);
                continue;
            }
            // A read error ends the input like end of file: nothing more can arrive.
            Err(_) => {
                framer.commit(READ_CHUNK, 0);
                break;
            }
        };
        framer.commit(READ_CHUNK, n);
        while let Some(line) = framer.next_line() {
            let event = match line {
                Ok(frame) => Event::Frame(Box::new(Decoded::new(&limits, frame))),
                Err(too_long) => {
                    let _ = events.send(Event::TooLong(too_long.seen));
                    return;
                }
            };
            if events.send(event).is_err() {
                return;
            }
        }
        if n == 0 {
            break;
        }
    }
    // A last line without its newline is still a frame.
    let rest = framer.remainder();
    if !rest.iter().all(u8::is_ascii_whitespace) {
        let _ = events.send(Event::Frame(Box::new(Decoded::new(&limits, rest))));
    }
    let _ = events.send(Event::End);
}

/// Runs handlers one at a time; a panic becomes the generic internal error.
fn worker(jobs: Receiver<Job>, events: SyncSender<Event>) {
    for job in jobs {
        let result = match &job.request {
            Request::CallTool { arguments, .. } => {
                std::panic::catch_unwind(|| (job.handler)(arguments)).unwrap_or(Err(HandlerError::Panicked))
            }
            // Only tools are registered: the engine sends nothing else.
            _ => Err(HandlerError::Panicked),
        };
        // Even a cancelled call's ticket goes back: the engine answers it `Stale`.
        if events.send(Event::Done(job.ticket, Reply::Tool(result))).is_err() {
            return;
        }
    }
}

/// Drains the engine: frames to `out`, invocations to the worker. The reason, once the
/// connection closed.
fn drain(
    engine: &mut Engine<Handler>,
    out: &mut impl Write,
    jobs: &Sender<Job>,
) -> io::Result<Option<CloseReason>> {
    let mut closed = None;
    while let Some(output) = engine.poll_output() {
        match output {
            Output::Frame { bytes, .. } => {
                out.write_all(&bytes)?;
                out.write_all(b"\n")?;
            }
            Output::Invoke(inv) => {
                let job = Job { ticket: inv.ticket, handler: inv.handler, request: inv.request };
                // The worker outlives the loop; if it died, the job's ticket is dropped and the
                // call answered by its timeout (or never, without one).
                let _ = jobs.send(job);
            }
            // A blocking handler cannot be interrupted; its late reply will be `Stale`.
            Output::Cancel { .. } => {}
            Output::Close { reason, .. } => closed = Some(reason),
            // Stdio has no HTTP responses, streams or asks.
            _ => {}
        }
    }
    out.flush()?;
    Ok(closed)
}

/// Serves one stdio session over `input` and `output` until the engine closes it.
fn serve(input: impl Read + Send + 'static, output: impl Write, limits: Limits) -> io::Result<CloseReason> {
    let mut engine = engine(limits.clone())?;
    let conn = engine
        .open(now(), ConnKind::Stdio, Caller::anonymous())
        .map_err(|e| io::Error::other(format!("{e:?}")))?;
    let (events_tx, events) = mpsc::sync_channel(EVENT_QUEUE);
    let (jobs, jobs_rx) = mpsc::channel();
    let from_reader = events_tx.clone();
    thread::spawn(move || reader(input, limits, from_reader));
    thread::spawn(move || worker(jobs_rx, events_tx));

    let mut out = BufWriter::new(output);
    loop {
        match drain(&mut engine, &mut out, &jobs) {
            Ok(Some(reason)) => return Ok(reason),
            Ok(None) => {}
            // Nobody reads the replies: close the connection (cancelling its calls), then stop.
            Err(e) => {
                engine.close(now(), conn);
                while engine.poll_output().is_some() {}
                return Err(e);
            }
        }
        // Sleep until the next event or the engine's next deadline, whichever comes first.
        let event = match engine.poll_timeout() {
            Some(at) => events.recv_timeout(at.saturating_duration_since(now())),
            None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let now = now();
        match event {
            Ok(Event::Frame(decoded)) => {
                engine.handle_decoded(now, conn, *decoded);
            }
            Ok(Event::TooLong(seen)) => engine.handle_oversized_frame(now, conn, seen),
            Ok(Event::End) => engine.close_input(now, conn),
            Ok(Event::Done(ticket, reply)) => {
                // `Err(Stale)`: the call was cancelled or timed out meanwhile; nothing to send.
                let _ = engine.complete(now, ticket, reply);
            }
            Err(RecvTimeoutError::Timeout) => engine.handle_timeout(now),
            // Both senders gone: the reader ended and the worker died. Nothing more can come.
            Err(RecvTimeoutError::Disconnected) => engine.close(now, conn),
        }
    }
}

/// `--max-frame-bytes N` and `--call-timeout-ms N`.
fn limits_from_args() -> Result<Limits, String> {
    let mut limits = Limits::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: u64 = value.parse().map_err(|_| format!("{flag}: not a number: {value}"))?;
        match flag.as_str() {
            "--max-frame-bytes" => {
                limits.max_frame_bytes(usize::try_from(n).unwrap_or(usize::MAX));
            }
            "--call-timeout-ms" => {
                limits.call_timeout(Some(Duration::from_millis(n)));
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(limits)
}

fn main() {
    let limits = match limits_from_args() {
        Ok(limits) => limits,
        Err(e) => {
            eprintln!("blocking_loop: {e}");
            std::process::exit(64);
        }
    };
    let code = match serve(io::stdin(), io::stdout().lock(), limits) {
        Ok(CloseReason::EndOfInput) => 0,
        Ok(CloseReason::FrameTooLarge) => 2,
        Ok(other) => {
            eprintln!("blocking_loop: closed: {other:?}");
            1
        }
        Err(e) => {
            eprintln!("blocking_loop: {e}");
            1
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pipes `input` through `serve` on in-memory streams: the replies by line, and how it ended.
    fn session(input: &str, limits: Limits) -> (Vec<Value>, CloseReason) {
        let mut output = Vec::new();
        let reason = serve(io::Cursor::new(input.as_bytes().to_vec()), &mut output, limits).unwrap();
        let lines = String::from_utf8(output).unwrap();
        (lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect(), reason)
    }

    const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
"#;

    #[test]
    fn lists_and_calls_tools_then_ends_with_its_input() {
        let input = format!(
            "{INIT}{}\n{}\n{}",
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":40}}}"#,
            // The last line has no newline: still a frame.
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":"x","b":1}}}"#,
        );
        let (replies, reason) = session(&input, Limits::default());
        assert_eq!(reason, CloseReason::EndOfInput);
        assert_eq!(replies.len(), 4, "{replies:?}");
        // Replies go out as they are ready: the engine's own at once, a handler's when it is done.
        let by_id = |id: u64| replies.iter().find(|r| r["id"] == id).unwrap();
        let names: Vec<&str> = by_id(1)["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(names, ["add", "sleep"]);
        assert_eq!(
            by_id(2),
            &json!({"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"42"}]}})
        );
        // Arguments are checked against the schema before any handler runs.
        assert_eq!(by_id(3)["error"]["code"], -32602);
    }

    #[test]
    fn the_engine_timer_answers_a_call_its_handler_still_runs() {
        let mut limits = Limits::default();
        limits.call_timeout(Some(Duration::from_millis(100)));
        let input = format!(
            "{INIT}{}\n",
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}"#
        );
        let started = now();
        let (replies, reason) = session(&input, limits);
        assert_eq!(reason, CloseReason::EndOfInput);
        assert_eq!(replies[1]["id"], 1);
        assert_eq!(replies[1]["error"]["message"], "request timed out");
        // Answered by the timer, not after the handler's 1.5 s.
        assert!(started.elapsed() < Duration::from_millis(1400), "{:?}", started.elapsed());
    }

    #[test]
    fn an_oversized_line_is_answered_and_ends_the_session() {
        let mut limits = Limits::default();
        limits.max_frame_bytes(256);
        let input =
            format!("{INIT}{}\n{}\n", "x".repeat(1000), r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#);
        let (replies, reason) = session(&input, limits);
        assert_eq!(reason, CloseReason::FrameTooLarge);
        assert_eq!(replies.len(), 2, "nothing after the oversized line is read: {replies:?}");
        assert_eq!(replies[1]["id"], Value::Null);
        assert_eq!(replies[1]["error"]["code"], -32600);
    }
}

//! Drives a stdio server process over real pipes: the replay transcripts a real process can
//! honour, and the shim behaviour tests (`tests/tests/stdio_*.rs`).
//!
//! A [`Process`] owns a child whose stdin is fed by a writer thread (so a test never blocks on
//! a full pipe, even when the server has stopped reading) and whose stdout and stderr are read
//! by reader threads. Reads wait at most a timeout: timing only ever turns a hang into a failure,
//! it never decides what is correct.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::replay::expand_frame;

/// How long to wait for a line, for end of output or for the process to exit before calling it
/// a hang.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// What the stdout reader saw.
enum Out {
    Line(Vec<u8>),
    /// Bytes after the last newline at end of output: a frame cut short.
    Unterminated(Vec<u8>),
    Eof,
    Error(String),
}

/// A server process on the other end of three pipes.
pub struct Process {
    label: String,
    child: Child,
    input: Option<Sender<Vec<u8>>>,
    output: Receiver<Out>,
    eof: bool,
    stderr: Arc<Mutex<Vec<u8>>>,
    write_error: Arc<Mutex<Option<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Process {
    /// Starts `program` with `args`, every standard stream piped.
    pub fn spawn(program: &str, args: &[String]) -> Result<Self, String> {
        Self::start(program, args, true)
    }

    /// Starts `program` with `args` and closes the read end of its stdout at once, as a peer
    /// that stops reading does: every write the server makes fails. stdout reads as ended.
    pub fn spawn_with_stdout_closed(program: &str, args: &[String]) -> Result<Self, String> {
        Self::start(program, args, false)
    }

    fn start(program: &str, args: &[String], read_stdout: bool) -> Result<Self, String> {
        let label = std::path::Path::new(program)
            .file_name()
            .map_or_else(|| program.to_owned(), |n| n.to_string_lossy().into_owned());
        let mut child = Command::new(program)
            .args(args)
            // Panic messages without backtraces keep stderr short in failure messages.
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let (Some(mut stdin), Some(stdout), Some(mut stderr_pipe)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(format!("{label}: a standard stream was not piped"));
        };

        let (input, chunks) = mpsc::channel::<Vec<u8>>();
        let write_error = Arc::new(Mutex::new(None));
        let werr = Arc::clone(&write_error);
        thread::spawn(move || {
            for chunk in chunks {
                if let Err(e) = stdin.write_all(&chunk).and_then(|()| stdin.flush()) {
                    *lock(&werr) = Some(e.to_string());
                    break;
                }
            }
            // Dropping `stdin` here closes the pipe: the server sees end of input.
        });

        let (tx, output) = mpsc::channel();
        if read_stdout {
            thread::spawn(move || read_lines(stdout, &tx));
        } else {
            drop(stdout);
            let _ = tx.send(Out::Eof);
        }

        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr);
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                lock(&sink).extend_from_slice(buf.get(..n).unwrap_or_default());
            }
        });

        Ok(Process { label, child, input: Some(input), output, eof: false, stderr, write_error })
    }

    /// The program's file name, for messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Sends `frame` and a newline.
    pub fn send_line(&self, frame: &[u8]) {
        let mut bytes = Vec::with_capacity(frame.len() + 1);
        bytes.extend_from_slice(frame);
        bytes.push(b'\n');
        self.send_bytes(bytes);
    }

    /// Sends raw bytes. Never blocks; a write the server refuses is recorded (see
    /// [`write_error`](Self::write_error)).
    pub fn send_bytes(&self, bytes: Vec<u8>) {
        if let Some(input) = &self.input {
            // The writer only stops after a write error, which is recorded.
            let _ = input.send(bytes);
        }
    }

    /// Closes stdin once everything sent so far is written.
    pub fn close_stdin(&mut self) {
        self.input = None;
    }

    /// The first error writing to stdin (the server closed its end), if any.
    pub fn write_error(&self) -> Option<String> {
        lock(&self.write_error).clone()
    }

    /// What the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.stderr)).into_owned()
    }

    /// A failure message with the server's stderr attached.
    pub fn fail(&self, msg: impl std::fmt::Display) -> String {
        let err = self.stderr_text();
        let tail: String = if err.len() > 4000 {
            format!("…{}", err.get(err.len() - 4000..).unwrap_or(&err))
        } else {
            err
        };
        format!("{}: {msg}\n  --- stderr ---\n{tail}", self.label)
    }

    /// The next stdout line (without its newline), or `None` once stdout is closed. Fails on a
    /// timeout, a read error, or a last line without a newline.
    pub fn next_line(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, String> {
        if self.eof {
            return Ok(None);
        }
        match self.output.recv_timeout(timeout) {
            Ok(Out::Line(l)) => Ok(Some(l)),
            Ok(Out::Eof) => {
                self.eof = true;
                Ok(None)
            }
            Ok(Out::Unterminated(l)) => {
                self.eof = true;
                Err(self
                    .fail(format!("stdout ended in the middle of a line: {}", String::from_utf8_lossy(&l))))
            }
            Ok(Out::Error(e)) => {
                self.eof = true;
                Err(self.fail(format!("reading stdout: {e}")))
            }
            Err(RecvTimeoutError::Timeout) => {
                Err(self.fail(format!("no line and no end of output within {timeout:?}")))
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.eof = true;
                Ok(None)
            }
        }
    }

    /// The next stdout line, which must be exactly `expected`.
    pub fn expect_line(&mut self, expected: &[u8]) -> Result<(), String> {
        match self.next_line(TIMEOUT)? {
            Some(actual) if actual == expected => Ok(()),
            Some(actual) => Err(self.fail(format!(
                "expected\n  < {}\nbut the server wrote\n  < {}{}",
                String::from_utf8_lossy(expected),
                String::from_utf8_lossy(&actual),
                first_difference(expected, &actual)
            ))),
            None => Err(self
                .fail(format!("expected\n  < {}\nbut stdout was closed", String::from_utf8_lossy(expected)))),
        }
    }

    /// Every line until stdout closes.
    pub fn rest(&mut self, timeout: Duration) -> Result<Vec<Vec<u8>>, String> {
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left)? {
                Some(l) => lines.push(l),
                None => return Ok(lines),
            }
        }
    }

    /// Waits for the process to exit; kills it after `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(self.fail(format!("did not exit within {timeout:?} (killed)")));
                }
                Err(e) => return Err(self.fail(format!("waiting for the process: {e}"))),
            }
        }
    }

    /// Closes stdin, then requires that stdout ends with no further line and the process exits
    /// with status 0.
    pub fn close_and_expect_clean_exit(&mut self) -> Result<(), String> {
        self.close_stdin();
        let extra = self.rest(TIMEOUT)?;
        if !extra.is_empty() {
            let shown: Vec<String> =
                extra.iter().map(|l| format!("  < {}", String::from_utf8_lossy(l))).collect();
            return Err(self.fail(format!(
                "after end of input the server wrote {} line(s) nothing expects:\n{}",
                extra.len(),
                shown.join("\n")
            )));
        }
        let status = self.wait(TIMEOUT)?;
        if !status.success() {
            return Err(self.fail(format!("exited with {status} after a clean end of input")));
        }
        Ok(())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.input = None;
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends each stdout line to `tx`, then how the output ended.
fn read_lines(stdout: impl Read, tx: &Sender<Out>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        let msg = match reader.read_until(b'\n', &mut line) {
            Ok(0) => Out::Eof,
            Ok(_) if line.last() == Some(&b'\n') => {
                line.pop();
                Out::Line(line)
            }
            Ok(_) => Out::Unterminated(line),
            Err(e) => Out::Error(e.to_string()),
        };
        let last = !matches!(msg, Out::Line(_));
        if tx.send(msg).is_err() || last {
            break;
        }
    }
}

/// Where two frames first differ.
fn first_difference(expected: &[u8], actual: &[u8]) -> String {
    let at =
        expected.iter().zip(actual).position(|(a, b)| a != b).unwrap_or(expected.len().min(actual.len()));
    let from = at.saturating_sub(30);
    let show = |b: &[u8]| {
        String::from_utf8_lossy(b.get(from..(at + 40).min(b.len())).unwrap_or_default()).into_owned()
    };
    format!(
        "\n  first difference at byte {at}:\n    expected …{}…\n    actual   …{}…",
        show(expected),
        show(actual)
    )
}

/// Checks that `line` is a JSON-RPC 2.0 message a server may write: a response (an `id` and
/// exactly one of `result` and `error`), a notification or request (`method`), or a non-empty
/// array of those. Returns the parsed value.
pub fn protocol_line(line: &[u8]) -> Result<Value, String> {
    let text = String::from_utf8_lossy(line);
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON ({e}): {text}"))?;
    let check = |m: &Value| -> Result<(), String> {
        let obj = m.as_object().ok_or_else(|| format!("not a JSON-RPC object: {text}"))?;
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(format!("no \"jsonrpc\":\"2.0\": {text}"));
        }
        let is_response = obj.contains_key("id")
            && !obj.contains_key("method")
            && (obj.contains_key("result") != obj.contains_key("error"));
        let is_message = obj.get("method").is_some_and(Value::is_string);
        if is_response || is_message {
            Ok(())
        } else {
            Err(format!("neither a response nor a request or notification: {text}"))
        }
    };
    match &value {
        Value::Array(items) if !items.is_empty() => items.iter().try_for_each(check)?,
        Value::Array(_) => return Err(format!("an empty batch: {text}")),
        other => check(other)?,
    }
    Ok(value)
}

/// One step of a transcript replayed over a pipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write this frame and a newline.
    Send {
        /// Its line in the transcript.
        line: usize,
        /// The frame, `{{repeat}}` expanded.
        frame: Vec<u8>,
    },
    /// The next stdout line must be exactly this.
    Expect {
        /// Its line in the transcript.
        line: usize,
        /// The frame, `{{repeat}}` expanded.
        frame: Vec<u8>,
    },
}

/// A transcript as a real process can replay it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// The tools to register (`! tools`), passed to the server on its command line.
    pub tools: Option<Vec<String>>,
    /// Frames in and exact lines out, in order.
    pub steps: Vec<Step>,
}

/// Turns a replay transcript (see [`crate::replay`]) into a pipe [`Script`], or says why a real
/// process cannot honour it.
///
/// A process serves with default limits and configuration, completes every call itself (the
/// auto-mode behaviours, see [`crate::stdio_server`]), runs on the real clock, and shows
/// nothing but stdout lines. So a transcript is replayed when it has only `>` and `<` lines,
/// `! auto` / `! manual` (without a `= invoke` line, no handler ever ran in manual mode) and
/// `! tools` (passed on the command line). Anything else skips it: clock steps (`@`), engine
/// expectations (`= invoke`, `= cancel`, `= close`, ...), manual completions and closes
/// (`! complete`, `! close`, `! close-input`), other configuration directives (limits, call
/// timeout, cache TTL, instructions, server info), `! known-bug`, and frames a line cannot carry
/// as they are (a raw newline, a trailing `\r`, or only whitespace: the line framer would split,
/// strip or skip them).
pub fn script(source: &str) -> Result<Script, String> {
    let mut out = Script { tools: None, steps: Vec::new() };
    for (i, raw) in source.lines().enumerate() {
        let line = i + 1;
        let text = raw.trim_end();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        if let Some(frame) = text.strip_prefix("> ") {
            let frame = expand_frame(frame).map_err(|e| format!("line {line}: {e}"))?;
            if frame.contains('\n') || frame.ends_with('\r') || frame.trim().is_empty() {
                return Err(format!("line {line}: a frame one stdio line cannot carry as it is"));
            }
            out.steps.push(Step::Send { line, frame: frame.into_bytes() });
        } else if let Some(frame) = text.strip_prefix("< ") {
            let frame = expand_frame(frame).map_err(|e| format!("line {line}: {e}"))?;
            out.steps.push(Step::Expect { line, frame: frame.into_bytes() });
        } else if let Some(rest) = text.strip_prefix("= ") {
            let what = rest.split_whitespace().next().unwrap_or_default();
            return Err(format!("line {line}: engine-only expectation `= {what}`"));
        } else if text.starts_with("@ ") {
            return Err(format!("line {line}: clock step `{text}`"));
        } else if let Some(d) = text.strip_prefix("! ") {
            let (name, rest) = d.trim().split_once(' ').unwrap_or((d.trim(), ""));
            match name {
                "auto" | "manual" => {}
                "tools" => out.tools = Some(rest.split_whitespace().map(str::to_owned).collect()),
                "complete" => return Err(format!("line {line}: manual completion `! complete`")),
                "close" | "close-input" => return Err(format!("line {line}: engine close `! {name}`")),
                "known-bug" => return Err(format!("line {line}: documents a known engine bug")),
                _ => return Err(format!("line {line}: configuration `! {name}`")),
            }
        } else {
            return Err(format!("line {line}: unreadable line"));
        }
    }
    Ok(out)
}

/// Replays `script` against a fresh `program`: sends each frame as a line, requires each
/// expected line exactly and in order, then closes stdin and requires that nothing more
/// arrives and the process exits 0.
pub fn replay(program: &str, script: &Script) -> Result<(), String> {
    replay_with(program, &[], script)
}

/// [`replay`], with `options` before the tool names on the server's command line (`--yield`).
pub fn replay_with(program: &str, options: &[&str], script: &Script) -> Result<(), String> {
    let mut args: Vec<String> = options.iter().map(|s| (*s).to_owned()).collect();
    args.extend(script.tools.iter().flatten().cloned());
    let mut proc = Process::spawn(program, &args)?;
    for step in &script.steps {
        match step {
            Step::Send { frame, .. } => proc.send_line(frame),
            Step::Expect { line, frame } => {
                proc.expect_line(frame).map_err(|e| format!("line {line}: {e}"))?
            }
        }
    }
    proc.close_and_expect_clean_exit().map_err(|e| format!("end: {e}"))
}

//! Server-sent events: event encoding, event ids, and a bounded replay buffer.
//!
//! The encoders write the wire form of the WHATWG `text/event-stream` format and never fail: a
//! field that cannot hold a line break (an id, an event name) has CR, LF and NUL removed, and
//! data is split into one `data:` line per line, so no input can forge an event boundary.
//!
//! Event ids are `<stream>-<seq>` ([`EventId`]): unique within a session and naming the stream
//! they belong to, as legacy Streamable HTTP resumption needs (a `GET` with `Last-Event-ID`
//! replays that stream only). 2026-07-28 has no resumption; its streams need no ids.

use std::collections::VecDeque;
use std::fmt;

/// The response headers of an SSE stream: the media type, no caching, and no proxy buffering
/// (`X-Accel-Buffering: no`, which the 2026-07-28 transport recommends, makes nginx pass each
/// event through at once).
pub const RESPONSE_HEADERS: [(&str, &str); 3] =
    [("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")];

/// The media type of an SSE stream.
pub const CONTENT_TYPE: &str = "text/event-stream";

/// Writes `name: value\n` (`name:\n` for an empty value), dropping CR and LF from `value`.
fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.push(b':');
    if !value.is_empty() {
        out.push(b' ');
        out.extend(value.iter().copied().filter(|&b| b != b'\r' && b != b'\n'));
    }
    out.push(b'\n');
}

/// Writes a single-line field whose value must also be free of NUL (a client ignores an `id`
/// containing one).
fn push_token(out: &mut Vec<u8>, name: &[u8], value: &str) {
    let clean: Vec<u8> = value.bytes().filter(|&b| b != 0).collect();
    push_field(out, name, &clean);
}

/// Writes one `name: line` per line of `value`, lines ending at CRLF, CR or LF (the three line
/// ends a client recognises). An empty value is one empty line.
fn push_lines(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let mut rest = value;
    loop {
        let Some(end) = rest.iter().position(|&b| b == b'\r' || b == b'\n') else {
            push_field(out, name, rest);
            return;
        };
        let (line, tail) = rest.split_at_checked(end).unwrap_or((rest, &[]));
        push_field(out, name, line);
        let skip = if tail.starts_with(b"\r\n") { 2 } else { 1 };
        rest = tail.get(skip..).unwrap_or_default();
    }
}

/// One event: an optional `id:` line, the data as `data:` lines, and the blank line that
/// dispatches it.
///
/// Each line of `data` (split at CRLF, CR or LF) becomes its own `data:` line, which a client
/// joins back with LF: data without CR round-trips exactly, and a trailing line break survives.
/// Empty data is one empty `data:` line, so the event is still dispatched. CR, LF and NUL are
/// removed from `id` (an id carrying them would end the field early or be ignored).
pub fn event(id: Option<&str>, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 32);
    if let Some(id) = id {
        push_token(&mut out, b"id", id);
    }
    push_lines(&mut out, b"data", data);
    out.push(b'\n');
    out
}

/// An event with an `event:` type line, as the 2024-11-05 HTTP+SSE transport uses (`endpoint`,
/// `message`). Otherwise as [`event`]; CR, LF and NUL are removed from `name` too.
pub fn named_event(name: &str, id: Option<&str>, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + name.len() + 40);
    push_token(&mut out, b"event", name);
    if let Some(id) = id {
        push_token(&mut out, b"id", id);
    }
    push_lines(&mut out, b"data", data);
    out.push(b'\n');
    out
}

/// The priming event that opens a resumable stream (2025-11-25): an id, an optional `retry:`
/// (the reconnection delay the client must honour, in milliseconds), and empty data.
///
/// It lets a client that loses the connection before any message resume from the start.
pub fn priming(id: &str, retry_ms: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(id.len() + 40);
    push_token(&mut out, b"id", id);
    if let Some(ms) = retry_ms {
        push_field(&mut out, b"retry", ms.to_string().as_bytes());
    }
    push_field(&mut out, b"data", b"");
    out.push(b'\n');
    out
}

/// A comment, `: text` then a blank line: ignored by clients, it keeps idle connections and
/// proxies from timing out. A multi-line `text` becomes one comment line per line.
pub fn comment(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 4);
    push_lines(&mut out, b"", text.as_bytes());
    out.push(b'\n');
    out
}

/// An SSE event id naming its stream and its position in it, written `<stream>-<seq>` in
/// canonical decimal.
///
/// ```
/// use mcp_proto::sse::EventId;
/// let id = EventId { stream: 3, seq: 17 };
/// assert_eq!(id.to_string(), "3-17");
/// assert_eq!(EventId::parse("3-17"), Some(id));
/// assert_eq!(EventId::parse("03-17"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    /// The stream within the session.
    pub stream: u64,
    /// The event's sequence number within the stream.
    pub seq: u64,
}

impl EventId {
    /// Reads `<stream>-<seq>`: two decimal numbers without sign, leading zeros (other than `0`
    /// itself) or anything else, each fitting `u64`. Anything else is `None`: the id was not
    /// ours, so there is nothing to resume.
    pub fn parse(text: &str) -> Option<Self> {
        let (stream, seq) = text.split_once('-')?;
        Some(Self { stream: canonical_u64(stream)?, seq: canonical_u64(seq)? })
    }

    /// The id of the next event on the same stream (the sequence saturates at `u64::MAX`).
    pub fn next(self) -> Self {
        Self { stream: self.stream, seq: self.seq.saturating_add(1) }
    }
}

fn canonical_u64(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.stream, self.seq)
    }
}

/// The default [`ReplayBuffer::max_bytes`]: 4 MiB.
pub const DEFAULT_REPLAY_BYTES: usize = 4 * 1024 * 1024;

/// The recent events of one stream, kept so that a reconnecting client can be sent what it
/// missed. Bounded by a count of events and a total of bytes; the oldest go first.
///
/// Push every event written with an id, the priming event included, with strictly increasing
/// sequence numbers; then answer a `Last-Event-ID` with [`since`](Self::since).
///
/// ```
/// use mcp_proto::sse::ReplayBuffer;
/// let mut buf = ReplayBuffer::new(2);
/// for seq in 0..4 {
///     assert!(buf.push(seq, format!("event {seq}").into_bytes()));
/// }
/// let missed: Vec<&[u8]> = buf.since(2).unwrap().collect();
/// assert_eq!(missed, [b"event 3"]);
/// assert!(buf.since(0).is_none()); // event 1 was evicted: the gap cannot be filled
/// ```
#[derive(Debug, Clone)]
pub struct ReplayBuffer {
    events: VecDeque<(u64, Vec<u8>)>,
    max_events: usize,
    max_bytes: usize,
    bytes: usize,
    newest: Option<u64>,
    /// The highest sequence number evicted so far.
    evicted: Option<u64>,
}

impl ReplayBuffer {
    /// A buffer keeping at most `max_events` events (and at most [`DEFAULT_REPLAY_BYTES`]
    /// bytes). With `max_events` 0 nothing is kept, and only a client that missed nothing can
    /// resume.
    pub fn new(max_events: usize) -> Self {
        Self {
            events: VecDeque::new(),
            max_events,
            max_bytes: DEFAULT_REPLAY_BYTES,
            bytes: 0,
            newest: None,
            evicted: None,
        }
    }

    /// Most bytes kept across all events. Default [`DEFAULT_REPLAY_BYTES`] (4 MiB).
    ///
    /// Past it the oldest events are evicted; an event larger than the whole bound is not kept
    /// at all (it counts as evicted, so resuming from before it yields `None`).
    pub fn max_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_bytes = bytes;
        self.evict();
        self
    }

    /// Records the event with sequence number `seq`, evicting the oldest events while over
    /// either bound.
    ///
    /// Returns `false` and records nothing if `seq` is not greater than every earlier one: an
    /// out-of-order event could not be replayed in order.
    pub fn push(&mut self, seq: u64, bytes: Vec<u8>) -> bool {
        if self.newest.is_some_and(|n| seq <= n) {
            return false;
        }
        self.newest = Some(seq);
        self.bytes = self.bytes.saturating_add(bytes.len());
        self.events.push_back((seq, bytes));
        self.evict();
        true
    }

    fn evict(&mut self) {
        while self.events.len() > self.max_events || self.bytes > self.max_bytes {
            let Some((seq, bytes)) = self.events.pop_front() else { break };
            self.bytes = self.bytes.saturating_sub(bytes.len());
            self.evicted = Some(seq);
        }
    }

    /// The events after `last_seq` (the sequence number of a client's `Last-Event-ID`), oldest
    /// first; empty when the client saw everything.
    ///
    /// `None` when they cannot all be replayed: some were evicted, or `last_seq` is newer than
    /// any event pushed (the id was never issued). The client must then start over.
    pub fn since(&self, last_seq: u64) -> Option<impl Iterator<Item = &[u8]> + '_> {
        if self.evicted.is_some_and(|e| last_seq < e) {
            return None;
        }
        self.kept_after(last_seq)
    }

    /// The events still kept after `last_seq`, oldest first, whether or not some in between
    /// were evicted: for a stream whose remaining events matter more than a complete history
    /// (a call's response stream, where the final response is what the client waits for).
    ///
    /// `None` when `last_seq` is newer than any event pushed: the id was never issued.
    pub fn kept_after(&self, last_seq: u64) -> Option<impl Iterator<Item = &[u8]> + '_> {
        if self.newest.is_none_or(|n| last_seq > n) {
            return None;
        }
        Some(
            self.events
                .iter()
                .skip_while(move |(seq, _)| *seq <= last_seq)
                .map(|(_, bytes)| bytes.as_slice()),
        )
    }

    /// Evicts the oldest events until at least `bytes` bytes are freed or none are left, as
    /// crossing [`max_bytes`](Self::max_bytes) would; returns the bytes freed. For a holder
    /// bounding many buffers together.
    pub fn shed(&mut self, bytes: usize) -> usize {
        let mut freed = 0usize;
        while freed < bytes {
            let Some((seq, event)) = self.events.pop_front() else { break };
            freed = freed.saturating_add(event.len());
            self.evicted = Some(seq);
        }
        self.bytes = self.bytes.saturating_sub(freed);
        freed
    }

    /// Events kept.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event is kept.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Bytes kept, across all events.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The sequence number of the newest event pushed, kept or not.
    pub fn newest(&self) -> Option<u64> {
        self.newest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    /// A minimal WHATWG event-stream parser: (id, data) per dispatched event.
    fn parse(stream: &str) -> Vec<(Option<String>, String)> {
        let mut events = Vec::new();
        let (mut id, mut data, mut has_data) = (None, String::new(), false);
        for line in stream.split('\n') {
            if line.is_empty() {
                if has_data {
                    events.push((id.take(), data.strip_suffix('\n').unwrap_or(&data).to_owned()));
                }
                data.clear();
                has_data = false;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => id = Some(value.to_owned()),
                "data" => {
                    data.push_str(value);
                    data.push('\n');
                    has_data = true;
                }
                _ => {}
            }
        }
        events
    }

    #[test]
    fn events() {
        assert_eq!(text(event(Some("0-1"), br#"{"a":1}"#)), "id: 0-1\ndata: {\"a\":1}\n\n");
        assert_eq!(text(event(None, b"x")), "data: x\n\n");
        assert_eq!(text(event(None, b"")), "data:\n\n");
        assert_eq!(text(event(None, b"a\nb\r\nc\rd")), "data: a\ndata: b\ndata: c\ndata: d\n\n");
        assert_eq!(text(event(None, b"a\n")), "data: a\ndata:\n\n");
        assert_eq!(text(event(Some("1\n2\r3\x004"), b"x")), "id: 1234\ndata: x\n\n");
        for data in ["", "x", "a\nb", "a\n", "\n\n", " lead", "{\"k\":\"v\"}"] {
            let parsed = parse(&text(event(Some("7-7"), data.as_bytes())));
            assert_eq!(parsed, vec![(Some("7-7".to_owned()), data.to_owned())], "{data:?}");
        }
        assert_eq!(text(named_event("message", None, b"{}")), "event: message\ndata: {}\n\n");
        assert_eq!(
            text(named_event("endpoint", Some("1-0"), b"/mcp?s=1")),
            "event: endpoint\nid: 1-0\ndata: /mcp?s=1\n\n"
        );
    }

    #[test]
    fn priming_and_comments() {
        assert_eq!(text(priming("0-0", Some(3000))), "id: 0-0\nretry: 3000\ndata:\n\n");
        assert_eq!(text(priming("0-0", None)), "id: 0-0\ndata:\n\n");
        assert_eq!(parse(&text(priming("5-0", Some(1)))), vec![(Some("5-0".to_owned()), String::new())]);
        assert_eq!(text(comment("keep-alive")), ": keep-alive\n\n");
        assert_eq!(text(comment("")), ":\n\n");
        assert_eq!(text(comment("a\nb")), ": a\n: b\n\n");
        assert!(parse(&text(comment("x\ndata: forged"))).is_empty());
        assert_eq!(RESPONSE_HEADERS[2], ("x-accel-buffering", "no"));
    }

    #[test]
    fn event_ids() {
        let id = EventId { stream: 12, seq: 0 };
        assert_eq!(id.to_string(), "12-0");
        assert_eq!(EventId::parse(&id.to_string()), Some(id));
        assert_eq!(id.next(), EventId { stream: 12, seq: 1 });
        assert_eq!(EventId { stream: 0, seq: u64::MAX }.next().seq, u64::MAX);
        let max = EventId { stream: u64::MAX, seq: u64::MAX };
        assert_eq!(EventId::parse(&max.to_string()), Some(max));
        for bad in [
            "",
            "1",
            "-",
            "1-",
            "-1",
            "01-1",
            "1-01",
            "+1-1",
            "1-1-1",
            "a-1",
            "1 -1",
            "18446744073709551616-0",
            "0/0",
        ] {
            assert_eq!(EventId::parse(bad), None, "{bad}");
        }
    }

    fn collect(buf: &ReplayBuffer, last: u64) -> Option<Vec<String>> {
        buf.since(last).map(|it| it.map(|b| String::from_utf8(b.to_vec()).unwrap()).collect())
    }

    #[test]
    fn replay_by_count() {
        let mut buf = ReplayBuffer::new(3);
        assert_eq!(collect(&buf, 0), None);
        for seq in 1..=5 {
            assert!(buf.push(seq, format!("e{seq}").into_bytes()));
        }
        assert_eq!(buf.len(), 3);
        assert_eq!(buf.newest(), Some(5));
        assert_eq!(collect(&buf, 2), Some(vec!["e3".into(), "e4".into(), "e5".into()]));
        assert_eq!(collect(&buf, 4), Some(vec!["e5".into()]));
        assert_eq!(collect(&buf, 5), Some(vec![]));
        assert_eq!(collect(&buf, 1), None);
        assert_eq!(collect(&buf, 6), None);
        // Out of order is refused and changes nothing.
        assert!(!buf.push(5, b"again".to_vec()));
        assert!(!buf.push(3, b"old".to_vec()));
        assert_eq!(collect(&buf, 4), Some(vec!["e5".into()]));
        // Gaps in the sequence are fine.
        assert!(buf.push(10, b"e10".to_vec()));
        assert_eq!(collect(&buf, 7), Some(vec!["e10".into()]));
        assert_eq!(collect(&buf, 3), Some(vec!["e4".into(), "e5".into(), "e10".into()]));
    }

    #[test]
    fn replay_by_bytes() {
        let mut buf = ReplayBuffer::new(100);
        buf.max_bytes(10);
        assert!(buf.push(0, vec![b'a'; 4]));
        assert!(buf.push(1, vec![b'b'; 4]));
        assert_eq!(buf.bytes(), 8);
        assert!(buf.push(2, vec![b'c'; 4]));
        assert_eq!((buf.len(), buf.bytes()), (2, 8));
        assert_eq!(collect(&buf, 0).map(|v| v.len()), Some(2));
        // An event over the whole bound is not kept, and resuming before it is impossible.
        assert!(buf.push(3, vec![b'd'; 11]));
        assert!(buf.is_empty());
        assert_eq!(buf.bytes(), 0);
        assert_eq!(collect(&buf, 2), None);
        assert_eq!(collect(&buf, 3), Some(vec![]));
        // Shrinking the bound evicts at once.
        let mut buf = ReplayBuffer::new(10);
        for seq in 0..4 {
            assert!(buf.push(seq, vec![0; 3]));
        }
        buf.max_bytes(6);
        assert_eq!(buf.len(), 2);
        assert_eq!(collect(&buf, 1).map(|v| v.len()), Some(2));
    }

    #[test]
    fn kept_after_ignores_gaps_but_not_unissued_ids() {
        let mut buf = ReplayBuffer::new(2);
        assert!(buf.kept_after(0).is_none());
        for seq in 0..4 {
            assert!(buf.push(seq, format!("e{seq}").into_bytes()));
        }
        let kept = |last| buf.kept_after(last).map(|it| it.map(<[u8]>::to_vec).collect::<Vec<_>>());
        assert_eq!(kept(0), Some(vec![b"e2".to_vec(), b"e3".to_vec()]), "e1 was evicted");
        assert_eq!(kept(2), Some(vec![b"e3".to_vec()]));
        assert_eq!(kept(3), Some(vec![]));
        assert_eq!(kept(4), None, "never issued");
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut buf = ReplayBuffer::new(0);
        assert!(buf.push(0, b"x".to_vec()));
        assert!(buf.is_empty());
        assert_eq!(collect(&buf, 0), Some(vec![]));
        assert!(buf.push(1, b"y".to_vec()));
        assert_eq!(collect(&buf, 0), None);
    }
}

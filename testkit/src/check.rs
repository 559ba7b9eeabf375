//! The independent output checker: what every frame the engine emits must be, judged with
//! serde_json alone (never with the engine's own decoder, so a decoder bug cannot hide itself).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// The identity a request id denotes, as the engine compares ids: strings by decoded value,
/// integers by their digits. `None` for anything that is not a usable id.
pub fn canon_id(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(format!("s:{s}")),
        Value::Number(n) => {
            let t = n.to_string();
            let digits = t.strip_prefix('-').unwrap_or(&t);
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| format!("n:{t}"))
        }
        _ => None,
    }
}

/// Whether `key` case-folds onto `"id"`.
pub fn folds_to_id(key: &str) -> bool {
    key.chars().flat_map(char::to_lowercase).eq("id".chars())
}

/// What one emitted frame said.
#[derive(Debug, Default)]
pub struct Checked {
    /// One entry per response in the frame (one, or one per batch member): its id's identity,
    /// `None` for a `null` id.
    pub answers: Vec<Option<String>>,
    /// Server-to-client notifications in the frame.
    pub notifications: usize,
    /// `nextCursor` values seen in results.
    pub cursors: Vec<String>,
    /// `protocolVersion` of `initialize` results: the session this frame set up.
    pub sessions: Vec<String>,
    /// Ids of server-to-client requests in the frame (only where [`check_message`] allows them).
    pub requests: Vec<Value>,
}

/// Checks one emitted frame: valid JSON without repeated keys, within `ceiling` bytes, and
/// shaped as JSON-RPC (a response has `"jsonrpc":"2.0"`, an `id` and exactly one of `result`
/// and `error`; an error has an integer `code` and a string `message`). Panics on a violation.
pub fn check_frame(bytes: &[u8], ceiling: usize) -> Checked {
    check_message(bytes, ceiling, false)
}

/// [`check_frame`], except that with `requests_ok` a message with both `id` and `method` (a
/// server-to-client request, as an HTTP stream or a legacy session may carry) is allowed and its
/// id collected. Panics on a violation.
pub fn check_message(bytes: &[u8], ceiling: usize, requests_ok: bool) -> Checked {
    match try_message(bytes, ceiling, requests_ok) {
        Ok(checked) => checked,
        Err(e) => panic!("{e}"),
    }
}

/// [`check_message`], returning the violation instead of panicking.
pub fn try_message(bytes: &[u8], ceiling: usize, requests_ok: bool) -> Result<Checked, String> {
    let show = || String::from_utf8_lossy(bytes).into_owned();
    macro_rules! ensure {
        ($cond:expr, $($fmt:tt)+) => {
            if !$cond {
                return Err(format!($($fmt)+));
            }
        };
    }
    ensure!(
        bytes.len() <= ceiling,
        "emitted frame of {} bytes exceeds the {ceiling}-byte response ceiling: {}",
        bytes.len(),
        String::from_utf8_lossy(bytes.get(..512).unwrap_or(bytes))
    );
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("emitted frame is not JSON ({e}): {}", show()))?;
    no_repeated_keys(bytes).map_err(|e| format!("emitted frame repeats a key ({e}): {}", show()))?;
    let mut checked = Checked::default();
    let messages = match &value {
        Value::Array(items) => {
            ensure!(!items.is_empty(), "emitted an empty batch: {}", show());
            items.iter().collect::<Vec<_>>()
        }
        other => vec![other],
    };
    for m in messages {
        let Value::Object(m) = m else { return Err(format!("emitted a non-object message: {}", show())) };
        ensure!(m.get("jsonrpc") == Some(&json!("2.0")), "missing jsonrpc 2.0: {}", show());
        if m.contains_key("method") {
            ensure!(m.get("method").is_some_and(Value::is_string), "non-string method: {}", show());
            if let Some(id) = m.get("id") {
                ensure!(requests_ok, "the engine sent a request, which nothing here answers: {}", show());
                ensure!(
                    canon_id(id).is_some(),
                    "a request id is neither a string nor an integer: {}",
                    show()
                );
                checked.requests.push(id.clone());
                continue;
            }
            checked.notifications += 1;
            continue;
        }
        let Some(id) = m.get("id") else { return Err(format!("response without id: {}", show())) };
        ensure!(
            id.is_null() || canon_id(id).is_some(),
            "response id is neither null, a string nor an integer: {}",
            show()
        );
        match (m.get("result"), m.get("error")) {
            (Some(result), None) => {
                ensure!(result.is_object(), "result is not an object: {}", show());
                if let Some(c) = result.get("nextCursor") {
                    let Some(c) = c.as_str() else {
                        return Err(format!("nextCursor not a string: {}", show()));
                    };
                    checked.cursors.push(c.to_owned());
                }
                if result.get("serverInfo").is_some() {
                    if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                        checked.sessions.push(v.to_owned());
                    }
                }
            }
            (None, Some(error)) => {
                ensure!(error.get("code").is_some_and(|c| c.as_i64().is_some()), "error code: {}", show());
                ensure!(error.get("message").is_some_and(Value::is_string), "error message: {}", show());
            }
            _ => return Err(format!("a response needs exactly one of result and error: {}", show())),
        }
        ensure!(m.len() == 3, "unexpected members in a response: {}", show());
        checked.answers.push(canon_id(id));
    }
    Ok(checked)
}

/// The ids of `frame` that the engine will answer by id, as [`canon_id`] identities, one per
/// request (a batch may hold several).
///
/// This reads the frame as leniently as the engine's decoder does (unknown members skipped
/// unchecked), so it never misses an id the engine could echo; it may count one the engine
/// ends up answering with `null` (for instance when a later member is not valid JSON text).
pub fn answerable_ids(frame: &[u8], max_id_bytes: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(frame);
    let ok = FrameProbe { out: &mut out, member: false }.deserialize(&mut de).is_ok() && de.end().is_ok();
    if !ok {
        // Not JSON: answered with a parse error and a null id.
        return Vec::new();
    }
    out.into_iter()
        .filter(|p| p.answerable())
        .filter_map(|p| {
            let raw = p.id?;
            if raw.len() > max_id_bytes {
                return None;
            }
            canon_id(&serde_json::from_str::<Value>(&raw).ok()?)
        })
        .collect()
}

#[derive(Default)]
struct Probe {
    id: Option<String>,
    ids: usize,
    id_like: bool,
    method: bool,
    result_or_error: bool,
}

impl Probe {
    /// A single `id`, no case-folded twin, and not a response (which is never answered).
    fn answerable(&self) -> bool {
        let response = !self.method && self.result_or_error;
        self.ids == 1 && !self.id_like && !response
    }
}

/// Reads a frame's shape: a message, a batch of messages (one level: a batch member that is
/// itself an array is just not a message), or anything else.
struct FrameProbe<'a> {
    out: &'a mut Vec<Probe>,
    /// Inside a batch, where another array is a member that is not a message.
    member: bool,
}

impl<'de> DeserializeSeed<'de> for FrameProbe<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FrameProbe<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.member { "a batch member" } else { "a frame" })
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        self.out.push(probe_map(map)?);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.member {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
        } else {
            while seq.next_element_seed(FrameProbe { out: &mut *self.out, member: true })?.is_some() {}
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

fn probe_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Probe, A::Error> {
    let mut p = Probe::default();
    while let Some(key) = map.next_key::<String>()? {
        if key == "id" {
            p.ids += 1;
            let raw: &RawValue = map.next_value()?;
            p.id = Some(raw.get().to_owned());
            continue;
        }
        if folds_to_id(&key) {
            p.id_like = true;
        }
        match key.as_str() {
            "method" => p.method = true,
            "result" | "error" => p.result_or_error = true,
            _ => {}
        }
        map.next_value::<IgnoredAny>()?;
    }
    Ok(p)
}

/// Fails when some object in `bytes` repeats a key.
pub fn no_repeated_keys(bytes: &[u8]) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    NoRepeats.deserialize(&mut de).map_err(|e| e.to_string())
}

struct NoRepeats;

impl<'de> DeserializeSeed<'de> for NoRepeats {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoRepeats {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("repeated key {key:?}")));
            }
            map.next_value_seed(NoRepeats)?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NoRepeats)?.is_some() {}
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

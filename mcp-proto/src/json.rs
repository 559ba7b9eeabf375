//! Strict, lossless JSON decoding.
//!
//! serde_json's `Value` quietly keeps the last of two repeated keys and, without
//! `arbitrary_precision`, rounds big numbers through `f64`. Both are silent data changes, so the
//! engine decodes through its own visitor instead: a repeated key or two keys that case-fold onto
//! each other are recorded as a [`Fault`], and so is nesting past
//! [`Limits::max_depth`](crate::limits::Limits::max_depth). A fault does not stop the parse: the rest of
//! the frame is still read, so that a request with a bad `params` can be answered with its own id
//! and a syntax error later in the frame still wins as `-32700`.
//!
//! Numbers: with the `exact-json` feature (serde_json's `arbitrary_precision`) every number keeps
//! its exact text. Without it (the default, which leaves serde_json's parsing of the rest of the
//! program alone) a number reads as serde_json reads it, an `i64`, a `u64` or an `f64`, and one
//! that would not be written back as the same number ([`first_inexact_number`]) is a
//! [`Fault::InexactNumber`] rather than a silent rounding. Ids are kept byte for byte in both
//! builds (a [`RawValue`]).

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

/// The key serde_json uses to smuggle an exact number through `deserialize_any` when
/// `arbitrary_precision` is on. Stable since serde_json 1.0.26.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// What was wrong with otherwise well-formed JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The same key twice in one object.
    DuplicateKey(String),
    /// Two keys of one object that differ only by case (`"id"` and `"Id"`).
    CaseFoldedKey(String, String),
    /// Arrays and objects nested deeper than the configured limit.
    TooDeep(usize),
    /// A number this build cannot carry exactly: its text as sent.
    #[cfg(not(feature = "exact-json"))]
    InexactNumber(String),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::DuplicateKey(k) => write!(f, "duplicate key \"{}\"", clip(k)),
            Fault::CaseFoldedKey(a, b) => {
                write!(f, "keys \"{}\" and \"{}\" differ only by case", clip(a), clip(b))
            }
            Fault::TooDeep(max) => write!(f, "JSON nested deeper than {max} levels"),
            #[cfg(not(feature = "exact-json"))]
            Fault::InexactNumber(n) => write!(
                f,
                "the number {} cannot be carried exactly by this server (it reads as a 64-bit \
                 integer or float); built with the `exact-json` feature it would be",
                clip(n)
            ),
        }
    }
}

impl Fault {
    /// Whether this is a number the build could not carry exactly (never, with `exact-json`).
    pub(crate) fn is_inexact_number(&self) -> bool {
        #[cfg(not(feature = "exact-json"))]
        {
            matches!(self, Fault::InexactNumber(_))
        }
        #[cfg(feature = "exact-json")]
        {
            false
        }
    }
}

/// Keeps error messages bounded whatever key or name the peer chose: its first 64 bytes.
pub(crate) fn clip(s: &str) -> &str {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}

/// Decoding state shared by every nested visitor of one parse.
#[derive(Debug)]
pub(crate) struct Ctx {
    depth: usize,
    max_depth: usize,
    /// The first fault, and whether it sat inside `params`.
    pub(crate) fault: Option<(Fault, bool)>,
    in_params: bool,
}

impl Ctx {
    pub(crate) fn new(max_depth: usize) -> Self {
        Self { depth: 0, max_depth, fault: None, in_params: false }
    }

    fn record(&mut self, fault: Fault) {
        if self.fault.is_none() {
            self.fault = Some((fault, self.in_params));
        }
    }

    /// Enters one level of nesting; false when that passes the limit.
    fn enter(&mut self) -> bool {
        self.depth += 1;
        if self.depth > self.max_depth {
            self.record(Fault::TooDeep(self.max_depth));
            return false;
        }
        true
    }
}

/// Decodes one value strictly; see the module docs.
pub(crate) struct Strict<'c>(pub(crate) &'c mut Ctx);

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // Not reached with `arbitrary_precision` (numbers arrive as NUMBER_TOKEN maps). Without
        // it, the member was scanned first ([`strict_member`]), so this float is the number sent.
        Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let ctx = self.0;
        if !ctx.enter() {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            ctx.depth -= 1;
            return Ok(Value::Null);
        }
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(v) = seq.next_element_seed(Strict(ctx))? {
            out.push(v);
        }
        ctx.depth -= 1;
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let ctx = self.0;
        let Some(first) = map.next_key::<String>()? else {
            return Ok(Value::Object(Map::new()));
        };
        if first == NUMBER_TOKEN {
            let text: String = map.next_value()?;
            return Number::from_str(&text).map(Value::Number).map_err(de::Error::custom);
        }
        if !ctx.enter() {
            map.next_value::<IgnoredAny>()?;
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            ctx.depth -= 1;
            return Ok(Value::Null);
        }
        let mut obj = Map::new();
        let mut keys = KeySet::default();
        let mut key = Some(first);
        while let Some(k) = key.take() {
            let value = map.next_value_seed(Strict(ctx))?;
            match keys.admit(&k, &obj) {
                Ok(()) => {
                    obj.insert(k, value);
                }
                Err(clash) => {
                    if ctx.fault.is_none() {
                        ctx.record(clash.to_fault());
                    }
                }
            }
            key = map.next_key::<String>()?;
        }
        ctx.depth -= 1;
        Ok(Value::Object(obj))
    }
}

/// `bytes` as one JSON object, strictly (no repeated or case-folded keys, at most `max_depth`
/// levels, nothing after it); `None` when they are anything else. For documents other parties
/// write (tokens, key sets, introspection answers), whose every fault is one refusal.
pub(crate) fn strict_object(bytes: &[u8], max_depth: usize) -> Option<Map<String, Value>> {
    if cfg!(not(feature = "exact-json")) && first_inexact_number(std::str::from_utf8(bytes).ok()?).is_some() {
        return None;
    }
    let mut ctx = Ctx::new(max_depth);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Strict(&mut ctx).deserialize(&mut de).ok()?;
    if de.end().is_err() || ctx.fault.is_some() {
        return None;
    }
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Detects repeated and case-folded keys of one object: a linear scan while the object is small,
/// maps once it is not, so that every key costs O(1) amortised work and a hostile object of 100k
/// keys (or of 50k case-folded pairs) costs O(n).
///
/// Admitted keys never fold onto each other, so a folded key names at most one admitted key: the
/// object's own key when that is already folded (`"name"`), else the entry of `unfolded`
/// (`"Name"`). That one is named as the other key of a [`Fault::CaseFoldedKey`], as a scan of the
/// object would name it.
#[derive(Default)]
pub(crate) struct KeySet {
    /// Folded key -> admitted key, for the admitted keys that are not their own fold; `None` until
    /// the object passes [`LINEAR_SCAN_MAX`] keys. Keys already folded (most keys) cost no entry.
    unfolded: Option<HashMap<String, String>>,
}

/// Keys of one object checked by comparing each against the others before switching to the map:
/// below this, a scan is cheaper than folding and hashing every key.
const LINEAR_SCAN_MAX: usize = 16;

// Keys looked at by `KeySet::admit` on this thread: a test tells linear from quadratic work by
// this count rather than by a clock.
#[cfg(test)]
thread_local! {
    static KEY_STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one key looked at (a comparison in a scan, or one look-up of a folded key).
fn step() {
    #[cfg(test)]
    KEY_STEPS.with(|c| c.set(c.get() + 1));
}

/// A key [`KeySet::admit`] refused, borrowed: most are never reported (only a parse's first
/// fault is), so the owned [`Fault`] is built only for the one that is.
#[derive(Debug)]
pub(crate) enum Clash<'a> {
    /// The same key twice.
    Duplicate(&'a str),
    /// The admitted key, then the refused one, that fold onto each other.
    Folded(Cow<'a, str>, &'a str),
}

impl Clash<'_> {
    pub(crate) fn to_fault(&self) -> Fault {
        match self {
            Clash::Duplicate(k) => Fault::DuplicateKey((*k).to_owned()),
            Clash::Folded(other, k) => Fault::CaseFoldedKey(other.clone().into_owned(), (*k).to_owned()),
        }
    }
}

impl KeySet {
    pub(crate) fn admit<'a>(
        &'a mut self,
        key: &'a str,
        obj: &'a Map<String, Value>,
    ) -> Result<(), Clash<'a>> {
        if obj.contains_key(key) {
            return Err(Clash::Duplicate(key));
        }
        if self.unfolded.is_none() && obj.len() < LINEAR_SCAN_MAX {
            if let Some(other) = obj.keys().find(|k| {
                step();
                eq_fold(k, key)
            }) {
                return Err(Clash::Folded(Cow::Borrowed(other), key));
            }
            return Ok(());
        }
        let unfolded = self.unfolded.get_or_insert_with(|| {
            obj.keys()
                .filter_map(|k| match fold(k) {
                    Cow::Owned(f) => Some((f, k.clone())),
                    Cow::Borrowed(_) => None,
                })
                .collect()
        });
        step();
        match fold(key) {
            Cow::Borrowed(_) => match unfolded.get(key) {
                Some(other) => Err(Clash::Folded(Cow::Borrowed(other), key)),
                None => Ok(()),
            },
            Cow::Owned(folded) => {
                if obj.contains_key(&folded) {
                    return Err(Clash::Folded(Cow::Owned(folded), key));
                }
                match unfolded.entry(folded) {
                    Entry::Occupied(other) => Err(Clash::Folded(Cow::Borrowed(other.into_mut()), key)),
                    Entry::Vacant(slot) => {
                        slot.insert(key.to_owned());
                        Ok(())
                    }
                }
            }
        }
    }
}

/// Simple case folding: ASCII by table, the rest by `char::to_lowercase`, which covers the
/// Unicode letters whose folds matter for keys (including the Kelvin sign onto `k`). Borrowed
/// when `s` is its own fold, which is what lets most keys be checked without allocating.
pub(crate) fn fold(s: &str) -> Cow<'_, str> {
    if s.is_ascii() {
        if s.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(s.to_ascii_lowercase())
        } else {
            Cow::Borrowed(s)
        }
    } else {
        let folded: String = s.chars().flat_map(char::to_lowercase).collect();
        if folded == s {
            Cow::Borrowed(s)
        } else {
            Cow::Owned(folded)
        }
    }
}

/// Whether two keys are equal after [`fold`].
pub(crate) fn eq_fold(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        a.eq_ignore_ascii_case(b)
    } else {
        a.chars().flat_map(char::to_lowercase).eq(b.chars().flat_map(char::to_lowercase))
    }
}

/// One JSON-RPC message as decoded, before any protocol rule is applied.
#[derive(Debug, Default)]
pub(crate) struct RawEnvelope {
    pub(crate) jsonrpc: Option<Value>,
    pub(crate) id: Option<Box<RawValue>>,
    pub(crate) method: Option<Value>,
    pub(crate) params: Option<Value>,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<Value>,
    /// An envelope-level problem: an unknown or repeated member.
    pub(crate) problem: Option<String>,
    /// Some member other than `id` case-folds onto `"id"` (`"Id"`, `"ID"`): the sender may have
    /// meant a request, so the frame is not treated as a notification.
    pub(crate) id_like: bool,
    /// `id` appears twice, or beside a case-folded twin: which one is meant cannot be known.
    pub(crate) id_ambiguous: bool,
    /// A fault inside `params` (or the envelope), from [`Ctx`].
    pub(crate) fault: Option<(Fault, bool)>,
}

/// A frame: one message, a batch, or a top-level value that is neither.
// Frames are transient and moved once, so the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum RawFrame {
    Single(RawEnvelope),
    Batch(Vec<RawFrameItem>),
    NotAnObject,
}

/// One member of a batch.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum RawFrameItem {
    Message(RawEnvelope),
    NotAnObject,
}

/// Why a frame could not be decoded at all.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// Not JSON: `-32700`.
    Syntax(String),
    /// Deeper than serde_json's fixed parser limit: `-32600`.
    TooDeep,
}

/// Decodes a frame; see the module docs for what counts as a fault rather than an error.
pub(crate) fn decode(bytes: &[u8], max_depth: usize) -> Result<RawFrame, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let frame = FrameSeed { max_depth }.deserialize(&mut de).and_then(|f| de.end().map(|()| f));
    frame.map_err(|e| {
        // A member decoded on its own (`strict_member`) reports the limit as a custom error.
        if e.to_string().starts_with("recursion limit exceeded") {
            DecodeError::TooDeep
        } else {
            DecodeError::Syntax(e.to_string())
        }
    })
}

struct FrameSeed {
    max_depth: usize,
}

impl<'de> DeserializeSeed<'de> for FrameSeed {
    type Value = RawFrame;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FrameSeed {
    type Value = RawFrame;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message or batch")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        EnvelopeVisitor { max_depth: self.max_depth }.visit_map(map).map(RawFrame::Single)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(ItemSeed { max_depth: self.max_depth })? {
            items.push(item);
        }
        Ok(RawFrame::Batch(items))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(RawFrame::NotAnObject)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(RawFrame::NotAnObject)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(RawFrame::NotAnObject)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(RawFrame::NotAnObject)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(RawFrame::NotAnObject)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(RawFrame::NotAnObject)
    }
}

struct ItemSeed {
    max_depth: usize,
}

impl<'de> DeserializeSeed<'de> for ItemSeed {
    type Value = RawFrameItem;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemSeed {
    type Value = RawFrameItem;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        // A batch is one level of nesting, so members get one level less.
        let max_depth = self.max_depth.saturating_sub(1);
        EnvelopeVisitor { max_depth }.visit_map(map).map(RawFrameItem::Message)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(RawFrameItem::NotAnObject)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(RawFrameItem::NotAnObject)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(RawFrameItem::NotAnObject)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(RawFrameItem::NotAnObject)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(RawFrameItem::NotAnObject)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(RawFrameItem::NotAnObject)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(RawFrameItem::NotAnObject)
    }
}

struct EnvelopeVisitor {
    max_depth: usize,
}

const ENVELOPE_KEYS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

impl EnvelopeVisitor {
    fn visit_map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<RawEnvelope, A::Error> {
        let mut env = RawEnvelope::default();
        let mut ctx = Ctx::new(self.max_depth);
        // The envelope itself is level 1.
        ctx.depth = 1;
        // Keys borrow from the frame when they hold no escape (all real ones): no allocation.
        // The first distinct keys, enough to name any clash: a fixed array, nothing allocated.
        let mut seen: [Option<Cow<'de, str>>; ENVELOPE_KEYS.len() + 1] =
            [const { None }; ENVELOPE_KEYS.len() + 1];
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if eq_fold(&key, "id") {
                let had_id = env.id.is_some() || env.id_like;
                if key != "id" {
                    env.id_like = true;
                }
                env.id_ambiguous |= had_id;
            }
            if env.problem.is_none() {
                if seen.iter().flatten().any(|k| *k == key) {
                    env.problem = Some(format!("duplicate envelope member \"{}\"", clip(&key)));
                } else if let Some(other) = seen.iter().flatten().find(|k| eq_fold(k, &key)) {
                    env.problem = Some(format!(
                        "envelope members \"{}\" and \"{}\" differ only by case",
                        clip(other),
                        clip(&key)
                    ));
                } else if !ENVELOPE_KEYS.contains(&&*key) {
                    env.problem = Some(format!("unknown envelope member \"{}\"", clip(&key)));
                }
            }
            let repeated = seen.iter().flatten().any(|k| *k == key);
            if !repeated {
                if let Some(slot) = seen.iter_mut().find(|k| k.is_none()) {
                    *slot = Some(key.clone());
                }
            }
            match &*key {
                "id" if !repeated => env.id = Some(map.next_value::<Box<RawValue>>()?),
                "jsonrpc" | "method" | "result" | "error" if !repeated => {
                    let v = strict_member(&mut map, &mut ctx)?;
                    match &*key {
                        "jsonrpc" => env.jsonrpc = Some(v),
                        "method" => env.method = Some(v),
                        "result" => env.result = Some(v),
                        _ => env.error = Some(v),
                    }
                }
                "params" if !repeated => {
                    ctx.in_params = true;
                    env.params = Some(strict_member(&mut map, &mut ctx)?);
                    ctx.in_params = false;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        env.fault = ctx.fault;
        Ok(env)
    }
}

/// The next member's value, decoded with [`Strict`].
#[cfg(feature = "exact-json")]
fn strict_member<'de, A: MapAccess<'de>>(map: &mut A, ctx: &mut Ctx) -> Result<Value, A::Error> {
    map.next_value_seed(Strict(ctx))
}

/// The next member's value, decoded with [`Strict`] once its text is known to hold no number
/// this build would round: serde_json hands a visitor an `f64`, not the text it came from, so
/// the text is borrowed first (the frame is in memory) and scanned. A member with such a number
/// is a [`Fault::InexactNumber`] and is not decoded further (`null`), as a too-deep one.
#[cfg(not(feature = "exact-json"))]
fn strict_member<'de, A: MapAccess<'de>>(map: &mut A, ctx: &mut Ctx) -> Result<Value, A::Error> {
    let raw: &'de RawValue = map.next_value()?;
    if let Some(number) = first_inexact_number(raw.get()) {
        ctx.record(Fault::InexactNumber(number.to_owned()));
        return Ok(Value::Null);
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    // The text is well-formed JSON already; what can still fail is serde_json's nesting limit,
    // whose message `decode` recognises.
    Strict(ctx).deserialize(&mut de).map_err(de::Error::custom)
}

/// The first number in the JSON `text` (outside strings) that serde_json without
/// `arbitrary_precision` would not carry exactly: an integer outside `i64` and `u64`, or a
/// number whose `f64` is written back as another number (`0.1000000000000000000001`, `1e400`,
/// `9007199254740993.0`). `2.5`, `1e2` and `-0.0` are carried exactly.
pub(crate) fn first_inexact_number(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        match b {
            b'"' => {
                // Strings are most of a frame's text: their end is searched for several bytes
                // at a time (SIMD), not byte by byte.
                at += 1;
                let mut closed = false;
                while let Some(found) = bytes.get(at..).and_then(|rest| memchr::memchr2(b'"', b'\\', rest)) {
                    closed = bytes.get(at + found) == Some(&b'"');
                    at += found + if closed { 1 } else { 2 };
                    if closed {
                        break;
                    }
                }
                if !closed {
                    // An unterminated string (not JSON): no number follows it.
                    return None;
                }
            }
            b'-' | b'0'..=b'9' => {
                let len = bytes
                    .get(at..)
                    .unwrap_or_default()
                    .iter()
                    .take_while(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                    .count();
                let token = text.get(at..at + len).unwrap_or_default();
                if !is_carried_exactly(token) {
                    return Some(token);
                }
                at += len;
            }
            _ => at += 1,
        }
    }
    None
}

/// Whether serde_json without `arbitrary_precision` reads `token` as a value it writes back as
/// the same number.
fn is_carried_exactly(token: &str) -> bool {
    if !token.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        // Integers are read as such when they fit; past `u64` they become floats.
        return token.parse::<u64>().is_ok() || token.parse::<i64>().is_ok();
    }
    // The very float the frame's parse produces (serde_json's reader, not the standard
    // library's), written as its shortest round-trip digits, as serde_json writes it.
    match (serde_json::from_str::<f64>(token), decimal(token)) {
        (Ok(f), Some(sent)) => decimal(&format!("{f:e}")) == Some(sent),
        _ => false,
    }
}

/// A number's decimal value as (negative, significant digits, exponent): `0.DIGITS * 10^exponent`
/// with no leading or trailing zero digit, so that `2.50`, `25e-1` and `2.5e0` compare equal;
/// zero, of either sign, is `(false, [], 0)`. `None` when the exponent overflows.
fn decimal(text: &str) -> Option<(bool, Vec<u8>, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(e) => (rest.get(..e)?, rest.get(e + 1..)?.parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut exponent = exponent.checked_add(i64::try_from(int.len()).ok()?)?;
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
    let leading = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..leading);
    exponent = exponent.checked_sub(i64::try_from(leading).ok()?)?;
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    if digits.is_empty() {
        return Some((false, digits, 0));
    }
    Some((negative, digits, exponent))
}

/// A number's text: as sent, with `exact-json`; without it, as serde_json writes the `i64`,
/// `u64` or `f64` it was read as, which the decoder made sure is the number sent (`1` and `1.0`
/// stay apart: an integer is written without a fraction, a float with one).
pub(crate) fn number_text(n: &Number) -> Cow<'_, str> {
    #[cfg(feature = "exact-json")]
    {
        Cow::Borrowed(n.as_str())
    }
    #[cfg(not(feature = "exact-json"))]
    {
        Cow::Owned(n.to_string())
    }
}

/// An object key, borrowed from the input when it holds no escape sequence.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(s: &str) -> RawEnvelope {
        match decode(s.as_bytes(), 64) {
            Ok(RawFrame::Single(e)) => e,
            other => panic!("not a single message: {other:?}"),
        }
    }

    #[cfg(feature = "exact-json")]
    #[test]
    fn big_numbers_keep_every_digit() {
        let e =
            single(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":9007199254740993,"x":1.50e400}}"#);
        let p = serde_json::to_string(&e.params).unwrap();
        // Every digit survives; serde_json only spells the exponent sign out.
        assert_eq!(p, r#"{"n":9007199254740993,"x":1.50e+400}"#);
    }

    #[cfg(not(feature = "exact-json"))]
    #[test]
    fn numbers_an_f64_cannot_carry_are_faults_not_roundings() {
        let e = single(
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":2.5,"b":{"n":0.1000000000000000000001}}}"#,
        );
        let fault = Some((Fault::InexactNumber("0.1000000000000000000001".into()), true));
        assert_eq!(e.fault, fault);
        let message = e.fault.map(|(f, _)| f.to_string()).unwrap_or_default();
        assert!(
            message.contains("0.1000000000000000000001") && message.contains("`exact-json`"),
            "{message}"
        );
        // Outside `params` (a client's `result`), the fault says so.
        let e = single(r#"{"jsonrpc":"2.0","id":1,"result":{"n":18446744073709551616}}"#);
        assert_eq!(e.fault, Some((Fault::InexactNumber("18446744073709551616".into()), false)));
        // Documents others write are refused whole.
        assert!(strict_object(br#"{"exp":1e400}"#, 8).is_none());
        assert!(strict_object(br#"{"exp":1700000000}"#, 8).is_some());
    }

    #[cfg(not(feature = "exact-json"))]
    #[test]
    fn numbers_an_f64_carries_pass_as_sent() {
        let e = single(
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":2.5,"b":1e2,"c":-0.0,"d":18446744073709551615,"e":-9223372036854775808,"f":2.50,"s":"0.1000000000000000000001 \" 1e400"}}"#,
        );
        assert_eq!(e.fault, None);
        let p = serde_json::to_string(&e.params).unwrap();
        assert_eq!(
            p,
            r#"{"a":2.5,"b":100.0,"c":-0.0,"d":18446744073709551615,"e":-9223372036854775808,"f":2.5,"s":"0.1000000000000000000001 \" 1e400"}"#
        );
    }

    #[cfg(not(feature = "exact-json"))]
    #[test]
    fn which_numbers_are_carried_exactly() {
        for exact in ["0", "-0", "2.5", "25e-1", "1E+2", "-1.5e-7", "0.1", "9007199254740993", "5e-324"] {
            assert_eq!(first_inexact_number(exact), None, "{exact}");
        }
        // Past u64, more digits than an f64 keeps, out of range, underflowing, and an integer
        // past 2^53 written as a float: each would come back as another number.
        for inexact in [
            "18446744073709551616",
            "-9223372036854775809",
            "0.1000000000000000000001",
            "1e400",
            "1e-400",
            "9007199254740993.0",
            "1e99999999999999999999",
        ] {
            assert_eq!(first_inexact_number(&format!("[1,{inexact}]")), Some(inexact), "{inexact}");
        }
    }

    #[cfg(not(feature = "exact-json"))]
    #[test]
    fn numbers_inside_strings_are_not_numbers() {
        // Escaped quotes and backslashes do not end a string; the number after it is found.
        let cases = [
            (r#"["1e400"]"#, None),
            (r#"["a\"1e400\"b"]"#, None),
            (r#"["\\",1e400]"#, Some("1e400")),
            (r#"["\\\"1e400",2]"#, None),
            (r#"{"k\"":"v","n":1e-400}"#, Some("1e-400")),
            (r#"["\u0022 1e400"]"#, None),
            // Not JSON, and no number in it: an unterminated string, or one ending in a lone escape.
            (r#"["1e400"#, None),
            (r#"["\"#, None),
        ];
        for (text, first) in cases {
            assert_eq!(first_inexact_number(text), first, "{text}");
        }
        // Long strings cross the scanner's word boundaries.
        let long = format!(r#"["{}\"{}",0.1000000000000000000001]"#, "x".repeat(100), "9".repeat(70));
        assert_eq!(first_inexact_number(&long), Some("0.1000000000000000000001"));
    }

    #[test]
    fn raw_ids_are_kept_byte_for_byte() {
        let e = single(r#"{"id":"\u0041b","jsonrpc":"2.0","method":"m"}"#);
        assert_eq!(e.id.unwrap().get(), r#""\u0041b""#);
        let e = single(r#"{"id":1234567890123456789012345678901234567890,"jsonrpc":"2.0","method":"m"}"#);
        assert_eq!(e.id.unwrap().get(), "1234567890123456789012345678901234567890");
    }

    #[test]
    fn duplicate_and_folded_keys_inside_params_are_faults() {
        let e = single(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{"x":1,"x":2}}}"#);
        assert_eq!(e.fault, Some((Fault::DuplicateKey("x".into()), true)));
        let e = single(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"Name":1,"nAME":2}}"#);
        assert!(matches!(e.fault, Some((Fault::CaseFoldedKey(..), true))));
        // The Kelvin sign folds onto k.
        let e = single("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"k\":1,\"\u{212A}\":2}}");
        assert!(matches!(e.fault, Some((Fault::CaseFoldedKey(..), true))));
    }

    #[test]
    fn many_keys_use_the_set() {
        let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"#);
        for i in 0..100 {
            s.push_str(&format!("\"k{i}\":{i},"));
        }
        s.push_str("\"K57\":0}}");
        let fault = single(&s).fault;
        // The key named is the one written earlier, exactly as written, as a scan would name it.
        assert_eq!(fault, Some((Fault::CaseFoldedKey("k57".into(), "K57".into()), true)));
        let message = fault.map(|(f, _)| f.to_string());
        assert_eq!(message.as_deref(), Some(r#"keys "k57" and "K57" differ only by case"#));
        // Past the scan, non-ASCII folds still meet: the Kelvin sign onto k.
        let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"#);
        for i in 0..40 {
            s.push_str(&format!("\"x{i}\":{i},"));
        }
        s.push_str("\"\\u212a\":1,\"Z\":2,\"k\":3,\"x3\":4}}");
        assert_eq!(single(&s).fault, Some((Fault::CaseFoldedKey("\u{212A}".into(), "k".into()), true)));
        // Past the scan, an earlier key that is not its own fold is named too, whichever form
        // the later key has.
        for (earlier, later) in [("Name", "name"), ("Name", "NAME"), ("name", "NAME")] {
            let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"#);
            for i in 0..20 {
                s.push_str(&format!("\"x{i}\":{i},"));
            }
            s.push_str(&format!("\"{earlier}\":1,\"{later}\":2}}}}"));
            assert_eq!(
                single(&s).fault,
                Some((Fault::CaseFoldedKey(earlier.into(), later.into()), true)),
                "{earlier} then {later}"
            );
        }
    }

    #[test]
    fn distinct_keys_cost_a_bounded_number_of_steps_per_key() {
        let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"#);
        let keys = 100_000u64;
        for i in 0..keys {
            s.push_str(&format!("\"key{i}\":0,"));
        }
        s.push_str("\"KEY99999\":0}}");
        KEY_STEPS.with(|c| c.set(0));
        let e = single(&s);
        let steps = KEY_STEPS.with(std::cell::Cell::get);
        assert_eq!(e.fault, Some((Fault::CaseFoldedKey("key99999".into(), "KEY99999".into()), true)));
        let bound = keys + (LINEAR_SCAN_MAX * LINEAR_SCAN_MAX) as u64;
        assert!(steps <= bound, "{steps} key steps for {keys} keys (bound {bound})");
    }

    /// `"K00000":0,"k00000":0,...` inside `params`, about `bytes` long; returns the frame and
    /// how many keys it has.
    fn folded_pairs(bytes: usize) -> (String, u64) {
        let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"#);
        let mut keys = 0;
        let mut i = 0u32;
        while s.len() < bytes {
            s.push_str(&format!("\"K{i:06}\":0,\"k{i:06}\":0,"));
            keys += 2;
            i += 1;
        }
        s.push_str("\"end\":0}}");
        (s, keys + 1)
    }

    #[test]
    fn folded_pairs_cost_a_bounded_number_of_steps_per_key() {
        let (frame, keys) = folded_pairs(1 << 20);
        KEY_STEPS.with(|c| c.set(0));
        let e = single(&frame);
        let steps = KEY_STEPS.with(std::cell::Cell::get);
        // The first pair already collides; every later one is refused the same way.
        assert_eq!(e.fault, Some((Fault::CaseFoldedKey("K000000".into(), "k000000".into()), true)));
        // At most LINEAR_SCAN_MAX comparisons for each of the first keys, then one probe per key.
        let bound = keys + (LINEAR_SCAN_MAX * LINEAR_SCAN_MAX) as u64;
        assert!(steps <= bound, "{steps} key steps for {keys} keys (bound {bound})");
    }

    #[test]
    fn envelope_problems() {
        let e = single(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#);
        assert!(e.problem.unwrap().contains("duplicate"));
        let e = single(r#"{"jsonrpc":"2.0","id":1,"Method":"m","method":"m"}"#);
        assert!(e.problem.is_some());
        let e = single(r#"{"jsonrpc":"2.0","id":1,"method":"m","extra":true}"#);
        assert!(e.problem.unwrap().contains("unknown"));
    }

    #[test]
    fn escaped_envelope_keys_are_the_keys_they_spell() {
        // Keys with escapes cannot borrow from the frame; they must still be recognised.
        let e = single(r#"{"jsonrpc":"2.0","\u0069d":7,"\u006dethod":"m"}"#);
        assert!(e.problem.is_none(), "{:?}", e.problem);
        assert_eq!(e.id.map(|id| id.get().to_owned()).as_deref(), Some("7"));
        assert_eq!(e.method, Some(Value::String("m".into())));
        let e = single(r#"{"jsonrpc":"2.0","id":1,"method":"m","\u006dethod":"n"}"#);
        assert!(e.problem.unwrap().contains("duplicate"));
        let e = single(r#"{"jsonrpc":"2.0","id":1,"method":"m","\u004dethod":"n"}"#);
        assert!(e.problem.unwrap().contains("differ only by case"));
    }

    #[test]
    fn depth() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{}{}}}"#,
            "[".repeat(70),
            "]".repeat(70)
        );
        assert!(matches!(single(&deep).fault, Some((Fault::TooDeep(64), true))));
        // Past our limit the rest is skipped iteratively, so no depth can overflow the stack.
        let deeper = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{}{}}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(matches!(single(&deeper).fault, Some((Fault::TooDeep(64), true))));
        // A limit above serde_json's own (128) meets serde_json's refusal instead.
        let deep = format!("{{\"params\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(decode(deep.as_bytes(), 500), Err(DecodeError::TooDeep)));
    }

    #[test]
    fn syntax_errors_win_over_faults() {
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":1,"id":1,"method":"m""#, 64),
            Err(DecodeError::Syntax(_))
        ));
        assert!(matches!(decode(b"{} x", 64), Err(DecodeError::Syntax(_))));
    }
}

//! Encoding results and errors: tool results (checked against the output schema, bounded by
//! the response limit) and the errors that frames and handler failures become.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::{Call, CallKind, Engine, META_SERVER_INFO};
use crate::content::{Content, HandlerError, ToolOutput};
use crate::json::DecodeError;
use crate::jsonrpc::{encode_result, Encoded, RequestId, RpcError};
use crate::version::ProtocolVersion;
use serde_json::{Map, Value};

impl<H: Clone> Engine<H> {
    pub(super) fn tool_result(&self, call: &Call, mut out: ToolOutput) -> Encoded {
        let entry = match &call.kind {
            CallKind::Tool(name) => self.registry.tools.get(name),
            _ => None,
        };
        if let Some(validator) = entry.and_then(|e| e.output.as_ref()) {
            if !out.is_error {
                let ok = out.structured.as_ref().is_some_and(|s| validator.is_valid(s));
                if !ok {
                    // The application broke its own contract; the peer learns only that the
                    // server failed.
                    return RpcError::misuse().encode(Some(&call.id));
                }
            }
        }
        if let Some(s) = &out.structured {
            if out.content.is_empty() {
                out.content.push(Content::text(s.to_string()));
            }
        }
        let bytes = self.encode_tool_result(&call.id, call.version, &out);
        let max = self.config.limits.max_response_bytes;
        if bytes.len() <= max {
            return bytes.into();
        }
        let msg = format!(
            "result_too_large: the tool's result of {} bytes exceeds the {max}-byte response limit",
            bytes.len()
        );
        self.encode_tool_result(&call.id, call.version, &ToolOutput::error(msg)).into()
    }

    pub(super) fn encode_tool_result(&self, id: &RequestId, v: ProtocolVersion, out: &ToolOutput) -> Vec<u8> {
        let modern = v.is_modern().then_some(&self.server_info_modern);
        encode_result(id, &ToolResultWire { out, v, server_info: modern })
    }
}

/// The error answering a frame that did not parse.
pub(super) fn decode_error(e: DecodeError) -> RpcError {
    match e {
        DecodeError::Syntax(msg) => RpcError::unparsable(format!("parse error: {msg}")),
        // A depth the parser will not descend to leaves the document as unreadable to us as a
        // syntax error does: malformed, not a bound the client could have been told of.
        DecodeError::TooDeep => RpcError::malformed("JSON nested deeper than 128 levels"),
    }
}

/// What a handler failure becomes on the wire: public errors as they are, anything else as the
/// generic internal error.
pub(super) fn public_error(e: HandlerError) -> RpcError {
    match e {
        HandlerError::Public(e) => e,
        HandlerError::Private(_) | HandlerError::Panicked | HandlerError::Cancelled => RpcError::internal(),
    }
}

struct ToolResultWire<'a> {
    out: &'a ToolOutput,
    v: ProtocolVersion,
    server_info: Option<&'a Value>,
}

impl Serialize for ToolResultWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("content", &ContentList(&self.out.content, self.v))?;
        if let Some(st) = &self.out.structured {
            if self.v.structured_content_any_type() || (self.v.has_structured_output() && st.is_object()) {
                m.serialize_entry("structuredContent", st)?;
            }
        }
        if self.out.is_error {
            m.serialize_entry("isError", &true)?;
        }
        match (self.server_info, &self.out.meta) {
            (Some(info), meta) => {
                m.serialize_entry("_meta", &MetaWithInfo(meta.as_ref(), info))?;
                m.serialize_entry("resultType", "complete")?;
            }
            (None, Some(meta)) => m.serialize_entry("_meta", meta)?,
            (None, None) => {}
        }
        m.end()
    }
}

struct ContentList<'a>(&'a [Content], ProtocolVersion);

impl Serialize for ContentList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| c.for_version(self.1)))
    }
}

struct MetaWithInfo<'a>(Option<&'a Map<String, Value>>, &'a Value);

impl Serialize for MetaWithInfo<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.0.into_iter().flatten() {
            if k != META_SERVER_INFO {
                m.serialize_entry(k, v)?;
            }
        }
        m.serialize_entry(META_SERVER_INFO, self.1)?;
        m.end()
    }
}

//! Content blocks and tool results, and how each is written for an older peer.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::jsonrpc::RpcError;
use crate::version::ProtocolVersion;

/// The body of an embedded or read resource: text or base64 bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceBody {
    /// UTF-8 text.
    Text(String),
    /// Binary data, already base64-encoded.
    Blob(String),
}

/// `TextResourceContents` or `BlobResourceContents`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// Its media type, when known. Left `None` in a read's answer, the declared resource's
    /// (or template's) media type is sent for an item of the URI read.
    pub mime_type: Option<String>,
    /// Text or blob.
    pub body: ResourceBody,
    /// `_meta` (sent to 2025-06-18 and later peers). Left `None` in a read's answer, the
    /// declared resource's (or template's) `_meta` is sent for an item of the URI read.
    pub meta: Option<Map<String, Value>>,
}

impl ResourceContents {
    /// Text contents.
    pub fn text(uri: impl Into<String>, mime_type: impl Into<String>, text: impl Into<String>) -> Self {
        Self::with(uri.into(), Some(mime_type.into()), ResourceBody::Text(text.into()))
    }

    /// Text contents without a media type or `_meta` of their own: a read of a declared
    /// resource or template fills both from its declaration (the resource's `mimeType` and
    /// `_meta`; for an app, [`APP_MIME_TYPE`](crate::apps::APP_MIME_TYPE) and its `_meta.ui`).
    /// Only items whose URI is the one read inherit; a value set on the item wins.
    pub fn inheriting(uri: impl Into<String>, text: impl Into<String>) -> Self {
        Self::with(uri.into(), None, ResourceBody::Text(text.into()))
    }

    /// Binary contents from base64 text that inherit the declaration's media type and `_meta`,
    /// as [`inheriting`](Self::inheriting) does.
    pub fn inheriting_blob(uri: impl Into<String>, base64: impl Into<String>) -> Self {
        Self::with(uri.into(), None, ResourceBody::Blob(base64.into()))
    }

    /// Binary contents from base64 text.
    pub fn blob(uri: impl Into<String>, mime_type: impl Into<String>, base64: impl Into<String>) -> Self {
        Self::with(uri.into(), Some(mime_type.into()), ResourceBody::Blob(base64.into()))
    }

    /// The one constructor the four public ones share: contents never start with `_meta`.
    fn with(uri: String, mime_type: Option<String>, body: ResourceBody) -> Self {
        Self { uri, mime_type, body, meta: None }
    }

    fn write<M: SerializeMap>(&self, m: &mut M, v: ProtocolVersion) -> Result<(), M::Error> {
        m.serialize_entry("uri", &self.uri)?;
        if let Some(t) = &self.mime_type {
            m.serialize_entry("mimeType", t)?;
        }
        match &self.body {
            ResourceBody::Text(t) => m.serialize_entry("text", t)?,
            ResourceBody::Blob(b) => m.serialize_entry("blob", b)?,
        }
        if v.has_structured_output() {
            if let Some(meta) = &self.meta {
                m.serialize_entry("_meta", meta)?;
            }
        }
        Ok(())
    }
}

/// The resource a `resource_link` block points at: the reference's own fields.
///
/// `annotations`, `_meta` and `icons` here describe the resource (copy them from its
/// declaration); the block that carries the link has annotations and `_meta` of its own (see
/// [`Content::ResourceLink`]), and on the wire the block's win key by key over these.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceLink {
    /// The linked resource's URI.
    pub uri: String,
    /// Its programmatic name.
    pub name: String,
    /// A display title.
    pub title: Option<String>,
    /// A description.
    pub description: Option<String>,
    /// Its media type.
    pub mime_type: Option<String>,
    /// Its size in bytes.
    pub size: Option<u64>,
    /// The resource's annotations (audience, priority, lastModified).
    pub annotations: Option<Map<String, Value>>,
    /// The resource's `_meta`.
    pub meta: Option<Map<String, Value>>,
    /// The resource's `icons` array, sent to 2025-11-25 and later peers (older schemas have no
    /// icons on a link).
    pub icons: Option<Value>,
}

impl ResourceLink {
    /// A link to `uri` named `name`, with no other field set.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self { uri: uri.into(), name: name.into(), ..Self::default() }
    }
}

/// One content block of a tool result or prompt message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// Optional `annotations` object (audience, priority, lastModified).
        annotations: Option<Map<String, Value>>,
        /// The block's `_meta` (sent to 2025-06-18 and later peers).
        meta: Option<Map<String, Value>>,
    },
    /// A base64 image.
    Image {
        /// Base64 data.
        data: String,
        /// Media type, e.g. `image/png`.
        mime_type: String,
        /// Optional annotations.
        annotations: Option<Map<String, Value>>,
        /// The block's `_meta` (sent to 2025-06-18 and later peers).
        meta: Option<Map<String, Value>>,
    },
    /// Base64 audio (2025-03-26 and later).
    Audio {
        /// Base64 data.
        data: String,
        /// Media type, e.g. `audio/wav`.
        mime_type: String,
        /// Optional annotations.
        annotations: Option<Map<String, Value>>,
        /// The block's `_meta` (sent to 2025-06-18 and later peers).
        meta: Option<Map<String, Value>>,
    },
    /// An embedded resource. The resource's own `_meta` stays on
    /// [`ResourceContents::meta`]; `meta` here is the containing block's.
    Resource {
        /// The resource's contents.
        resource: ResourceContents,
        /// Optional annotations.
        annotations: Option<Map<String, Value>>,
        /// The block's `_meta` (sent to 2025-06-18 and later peers).
        meta: Option<Map<String, Value>>,
    },
    /// A link to a resource (2025-06-18 and later; written as text for older peers).
    ///
    /// The block's `annotations` and `_meta` override the matching keys of the link's own
    /// ([`ResourceLink::annotations`], [`ResourceLink::meta`]): the reference describes the
    /// resource, the block says what this mention of it means here.
    ResourceLink {
        /// The linked resource.
        link: ResourceLink,
        /// The block's annotations, merged over the link's.
        annotations: Option<Map<String, Value>>,
        /// The block's `_meta`, merged over the link's.
        meta: Option<Map<String, Value>>,
    },
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into(), annotations: None, meta: None }
    }

    /// An image block from base64 data.
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Image { data: base64.into(), mime_type: mime_type.into(), annotations: None, meta: None }
    }

    /// An audio block from base64 data.
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Audio { data: base64.into(), mime_type: mime_type.into(), annotations: None, meta: None }
    }

    /// An embedded resource block.
    pub fn resource(resource: ResourceContents) -> Self {
        Content::Resource { resource, annotations: None, meta: None }
    }

    /// A `resource_link` block without annotations or `_meta` of its own.
    pub fn resource_link(link: ResourceLink) -> Self {
        Content::ResourceLink { link, annotations: None, meta: None }
    }

    /// Sets the block's annotations (replacing any it had).
    pub fn with_annotations(mut self, a: Map<String, Value>) -> Self {
        *self.parts_mut().0 = Some(a);
        self
    }

    /// Sets the block's `_meta` (replacing any it had). Peers older than 2025-06-18 do not
    /// receive it: their schemas have no `_meta` on content.
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        *self.parts_mut().1 = Some(meta);
        self
    }

    /// The block's annotations and `_meta`, whatever its kind, so the builders need no match
    /// of their own.
    fn parts_mut(&mut self) -> (&mut Option<Map<String, Value>>, &mut MetaField) {
        match self {
            Content::Text { annotations, meta, .. }
            | Content::Image { annotations, meta, .. }
            | Content::Audio { annotations, meta, .. }
            | Content::Resource { annotations, meta, .. }
            | Content::ResourceLink { annotations, meta, .. } => (annotations, meta),
        }
    }

    /// Writes this block as `version` knows it.
    pub(crate) fn for_version(&self, version: ProtocolVersion) -> VersionedContent<'_> {
        VersionedContent(self, version)
    }
}

/// An optional `_meta` object, as every block holds one.
type MetaField = Option<Map<String, Value>>;

/// A block paired with the version it is written for.
pub(crate) struct VersionedContent<'a>(&'a Content, ProtocolVersion);

/// `annotations` as `v` knows them: `lastModified` is 2025-06-18 and later. Content blocks,
/// resources and templates all list them so.
pub(crate) fn annotations_for(
    a: &Option<Map<String, Value>>,
    v: ProtocolVersion,
) -> Option<Map<String, Value>> {
    let a = a.as_ref()?;
    if v.has_structured_output() || !a.contains_key("lastModified") {
        return Some(a.clone());
    }
    let mut a = a.clone();
    a.remove("lastModified");
    Some(a)
}

/// `base` with `over`'s keys written on top: a block's fields win over its reference's.
fn merged(
    base: &Option<Map<String, Value>>,
    over: &Option<Map<String, Value>>,
) -> Option<Map<String, Value>> {
    match (base, over) {
        (None, None) => None,
        (Some(m), None) | (None, Some(m)) => Some(m.clone()),
        (Some(b), Some(o)) => {
            let mut m = b.clone();
            m.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
            Some(m)
        }
    }
}

impl Serialize for VersionedContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.1;
        let mut m = s.serialize_map(None)?;
        let merged_link;
        let (ann, meta) = match self.0 {
            Content::Text { text, annotations, meta } => {
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", text)?;
                (annotations, meta)
            }
            Content::Image { data, mime_type, annotations, meta } => {
                m.serialize_entry("type", "image")?;
                m.serialize_entry("data", data)?;
                m.serialize_entry("mimeType", mime_type)?;
                (annotations, meta)
            }
            Content::Audio { data, mime_type, annotations, meta } => {
                m.serialize_entry("type", "audio")?;
                m.serialize_entry("data", data)?;
                m.serialize_entry("mimeType", mime_type)?;
                (annotations, meta)
            }
            Content::Resource { resource, annotations, meta } => {
                m.serialize_entry("type", "resource")?;
                m.serialize_entry("resource", &VersionedResource(resource, v))?;
                (annotations, meta)
            }
            Content::ResourceLink { link, .. } if !v.has_structured_output() => {
                // 2025-03-26 has no resource_link block: say the same thing in text. The
                // link's annotations and `_meta` describe a resource, not this text, so they
                // are not carried over.
                let mut text =
                    format!("Resource: {} ({})", link.title.as_ref().unwrap_or(&link.name), link.uri);
                if let Some(d) = &link.description {
                    text.push_str(": ");
                    text.push_str(d);
                }
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", &text)?;
                return m.end();
            }
            Content::ResourceLink { link, annotations, meta } => {
                m.serialize_entry("type", "resource_link")?;
                m.serialize_entry("uri", &link.uri)?;
                m.serialize_entry("name", &link.name)?;
                if let Some(t) = &link.title {
                    m.serialize_entry("title", t)?;
                }
                if let Some(d) = &link.description {
                    m.serialize_entry("description", d)?;
                }
                if let Some(t) = &link.mime_type {
                    m.serialize_entry("mimeType", t)?;
                }
                if let Some(n) = link.size {
                    m.serialize_entry("size", &n)?;
                }
                if v.has_icons() {
                    if let Some(i) = &link.icons {
                        m.serialize_entry("icons", i)?;
                    }
                }
                merged_link = (merged(&link.annotations, annotations), merged(&link.meta, meta));
                (&merged_link.0, &merged_link.1)
            }
        };
        if let Some(a) = annotations_for(ann, v) {
            m.serialize_entry("annotations", &a)?;
        }
        if v.has_structured_output() {
            if let Some(meta) = meta {
                m.serialize_entry("_meta", meta)?;
            }
        }
        m.end()
    }
}

struct VersionedResource<'a>(&'a ResourceContents, ProtocolVersion);

impl Serialize for VersionedResource<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        self.0.write(&mut m, self.1)?;
        m.end()
    }
}

/// What a tool handler produces: a `CallToolResult`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// The content blocks, in order.
    pub content: Vec<Content>,
    /// `structuredContent`; checked against the tool's `outputSchema` when it declares one.
    pub structured: Option<Value>,
    /// Whether this is a tool-level failure the model should see.
    pub is_error: bool,
    /// `_meta` on the result.
    pub meta: Option<Map<String, Value>>,
}

impl ToolOutput {
    /// One text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![Content::text(text)], ..Self::default() }
    }

    /// The given blocks.
    pub fn content(content: Vec<Content>) -> Self {
        Self { content, ..Self::default() }
    }

    /// A failure the model sees: one text block and `isError: true`.
    pub fn error(text: impl Into<String>) -> Self {
        Self { content: vec![Content::text(text)], is_error: true, ..Self::default() }
    }

    /// Structured output. The engine adds the JSON text copy older clients read, unless the
    /// content already has blocks.
    pub fn structured(value: Value) -> Self {
        Self { structured: Some(value), ..Self::default() }
    }
}

/// A tool's typed failure: what went wrong, in a form a program can act on. A tool handler
/// returns it (as [`HandlerError::Failure`]) when the call reached the tool and the tool could
/// not do what was asked: a missing record, a refused operation, an upstream outage.
///
/// How it goes on the wire depends on the server, not on the handler (see
/// [`Config::envelopes`](crate::engine::Config::envelopes)): without envelopes it is today's tool error,
/// `isError: true` and the message as text; with them it also carries
/// `structuredContent: {"failure": {"code", "message", "retryable", "diagnostics"?}}`. Either
/// way the call is answered with a result, not a JSON-RPC error, so the model sees it.
///
/// Only `code`, `message`, `retryable`, `diagnostics` and `content` are ever serialised; a
/// [`cause`](Self::with_cause) stays on the server (the server layer logs it, as it logs a
/// [`HandlerError::Private`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct ToolFailure {
    /// A short, stable, machine-readable code (`not_found`, `quota_exceeded`): what a program
    /// branches on. The message may change between releases; the code should not.
    pub code: String,
    /// What went wrong, for the model and the user.
    pub message: String,
    /// Whether the same call may succeed if made again later. Default `false`.
    pub retryable: bool,
    /// Machine-readable details (which field, which limit). Validated against the tool's
    /// [`failure_diagnostics_schema`](crate::tool::Tool::failure_diagnostics_schema) when it declares
    /// one; sent only with envelopes. Default `None`.
    pub diagnostics: Option<Value>,
    /// Content blocks to send before the failure's own text (a partial result, a link to a
    /// log). Default none.
    pub content: Vec<Content>,
    cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ToolFailure {
    /// A failure that is not retryable, without diagnostics, content or cause.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            retryable: false,
            diagnostics: None,
            content: Vec::new(),
            cause: None,
        }
    }

    /// Marks the failure retryable (or not).
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Attaches machine-readable details.
    pub fn with_diagnostics(mut self, diagnostics: Value) -> Self {
        self.diagnostics = Some(diagnostics);
        self
    }

    /// Attaches content blocks, sent before the failure's text.
    pub fn with_content(mut self, content: Vec<Content>) -> Self {
        self.content = content;
        self
    }

    /// Attaches the private cause: logged by the server layer, never serialised.
    pub fn with_cause(mut self, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        self.cause = Some(cause.into());
        self
    }

    /// The private cause, if any.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

/// Why a handler did not produce a result.
#[derive(Debug)]
#[non_exhaustive]
pub enum HandlerError {
    /// An error meant for the client: its code, message and data go on the wire as they are,
    /// and its [`blame`](RpcError::blame) sets the HTTP status: 200 for [`RpcError::new`] (the
    /// application's error), 400 on 2026-07-28 for [`RpcError::invalid_params`] (the client's).
    Public(RpcError),
    /// A private failure: logged by the shim, answered with the generic internal error. Its text
    /// never crosses the transport.
    Private(Box<dyn std::error::Error + Send + Sync>),
    /// The handler panicked; answered with the generic internal error.
    Panicked,
    /// The handler was cancelled (its future was dropped) before it finished.
    Cancelled,
    /// A tool's typed failure: answered with a tool result (`isError: true`), encoded as the
    /// server's configuration says (see [`ToolFailure`]). From a resource, prompt or completion
    /// handler, which have no results of that kind, it becomes a JSON-RPC error `-32603` with
    /// the message and `data: {"code", "retryable"}` (diagnostics and content are dropped).
    /// Boxed, so that every handler's `Result` stays small.
    Failure(Box<ToolFailure>),
}

impl From<ToolFailure> for HandlerError {
    fn from(f: ToolFailure) -> Self {
        HandlerError::Failure(Box::new(f))
    }
}

impl HandlerError {
    /// A private failure from any error value.
    pub fn private(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        HandlerError::Private(e.into())
    }
}

impl From<RpcError> for HandlerError {
    fn from(e: RpcError) -> Self {
        HandlerError::Public(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(c: &Content, v: ProtocolVersion) -> String {
        serde_json::to_string(&c.for_version(v)).unwrap()
    }

    #[test]
    fn resource_link_down_levels_to_text() {
        let link = Content::resource_link(ResourceLink::new("test://x", "x"));
        assert_eq!(
            json(&link, ProtocolVersion::V2025_03_26),
            r#"{"type":"text","text":"Resource: x (test://x)"}"#
        );
        assert_eq!(
            json(&link, ProtocolVersion::V2025_06_18),
            r#"{"type":"resource_link","uri":"test://x","name":"x"}"#
        );
    }

    #[test]
    fn last_modified_is_dropped_for_old_peers() {
        let mut a = Map::new();
        a.insert("priority".into(), Value::from(1));
        a.insert("lastModified".into(), Value::from("2025-01-01T00:00:00Z"));
        let c = Content::text("t").with_annotations(a);
        assert_eq!(
            json(&c, ProtocolVersion::V2025_03_26),
            r#"{"type":"text","text":"t","annotations":{"priority":1}}"#
        );
        assert!(json(&c, ProtocolVersion::V2025_11_25).contains("lastModified"));
    }

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn every_block_carries_meta_from_2025_06_18() {
        let meta = map(serde_json::json!({"k": 1}));
        let blocks = [
            Content::text("t"),
            Content::image("aGk=", "image/png"),
            Content::audio("aGk=", "audio/wav"),
            Content::resource(ResourceContents::text("test://r", "text/plain", "r")),
            Content::resource_link(ResourceLink::new("test://l", "l")),
        ];
        for b in blocks {
            let b = b.with_meta(meta.clone());
            assert!(json(&b, ProtocolVersion::V2025_06_18).ends_with(r#","_meta":{"k":1}}"#), "{b:?}");
            // 2025-03-26's schema has no `_meta` on content.
            assert!(!json(&b, ProtocolVersion::V2025_03_26).contains("_meta"), "{b:?}");
        }
    }

    #[test]
    fn embedded_resource_keeps_its_meta_apart_from_the_block() {
        let mut r = ResourceContents::text("test://r", "text/plain", "r");
        r.meta = Some(map(serde_json::json!({"of": "resource"})));
        let c = Content::resource(r).with_meta(map(serde_json::json!({"of": "block"})));
        assert_eq!(
            json(&c, ProtocolVersion::V2025_11_25),
            concat!(
                r#"{"type":"resource","resource":{"uri":"test://r","mimeType":"text/plain","text":"r","#,
                r#""_meta":{"of":"resource"}},"_meta":{"of":"block"}}"#
            )
        );
    }

    // Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
    #[cfg(feature = "exact-json")]
    #[test]
    fn link_block_fields_override_the_reference() {
        let mut link = ResourceLink::new("test://l", "l");
        link.annotations = Some(map(serde_json::json!({"priority": 0.2, "audience": ["user"]})));
        link.meta = Some(map(serde_json::json!({"a": 1, "b": 1})));
        link.icons = Some(serde_json::json!([{"src": "https://example.com/i.png"}]));
        let c = Content::resource_link(link)
            .with_annotations(map(serde_json::json!({"priority": 0.9})))
            .with_meta(map(serde_json::json!({"b": 2})));
        assert_eq!(
            json(&c, ProtocolVersion::V2025_11_25),
            concat!(
                r#"{"type":"resource_link","uri":"test://l","name":"l","#,
                r#""icons":[{"src":"https://example.com/i.png"}],"#,
                r#""annotations":{"priority":0.9,"audience":["user"]},"_meta":{"a":1,"b":2}}"#
            )
        );
        // 2025-06-18 has annotations and `_meta` on a link, but no icons.
        let old = json(&c, ProtocolVersion::V2025_06_18);
        assert!(!old.contains("icons") && old.contains(r#""priority":0.9"#) && old.contains("_meta"));
    }
}

/// Who speaks a prompt message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

/// One message of a `prompts/get` result.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    /// Who speaks it.
    pub role: Role,
    /// What is said.
    pub content: Content,
}

impl PromptMessage {
    /// A user message.
    pub fn user(content: Content) -> Self {
        Self { role: Role::User, content }
    }

    /// An assistant message.
    pub fn assistant(content: Content) -> Self {
        Self { role: Role::Assistant, content }
    }
}

/// What a prompt handler produces: a `GetPromptResult`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptOutput {
    /// An optional description of this rendering.
    pub description: Option<String>,
    /// The messages.
    pub messages: Vec<PromptMessage>,
}

impl PromptOutput {
    /// The given messages, without a description.
    pub fn messages(messages: Vec<PromptMessage>) -> Self {
        Self { description: None, messages }
    }
}

pub(crate) struct PromptOutputWire<'a>(pub(crate) &'a PromptOutput, pub(crate) ProtocolVersion);

impl Serialize for PromptOutputWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Msg<'a>(&'a PromptMessage, ProtocolVersion);
        impl Serialize for Msg<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("role", if self.0.role == Role::User { "user" } else { "assistant" })?;
                m.serialize_entry("content", &self.0.content.for_version(self.1))?;
                m.end()
            }
        }
        let mut m = s.serialize_map(None)?;
        if let Some(d) = &self.0.description {
            m.serialize_entry("description", d)?;
        }
        let msgs: Vec<Msg<'_>> = self.0.messages.iter().map(|x| Msg(x, self.1)).collect();
        m.serialize_entry("messages", &msgs)?;
        m.end()
    }
}

pub(crate) struct ContentsWire<'a>(pub(crate) &'a [ResourceContents], pub(crate) ProtocolVersion);

impl Serialize for ContentsWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| VersionedResource(c, self.1)))
    }
}

/// What a completion handler produces; at most 100 values reach the client.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    /// Suggested values, best first.
    pub values: Vec<String>,
    /// How many values exist in all, when known.
    pub total: Option<u64>,
    /// Whether more values exist than were returned.
    pub has_more: bool,
}

impl Completion {
    /// These values (more than 100 are cut, and `has_more` set).
    pub fn values(values: Vec<String>) -> Self {
        Self { values, total: None, has_more: false }
    }
}

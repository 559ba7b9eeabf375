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

/// A `ResourceLink` block's fields.
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
    },
    /// A base64 image.
    Image {
        /// Base64 data.
        data: String,
        /// Media type, e.g. `image/png`.
        mime_type: String,
        /// Optional annotations.
        annotations: Option<Map<String, Value>>,
    },
    /// Base64 audio (2025-03-26 and later).
    Audio {
        /// Base64 data.
        data: String,
        /// Media type, e.g. `audio/wav`.
        mime_type: String,
        /// Optional annotations.
        annotations: Option<Map<String, Value>>,
    },
    /// An embedded resource.
    Resource {
        /// The resource's contents.
        resource: ResourceContents,
        /// Optional annotations.
        annotations: Option<Map<String, Value>>,
    },
    /// A link to a resource (2025-06-18 and later; written as text for older peers).
    ResourceLink(ResourceLink),
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into(), annotations: None }
    }

    /// An image block from base64 data.
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Image { data: base64.into(), mime_type: mime_type.into(), annotations: None }
    }

    /// An audio block from base64 data.
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Audio { data: base64.into(), mime_type: mime_type.into(), annotations: None }
    }

    /// An embedded resource block.
    pub fn resource(resource: ResourceContents) -> Self {
        Content::Resource { resource, annotations: None }
    }

    /// Writes this block as `version` knows it.
    pub(crate) fn for_version(&self, version: ProtocolVersion) -> VersionedContent<'_> {
        VersionedContent(self, version)
    }
}

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

impl Serialize for VersionedContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.1;
        let mut m = s.serialize_map(None)?;
        let ann = match self.0 {
            Content::Text { text, annotations } => {
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", text)?;
                annotations
            }
            Content::Image { data, mime_type, annotations } => {
                m.serialize_entry("type", "image")?;
                m.serialize_entry("data", data)?;
                m.serialize_entry("mimeType", mime_type)?;
                annotations
            }
            Content::Audio { data, mime_type, annotations } => {
                m.serialize_entry("type", "audio")?;
                m.serialize_entry("data", data)?;
                m.serialize_entry("mimeType", mime_type)?;
                annotations
            }
            Content::Resource { resource, annotations } => {
                m.serialize_entry("type", "resource")?;
                m.serialize_entry("resource", &VersionedResource(resource, v))?;
                annotations
            }
            Content::ResourceLink(link) if !v.has_structured_output() => {
                // 2025-03-26 has no resource_link block: say the same thing in text.
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
            Content::ResourceLink(link) => {
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
                return m.end();
            }
        };
        if let Some(a) = annotations_for(ann, v) {
            m.serialize_entry("annotations", &a)?;
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
        let link = Content::ResourceLink(ResourceLink {
            uri: "test://x".into(),
            name: "x".into(),
            ..Default::default()
        });
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
        let c = Content::Text { text: "t".into(), annotations: Some(a) };
        assert_eq!(
            json(&c, ProtocolVersion::V2025_03_26),
            r#"{"type":"text","text":"t","annotations":{"priority":1}}"#
        );
        assert!(json(&c, ProtocolVersion::V2025_11_25).contains("lastModified"));
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

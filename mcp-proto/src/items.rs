//! Resources, resource templates and prompts: their declarations and how each version lists them.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::caller::Gate;
use crate::content::annotations_for;
use crate::registry_error::RegistryError;
use crate::version::ProtocolVersion;

/// What every listed item (tool, resource, template, prompt) carries beside its key and its own
/// fields: the display fields, `_meta` and the gate. One struct, so that what every item gains is
/// added, set and listed in one place.
#[derive(Debug, Clone, Default)]
pub(crate) struct Described {
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) icons: Option<Value>,
    pub(crate) meta: Option<Map<String, Value>>,
    pub(crate) gate: Option<Gate>,
    /// The scopes using the item needs (see `builder_fields!`'s `scopes`).
    pub(crate) scopes: Vec<String>,
}

impl Described {
    /// Nothing described yet but the description.
    pub(crate) fn with_description(description: Option<String>) -> Self {
        Self { description, ..Self::default() }
    }

    /// Inserts `title`, `_meta` and `icons`, filtered by what `v` knows.
    pub(crate) fn list(&self, m: &mut Map<String, Value>, v: ProtocolVersion) {
        if v.has_structured_output() {
            if let Some(t) = &self.title {
                m.insert("title".into(), t.clone().into());
            }
            if let Some(meta) = &self.meta {
                m.insert("_meta".into(), Value::Object(meta.clone()));
            }
        }
        if v.has_icons() {
            if let Some(i) = &self.icons {
                m.insert("icons".into(), i.clone());
            }
        }
    }
}

/// Inserts what a resource and a template both describe their contents with, in wire order
/// (`description`, `mimeType`, a resource's `size`, `annotations`).
fn described(
    m: &mut Map<String, Value>,
    v: ProtocolVersion,
    description: &Option<String>,
    mime_type: &Option<String>,
    size: Option<u64>,
    annotations: &Option<Map<String, Value>>,
) {
    if let Some(d) = description {
        m.insert("description".into(), d.clone().into());
    }
    if let Some(t) = mime_type {
        m.insert("mimeType".into(), t.clone().into());
    }
    if let Some(s) = size {
        m.insert("size".into(), s.into());
    }
    if let Some(a) = annotations_for(annotations, v) {
        m.insert("annotations".into(), Value::Object(a));
    }
}

/// How a 2026-07-28 client may cache a `resources/read` or `server/discover` result: the
/// result's `ttlMs` and `cacheScope` (SEP-2549).
///
/// The default is private with a TTL of 0: a handler may personalise what it answers (by
/// caller, by time), so nothing is shared across users or reused without asking, unless the
/// application says so. [`CacheHint::shared`] marks a result that is the same for everyone
/// (`cacheScope: "public"`, which shared gateways and proxies may serve to other users). The
/// engine never widens a hint: a result a gate shaped (the item's, the server's, or another
/// item's that could answer the same URI) is sent private whatever its hint says, and a
/// result of a retried request (one that carried `requestState` or `inputResponses`, whose
/// answer depends on what the user answered) is sent private with TTL 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheHint {
    shared: bool,
    ttl: Duration,
}

impl CacheHint {
    /// Private, TTL 0: the default. Every read asks the server again.
    pub const fn private() -> Self {
        Self { shared: false, ttl: Duration::ZERO }
    }

    /// Private, and reusable by the same authorization context for `ttl`.
    pub const fn private_for(ttl: Duration) -> Self {
        Self { shared: false, ttl }
    }

    /// The same for every caller (`cacheScope: "public"`), reusable by anyone for `ttl`.
    pub const fn shared(ttl: Duration) -> Self {
        Self { shared: true, ttl }
    }

    /// Whether the result may be shared across users (`"public"`).
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// How long the result may be reused (`ttlMs`, sent in whole milliseconds, saturating).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// This hint as sent: private when `shaped` (a gate or the user's answers made the result
    /// depend on who asked), the TTL unchanged.
    pub(crate) fn narrowed(self, shaped: bool) -> Self {
        Self { shared: self.shared && !shaped, ..self }
    }
}

macro_rules! builder_fields {
    () => {
        /// A display title (2025-06-18 and later).
        pub fn title(mut self, title: impl Into<String>) -> Self {
            self.info.title = Some(title.into());
            self
        }

        /// A description.
        pub fn description(mut self, description: impl Into<String>) -> Self {
            self.info.description = Some(description.into());
            self
        }

        /// `icons` (2025-11-25 and later).
        pub fn icons(mut self, icons: Value) -> Self {
            self.info.icons = Some(icons);
            self
        }

        /// `_meta`, served verbatim (2025-06-18 and later).
        pub fn meta(mut self, meta: Map<String, Value>) -> Self {
            self.info.meta = Some(meta);
            self
        }

        /// Hides the item from callers the gate refuses and refuses their access, with the same
        /// error an unknown item gets.
        pub fn gate(mut self, gate: $crate::caller::Gate) -> Self {
            self.info.gate = Some(gate);
            self
        }

        /// The gate set with [`gate`](Self::gate), if any.
        pub fn declared_gate(&self) -> Option<&$crate::caller::Gate> {
            self.info.gate.as_ref()
        }

        /// The OAuth scopes using the item needs, each a role of the caller (an access token's
        /// scopes become the roles of its [`Caller`](crate::Caller)). Default none. A caller the
        /// gate admits sees the item listed; calling, reading or getting it without every one
        /// of these scopes is refused with [`Blame::Scope`](crate::Blame::Scope): over HTTP a
        /// `403` whose `insufficient_scope` challenge names every scope to ask for (these and
        /// those the caller holds), so that the client obtains a token with them and retries.
        /// To hide the item from such callers instead, gate it with [`Gate::role`](crate::Gate::role).
        pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
            self.info.scopes = scopes.into_iter().map(Into::into).collect();
            self
        }
    };
}
pub(crate) use builder_fields;

/// The setters a resource and a template share beyond [`builder_fields!`]; `$mime_doc` is the
/// media type setter's doc, which says whose type it is.
macro_rules! content_fields {
    ($mime_doc:literal) => {
        #[doc = $mime_doc]
        pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
            self.mime_type = Some(mime_type.into());
            self
        }

        /// How 2026-07-28 clients may cache what a read of this answers. Default
        /// [`CacheHint::private`] (private, TTL 0): mark only what is the same for every caller
        /// as [`CacheHint::shared`]. See [`CacheHint`] for when the engine sends it narrower.
        pub fn cache(mut self, hint: CacheHint) -> Self {
            self.cache = hint;
            self
        }
    };
}

/// A concrete resource, read by exact URI.
#[derive(Debug, Clone)]
pub struct Resource {
    pub(crate) uri: String,
    pub(crate) name: String,
    pub(crate) info: Described,
    pub(crate) mime_type: Option<String>,
    pub(crate) size: Option<u64>,
    pub(crate) annotations: Option<Map<String, Value>>,
    pub(crate) cache: CacheHint,
}

impl Resource {
    /// A resource with its URI and name.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            info: Described::default(),
            mime_type: None,
            size: None,
            annotations: None,
            cache: CacheHint::private(),
        }
    }

    builder_fields!();
    content_fields!("The media type.");

    /// The size in bytes, when known.
    pub fn size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }

    /// `annotations` (audience, priority, lastModified).
    pub fn annotations(mut self, annotations: Map<String, Value>) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// The URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub(crate) fn listing(&self, v: ProtocolVersion) -> String {
        let mut m = Map::new();
        m.insert("uri".into(), self.uri.clone().into());
        m.insert("name".into(), self.name.clone().into());
        described(&mut m, v, &self.info.description, &self.mime_type, self.size, &self.annotations);
        self.info.list(&mut m, v);
        Value::Object(m).to_string()
    }
}

/// One piece of a parsed URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// `{name}`: one path segment (no `/`, `?` or `#`).
    Simple(String),
    /// `{+name}`: anything, slashes included.
    Reserved(String),
}

/// An RFC 6570 template, reduced to the forms that can be matched without ambiguity:
/// literals, `{var}` and `{+var}`, with a literal between any two variables.
#[derive(Debug, Clone)]
pub(crate) struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    pub(crate) fn parse(t: &str) -> Result<Self, RegistryError> {
        let bad = |why: &str| RegistryError::InvalidTemplate(format!("{t:?}: {why}"));
        let mut parts = Vec::new();
        let mut rest = t;
        while !rest.is_empty() {
            match rest.find('{') {
                Some(0) => {
                    let end = rest.find('}').ok_or_else(|| bad("unclosed '{'"))?;
                    let expr = rest.get(1..end).unwrap_or_default();
                    rest = rest.get(end + 1..).unwrap_or_default();
                    let (reserved, name) = match expr.strip_prefix('+') {
                        Some(n) => (true, n),
                        None => (false, expr),
                    };
                    if name.is_empty()
                        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
                    {
                        return Err(bad("only {name} and {+name} expressions are supported"));
                    }
                    if matches!(parts.last(), Some(Part::Simple(_) | Part::Reserved(_))) {
                        return Err(bad("two variables need a literal between them"));
                    }
                    let name = name.to_owned();
                    parts.push(if reserved { Part::Reserved(name) } else { Part::Simple(name) });
                }
                Some(i) => {
                    parts.push(Part::Literal(rest.get(..i).unwrap_or_default().to_owned()));
                    rest = rest.get(i..).unwrap_or_default();
                }
                None => {
                    parts.push(Part::Literal(rest.to_owned()));
                    rest = "";
                }
            }
        }
        if rest.contains('}') || parts.iter().any(|p| matches!(p, Part::Literal(l) if l.contains('}'))) {
            return Err(bad("unmatched '}'"));
        }
        Ok(Self { parts })
    }

    /// Matches `uri`, returning the variables in template order, each percent-decoded (RFC 6570
    /// §3.2.1 encodes what an expansion cannot carry literally, so matching decodes it back, as
    /// the official Python SDK's matcher does). A URI whose variable is not well-formed
    /// percent-encoded UTF-8 does not match: see [`UriTemplate::undecodable`] for why.
    pub(crate) fn matches(&self, uri: &str) -> Option<Vec<TemplateVar>> {
        self.matches_raw(uri)?
            .into_iter()
            .map(|(name, raw)| Some(TemplateVar { value: percent_decoded(&raw).ok()?, name, raw }))
            .collect()
    }

    /// The first variable of a raw match of `uri` that does not decode, and why: what turns a
    /// "not found" into the specific refusal it deserves.
    pub(crate) fn undecodable(&self, uri: &str) -> Option<(String, &'static str)> {
        self.matches_raw(uri)?
            .into_iter()
            .find_map(|(name, raw)| percent_decoded(&raw).err().map(|why| (name, why)))
    }

    /// Matches `uri`, returning the variables in template order as they appear in it. Each
    /// variable takes the shortest run that lets the next literal follow, so matching is one
    /// left-to-right pass: linear in the URI, whatever the input.
    fn matches_raw(&self, uri: &str) -> Option<Vec<(String, String)>> {
        let mut vars = Vec::new();
        let mut rest = uri;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(l) => rest = rest.strip_prefix(l.as_str())?,
                Part::Simple(name) | Part::Reserved(name) => {
                    let take = match parts.peek() {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = rest.get(..take)?;
                    let simple = matches!(part, Part::Simple(_));
                    if value.is_empty() || (simple && value.contains(['/', '?', '#'])) {
                        return None;
                    }
                    vars.push((name.clone(), value.to_owned()));
                    rest = rest.get(take..)?;
                }
            }
        }
        rest.is_empty().then_some(vars)
    }
}

/// One variable of a URI matched by a resource template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateVar {
    /// The variable's name, as the template spells it.
    pub name: String,
    /// Its value, percent-decoded (`a%20b` is `a b`, `%2F` is `/`).
    pub value: String,
    /// Its value exactly as it appears in the URI, for a handler that must tell an encoded
    /// `%2F` from a literal `/` in a `{+path}`.
    pub raw: String,
}

/// Percent-decodes one matched variable. Strict where lenient decoders are not: a `%` that
/// does not start two hex digits is not a URI (RFC 3986 §2.1), and bytes that are not UTF-8
/// are not text a handler can be given as a `String`; either refuses, rather than passing on
/// a value that silently differs from what the client sent.
fn percent_decoded(raw: &str) -> Result<String, &'static str> {
    if !raw.contains('%') {
        return Ok(raw.to_owned());
    }
    let hex = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    let mut bytes = Vec::with_capacity(raw.len());
    let mut it = raw.bytes();
    while let Some(b) = it.next() {
        if b != b'%' {
            bytes.push(b);
            continue;
        }
        match (it.next().and_then(hex), it.next().and_then(hex)) {
            // Two hex digits are at most 0xFF: no overflow.
            (Some(hi), Some(lo)) => bytes.push(hi * 16 + lo),
            _ => return Err("has a '%' that does not start two hex digits"),
        }
    }
    String::from_utf8(bytes).map_err(|_| "does not percent-decode to UTF-8")
}

/// A URI template whose matching URIs are read through one handler.
#[derive(Debug, Clone)]
pub struct ResourceTemplate {
    pub(crate) uri_template: String,
    pub(crate) name: String,
    pub(crate) info: Described,
    pub(crate) mime_type: Option<String>,
    pub(crate) annotations: Option<Map<String, Value>>,
    pub(crate) cache: CacheHint,
}

impl ResourceTemplate {
    /// A template (`{name}` matches one path segment, `{+name}` anything) and its name.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri_template: uri_template.into(),
            name: name.into(),
            info: Described::default(),
            mime_type: None,
            annotations: None,
            cache: CacheHint::private(),
        }
    }

    builder_fields!();
    content_fields!("The media type of matching resources.");

    /// The template text.
    pub fn uri_template(&self) -> &str {
        &self.uri_template
    }

    pub(crate) fn listing(&self, v: ProtocolVersion) -> String {
        let mut m = Map::new();
        m.insert("uriTemplate".into(), self.uri_template.clone().into());
        m.insert("name".into(), self.name.clone().into());
        described(&mut m, v, &self.info.description, &self.mime_type, None, &self.annotations);
        self.info.list(&mut m, v);
        Value::Object(m).to_string()
    }
}

/// An argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// A display title (2025-06-18 and later).
    pub title: Option<String>,
    /// A description.
    pub description: Option<String>,
    /// Whether `prompts/get` must supply it.
    pub required: bool,
}

impl PromptArgument {
    /// An optional argument.
    pub fn optional(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self { name: name.into(), title: None, description: Some(description.into()), required: false }
    }

    /// A required argument.
    pub fn required(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self { required: true, ..Self::optional(name, description) }
    }
}

/// A prompt template.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub(crate) name: String,
    pub(crate) info: Described,
    pub(crate) arguments: Vec<PromptArgument>,
}

impl Prompt {
    /// A prompt with its name.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), info: Described::default(), arguments: Vec::new() }
    }

    builder_fields!();

    /// Adds an argument.
    pub fn argument(mut self, argument: PromptArgument) -> Self {
        self.arguments.push(argument);
        self
    }

    /// The prompt's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn listing(&self, v: ProtocolVersion) -> String {
        let mut m = Map::new();
        m.insert("name".into(), self.name.clone().into());
        if let Some(d) = &self.info.description {
            m.insert("description".into(), d.clone().into());
        }
        if !self.arguments.is_empty() {
            let args: Vec<Value> = self
                .arguments
                .iter()
                .map(|a| {
                    let mut o = Map::new();
                    o.insert("name".into(), a.name.clone().into());
                    if v.has_structured_output() {
                        if let Some(t) = &a.title {
                            o.insert("title".into(), t.clone().into());
                        }
                    }
                    if let Some(d) = &a.description {
                        o.insert("description".into(), d.clone().into());
                    }
                    if a.required {
                        o.insert("required".into(), true.into());
                    }
                    Value::Object(o)
                })
                .collect();
            m.insert("arguments".into(), args.into());
        }
        self.info.list(&mut m, v);
        Value::Object(m).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(t: &str, uri: &str) -> Option<Vec<(String, String)>> {
        let vars = UriTemplate::parse(t).unwrap().matches(uri)?;
        Some(vars.into_iter().map(|v| (v.name, v.value)).collect())
    }

    #[test]
    fn variables_are_percent_decoded_and_keep_their_raw_form() {
        let t = UriTemplate::parse("x://{a}/{+b}").unwrap();
        let got = t.matches("x://hello%20w%C3%B6rld/p%2Fq/r").unwrap();
        let pairs: Vec<_> = got.iter().map(|v| (v.name.as_str(), v.value.as_str(), v.raw.as_str())).collect();
        assert_eq!(pairs, [("a", "hello wörld", "hello%20w%C3%B6rld"), ("b", "p/q/r", "p%2Fq/r")]);
        // An encoded "/" is inside one segment: {a} still matches it.
        assert_eq!(vars("x://{a}", "x://a%2Fb"), Some(vec![("a".into(), "a/b".into())]));
        for (uri, why) in
            [("x://a%2", "two hex"), ("x://a%zz", "two hex"), ("x://%FF", "UTF-8"), ("x://%C3", "UTF-8")]
        {
            let t = UriTemplate::parse("x://{a}").unwrap();
            assert!(t.matches(uri).is_none(), "{uri}");
            let (name, got) = t.undecodable(uri).unwrap();
            assert!(name == "a" && got.contains(why), "{uri}: {got}");
        }
        assert_eq!(UriTemplate::parse("x://{a}").unwrap().undecodable("x://ok"), None);
    }

    #[test]
    fn templates() {
        assert_eq!(
            vars("test://template/{id}/data", "test://template/123/data"),
            Some(vec![("id".into(), "123".into())])
        );
        assert_eq!(vars("test://template/{id}/data", "test://template/1/2/data"), None);
        assert_eq!(vars("test://template/{id}/data", "test://template//data"), None);
        assert_eq!(vars("file:///{+path}", "file:///a/b/c"), Some(vec![("path".into(), "a/b/c".into())]));
        assert_eq!(
            vars("x://{a}-{b}", "x://1-2-3"),
            Some(vec![("a".into(), "1".into()), ("b".into(), "2-3".into())])
        );
        assert!(UriTemplate::parse("x://{a}{b}").is_err());
        assert!(UriTemplate::parse("x://{?q}").is_err());
        assert!(UriTemplate::parse("x://{a").is_err());
        assert!(UriTemplate::parse("x://a}").is_err());
    }

    #[test]
    fn hostile_uris_match_in_linear_time() {
        let t = UriTemplate::parse("x://{a}-{b}-{c}-end").unwrap();
        let uri = format!("x://{}", "-".repeat(100_000));
        assert_eq!(t.matches_raw(&uri), None);
    }
}

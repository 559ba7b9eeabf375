//! What an engine is built from: the server's identity, its limits, keys and seed.
//!
//! Every tunable bound and timeout lives in [`Limits`]; `Config` holds what is not a bound.

use serde_json::{Map, Value};

use crate::cursor::KeyRing;
use crate::items::CacheHint;
use crate::limits::Limits;
use crate::version::ProtocolVersion;

/// The largest encoded [`Implementation`], in bytes: 4 KiB (seed 000's bound). Measured as the
/// JSON of its 2026-07-28 form, every field included, which is the largest any version sends.
/// Every 2026-07-28 result carries it (`_meta` `io.modelcontextprotocol/serverInfo`), so it
/// is bounded to leave the rest of [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes)
/// to the results themselves. A larger identity is refused by [`Implementation::check`], which
/// the server layer's build runs: the server does not start.
pub const MAX_IDENTITY_BYTES: usize = 4 * 1024;

/// Why [`Implementation::check`] refused an identity: it encodes to `size` bytes, over `limit`
/// ([`MAX_IDENTITY_BYTES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityTooLarge {
    /// The encoded size of the identity, in bytes.
    pub size: usize,
    /// The bound it crossed, in bytes.
    pub limit: usize,
}

impl std::fmt::Display for IdentityTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server's identity (serverInfo) encodes to {} bytes, over the {}-byte bound",
            self.size, self.limit
        )
    }
}

impl std::error::Error for IdentityTooLarge {}

/// `Implementation`: the server's name and version as peers see them. Its encoding is bounded
/// by [`MAX_IDENTITY_BYTES`] ([`check`](Self::check)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Display title (sent to 2025-06-18 and later peers).
    pub title: Option<String>,
    /// Description (sent to 2025-11-25 and later peers).
    pub description: Option<String>,
    /// Website (sent to 2025-11-25 and later peers).
    pub website_url: Option<String>,
}

impl Implementation {
    /// Name and version only.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self { name: name.into(), version: version.into(), title: None, description: None, website_url: None }
    }

    /// Refuses an identity whose encoding is over [`MAX_IDENTITY_BYTES`], naming its size.
    pub fn check(&self) -> Result<(), IdentityTooLarge> {
        let size = self.to_json(ProtocolVersion::V2026_07_28).to_string().len();
        if size > MAX_IDENTITY_BYTES {
            return Err(IdentityTooLarge { size, limit: MAX_IDENTITY_BYTES });
        }
        Ok(())
    }

    pub(in crate::engine) fn to_json(&self, v: ProtocolVersion) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), self.name.clone().into());
        m.insert("version".into(), self.version.clone().into());
        if v.implementation_has_title() {
            if let Some(t) = &self.title {
                m.insert("title".into(), t.clone().into());
            }
        }
        if v.implementation_has_description() {
            if let Some(d) = &self.description {
                m.insert("description".into(), d.clone().into());
            }
            if let Some(w) = &self.website_url {
                m.insert("websiteUrl".into(), w.clone().into());
            }
        }
        Value::Object(m)
    }
}

/// Everything an [`Engine`](crate::engine::Engine) is built from.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's `Implementation`. At most [`MAX_IDENTITY_BYTES`] encoded: the engine
    /// takes what it is given, so whoever builds the configuration runs
    /// [`Implementation::check`] (the server layer's build does).
    pub server_info: Implementation,
    /// `instructions` for the model, sent in `initialize` and `server/discover` results.
    pub instructions: Option<String>,
    /// Every bound and timeout, of the engine and of the layers that drive it.
    pub limits: Limits,
    /// Keys that sign cursors (and, later, request state). Shims draw a random one by default.
    pub keys: KeyRing,
    /// The wall-clock time, in unix milliseconds, at the `now` the engine was made with. Sealed
    /// 2026-07-28 request states carry an expiry in wall-clock time so that replicas sharing the
    /// key ring agree on it; the engine itself never reads a clock. Default 0 (expiries then
    /// count from the engine's start, which only this engine understands); the server layer
    /// sets it from the system clock.
    pub unix_ms_at_start: u64,
    /// The engine's only entropy: legacy HTTP session ids are derived from it (see [`Seed`]).
    /// The shim draws it from the OS's randomness once, at construction (the server layer does
    /// when this is `None`); a fixed seed makes runs reproducible, for tests and fuzzing. Default
    /// `None`: the engine cannot mint session ids, and a legacy HTTP `initialize` is answered
    /// with 500 rather than with a guessable id.
    pub seed: Option<Seed>,
    /// The continuation epoch sealed into every 2026-07-28 `requestState`. A state comes back
    /// valid only while the epoch it was sealed in is still current, so moving the epoch on
    /// invalidates every outstanding state at once; a refused client starts its call again
    /// without one (`-32602` "requestState expired", `data.reason: "epoch"`). Default 0.
    ///
    /// Replicas sharing a [`KeyRing`] must share the epoch too, or each refuses the others'
    /// states: set it from the deployment (a release counter, say) and move it on every replica
    /// together, at run time with [`Engine::set_epoch`](crate::engine::Engine::set_epoch) or
    /// [`Engine::bump_epoch`](crate::engine::Engine::bump_epoch). Cursors carry no epoch: a list page is
    /// no continuation of a call, and a stale cursor only re-reads the list.
    pub state_epoch: u64,
    /// How 2026-07-28 clients may cache the `server/discover` result. Default
    /// [`CacheHint::private`] (private, TTL 0). A [`CacheHint::shared`] hint is sent as such
    /// only while no gate exists (the server's or any item's): the capabilities it lists are
    /// derived from what the caller may see, so any gate makes them the caller's own.
    pub discover_cache: CacheHint,
    /// How 2026-07-28 clients may cache a list result (`tools/list`, `prompts/list`,
    /// `resources/list`, `resources/templates/list`, `skills/list`, and compact mode's lists).
    /// Default [`CacheHint::private`] (private, TTL 0), as reads are: a list is what this
    /// caller may see now, and only the application knows that it is the same for everyone
    /// and for how long. A [`CacheHint::shared`] hint is sent as such only while no gate can
    /// shape the list (the server's or any listed item's); otherwise it goes private with its
    /// TTL kept, since the caller's own view may be reused by that caller.
    pub list_cache: CacheHint,
    /// Whether the server logs to its clients: advertise the `logging` capability, serve
    /// `logging/setLevel`, and send what [`Engine::log`](crate::engine::Engine::log) is given. Default
    /// `false`: no engine can know whether a handler will log, so a server says so. Off,
    /// `logging` is not advertised, `logging/setLevel` is answered `-32601` (method not found,
    /// as for any method of a capability not declared), and `Engine::log` sends nothing.
    pub logging: bool,
    /// Whether the application reports resource changes (calls
    /// [`Engine::notify_resource_updated`](crate::engine::Engine::notify_resource_updated)): advertise
    /// `resources.subscribe`, serve legacy `resources/subscribe` and `resources/unsubscribe`,
    /// and honour `resourceSubscriptions` in a 2026-07-28 listen. Default `false`: a
    /// subscription nobody ever notifies would promise updates that never come. Off (or with no
    /// resource or template registered), those methods are answered `-32601` and a listen's
    /// acknowledgement leaves `resourceSubscriptions` out.
    pub resource_subscriptions: bool,
    /// Whether tool results carry the value/failure envelope. Default `false`: results are
    /// the MCP norm, structured output as the handler gave it and a
    /// [`ToolFailure`](crate::content::ToolFailure) as `isError: true` with its message as text.
    ///
    /// On, every tool's result is encoded for programs as well as models:
    ///
    /// - structured output `v` becomes `structuredContent: {"value": v}` (an explicit `null`
    ///   stays, as `{"value": null}`; no structured output stays none), and the envelope's JSON
    ///   text follows the handler's content blocks, for clients that do not read
    ///   `structuredContent` (2025-03-26 has none: there the text is all it gets). The value is
    ///   still checked against the tool's `outputSchema` as declared.
    /// - a failure sets `isError` and carries `structuredContent: {"failure": {"code",
    ///   "message", "retryable", "diagnostics"?}}`, after the failure's content blocks and
    ///   followed by the envelope's text. Arguments that break the input schema (a result from
    ///   2025-11-25 on) are the failure `invalid_arguments`; a result over
    ///   [`Limits::max_response_bytes`] is `result_too_large`.
    /// - a result the handler built with `isError: true` itself is sent as it is.
    ///
    /// Numbers keep their exact digits in both the envelope and its text. A tool's listed
    /// `outputSchema` becomes its schema wrapped ([`crate::wrap`]) as the union of
    /// `{"value": <schema>}` and the failure envelope, prepared on the tool's first authorized
    /// use and kept; a tool whose schema the wrapper refuses is never listed or run (the page or
    /// call answers `-32603` with `data: {"reason": "unpublishable", "kind", "name"}`).
    pub envelopes: bool,
    /// How tools are published: each as a native tool ([`Mode::Direct`], the default) or behind
    /// three discovery tools ([`Mode::Compact`]). Read once, by [`Engine::new`](crate::engine::Engine::new):
    /// a mode never changes at run time (the engine offers no way to change its configuration's
    /// mode), so a client never sees one tool list turn into the other.
    pub mode: Mode,
    /// The protected resource this server is (its metadata URL and default scopes), when an
    /// OAuth resource server guards its HTTP endpoint: an HTTP refusal for a missing scope
    /// ([`Blame::Scope`](crate::Blame::Scope)) then carries its `insufficient_scope` challenge.
    /// Default `None`: such a refusal is a bare `403`. The server layer sets it with its
    /// authorization.
    pub protected: Option<crate::auth::ProtectedResource>,
}

/// How a server publishes its tools. Chosen at construction ([`Config::mode`]) and fixed for
/// the engine's life.
///
/// The registry belongs to its engine (registries are not shared between servers), so the
/// mode is the server's, not the registry's: two servers built from the same tool declarations
/// may publish them in different modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Mode {
    /// The MCP norm, and the default: every tool the caller may see is a native tool in
    /// `tools/list`, paged by [`Limits::page_size`](crate::limits::Limits::page_size), and called by
    /// its own name. A tool named `search_tools` is an ordinary tool here.
    #[default]
    Direct,
    /// `tools/list` is exactly `search_tools`, `get_tool_details` and `call_tool`, on every
    /// protocol version and for every caller (paged like any list); the registered tools are
    /// found, read and run through them. Results of all three use the value/failure envelope
    /// (see [`Config::envelopes`]) whatever `envelopes` says, and they declare no
    /// `outputSchema`.
    ///
    /// - `search_tools {query: string, limit?: integer}` ranks the tools the caller may see
    ///   (gates and per-version visibility apply as in direct mode) against the query and
    ///   returns `{"value": {"tools": [{name, title?, description?}, ...]}}`, best first: how
    ///   it ranks and what a search may cost is in the `search` module (name tokens weigh 10,
    ///   a name-token prefix 5, title tokens 4, description tokens 1, the whole query being the
    ///   name 100; ties by name; at most 10 000 index entries per search). `limit` is 5 when
    ///   absent and must be 1 to 20: anything else is refused with `-32602`, as a malformed
    ///   request, rather than silently clamped. A query without a word lists the first visible
    ///   tools by name.
    /// - `get_tool_details {name}` returns `{"value": <definition>}`, the definition exactly as
    ///   direct mode's `tools/list` would give it on this protocol version.
    /// - `call_tool {name, arguments?}` runs the named tool through the same machinery as a
    ///   direct call (progress, cancellation, logs, asks, timeouts and shares all apply, and on
    ///   2026-07-28 `input_required` round trips: the request state binds the outer request's
    ///   `name` and `arguments`, so the inner tool and its arguments too). Its arguments are
    ///   checked against the tool's own input schema, as given (no default is inserted, numbers
    ///   keep their digits); arguments that break it are the tool failure `invalid_arguments` on
    ///   every version. The result is always enveloped.
    ///
    /// A name the caller may not see and a name never registered are alike: the tool failure
    /// `unavailable` (`isError`, `{"failure": {"code": "unavailable", ...}}`). A malformed
    /// request to one of the three (a member missing or of the wrong type, a member not in its
    /// input schema) is a protocol error, `-32602`; so is an outer name that is none of the
    /// three. Discovery runs no handler and changes nothing.
    ///
    /// Seed 000 (the source) defaults to compact because it publishes a command tree;
    /// MCP clients expect native tools, so direct is ours.
    Compact,
}

/// The engine's entropy seed: 32 bytes that must be secret and random for session ids to be
/// unguessable, since each id is a keyed PRF (HMAC-SHA256) of the seed and a counter.
/// `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Seed(pub [u8; 32]);

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(..)")
    }
}

impl From<[u8; 32]> for Seed {
    fn from(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
}

impl Config {
    /// A configuration with default limits.
    pub fn new(server_info: Implementation, keys: KeyRing) -> Self {
        Self {
            server_info,
            instructions: None,
            limits: Limits::default(),
            keys,
            unix_ms_at_start: 0,
            seed: None,
            state_epoch: 0,
            discover_cache: CacheHint::private(),
            list_cache: CacheHint::private(),
            logging: false,
            resource_subscriptions: false,
            envelopes: false,
            mode: Mode::Direct,
            protected: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An identity whose 2026-07-28 encoding is `{"name":"n","version":"1","description":"…"}`
    /// with a description of `n` bytes: 43 bytes of framing.
    fn described(n: usize) -> Implementation {
        let mut info = Implementation::new("n", "1");
        info.description = Some("d".repeat(n));
        info
    }

    #[test]
    fn an_identity_is_bounded_by_its_largest_encoding() {
        assert_eq!(described(MAX_IDENTITY_BYTES - 43).check(), Ok(()));
        assert_eq!(
            described(MAX_IDENTITY_BYTES - 42).check(),
            Err(IdentityTooLarge { size: MAX_IDENTITY_BYTES + 1, limit: MAX_IDENTITY_BYTES })
        );
        // Escaping counts: a quote is two bytes on the wire.
        let mut info = Implementation::new("n", "1");
        info.title = Some("\"".repeat(MAX_IDENTITY_BYTES / 2));
        let Err(e) = info.check() else { panic!("{info:?} should be refused") };
        assert!(e.size > MAX_IDENTITY_BYTES, "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "the server's identity (serverInfo) encodes to {} bytes, over the 4096-byte bound",
                e.size
            )
        );
    }
}

//! Compact publication ([`Mode::Compact`]): `tools/list` is `search_tools`,
//! `get_tool_details` and `call_tool`, and the registered tools are reached through them.
//! Discovery is answered here, from the registry and its search index, without a handler;
//! `call_tool` goes through [`Engine::run_tool`], the direct call's own path.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::blame::{Blame, Bound};
use crate::caller::{admits, Caller, Gate};
use crate::content::{ToolFailure, ToolOutput};
use crate::engine::protocol::encode::{ToolEncoding, ToolOutcome};
use crate::engine::{Answer, Ctx, Engine, Mode};
use crate::jsonrpc::ErrorCode;
use crate::jsonrpc::{Encoded, RpcError};
use crate::registry::{listings, Catalogue, Listed, Tool, MAX_TOOL_NAME};
use crate::search::{Query, SEARCH_BUDGET, W_EXACT_NAME};
use crate::slab::Key;
use crate::version::ProtocolVersion;

/// The discovery tool that ranks tools against a query.
pub(crate) const SEARCH_TOOLS: &str = "search_tools";
/// The discovery tool that returns one tool's definition.
pub(crate) const GET_TOOL_DETAILS: &str = "get_tool_details";
/// The tool that runs a registered tool by name.
pub(crate) const CALL_TOOL: &str = "call_tool";
/// Results of a `search_tools` without `limit`: 5.
pub(crate) const DEFAULT_RESULTS: u64 = 5;
/// The largest `limit` `search_tools` accepts: 20; a larger one is refused with `-32602`.
pub(crate) const MAX_RESULTS: u64 = 20;
/// The failure code of a name the caller may not see or that was never registered.
pub(crate) const UNAVAILABLE: &str = "unavailable";

/// One of the three published tools: its listing per protocol version.
pub(crate) struct Published {
    listings: [Arc<str>; 4],
}

impl Listed for Published {
    const METHOD: &'static str = "tools/list";
    const KEY: &'static str = "tools";
    fn key_bound(_limits: &crate::limits::Limits) -> usize {
        MAX_TOOL_NAME
    }
    fn listing(&self, v: ProtocolVersion) -> &str {
        self.listings.get(crate::registry::version_index(v)).map_or("", |s| s)
    }
    fn gate(&self) -> Option<&Gate> {
        None
    }
}

/// The compact catalogue: the same three tools for every caller; `call_tool` linked to the
/// apps shell mounted at `shell`, if any.
pub(crate) fn catalogue(shell: Option<&str>) -> Catalogue<Published> {
    let read_only = || {
        let mut a = Map::new();
        a.insert("readOnlyHint".into(), Value::Bool(true));
        a
    };
    let tools = [
        Tool::new(
            SEARCH_TOOLS,
            "Searches this server's tools by name, title and description and returns the best \
             matches first (5 by default, at most 20). Use get_tool_details for a tool's full \
             definition and call_tool to run it.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for."},
                    "limit": {
                        "type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": DEFAULT_RESULTS,
                        "description": "How many results to return."
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
        .title("Search tools")
        .annotations(read_only()),
        Tool::new(
            GET_TOOL_DETAILS,
            "Returns one tool's full definition: its input and output schemas, description, \
             annotations and metadata.",
            json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "The tool's name."}},
                "required": ["name"],
                "additionalProperties": false
            }),
        )
        .title("Get tool details")
        .annotations(read_only()),
        Tool::new(
            CALL_TOOL,
            "Runs a tool by name with arguments that follow its input schema (see \
             get_tool_details).",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name."},
                    "arguments": {"type": "object", "description": "The tool's arguments."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        )
        .title("Call tool"),
    ];
    let tools = tools.map(|t| match shell {
        // Seed 000: only call_tool carries the shell's link, with explicit visibility.
        Some(uri) if t.name() == CALL_TOOL => t.ui(uri, crate::apps::Visibility::ModelAndApp),
        _ => t,
    });
    let mut c = Catalogue::default();
    for t in tools {
        let published = Published { listings: listings(|v| t.listing(v)) };
        c.insert(t.name().to_owned(), published);
    }
    c
}

/// The members of a discovery tool's `arguments`, checked against its input schema by hand
/// (the schema is ours and tiny; this works without the `validation` feature too).
fn members<'a>(
    tool: &str,
    arguments: Option<&'a Value>,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>, RpcError> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let m = match arguments {
        None | Some(Value::Null) => EMPTY.get_or_init(Map::new),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(RpcError::invalid_params(format!("{tool}: \"arguments\" must be an object"))),
    };
    if let Some(unknown) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(RpcError::invalid_params(format!("{tool}: unknown argument {unknown:?}")));
    }
    Ok(m)
}

fn string_member<'a>(tool: &str, m: &'a Map<String, Value>, key: &str) -> Result<&'a str, RpcError> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(RpcError::invalid_params(format!("{tool}: \"{key}\" must be a string"))),
        None => Err(RpcError::invalid_params(format!("{tool}: \"{key}\" is required"))),
    }
}

impl<H: Clone> Engine<H> {
    /// Whether this engine publishes compactly.
    pub(in crate::engine) fn compact(&self) -> bool {
        self.config.mode == Mode::Compact
    }

    /// `tools/list` in compact mode: a page of the three published tools.
    pub(in crate::engine) fn list_compact(
        &self,
        ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
    ) -> Result<Vec<u8>, RpcError> {
        let Some(published) = &self.published else { return Err(RpcError::misuse()) };
        self.list_page(ctx, params, published)
    }

    /// `tools/call` in compact mode.
    pub(in crate::engine) fn call_compact(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let (outer, arguments) = crate::engine::protocol::features::tool_call_params(params)?;
        match outer.as_str() {
            SEARCH_TOOLS => {
                let m = members(SEARCH_TOOLS, arguments.as_ref(), &["query", "limit"])?;
                let query = string_member(SEARCH_TOOLS, m, "query")?;
                let terms = self.search_query(query)?;
                let limit = match m.get("limit") {
                    None => DEFAULT_RESULTS,
                    Some(l) => l.as_u64().filter(|l| (1..=MAX_RESULTS).contains(l)).ok_or_else(|| {
                        RpcError::invalid_params(format!(
                            "{SEARCH_TOOLS}: \"limit\" must be an integer from 1 to {MAX_RESULTS}"
                        ))
                    })?,
                };
                // At most MAX_RESULTS: the conversion cannot fail.
                let limit = usize::try_from(limit).unwrap_or(1);
                let caller = self.caller(ctx.conn);
                let value = self.search(ctx.version, &caller, query, &terms, limit).0;
                Ok(Answer::Now(self.discovery_value(ctx, value)))
            }
            GET_TOOL_DETAILS => {
                let m = members(GET_TOOL_DETAILS, arguments.as_ref(), &["name"])?;
                let name = string_member(GET_TOOL_DETAILS, m, "name")?;
                let caller = self.caller(ctx.conn);
                let listing = self
                    .registry
                    .tools
                    .get(name)
                    .filter(|t| t.visible_to(ctx.version) && admits(t.tool.info.gate.as_ref(), &caller))
                    .map(|t| t.listing(ctx.version));
                let Some(listing) = listing else {
                    return Ok(Answer::Now(self.compact_unavailable(ctx, name)));
                };
                // The cached listing is JSON this crate wrote; reading it back keeps exact numbers.
                let definition: Value = serde_json::from_str(listing).map_err(|_| RpcError::internal())?;
                Ok(Answer::Now(self.discovery_value(ctx, definition)))
            }
            CALL_TOOL => {
                let m = members(CALL_TOOL, arguments.as_ref(), &["name", "arguments"])?;
                let name = string_member(CALL_TOOL, m, "name")?.to_owned();
                let inner = match m.get("arguments") {
                    None => None,
                    Some(v @ Value::Object(_)) => Some(v.clone()),
                    Some(_) => {
                        return Err(RpcError::invalid_params(format!(
                            "{CALL_TOOL}: \"arguments\" must be an object"
                        )))
                    }
                };
                self.run_tool(now, ctx, name, inner, batch, true)
            }
            _ => Err(RpcError::invalid_params(format!("unknown tool: {outer}"))),
        }
    }

    /// `query` within [`Limits::max_search_query_bytes`](crate::limits::Limits::max_search_query_bytes)
    /// and [`Limits::max_search_query_words`](crate::limits::Limits::max_search_query_words), cut into
    /// its terms; the byte bound is checked before a word is read.
    fn search_query(&self, query: &str) -> Result<Query, RpcError> {
        let limits = &self.config.limits;
        let refuse = |msg: String| RpcError::blamed(Blame::Limit(Bound::Size), ErrorCode::InvalidParams, msg);
        let max = limits.max_search_query_bytes;
        if query.len() > max {
            return Err(refuse(format!(
                "{SEARCH_TOOLS}: \"query\" of {} bytes exceeds the {max}-byte limit (max_search_query_bytes)",
                query.len()
            )));
        }
        let max = limits.max_search_query_words;
        Query::parse(query, max).map_err(|_| {
            refuse(format!("{SEARCH_TOOLS}: \"query\" has more than {max} words (max_search_query_words)"))
        })
    }

    /// The tools `caller` may see on `version` that best match `query` (cut into `terms`), at
    /// most `limit`, as `search_tools` returns them, with the index work the search took.
    pub(in crate::engine) fn search(
        &self,
        version: ProtocolVersion,
        caller: &Caller,
        query: &str,
        terms: &Query,
        limit: usize,
    ) -> (Value, usize) {
        let tools = &self.registry.tools;
        // A tool only an app may call (visibility ["app"]) is no result for the agent's search.
        let sees = |name: &str| {
            tools.get(name).is_some_and(|t| {
                t.visible_to(version)
                    && admits(t.tool.info.gate.as_ref(), caller)
                    && t.tool.ui.as_ref().is_none_or(|l| l.visibility.includes_model())
            })
        };
        let exact = query.trim();
        let bonus = tools.contains_key(exact).then_some((exact, W_EXACT_NAME));
        let (names, work): (Vec<Arc<str>>, usize) = match &self.registry.search {
            Some(index) if !terms.is_empty() || bonus.is_some() => {
                let hits = index.search(terms, bonus, limit, sees);
                (hits.ranked.into_iter().map(|(n, _)| n).collect(), hits.work)
            }
            // No word to look for: the first visible tools by name, within the same budget.
            _ => {
                let mut work = 0;
                let names = tools
                    .keys()
                    .take(SEARCH_BUDGET)
                    .inspect(|_| work += 1)
                    .filter(|n| sees(n))
                    .take(limit)
                    .map(|n| Arc::from(n.as_str()))
                    .collect();
                (names, work)
            }
        };
        let found: Vec<Value> = names
            .iter()
            .filter_map(|n| tools.get(&**n))
            .map(|e| {
                let mut m = Map::new();
                m.insert("name".into(), Value::String(e.tool.name().to_owned()));
                if let Some(t) = e.tool.declared_title() {
                    m.insert("title".into(), Value::String(t.to_owned()));
                }
                if let Some(d) = e.tool.declared_description() {
                    m.insert("description".into(), Value::String(d.to_owned()));
                }
                Value::Object(m)
            })
            .collect();
        (json!({ "tools": found }), work)
    }

    /// A discovery result: `value` in the success envelope, bounded like any tool result.
    fn discovery_value(&self, ctx: Ctx<'_>, value: Value) -> Encoded {
        let out = ToolOutput { content: Vec::new(), structured: Some(value), is_error: false, meta: None };
        self.encode_tool_outcome(ctx.id, ctx.version, None, ToolOutcome::Output(out), ToolEncoding::Envelopes)
    }

    /// The answer to a name the caller may not see, or that nothing has: one failure for both,
    /// so a gate does not betray what it hides.
    pub(in crate::engine) fn compact_unavailable(&self, ctx: Ctx<'_>, name: &str) -> Encoded {
        let failure =
            ToolFailure::new(UNAVAILABLE, format!("tool {:?} is not available", crate::json::clip(name)));
        self.encode_tool_outcome(
            ctx.id,
            ctx.version,
            None,
            ToolOutcome::Failure(failure),
            ToolEncoding::Envelopes,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::{json, Value};

    use crate::caller::Caller;
    use crate::cursor::KeyRing;
    use crate::engine::test_support::frame;
    use crate::engine::{Config, ConnKind, Engine, Implementation, Mode};
    use crate::limits::Limits;
    use crate::registry::Tool;

    fn engine(limits: impl FnOnce(&mut Limits)) -> (Engine<u32>, Instant) {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([7; 32]));
        config.mode = Mode::Compact;
        limits(&mut config.limits);
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut e = Engine::new(config, now);
        let mut r = e.registry_mut(now);
        r.add_tool(Tool::new("get_weather", "Current weather", json!({"type": "object"})), 1).unwrap();
        r.add_tool(Tool::new("fetch_url", "Fetches a page", json!({"type": "object"})), 1).unwrap();
        (e, now)
    }

    /// `search_tools` with `query`, on a 2026-07-28 stdio connection: the answer.
    fn search(e: &mut Engine<u32>, now: Instant, query: &str) -> Value {
        let conn = e.open(now, ConnKind::Stdio, Caller::anonymous()).unwrap();
        let request = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {
                "name": "search_tools", "arguments": {"query": query},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}
                }
            }
        });
        e.handle_frame(now, conn, request.to_string().as_bytes());
        let outs: Vec<_> = std::iter::from_fn(|| e.poll_output()).collect();
        e.close(now, conn);
        frame(&outs)
    }

    fn found(answer: &Value) -> Vec<&str> {
        let tools = answer.pointer("/result/structuredContent/value/tools").and_then(Value::as_array);
        tools.map_or_else(Vec::new, |t| t.iter().filter_map(|t| t["name"].as_str()).collect())
    }

    fn refusal(answer: &Value) -> (i64, String) {
        let code = answer.pointer("/error/code").and_then(Value::as_i64).unwrap_or(0);
        (code, answer.pointer("/error/message").and_then(Value::as_str).unwrap_or("").to_owned())
    }

    #[test]
    fn the_query_bounds_hold_exactly() {
        let (mut e, now) = engine(|l| {
            l.max_search_query_bytes(16).max_search_query_words(3);
        });
        // 16 bytes, 3 words: searched.
        let answer = search(&mut e, now, "weather   now  x");
        assert_eq!(found(&answer), ["get_weather"], "{answer}");
        // 17 bytes.
        let (code, msg) = refusal(&search(&mut e, now, "weather    now  x"));
        assert_eq!(code, -32602);
        assert!(msg.contains("17 bytes") && msg.contains("max_search_query_bytes"), "{msg}");
        // 4 words (camel case splits: `fetchUrl` is two).
        let (code, msg) = refusal(&search(&mut e, now, "fetchUrl now x"));
        assert_eq!(code, -32602);
        assert!(msg.contains("more than 3 words") && msg.contains("max_search_query_words"), "{msg}");
        assert_eq!(found(&search(&mut e, now, "fetchUrl now")), ["fetch_url"]);
    }

    /// A query as long as a frame allows is refused on its length, before a word of it is read;
    /// one allowed that many bytes is refused at the word past the bound (`search.rs` tests
    /// count the words read). Either way the error names the bound.
    #[test]
    fn a_frame_sized_query_is_refused_by_its_bounds() {
        let huge = "ab ".repeat((2 * 1024 * 1024 - 400) / 3);
        let (mut e, now) = engine(|_| {});
        let (code, msg) = refusal(&search(&mut e, now, &huge));
        assert_eq!(code, -32602);
        assert!(msg.contains("exceeds the 1024-byte limit (max_search_query_bytes)"), "{msg}");

        let (mut e, now) = engine(|l| {
            l.max_search_query_bytes(usize::MAX);
        });
        let (code, msg) = refusal(&search(&mut e, now, &huge));
        assert_eq!(code, -32602);
        assert!(msg.contains("more than 64 words (max_search_query_words)"), "{msg}");
    }
}

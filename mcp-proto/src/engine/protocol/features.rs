//! Lists, resources, prompts and completion.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use crate::blame::Blame;
use crate::caller::{admits, Caller};
use crate::content::{Completion, ContentsWire, PromptOutputWire, ResourceContents};
use crate::cursor;
use crate::engine::{Answer, CallKind, CompletionRef, Ctx, Engine, Request};
use crate::items::{CacheHint, TemplateVar};
use crate::jsonrpc::{encode_result, ErrorCode, RpcError};
use crate::registry::{Catalogue, Listed};
use crate::slab::Key;

/// What a read inherits: the declared media type and `_meta`.
pub(in crate::engine) type Declared<'a> = (Option<&'a str>, Option<&'a Map<String, Value>>);

/// The most completion values a client is sent (the spec's bound).
const MAX_COMPLETION_VALUES: usize = 100;

fn string_param<'a>(params: Option<&'a Map<String, Value>>, name: &str) -> Result<&'a str, RpcError> {
    match params.and_then(|p| p.get(name)) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(RpcError::invalid_params(format!("\"{name}\" must be a string"))),
        None => Err(RpcError::invalid_params(format!("missing \"{name}\""))),
    }
}

/// Which kinds of item a caller can see: what its capabilities and methods derive from.
#[derive(Debug, Clone, Copy)]
pub(in crate::engine) struct Offers {
    pub(in crate::engine) tools: bool,
    pub(in crate::engine) resources: bool,
    pub(in crate::engine) prompts: bool,
    pub(in crate::engine) completions: bool,
    /// `resources.subscribe`: resources are offered and the application reports changes
    /// ([`Config::resource_subscriptions`](crate::engine::Config::resource_subscriptions)).
    pub(in crate::engine) subscriptions: bool,
    /// [`Config::logging`](crate::engine::Config::logging).
    pub(in crate::engine) logging: bool,
    /// Skills (`io.modelcontextprotocol/skills`): at least one skill admits the caller.
    pub(in crate::engine) skills: bool,
}

impl Offers {
    /// Whether a data method exists for this caller.
    pub(in crate::engine) fn method(self, method: &str) -> bool {
        if method == "resources/directory/read" {
            return self.skills;
        }
        match method.split('/').next() {
            Some("skills") => self.skills,
            Some("tools") => self.tools,
            Some("resources") => self.resources,
            Some("prompts") => self.prompts,
            _ => self.completions,
        }
    }

    /// Tools, resources, prompts, in the order of the notification lists.
    pub(in crate::engine) fn lists(self) -> [bool; 3] {
        [self.tools, self.resources, self.prompts]
    }
}

/// An optional object whose values must all be strings (prompt arguments, completion context).
fn string_map(value: Option<&Value>, what: &str, item: &str) -> Result<BTreeMap<String, String>, RpcError> {
    let args = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(args)) => args,
        Some(_) => return Err(RpcError::invalid_params(format!("{what} must be an object"))),
    };
    args.iter()
        .map(|(k, v)| match v {
            Value::String(v) => Ok((k.clone(), v.clone())),
            _ => Err(RpcError::invalid_params(format!("{item} \"{k}\" must be a string"))),
        })
        .collect()
}

impl<H: Clone> Engine<H> {
    /// What a read of `uri` inherits when the handler's contents leave the media type or
    /// `_meta` out: the declaration that answered it (the shell, the exact resource, or the
    /// template), as registered when the read completes.
    pub(in crate::engine) fn declared_for(&self, uri: &str, template: Option<&str>) -> Option<Declared<'_>> {
        if let Some(t) = template {
            let t = &self.registry.templates.get(t)?.template;
            return Some((t.mime_type.as_deref(), t.info.meta.as_ref()));
        }
        let shell = self.registry.apps.shell.as_ref().filter(|s| s.resource.uri == uri).map(|s| &s.resource);
        let r: &crate::items::Resource = match shell {
            Some(r) => r,
            None => &self.registry.resources.get(uri)?.resource,
        };
        Some((r.mime_type.as_deref(), r.info.meta.as_ref()))
    }

    pub(in crate::engine) fn offers(&self, caller: &Caller) -> Offers {
        let r = &self.registry;
        let sees = |gate: Option<&crate::caller::Gate>| admits(gate, caller);
        let templates = r.templates.values().any(|t| sees(t.template.info.gate.as_ref()));
        let prompts = r.prompts.values().any(|p| sees(p.prompt.info.gate.as_ref()));
        // The apps shell is readable by every caller, though never listed.
        let resources = templates
            || r.apps.shell.is_some()
            || r.resources.values().any(|x| sees(x.resource.info.gate.as_ref()));
        // Completion exists only where a handler can answer it: an item without one would only
        // ever complete to nothing.
        let completions = r
            .prompts
            .values()
            .any(|p| p.completion.is_some() && sees(p.prompt.info.gate.as_ref()))
            || r.templates.values().any(|t| t.completion.is_some() && sees(t.template.info.gate.as_ref()));
        Offers {
            // Compact publication's three tools are there for everyone.
            tools: self.compact() || r.tools.values().any(|t| sees(t.tool.info.gate.as_ref())),
            resources,
            prompts,
            completions,
            subscriptions: resources && self.config.resource_subscriptions,
            logging: self.config.logging,
            skills: r.skills.values().any(|s| sees(s.skill.gate.as_ref())),
        }
    }

    pub(in crate::engine) fn caller(&self, conn: crate::engine::ConnId) -> Arc<Caller> {
        self.conns.get(conn.0).map(|c| c.caller.clone()).unwrap_or_default()
    }

    /// The server-wide gate; a refused caller learns only that it is refused.
    pub(in crate::engine) fn check_server_gate(&self, ctx: Ctx<'_>) -> Result<(), RpcError> {
        if admits(self.registry.gate.as_ref(), &self.caller(ctx.conn)) {
            Ok(())
        } else {
            Err(RpcError::invalid_params("forbidden: this caller may not use this server"))
        }
    }

    /// One page of a list, after gates: pages are cut from what the caller may see, so a hidden
    /// item never shortens a page. A page starts after the key its cursor names, found in
    /// O(log n), and costs O(page size + hidden items skipped): nothing before it is walked and
    /// nothing past it is counted, only one item peeked to know whether a next page exists.
    /// A cursor carries at most the longest key the catalogue can hold (registered, or allowed
    /// by a bound registration enforced).
    pub(in crate::engine) fn list_page<T: Listed>(
        &self,
        ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
        items: &Catalogue<T>,
    ) -> Result<Vec<u8>, RpcError> {
        let (method, key) = (T::METHOD, T::KEY);
        let max_key = items.cursor_key_bound(&self.config.limits);
        let after = self.page_bounds(ctx, method, params, max_key)?;
        let caller = self.caller(ctx.conn);
        let private = ctx.private || items.any_gated();
        let page = self.config.limits.page_size;
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut visible = items
            .range::<str, _>((start, Bound::Unbounded))
            .filter(|(_, t)| t.visible_to(ctx.version) && admits(t.gate(), &caller));
        let mut body = String::with_capacity(256);
        body.push_str("{\"");
        body.push_str(key);
        body.push_str("\":[");
        let mut last = None;
        let enveloped = self.config.envelopes;
        for (k, t) in visible.by_ref().take(page) {
            if last.is_some() {
                body.push(',');
            }
            // An item that cannot be published (a tool whose output schema cannot be wrapped)
            // fails the page with a safe error: never a listing that breaks its own contract.
            let listing = t.wire_listing(ctx.version, enveloped).map_err(|_| unpublishable(key, k))?;
            body.push_str(listing);
            last = Some(k);
        }
        body.push(']');
        if let (Some(last), Some(_)) = (last, visible.next()) {
            let next = cursor::make(&self.config.keys, method, caller.binding(), last);
            body.push_str(",\"nextCursor\":");
            body.push_str(&Value::String(next).to_string());
        }
        if ctx.version.is_modern() {
            let mut tail = Map::new();
            self.cacheable(&mut tail, ctx.version, self.config.list_cache.narrowed(private));
            self.finish(&mut tail, ctx.version);
            for (k, v) in tail {
                body.push(',');
                body.push_str(&Value::String(k).to_string());
                body.push(':');
                body.push_str(&v.to_string());
            }
        }
        body.push('}');
        // Every piece is serialised JSON already (cached listings, encoded strings).
        Ok(crate::jsonrpc::encode_result_text(ctx.id, &body))
    }

    /// Why no template matched `uri` when one admitted template would have but for a variable
    /// that is not percent-encoded UTF-8: said as such, rather than as "not found", so the
    /// client learns what to fix. Only on the way to a refusal, so it costs a hit nothing.
    fn undecodable(&self, caller: &Caller, uri: &str) -> Option<RpcError> {
        self.registry.templates.values().find_map(|t| {
            if !admits(t.template.info.gate.as_ref(), caller) {
                return None;
            }
            let (name, why) = t.matcher.undecodable(uri)?;
            let template = &t.template.uri_template;
            let msg = format!("variable {name:?} of the URI template {template:?} {why}: {uri}");
            Some(RpcError::invalid_params(msg).with_data(serde_json::json!({ "uri": uri })))
        })
    }

    /// "Resource not found" as each version spells it.
    pub(in crate::engine) fn not_found(
        &self,
        version: crate::version::ProtocolVersion,
        uri: &str,
    ) -> RpcError {
        let data = serde_json::json!({ "uri": uri });
        if version.is_modern() {
            RpcError::invalid_params(format!("resource not found: {uri}")).with_data(data)
        } else {
            RpcError::blamed(
                Blame::Misbehaving,
                ErrorCode::ResourceNotFound,
                format!("resource not found: {uri}"),
            )
            .with_data(data)
        }
    }

    /// Resolves a URI to the handler that reads it, after gates: an exact resource first, then
    /// the first template (in `uriTemplate` order) that matches and admits the caller. Also
    /// says how its answer may be cached, and whether a gate could shape it.
    #[allow(clippy::type_complexity)]
    pub(in crate::engine) fn resolve(
        &self,
        caller: &Caller,
        uri: &str,
    ) -> Option<(H, Option<String>, Vec<TemplateVar>, CacheHint, bool)> {
        // The apps shell is an exclusive mount, read by everyone.
        if let Some(shell) = self.registry.apps.shell.as_ref().filter(|s| s.resource.uri == uri) {
            return Some((shell.handler.clone(), None, Vec::new(), shell.resource.cache, false));
        }
        // Private when any gated item could answer this URI, admitted or not: another caller
        // may be answered differently.
        let exact = self.registry.resources.get(uri);
        let private = exact.is_some_and(|r| r.resource.info.gate.is_some())
            || self
                .registry
                .templates
                .values()
                .any(|t| t.template.info.gate.is_some() && t.matcher.matches(uri).is_some());
        if let Some(r) = exact {
            if let (true, crate::registry::Source::Handler(h)) =
                (admits(r.resource.info.gate.as_ref(), caller), &r.source)
            {
                return Some((h.clone(), None, Vec::new(), r.resource.cache, private));
            }
        }
        self.registry.templates.values().find_map(|t| {
            if !admits(t.template.info.gate.as_ref(), caller) {
                return None;
            }
            let vars = t.matcher.matches(uri)?;
            let hint = t.template.cache;
            Some((t.handler.clone(), Some(t.template.uri_template.clone()), vars, hint, private))
        })
    }

    pub(in crate::engine) fn checked_uri<'a>(
        &self,
        params: Option<&'a Map<String, Value>>,
    ) -> Result<&'a str, RpcError> {
        let uri = string_param(params, "uri")?;
        let max = self.config.limits.max_uri_bytes;
        if uri.len() > max {
            let msg = format!("uri of {} bytes exceeds the {max}-byte limit", uri.len());
            let blame = Blame::Limit(crate::blame::Bound::Size);
            return Err(RpcError::blamed(blame, ErrorCode::InvalidParams, msg));
        }
        Ok(uri)
    }

    pub(in crate::engine) fn read_resource(
        &mut self,
        now: Instant,
        mut ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let uri = self.checked_uri(params)?;
        let caller = self.caller(ctx.conn);
        if let Some(answer) = self.read_skill_file(ctx, uri, &caller) {
            return Ok(Answer::Now(answer.into()));
        }
        let Some((handler, template, variables, hint, gated)) = self.resolve(&caller, uri) else {
            return Err(self.undecodable(&caller, uri).unwrap_or_else(|| self.not_found(ctx.version, uri)));
        };
        let needed = match &template {
            Some(t) => self.registry.templates.get(t.as_str()).map(|t| &t.template.info.scopes),
            None => self.registry.resources.get(uri).map(|r| &r.resource.info.scopes),
        };
        super::scopes::check(needed.map_or(&[][..], Vec::as_slice), &caller)?;
        ctx.private |= gated;
        let kind = CallKind::Resource(uri.to_owned(), hint, template.clone());
        let request = Request::ReadResource { uri: uri.to_owned(), template, variables };
        self.invoke(now, ctx, kind, batch, request, handler)
    }

    pub(in crate::engine) fn read_result(
        &self,
        call: &crate::engine::Call,
        uri: &str,
        hint: CacheHint,
        template: Option<&str>,
        mut contents: Vec<ResourceContents>,
    ) -> crate::jsonrpc::Encoded {
        if contents.is_empty() {
            // Never an empty `contents`: the handler found nothing, so the resource is not there.
            return self.not_found(call.version, uri).encode(Some(&call.id));
        }
        if let Some((mime, meta)) = self.declared_for(uri, template) {
            inherit(&mut contents, uri, mime, meta);
        }
        let mut r = Map::new();
        r.insert(
            "contents".into(),
            serde_json::to_value(ContentsWire(&contents, call.version)).unwrap_or_default(),
        );
        // The schema requires the hints on every complete read, retries included; what the
        // user answered makes a retried read theirs alone.
        let hint = if call.retried() { CacheHint::private() } else { hint.narrowed(call.private) };
        self.cacheable(&mut r, call.version, hint);
        self.finish(&mut r, call.version);
        encode_result(&call.id, &r).into()
    }

    pub(in crate::engine) fn get_prompt(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let name = string_param(params, "name")?;
        let caller = self.caller(ctx.conn);
        let Some(entry) =
            self.registry.prompts.get(name).filter(|p| admits(p.prompt.info.gate.as_ref(), &caller))
        else {
            return Err(RpcError::invalid_params(format!("unknown prompt: {name}")));
        };
        super::scopes::check(&entry.prompt.info.scopes, &caller)?;
        let arguments =
            string_map(params.and_then(|p| p.get("arguments")), "\"arguments\"", "prompt argument")?;
        if let Some(missing) =
            entry.prompt.arguments.iter().find(|a| a.required && !arguments.contains_key(&a.name))
        {
            return Err(RpcError::invalid_params(format!("missing required argument \"{}\"", missing.name)));
        }
        let handler = entry.handler.clone();
        let request = Request::GetPrompt { name: name.to_owned(), arguments };
        self.invoke(now, ctx, CallKind::Prompt, batch, request, handler)
    }

    pub(in crate::engine) fn prompt_result(
        &self,
        call: &crate::engine::Call,
        out: &crate::content::PromptOutput,
    ) -> Vec<u8> {
        let mut r = match serde_json::to_value(PromptOutputWire(out, call.version)) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        self.finish(&mut r, call.version);
        encode_result(&call.id, &r)
    }

    pub(in crate::engine) fn complete_request(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let r = params.and_then(|p| p.get("ref")).and_then(Value::as_object);
        let Some(r) = r else { return Err(RpcError::invalid_params("missing \"ref\"")) };
        let r = Some(r);
        let argument = params.and_then(|p| p.get("argument")).and_then(Value::as_object);
        let Some(argument) = argument else { return Err(RpcError::invalid_params("missing \"argument\"")) };
        let arg_name = string_param(Some(argument), "name")?.to_owned();
        let value = string_param(Some(argument), "value")?.to_owned();
        let context = params.and_then(|p| p.get("context")).and_then(|c| c.get("arguments"));
        let context = string_map(context, "\"context.arguments\"", "context argument")?;
        let caller = self.caller(ctx.conn);
        let (reference, handler) = match string_param(r, "type")? {
            "ref/prompt" => {
                let name = string_param(r, "name")?;
                let entry =
                    self.registry.prompts.get(name).filter(|p| admits(p.prompt.info.gate.as_ref(), &caller));
                let Some(entry) = entry else {
                    return Err(RpcError::invalid_params(format!("unknown prompt: {name}")));
                };
                (CompletionRef::Prompt(name.to_owned()), entry.completion.clone())
            }
            "ref/resource" => {
                let uri = string_param(r, "uri")?;
                let entry = self
                    .registry
                    .templates
                    .get(uri)
                    .filter(|t| admits(t.template.info.gate.as_ref(), &caller));
                let Some(entry) = entry else {
                    return Err(RpcError::invalid_params(format!("unknown resource template: {uri}")));
                };
                (CompletionRef::Template(uri.to_owned()), entry.completion.clone())
            }
            other => return Err(RpcError::invalid_params(format!("unknown reference type {other:?}"))),
        };
        let Some(handler) = handler else {
            let mut r = Map::new();
            r.insert("completion".into(), serde_json::json!({ "values": [], "hasMore": false }));
            self.finish(&mut r, ctx.version);
            return Ok(Answer::Now(encode_result(ctx.id, &r).into()));
        };
        let request = Request::Complete { reference, argument: arg_name, value, context };
        self.invoke(now, ctx, CallKind::Complete, batch, request, handler)
    }

    pub(in crate::engine) fn completion_result(
        &self,
        call: &crate::engine::Call,
        mut c: Completion,
    ) -> Vec<u8> {
        if c.values.len() > MAX_COMPLETION_VALUES {
            c.values.truncate(MAX_COMPLETION_VALUES);
            c.has_more = true;
        }
        let mut completion = Map::new();
        completion.insert("values".into(), c.values.into());
        if let Some(t) = c.total {
            completion.insert("total".into(), t.into());
        }
        completion.insert("hasMore".into(), c.has_more.into());
        let mut r = Map::new();
        r.insert("completion".into(), Value::Object(completion));
        self.finish(&mut r, call.version);
        encode_result(&call.id, &r)
    }
}

/// Everything registered, whatever the gates: for code that holds the server (admin tooling,
/// tests, documentation generators).
///
/// **Never serve this to a remote caller**: it lists items the caller's gates would hide. A
/// remote-facing listing is [`Engine::visible_to`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Introspection {
    /// Tools, by name.
    pub tools: Vec<crate::registry::Tool>,
    /// Resources, by URI.
    pub resources: Vec<crate::items::Resource>,
    /// Templates, by `uriTemplate`.
    pub templates: Vec<crate::items::ResourceTemplate>,
    /// Prompts, by name.
    pub prompts: Vec<crate::items::Prompt>,
    /// Skills, by `SKILL.md` URI (their files are among `resources` too).
    pub skills: Vec<crate::skills::Skill>,
}

impl<H: Clone> Engine<H> {
    /// Every registered item, ignoring gates; see [`Introspection`] for why it must not be
    /// served remotely.
    pub fn introspect(&self) -> Introspection {
        self.items_where(|_| true)
    }

    /// What `caller` is shown by the list methods (every page): the server-wide gate and each
    /// item's gate applied, as over the wire.
    pub fn visible_to(&self, caller: &Caller) -> Introspection {
        if !admits(self.registry.gate.as_ref(), caller) {
            return Introspection::default();
        }
        self.items_where(|gate| admits(gate, caller))
    }

    fn items_where(&self, keep: impl Fn(Option<&crate::caller::Gate>) -> bool) -> Introspection {
        fn pick<'a, E: 'a, T: Clone + 'a>(
            entries: impl Iterator<Item = &'a E>,
            item: impl Fn(&E) -> &T,
            gate: impl Fn(&T) -> Option<&crate::caller::Gate>,
            keep: &impl Fn(Option<&crate::caller::Gate>) -> bool,
        ) -> Vec<T> {
            entries.map(item).filter(|t| keep(gate(t))).cloned().collect()
        }
        let r = &self.registry;
        Introspection {
            tools: pick(r.tools.values(), |e| &e.tool, |t| t.info.gate.as_ref(), &keep),
            resources: pick(r.resources.values(), |e| &e.resource, |t| t.info.gate.as_ref(), &keep),
            templates: pick(r.templates.values(), |e| &e.template, |t| t.info.gate.as_ref(), &keep),
            prompts: pick(r.prompts.values(), |e| &e.prompt, |t| t.info.gate.as_ref(), &keep),
            skills: pick(r.skills.values(), |e| &e.skill, |t| t.gate.as_ref(), &keep),
        }
    }

    /// Admits an in-process call of a tool by `caller`, with the same gates and argument
    /// validation as `tools/call`: the handler to run, or the error a remote caller would get
    /// (a refused or unknown tool is "unknown tool"; invalid arguments are `-32602` with the
    /// validation errors in `data`).
    pub fn authorize_tool_call(
        &self,
        caller: &Caller,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Result<H, RpcError> {
        if !admits(self.registry.gate.as_ref(), caller) {
            return Err(RpcError::invalid_params("forbidden: this caller may not use this server"));
        }
        let Some(entry) = self.registry.tools.get(name).filter(|t| admits(t.tool.info.gate.as_ref(), caller))
        else {
            return Err(RpcError::invalid_params(format!("unknown tool: {}", crate::json::clip(name))));
        };
        super::scopes::check(&entry.tool.info.scopes, caller)?;
        if let Some(validator) = &entry.input {
            let args = Value::Object(arguments.clone());
            if let Some(errors) = crate::registry::describe_errors(validator, &args) {
                let text = format!("invalid arguments for tool {name}: {}", errors.join("; "));
                return Err(RpcError::invalid_params(text).with_data(serde_json::json!({ "errors": errors })));
            }
        }
        Ok(entry.handler.clone())
    }
}

/// The error of a page or call that would publish an item whose definition cannot be prepared
/// (today: a tool's output schema that the envelope wrapper refuses). The reason stays with the
/// operator ([`crate::wrap::prepare`] reproduces it); the peer learns which item is broken.
pub(in crate::engine) fn unpublishable(kind: &str, name: &str) -> RpcError {
    RpcError::internal()
        .with_data(serde_json::json!({ "reason": "unpublishable", "kind": kind, "name": name }))
}

/// The `name` and `arguments` of a `tools/call`, direct or compact (whose outer name is one of
/// the three published tools).
pub(in crate::engine) fn tool_call_params(
    params: Option<Map<String, Value>>,
) -> Result<(String, Option<Value>), RpcError> {
    let mut params = params.unwrap_or_default();
    let name = match params.remove("name") {
        Some(Value::String(n)) => n,
        Some(_) => return Err(RpcError::invalid_params("\"name\" must be a string")),
        None => return Err(RpcError::invalid_params("missing tool \"name\"")),
    };
    Ok((name, params.remove("arguments")))
}

/// Fills what `contents` leave out from the declaration a read of `uri` inherits: the media type
/// and `_meta` of each item for `uri` itself (an item for another URI, a child a read lists, is
/// not the declared resource). A value the handler gave wins.
pub(in crate::engine) fn inherit(
    contents: &mut [ResourceContents],
    uri: &str,
    mime: Option<&str>,
    meta: Option<&Map<String, Value>>,
) {
    for c in contents.iter_mut().filter(|c| c.uri == uri) {
        if c.mime_type.is_none() {
            c.mime_type = mime.map(str::to_owned);
        }
        if c.meta.is_none() {
            c.meta = meta.cloned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller::Gate;
    use crate::cursor::KeyRing;
    use crate::engine::{Config, ConnId, Output};
    use crate::engine::{ConnKind, Implementation};
    use crate::registry::Tool;
    use serde_json::json;

    struct Rig {
        engine: Engine<u32>,
        conn: ConnId,
        now: Instant,
    }

    impl Rig {
        fn new(page: usize) -> Self {
            let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32]));
            config.limits.page_size(page);
            #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
            let now = Instant::now();
            let mut engine = Engine::new(config, now);
            let conn = engine.open(now, ConnKind::Stdio, Caller::identified("alice")).unwrap();
            let mut rig = Self { engine, conn, now };
            rig.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}));
            rig.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
            rig
        }

        /// Tool `name`, hidden from every caller without the `admin` role when `hidden`.
        fn add(&mut self, name: &str, hidden: bool) {
            let mut tool = Tool::new(name, "d", json!({"type": "object"}));
            if hidden {
                tool = tool.gate(Gate::role("admin"));
            }
            self.engine.registry_mut(self.now).add_tool(tool, 0).unwrap();
            while self.engine.poll_output().is_some() {}
        }

        /// Removes tool `name`; whether it was there.
        fn remove(&mut self, name: &str) -> bool {
            let removed = self.engine.registry_mut(self.now).remove_tool(name).is_some();
            while self.engine.poll_output().is_some() {}
            removed
        }

        /// Sends a frame and returns the response to it (notifications are dropped).
        fn send(&mut self, frame: &Value) -> Option<Value> {
            // Whatever registry edits since the last frame raised (list_changed) is drained
            // first, as the run loop asks.
            while self.engine.poll_output().is_some() {}
            self.engine.handle_frame(self.now, self.conn, frame.to_string().as_bytes());
            let mut response = None;
            while let Some(out) = self.engine.poll_output() {
                if let Output::Frame { bytes, .. } = out {
                    let v: Value = serde_json::from_slice(&bytes).unwrap();
                    if v.get("id").is_some() {
                        response = Some(v);
                    }
                }
            }
            response
        }

        /// One `tools/list` page: the names on it and the next cursor.
        fn page(&mut self, cursor: Option<&str>) -> (Vec<String>, Option<String>) {
            let params = cursor.map_or(json!({}), |c| json!({ "cursor": c }));
            let r = self
                .send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}))
                .unwrap();
            let result = r.get("result").unwrap_or_else(|| panic!("not a result: {r}"));
            let names = result["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            (names, result.get("nextCursor").and_then(Value::as_str).map(str::to_owned))
        }
    }

    #[test]
    fn a_walk_sees_each_visible_tool_once_while_the_catalogue_changes() {
        let page = 40;
        let mut rig = Rig::new(page);
        let name = |i: usize| format!("t{i:05}");
        for i in 0..1200 {
            rig.add(&name(i), i % 2 == 1);
        }
        // What the walk must show: the visible tools, changed as the walk goes on below.
        let mut expected: std::collections::BTreeSet<String> = (0..1200).step_by(2).map(name).collect();
        let mut seen: Vec<String> = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            let (names, next) = rig.page(cursor.as_deref());
            pages += 1;
            assert!(names.len() <= page);
            seen.extend(names.iter().cloned());
            let Some(next) = next else {
                break;
            };
            assert_eq!(names.len(), page, "only the last page is short");
            let last = names.last().unwrap().clone();
            let n: usize = last[1..].parse().unwrap();
            // The item the cursor names goes away: the walk goes on after where it was.
            assert!(rig.remove(&last));
            // A visible tool ahead goes away and is never shown; one behind is already shown.
            let ahead = name(n + 10);
            if rig.remove(&ahead) {
                expected.remove(&ahead);
            }
            assert!(rig.remove(&name(n - 2)));
            // New tools: visible ahead (shown in order), visible behind (missed, as in any
            // walk), hidden ahead (never shown).
            let new_ahead = format!("{}_new", name(n + 3));
            rig.add(&new_ahead, false);
            expected.insert(new_ahead);
            rig.add(&format!("{}_new", name(n - 3)), false);
            rig.add(&format!("{}_hidden", name(n + 5)), true);
            cursor = Some(next);
        }
        assert!(pages > 10, "{pages} pages");
        assert_eq!(seen, expected.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn a_full_last_page_has_no_next_cursor() {
        let mut rig = Rig::new(3);
        for i in 0..12 {
            rig.add(&format!("t{i:02}"), i % 2 == 1);
        }
        let (first, next) = rig.page(None);
        assert_eq!(first, ["t00", "t02", "t04"]);
        // Exactly one page's worth of visible tools remains, then only hidden ones.
        let (last, next) = rig.page(next.as_deref());
        assert_eq!(last, ["t06", "t08", "t10"]);
        assert_eq!(next, None);
    }

    #[test]
    fn cursors_survive_the_removal_of_everything_after_them() {
        let mut rig = Rig::new(2);
        for i in 0..5 {
            rig.add(&format!("t{i}"), false);
        }
        let (_, next) = rig.page(None);
        // The cursor's own item too; `t0` stays so that tools are still offered.
        for i in 1..5 {
            assert!(rig.remove(&format!("t{i}")));
        }
        assert_eq!(rig.page(next.as_deref()), (vec![], None));
    }
}

//! The `!` directives: the configuration gathered before the engine is built, the actions on
//! a running engine, and building the engine with its fixtures.

use super::*;

/// Which test items to register: `None` is the default, `Some` names them.
type Selection = Option<Vec<String>>;

/// The configuration directives, gathered before the engine is built.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) limits: Limits,
    pub(super) instructions: Option<String>,
    full_info: bool,
    pub(super) tools: Selection,
    pub(super) resources: Selection,
    pub(super) templates: Selection,
    pub(super) prompts: Selection,
    /// Skill fixtures by name ([`crate::skills`]).
    pub(super) skills: Selection,
    pub(super) caller: Caller,
    /// `Config::state_epoch`.
    pub(super) state_epoch: u64,
    /// Resources and templates (by URI or `uriTemplate`) registered with `CacheHint::shared`.
    pub(super) shareable: Vec<(String, Duration)>,
    /// `Config::discover_cache`.
    pub(super) discover_cache: CacheHint,
    pub(super) list_cache: CacheHint,
    /// `Config::logging`.
    pub(super) logging: bool,
    /// `Config::resource_subscriptions`.
    pub(super) subscriptions: bool,
    /// `Config::envelopes`.
    pub(super) envelopes: bool,
    /// `Config::mode`.
    pub(super) mode: mcp_proto::Mode,
    /// Extensions declared at start: id, settings, and the role their gate asks for.
    extensions: Vec<(String, Value, Option<String>)>,
    /// Mirrors of the limits `Limits` has no getter for.
    pub(super) max_batch_len: usize,
    pub(super) max_depth: usize,
    pub(super) max_id_bytes: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            instructions: None,
            full_info: false,
            tools: None,
            resources: None,
            templates: None,
            prompts: None,
            skills: None,
            caller: Caller::anonymous(),
            state_epoch: 0,
            shareable: Vec::new(),
            discover_cache: CacheHint::private(),
            list_cache: CacheHint::private(),
            logging: true,
            subscriptions: true,
            envelopes: false,
            mode: mcp_proto::Mode::Direct,
            extensions: Vec::new(),
            max_batch_len: 64,
            max_depth: 64,
            max_id_bytes: 256,
        }
    }
}

/// `<id> {settings} [role <role>]`.
fn parse_extension(s: &str) -> Result<(String, Value, Option<String>), String> {
    let usage = "`! extension <id> {settings} [role <role>]`";
    let (id, rest) = s.split_once(' ').ok_or(usage)?;
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    let settings = match values.next() {
        Some(Ok(v)) => v,
        _ => return Err(usage.into()),
    };
    let tail = rest.get(values.byte_offset()..).unwrap_or_default().trim();
    let role = match tail.split_whitespace().collect::<Vec<_>>().as_slice() {
        [] => None,
        ["role", role] => Some((*role).to_owned()),
        _ => return Err(usage.into()),
    };
    Ok((id.to_owned(), settings, role))
}

/// `<identity|anonymous> [role...]`.
pub(super) fn parse_caller(s: &str) -> Result<Caller, String> {
    let mut words = s.split_whitespace();
    let mut caller = match words.next() {
        None => return Err("a caller is `<identity|anonymous> [role...]`".into()),
        Some("anonymous") => Caller::anonymous(),
        Some(id) => Caller::identified(id),
    };
    for role in words {
        caller = caller.with_role(role);
    }
    Ok(caller)
}

/// A [`Limits`] setter, taking a number or a duration.
type Setter<T> = fn(&mut Limits, T) -> &mut Limits;

/// The `! <name> N` directives that only call the [`Limits`] setter of that name.
const NUMBER_LIMITS: [(&str, Setter<usize>); 12] = [
    ("page-size", Limits::page_size),
    ("max-frame-bytes", Limits::max_frame_bytes),
    ("max-method-bytes", Limits::max_method_bytes),
    ("max-in-flight", Limits::max_in_flight),
    ("max-response-bytes", Limits::max_response_bytes),
    ("max-uri-bytes", Limits::max_uri_bytes),
    ("max-subscribed-uris", Limits::max_subscribed_uris),
    ("max-subscriptions", Limits::max_subscriptions),
    ("max-listens", Limits::max_listens),
    ("max-connections", Limits::max_connections),
    ("max-ledger-entries", Limits::max_ledger_entries),
    ("max-tasks", Limits::max_tasks),
];

/// The `! <name> 5s` (or `ms`) directives that only call the [`Limits`] setter of that name.
const DURATION_LIMITS: [(&str, Setter<Duration>); 4] = [
    ("state-ttl", Limits::state_ttl),
    ("resume-window", Limits::resume_window),
    ("task-ttl", Limits::task_ttl),
    ("task-poll-interval", Limits::task_poll_interval),
];

impl Runner {
    pub(super) fn directive(&mut self, line: usize, d: &str) -> Result<(), String> {
        let (name, rest) = d.split_once(' ').map_or((d, ""), |(a, b)| (a, b.trim()));
        let config = |s: &mut Self| -> Result<(), String> {
            if s.engine.is_some() {
                Err(format!("`! {name}` configures the engine and must come before the first input"))
            } else {
                Ok(())
            }
        };
        let number = || rest.parse::<usize>().map_err(|_| format!("`! {name}` takes a number, not {rest:?}"));
        let names = || Some(rest.split_whitespace().map(str::to_owned).collect::<Vec<_>>());
        if let Some((_, set)) = NUMBER_LIMITS.iter().find(|(n, _)| *n == name) {
            config(self)?;
            set(&mut self.settings.limits, number()?);
            return Ok(());
        }
        if let Some((_, set)) = DURATION_LIMITS.iter().find(|(n, _)| *n == name) {
            config(self)?;
            set(&mut self.settings.limits, parse_duration(rest)?);
            return Ok(());
        }
        match name {
            "max-id-bytes" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_id_bytes(n);
                self.settings.max_id_bytes = n;
            }
            "max-depth" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_depth(n);
                self.settings.max_depth = n;
            }
            "max-batch-len" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_batch_len(n);
                self.settings.max_batch_len = n;
            }
            "call-timeout" => {
                config(self)?;
                self.settings.limits.call_timeout(Some(parse_duration(rest)?));
            }
            "list-cache" => {
                config(self)?;
                self.settings.list_cache = match rest.split_once(' ') {
                    Some(("shared", ttl)) => CacheHint::shared(parse_duration(ttl)?),
                    Some(("private", ttl)) => CacheHint::private_for(parse_duration(ttl)?),
                    _ => return Err("`! list-cache <shared|private> <ttl>`".into()),
                };
            }
            "max-input-rounds" => {
                config(self)?;
                let n = number()?;
                self.settings
                    .limits
                    .max_input_rounds(u32::try_from(n).map_err(|_| format!("{n} is too large"))?);
            }
            "state-epoch" => {
                config(self)?;
                self.settings.state_epoch = number()? as u64;
            }
            "shareable" => {
                config(self)?;
                let (item, ttl) = rest.rsplit_once(' ').ok_or("`! shareable <uri|uriTemplate> <ttl>`")?;
                self.settings.shareable.push((item.trim().to_owned(), parse_duration(ttl)?));
            }
            "discover-cache" => {
                config(self)?;
                self.settings.discover_cache = match rest.split_once(' ') {
                    Some(("shared", ttl)) => CacheHint::shared(parse_duration(ttl)?),
                    Some(("private", ttl)) => CacheHint::private_for(parse_duration(ttl)?),
                    _ => return Err("`! discover-cache <shared|private> <ttl>`".into()),
                };
            }
            "instructions" => {
                config(self)?;
                let (s, _) = json_string(rest)?;
                self.settings.instructions = Some(s);
            }
            "logging" | "subscriptions" => {
                config(self)?;
                if rest != "off" {
                    return Err(format!("`! {name}` takes `off` (it is on by default)"));
                }
                if name == "logging" {
                    self.settings.logging = false;
                } else {
                    self.settings.subscriptions = false;
                }
            }
            "envelopes" => {
                config(self)?;
                self.settings.envelopes = match rest {
                    "on" => true,
                    "off" => false,
                    _ => return Err("`! envelopes on|off`".into()),
                };
            }
            "mode" => {
                config(self)?;
                self.settings.mode = match rest {
                    "compact" => mcp_proto::Mode::Compact,
                    "direct" => mcp_proto::Mode::Direct,
                    _ => return Err("`! mode compact|direct`".into()),
                };
            }
            "extension" => {
                config(self)?;
                self.settings.extensions.push(parse_extension(rest)?);
            }
            "server-info" => {
                config(self)?;
                if rest != "full" {
                    return Err("`! server-info` takes `full`".into());
                }
                self.settings.full_info = true;
            }
            "tools" => {
                config(self)?;
                self.settings.tools = names();
            }
            "resources" => {
                config(self)?;
                self.settings.resources = names();
            }
            "templates" => {
                config(self)?;
                self.settings.templates = names();
            }
            "prompts" => {
                config(self)?;
                self.settings.prompts = names();
            }
            "skills" => {
                config(self)?;
                self.settings.skills = names();
            }
            "caller" => {
                config(self)?;
                self.settings.caller = parse_caller(rest)?;
            }
            "known-bug" => self.known_bug = Some(rest.to_owned()),
            "auto" => self.auto = true,
            "manual" => self.auto = false,
            _ => {
                // Every other directive acts on the engine, after what came before is matched.
                self.settle()?;
                self.start()?;
                self.cause = line;
                self.action(name, rest)?;
                self.drain()?;
                let unsent: Vec<String> =
                    self.ask_sends.drain(..).map(|(c, m)| format!("{m} (connection {c})")).collect();
                if !unsent.is_empty() {
                    self.invariant(format!(
                        "`! ask` returned pending, but these requests were never sent: {}",
                        unsent.join(", ")
                    ));
                }
                return Ok(());
            }
        }
        Ok(())
    }

    /// The directives that act on the engine; the caller drains afterwards.
    fn action(&mut self, name: &str, rest: &str) -> Result<(), String> {
        let now = self.now;
        match name {
            "complete" => self.complete(rest),
            "ask" => self.ask(rest),
            "start-task" => self.start_task(rest),
            "log" => self.log(rest),
            "progress" => self.progress(rest),
            "shutdown" => {
                self.shutting_down = true;
                let engine = self.engine_mut()?;
                engine.shutdown(now);
                Ok(())
            }
            "close-input" | "close" => {
                let n = if rest.is_empty() {
                    1
                } else {
                    rest.parse().map_err(|_| format!("bad connection {rest:?}"))?
                };
                let id = self.conn(n)?.id;
                let engine = self.engine_mut()?;
                if name == "close" {
                    engine.close(now, id);
                } else {
                    engine.close_input(now, id);
                }
                Ok(())
            }
            "drop" => {
                let n: usize =
                    rest.parse().map_err(|_| format!("`! drop N` takes a request number, not {rest:?}"))?;
                let conn = self
                    .http_conns
                    .iter()
                    .find(|(_, (ex, _))| *ex == n)
                    .map(|(conn, _)| *conn)
                    .ok_or_else(|| format!("HTTP request {n} has no pending response"))?;
                self.engine_mut()?.close(now, conn);
                Ok(())
            }
            "open" => {
                let (n, who) = rest.split_once(' ').ok_or("`! open N <identity|anonymous> [role...]`")?;
                let n: usize = n.parse().map_err(|_| format!("bad connection number {n:?}"))?;
                if n == 0 || self.conns.contains_key(&n) {
                    return Err(format!("connection {n} is already used (numbers are never reused)"));
                }
                let caller = parse_caller(who)?;
                let id = self
                    .engine_mut()?
                    .open(now, ConnKind::Stdio, caller)
                    .map_err(|e| format!("open: {e:?}"))?;
                self.conns.insert(n, Conn::new(id));
                Ok(())
            }
            "server-gate" => {
                let gate = match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
                    ["role", role] => Some(Gate::role(*role)),
                    ["identified"] => Some(Gate::identified()),
                    ["none"] => None,
                    _ => return Err("`! server-gate role <role>` / `identified` / `none`".into()),
                };
                self.engine_mut()?.registry_mut(now).set_gate(gate);
                Ok(())
            }
            "recheck" => {
                let usage =
                    "`! recheck <binding> gone` / `! recheck <binding> as <identity|anonymous> [role...]`";
                let (binding, current) = rest.split_once(' ').ok_or(usage)?;
                let current = match current.split_once(' ') {
                    _ if current == "gone" => None,
                    Some(("as", who)) => Some(parse_caller(who)?),
                    _ => return Err(usage.into()),
                };
                self.rechecks.lock().unwrap_or_else(|p| p.into_inner()).insert(binding.to_owned(), current);
                let table = self.rechecks.clone();
                let recheck = mcp_proto::Recheck::new(move |caller| {
                    let table = table.lock().unwrap_or_else(|p| p.into_inner());
                    table.get(caller.binding()).cloned().unwrap_or_else(|| Some(caller.clone()))
                });
                self.engine_mut()?.registry_mut(now).set_recheck(Some(recheck));
                Ok(())
            }
            "register" | "unregister" => {
                let (kind, names) = rest.split_once(' ').ok_or("`! register <kind> NAME...`")?;
                let engine = self.engine.as_mut().ok_or("no engine")?;
                // One input for the whole line, as one registry edit.
                let mut r = engine.registry_mut(now);
                for n in names.split_whitespace() {
                    if name == "register" {
                        register(&mut r, kind, n, &self.settings.shareable)?;
                    } else {
                        unregister(&mut r, kind, n)?;
                    }
                }
                Ok(())
            }
            "app" | "shell" => {
                let app = parse_app(rest)?;
                let html: &'static str = Box::leak(app.html().to_owned().into_boxed_str());
                let mut r = self.engine_mut()?.registry_mut(now);
                let done = if name == "app" {
                    r.add_app(app, Fixture::App(html))
                } else {
                    r.mount_apps_shell(app, Fixture::App(html))
                };
                done.map_err(|e| format!("`! {name}`: {e}"))
            }
            "app-tool" => {
                let usage = "`! app-tool NAME URI model|app|model+app`";
                let [tool, uri, vis] = rest.split_whitespace().collect::<Vec<_>>()[..] else {
                    return Err(usage.into());
                };
                let visibility = match vis {
                    "model" => mcp_proto::Visibility::Model,
                    "app" => mcp_proto::Visibility::App,
                    "model+app" => mcp_proto::Visibility::ModelAndApp,
                    _ => return Err(usage.into()),
                };
                let t = mcp_proto::Tool::new(tool, "An app tool", serde_json::json!({"type": "object"}))
                    .ui(uri, visibility);
                let mut r = self.engine_mut()?.registry_mut(now);
                r.add_tool(t, Fixture::Tool(crate::tools::TestHandler::Nested))
                    .map_err(|e| format!("`! app-tool`: {e}"))
            }
            "notify-updated" => {
                if rest.is_empty() {
                    return Err("`! notify-updated <uri>`".into());
                }
                self.engine_mut()?.notify_resource_updated(now, rest);
                Ok(())
            }
            "notify-list-changed" => {
                let list = match rest {
                    "tools" => mcp_proto::ChangedList::Tools,
                    "resources" => mcp_proto::ChangedList::Resources,
                    "prompts" => mcp_proto::ChangedList::Prompts,
                    _ => return Err("`! notify-list-changed tools|resources|prompts`".into()),
                };
                self.engine_mut()?.notify_list_changed(now, list);
                Ok(())
            }
            "bump-epoch" => {
                self.engine_mut()?.bump_epoch(now);
                Ok(())
            }
            "set-epoch" => {
                let epoch =
                    rest.parse().map_err(|_| format!("`! set-epoch` takes a number, not {rest:?}"))?;
                self.engine_mut()?.set_epoch(now, epoch);
                Ok(())
            }
            _ => Err(format!("unknown directive `! {name}`")),
        }
    }

    /// Builds the engine on first use.
    pub(super) fn start(&mut self) -> Result<(), String> {
        if self.engine.is_some() {
            return Ok(());
        }
        let s = &self.settings;
        let mut info = Implementation::new("replay", "1.0.0");
        if s.full_info {
            info.title = Some("Replay Server".into());
            info.description = Some("Replays transcripts".into());
            info.website_url = Some("https://example.com/replay".into());
        }
        let mut config = Config::new(info, KeyRing::new([7; 32]));
        config.limits = s.limits.clone();
        config.instructions = s.instructions.clone();
        config.state_epoch = s.state_epoch;
        config.discover_cache = s.discover_cache;
        config.list_cache = s.list_cache;
        config.logging = s.logging;
        config.resource_subscriptions = s.subscriptions;
        config.envelopes = s.envelopes;
        config.mode = s.mode;
        // Session ids come from the seed: a fixed one makes them the same on every run.
        config.seed = Some(Seed([11; 32]));
        self.http = Some(HttpConfig::default());
        let mut engine = Engine::new(config, self.now);
        // The default tool set is `all_tools`; `admin_tool` only when named.
        let known: Vec<String> =
            all_tools().into_iter().chain(gated_tools()).map(|(t, _)| t.name().to_owned()).collect();
        let tools: Vec<String> = match &s.tools {
            Some(w) => {
                if let Some(bad) = w.iter().find(|n| !known.contains(n)) {
                    return Err(format!("`! tools`: no test tool named {bad:?}"));
                }
                // Registered in the fixture order, whatever the order named.
                known.iter().filter(|n| w.contains(n)).cloned().collect()
            }
            None => all_tools().into_iter().map(|(t, _)| t.name().to_owned()).collect(),
        };
        let select = |sel: &Selection, all: Vec<String>, what: &str| -> Result<Vec<String>, String> {
            let Some(w) = sel else { return Ok(Vec::new()) };
            if w.iter().any(|n| n == "all") {
                return Ok(all);
            }
            if let Some(bad) = w.iter().find(|n| !all.contains(n)) {
                return Err(format!("`! {what}`: no test fixture named {bad:?}"));
            }
            Ok(w.clone())
        };
        let resources = select(
            &s.resources,
            fixture_resources().into_iter().map(|(r, _)| r.uri().to_owned()).collect(),
            "resources",
        )?;
        let templates = select(
            &s.templates,
            fixture_templates().into_iter().map(|(t, _, _)| t.uri_template().to_owned()).collect(),
            "templates",
        )?;
        let prompts = select(
            &s.prompts,
            fixture_prompts().into_iter().map(|(p, _, _)| p.name().to_owned()).collect(),
            "prompts",
        )?;
        let skills = select(
            &s.skills,
            crate::skills::fixture_skills().iter().map(|s| s.name().to_owned()).collect(),
            "skills",
        )?;
        for (kind, list) in [
            ("tool", tools),
            ("resource", resources),
            ("template", templates),
            ("prompt", prompts),
            ("skill", skills),
        ] {
            for name in list {
                register(&mut engine.registry_mut(self.now), kind, &name, &s.shareable)?;
            }
        }
        for (id, settings, role) in &s.extensions {
            let mut e = Extension::new(id.clone(), settings.clone());
            if let Some(role) = role {
                e = e.gate(Gate::role(role.clone()));
            }
            engine.registry_mut(self.now).add_extension(e).map_err(|e| format!("`! extension`: {e}"))?;
        }
        let conn = engine
            .open(self.now, ConnKind::Stdio, self.settings.caller.clone())
            .map_err(|e| format!("{e:?}"))?;
        // Nothing is open yet, so registering told nobody; drop whatever it queued.
        while engine.poll_output().is_some() {}
        self.engine = Some(engine);
        self.conns.insert(1, Conn::new(conn));
        Ok(())
    }
}

/// Registers the test item `name` of `kind` (a fixture, or a plain extra item).
pub(super) fn register(
    r: &mut RegistryMut<'_, Fixture>,
    kind: &str,
    name: &str,
    shareable: &[(String, Duration)],
) -> Result<(), String> {
    let hint = shareable
        .iter()
        .find(|(n, _)| n == name)
        .map_or(CacheHint::private(), |(_, ttl)| CacheHint::shared(*ttl));
    let result = match kind {
        "tool" => {
            let found = all_tools().into_iter().chain(gated_tools()).find(|(t, _)| t.name() == name);
            let (tool, handler) = found.unwrap_or_else(|| {
                (
                    mcp_proto::Tool::new(name, "An extra tool", serde_json::json!({"type": "object"})),
                    TestHandler::Nested,
                )
            });
            r.add_tool(tool, Fixture::Tool(handler))
        }
        "resource" => {
            let found = fixture_resources().into_iter().find(|(x, _)| x.uri() == name);
            let (res, f) = found.unwrap_or_else(|| {
                (mcp_proto::Resource::new(name, name), Fixture::Text("text/plain", "extra"))
            });
            r.add_resource(res.cache(hint), f)
        }
        "template" => {
            let found = fixture_templates().into_iter().find(|(t, _, _)| t.uri_template() == name);
            let (t, f, c) = found.unwrap_or_else(|| {
                (mcp_proto::ResourceTemplate::new(name, "extra"), Fixture::Variables, None)
            });
            r.add_template(t.cache(hint), f, c)
        }
        "prompt" => {
            let found = fixture_prompts().into_iter().find(|(p, _, _)| p.name() == name);
            let (p, f, c) =
                found.unwrap_or_else(|| (mcp_proto::Prompt::new(name), Fixture::PromptText("extra"), None));
            r.add_prompt(p, f, c)
        }
        "skill" => r.add_skill(crate::skills::skill(name)),
        _ => return Err(format!("unknown item kind {kind:?}: tool, resource, template, prompt or skill")),
    };
    result.map_err(|e| format!("registering {kind} {name}: {e}"))
}

/// An app from the JSON of `! app` and `! shell`: `uri`, `name` and `html` (required),
/// `title`, `description`, `views` (strings), `csp` (the four lists by their wire names),
/// `permissions` (names: `camera`, `microphone`, `geolocation`, `clipboardWrite`),
/// `prefersBorder`, `domain`.
fn parse_app(text: &str) -> Result<mcp_proto::App, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("app JSON: {e}"))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let strings = |x: Option<&Value>| -> Vec<String> {
        x.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let (Some(uri), Some(name), Some(html)) = (s("uri"), s("name"), s("html")) else {
        return Err("an app needs \"uri\", \"name\" and \"html\"".into());
    };
    let mut app = mcp_proto::App::new(uri, name, html).views(strings(v.get("views")));
    if let Some(t) = s("title") {
        app = app.title(t);
    }
    if let Some(d) = s("description") {
        app = app.description(d);
    }
    if let Some(d) = s("domain") {
        app = app.domain(d);
    }
    if let Some(b) = v.get("prefersBorder").and_then(Value::as_bool) {
        app = app.prefers_border(b);
    }
    let csp = v.get("csp");
    let mut c = mcp_proto::AppCsp::new();
    for o in strings(csp.and_then(|c| c.get("connectDomains"))) {
        c = c.connect_domain(o);
    }
    for o in strings(csp.and_then(|c| c.get("resourceDomains"))) {
        c = c.resource_domain(o);
    }
    for o in strings(csp.and_then(|c| c.get("frameDomains"))) {
        c = c.frame_domain(o);
    }
    for o in strings(csp.and_then(|c| c.get("baseUriDomains"))) {
        c = c.base_uri_domain(o);
    }
    let mut p = mcp_proto::AppPermissions::new();
    for name in strings(v.get("permissions")) {
        p = match name.as_str() {
            "camera" => p.camera(),
            "microphone" => p.microphone(),
            "geolocation" => p.geolocation(),
            "clipboardWrite" => p.clipboard_write(),
            other => return Err(format!("unknown app permission {other:?}")),
        };
    }
    Ok(app.csp(c).permissions(p))
}

pub(super) fn unregister(r: &mut RegistryMut<'_, Fixture>, kind: &str, name: &str) -> Result<(), String> {
    let found = match kind {
        "tool" => r.remove_tool(name).is_some(),
        "resource" => r.remove_resource(name).is_some(),
        "template" => r.remove_template(name).is_some(),
        "prompt" => r.remove_prompt(name).is_some(),
        "skill" => r.remove_skill(&crate::skills::skill(name).uri()).is_some(),
        _ => return Err(format!("unknown item kind {kind:?}: tool, resource, template, prompt or skill")),
    };
    if found {
        Ok(())
    } else {
        Err(format!("unregistering {kind} {name}: it is not registered"))
    }
}

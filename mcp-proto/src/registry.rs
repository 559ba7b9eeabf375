//! What the server offers: tools (resources, templates and prompts follow the same pattern).
//!
//! Registration does the expensive work once: names are checked, schemas are compiled into
//! validators, and each tool's listing is serialised for every protocol version, so a
//! `tools/list` is a concatenation and a `tools/call` a map lookup plus one validation.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::apps::{self, App, AppError, Apps, Shell};
use crate::caller::Gate;
use crate::items::{Prompt, Resource, ResourceTemplate, UriTemplate};
use crate::schema::Validator;
use crate::version::ProtocolVersion;
// The leaves below the registry own these; this path stays valid for the engine.
pub(crate) use crate::registry_error::RegistryError;
pub(crate) use crate::tool::{TaskSupport, Tool};

fn valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Compiles a schema without ever fetching a remote `$ref` (see [`crate::schema`]).
fn compile(schema: &Value) -> Result<Validator, RegistryError> {
    Validator::compile(schema).map_err(RegistryError::InvalidSchema)
}

/// A registered tool: its declaration, compiled validators, cached listings and handler.
pub(crate) struct ToolEntry<H> {
    pub(crate) tool: Tool,
    pub(crate) input: Option<Validator>,
    pub(crate) output: Option<Validator>,
    /// What a failure's `diagnostics` must satisfy ([`Tool::failure_diagnostics_schema`]).
    pub(crate) diagnostics: Option<Validator>,
    /// `tools/list` entries per version, index by [`version_index`].
    listings: [Arc<str>; 4],
    /// The listings with the output schema wrapped for envelopes ([`crate::wrap`]), prepared on
    /// the tool's first authorized access on a server with envelopes, then kept (a failure too:
    /// the schema cannot change without replacing the tool, which drops this).
    enveloped: OnceCell<Result<[Arc<str>; 4], String>>,
    legacy_visible: bool,
    /// The input schema's `x-mcp-header` annotations: what 2026-07-28 `Mcp-Param-*` headers
    /// must mirror.
    pub(crate) header_params: Vec<crate::http::HeaderParam>,
    pub(crate) handler: H,
}

impl<H> ToolEntry<H> {
    pub(crate) fn visible_to(&self, v: ProtocolVersion) -> bool {
        v.structured_content_any_type() || self.legacy_visible
    }

    pub(crate) fn listing(&self, v: ProtocolVersion) -> &str {
        self.listings.get(version_index(v)).map_or("", |s| s)
    }

    /// The listing a server with envelopes publishes: the output schema, if any, wrapped as the
    /// union of `{"value": <schema>}` and the failure envelope. Prepared (wrapped and compiled)
    /// on first use; `Err` names why it cannot be, for the server's operator, never the peer.
    pub(crate) fn enveloped_listing(&self, v: ProtocolVersion) -> Result<&str, &str> {
        if self.tool.output_schema.is_none() {
            return Ok(self.listing(v));
        }
        match self.enveloped.get_or_init(|| self.wrap_listings()) {
            Ok(listings) => Ok(listings.get(version_index(v)).map_or("", |s| s)),
            Err(e) => Err(e),
        }
    }

    fn wrap_listings(&self) -> Result<[Arc<str>; 4], String> {
        let Some(app) = &self.tool.output_schema else { return Ok(self.listings.clone()) };
        let wrapped =
            crate::wrap::prepare(app, self.tool.diagnostics_schema.as_ref()).map_err(|e| e.to_string())?;
        let mut tool = self.tool.clone();
        tool.output_schema = Some(wrapped.schema().clone());
        Ok(listings(|v| tool.listing(v)))
    }
}

pub(crate) fn version_index(v: ProtocolVersion) -> usize {
    match v {
        ProtocolVersion::V2025_03_26 => 0,
        ProtocolVersion::V2025_06_18 => 1,
        ProtocolVersion::V2025_11_25 => 2,
        ProtocolVersion::V2026_07_28 => 3,
    }
}

/// Serialises an item's listing once per version.
pub(crate) fn listings(f: impl Fn(ProtocolVersion) -> String) -> [Arc<str>; 4] {
    let mut out = ProtocolVersion::ALL.map(|_| Arc::<str>::from(""));
    for v in ProtocolVersion::ALL {
        if let Some(slot) = out.get_mut(version_index(v)) {
            *slot = f(v).into();
        }
    }
    out
}

/// A registered resource.
pub(crate) struct ResourceEntry<H> {
    pub(crate) resource: Resource,
    listings: [Arc<str>; 4],
    pub(crate) source: Source<H>,
}

/// Who answers a read of a resource.
pub(crate) enum Source<H> {
    /// The application's handler.
    Handler(H),
    /// The engine, from a registered skill's file.
    Skill(Arc<crate::skills::ServedFile>),
}

/// A registered template.
pub(crate) struct TemplateEntry<H> {
    pub(crate) template: ResourceTemplate,
    pub(crate) matcher: UriTemplate,
    listings: [Arc<str>; 4],
    pub(crate) handler: H,
    pub(crate) completion: Option<H>,
}

/// A registered prompt.
pub(crate) struct PromptEntry<H> {
    pub(crate) prompt: Prompt,
    listings: [Arc<str>; 4],
    pub(crate) handler: H,
    pub(crate) completion: Option<H>,
}

/// What every listed item offers the engine's list and gate logic.
pub(crate) trait Listed {
    /// The method that lists this kind, which its cursors are bound to.
    const METHOD: &'static str;
    /// The member of the list result that holds the page.
    const KEY: &'static str;
    /// The longest key a cursor of this kind may carry beyond the longest registered now: a
    /// bound registration enforced, which a smaller limit set later must not make refuse a
    /// cursor the engine issued. Registration bounds neither URI templates nor prompt names,
    /// so for them (the default) the longest registered is the longest a cursor can carry.
    fn key_bound(_limits: &crate::limits::Limits) -> usize {
        0
    }
    fn listing(&self, v: ProtocolVersion) -> &str;
    /// The listing a server publishes with envelopes on (`enveloped`); only tools differ.
    fn wire_listing(&self, v: ProtocolVersion, enveloped: bool) -> Result<&str, &str> {
        let _ = enveloped;
        Ok(self.listing(v))
    }
    fn gate(&self) -> Option<&Gate>;
    fn visible_to(&self, _v: ProtocolVersion) -> bool {
        true
    }
}

impl<H> Listed for ToolEntry<H> {
    const METHOD: &'static str = "tools/list";
    const KEY: &'static str = "tools";
    fn key_bound(_limits: &crate::limits::Limits) -> usize {
        MAX_TOOL_NAME
    }
    fn listing(&self, v: ProtocolVersion) -> &str {
        ToolEntry::listing(self, v)
    }
    fn wire_listing(&self, v: ProtocolVersion, enveloped: bool) -> Result<&str, &str> {
        if enveloped {
            self.enveloped_listing(v)
        } else {
            Ok(self.listing(v))
        }
    }
    fn gate(&self) -> Option<&Gate> {
        self.tool.info.gate.as_ref()
    }
    fn visible_to(&self, v: ProtocolVersion) -> bool {
        ToolEntry::visible_to(self, v)
    }
}

macro_rules! listed {
    ($entry:ident, $field:ident, $method:literal, $key:literal $(, $bound:expr)?) => {
        impl<H> Listed for $entry<H> {
            const METHOD: &'static str = $method;
            const KEY: &'static str = $key;
            $(
                fn key_bound(limits: &crate::limits::Limits) -> usize {
                    ($bound)(limits)
                }
            )?
            fn listing(&self, v: ProtocolVersion) -> &str {
                self.listings.get(version_index(v)).map_or("", |s| s)
            }
            fn gate(&self) -> Option<&Gate> {
                self.$field.info.gate.as_ref()
            }
        }
    };
}
// Registration refuses URIs longer than `max_uri_bytes`, but a smaller limit may have come later.
listed!(ResourceEntry, resource, "resources/list", "resources", |l: &crate::limits::Limits| l.max_uri_bytes);

impl Listed for crate::skills::SkillEntry {
    const METHOD: &'static str = "skills/list";
    const KEY: &'static str = "skills";
    // A skill is keyed by its `SKILL.md` URI, which registration bounds like any resource's.
    fn key_bound(limits: &crate::limits::Limits) -> usize {
        limits.max_uri_bytes
    }
    fn listing(&self, _v: ProtocolVersion) -> &str {
        &self.entry
    }
    fn gate(&self) -> Option<&Gate> {
        self.skill.gate.as_ref()
    }
}
listed!(TemplateEntry, template, "resources/templates/list", "resourceTemplates");
listed!(PromptEntry, prompt, "prompts/list", "prompts");

/// The longest tool name [`valid_tool_name`] accepts, so the longest key a `tools/list` cursor
/// ever carries.
pub(crate) const MAX_TOOL_NAME: usize = 128;

/// The items of one kind, by key (tool or prompt name, resource URI, URI template) in key
/// order, the order lists page through. Reads go to the map; writes go through `insert` and
/// `remove`, which keep the counts a list page needs in O(1) up to date.
pub(crate) struct Catalogue<E> {
    items: BTreeMap<String, E>,
    /// How many items have a gate: a list is private (`cacheScope`) when any does, and a page
    /// must learn that without walking the catalogue.
    gated: usize,
    /// The longest key ever inserted, removed ones included, so a cursor that names a removed
    /// item still reads.
    longest_key: usize,
}

impl<E> Default for Catalogue<E> {
    fn default() -> Self {
        Self { items: BTreeMap::new(), gated: 0, longest_key: 0 }
    }
}

impl<E> std::ops::Deref for Catalogue<E> {
    type Target = BTreeMap<String, E>;
    fn deref(&self) -> &Self::Target {
        &self.items
    }
}

impl<E: Listed> Catalogue<E> {
    /// Adds or replaces the item at `key`.
    pub(crate) fn insert(&mut self, key: String, entry: E) -> Option<E> {
        self.longest_key = self.longest_key.max(key.len());
        self.gated += usize::from(entry.gate().is_some());
        let old = self.items.insert(key, entry);
        self.gated -= old.as_ref().map_or(0, |o| usize::from(o.gate().is_some()));
        old
    }

    /// Removes the item at `key`.
    pub(crate) fn remove(&mut self, key: &str) -> Option<E> {
        let old = self.items.remove(key)?;
        self.gated -= usize::from(old.gate().is_some());
        Some(old)
    }

    /// Whether any item has a gate.
    pub(crate) fn any_gated(&self) -> bool {
        self.gated > 0
    }

    /// The longest key ever inserted, in bytes.
    pub(crate) fn longest_key(&self) -> usize {
        self.longest_key
    }

    /// The longest key a list cursor of this kind may name: the longest registered, or the
    /// kind's registration bound ([`Listed::key_bound`]) when that is longer.
    pub(crate) fn cursor_key_bound(&self, limits: &crate::limits::Limits) -> usize {
        self.longest_key.max(E::key_bound(limits))
    }
}

/// Everything registered with an engine.
pub(crate) struct Registry<H> {
    pub(crate) tools: Catalogue<ToolEntry<H>>,
    pub(crate) resources: Catalogue<ResourceEntry<H>>,
    pub(crate) templates: Catalogue<TemplateEntry<H>>,
    pub(crate) prompts: Catalogue<PromptEntry<H>>,
    /// Skills, by the URI of their `SKILL.md` (their files are in `resources` too).
    pub(crate) skills: Catalogue<crate::skills::SkillEntry>,
    /// Every directory of every skill, by URI: the `SKILL.md` URI of the skill it belongs to,
    /// so a `resources/directory/read` finds its skill in one lookup.
    pub(crate) skill_dirs: BTreeMap<String, String>,
    /// The server-wide gate over the data methods.
    pub(crate) gate: Option<Gate>,
    /// Re-resolves a held stream's caller before each delivery to it
    /// ([`crate::engine::RegistryMut::set_recheck`]).
    pub(crate) recheck: Option<crate::caller::Recheck>,
    /// Declared extensions, by id: the order `capabilities.extensions` lists them in.
    pub(crate) extensions: BTreeMap<String, crate::extensions::Extension>,
    /// The tools' search index, kept only where something searches (compact publication).
    pub(crate) search: Option<crate::search::SearchIndex>,
    /// MCP Apps: each registered app's views, and the compact apps shell.
    pub(crate) apps: Apps<H>,
    /// Tools that may run as tasks: while there is one, the engine serves the Tasks extension.
    pub(crate) task_tools: usize,
    /// Looks up tasks the engine does not hold ([`crate::engine::RegistryMut::set_task_lookup`]).
    pub(crate) task_lookup: Option<H>,
}

impl<H> Default for Registry<H> {
    fn default() -> Self {
        Self {
            tools: Catalogue::default(),
            resources: Catalogue::default(),
            templates: Catalogue::default(),
            prompts: Catalogue::default(),
            skills: Catalogue::default(),
            skill_dirs: BTreeMap::new(),
            gate: None,
            recheck: None,
            extensions: BTreeMap::new(),
            search: None,
            apps: Apps::default(),
            task_tools: 0,
            task_lookup: None,
        }
    }
}

impl<H> Registry<H> {
    /// An empty registry that keeps a search index of its tools when `searchable`.
    pub(crate) fn new(searchable: bool) -> Self {
        Self { search: searchable.then(crate::search::SearchIndex::default), ..Self::default() }
    }

    pub(crate) fn add_resource(
        &mut self,
        resource: Resource,
        handler: H,
        max_uri: usize,
    ) -> Result<(), RegistryError> {
        if resource.uri.is_empty() || resource.name.is_empty() || resource.uri.len() > max_uri {
            return Err(RegistryError::InvalidUri(format!(
                "{:?}: the URI and name must be non-empty and the URI at most {max_uri} bytes",
                resource.uri
            )));
        }
        if self.resources.contains_key(&resource.uri) {
            return Err(RegistryError::Duplicate(resource.uri));
        }
        if self.apps.shell.as_ref().is_some_and(|s| s.resource.uri == resource.uri) {
            let item = format!("resource {:?}", resource.uri);
            return Err(AppError::ShellConflict { uri: resource.uri, item }.into());
        }
        let listings = listings(|v| resource.listing(v));
        let source = Source::Handler(handler);
        self.resources.insert(resource.uri.clone(), ResourceEntry { resource, listings, source });
        Ok(())
    }

    /// Registers a skill: its entry, and each of its files as a resource. Refused whole, before
    /// anything changes, when the skill is invalid, its `SKILL.md` URI is taken, one of its
    /// files' URIs is a registered resource, or it nests in (or holds) another skill.
    pub(crate) fn add_skill(
        &mut self,
        skill: crate::skills::Skill,
        max_uri: usize,
    ) -> Result<(), RegistryError> {
        let entry = crate::skills::SkillEntry::new(skill, max_uri)?;
        if self.skills.contains_key(entry.uri()) {
            return Err(RegistryError::Duplicate(entry.uri().to_owned()));
        }
        if let Some((r, _)) = entry.files.iter().find(|(r, _)| self.resources.contains_key(&r.uri)) {
            return Err(RegistryError::Duplicate(r.uri.clone()));
        }
        let root = entry.skill.root();
        // Nested skills are not supported (see crate::skills): SEP-2640 would have the outer
        // manifest list the inner skill's files too, which a separately registered inner skill
        // would change behind the outer entry. Both roots are compared as directories.
        let nested = self.skills.values().find(|other| {
            let o = other.skill.root();
            root.strip_prefix(o).is_some_and(|r| r.starts_with('/'))
                || o.strip_prefix(root).is_some_and(|r| r.starts_with('/'))
        });
        if let Some(other) = nested {
            return Err(RegistryError::InvalidSkill(format!(
                "{root:?}: nests with the registered skill {:?}; serve a nested skill's files as files \
                 of the outer skill instead",
                other.skill.root()
            )));
        }
        for (resource, file) in &entry.files {
            let listings = listings(|v| resource.listing(v));
            let source = Source::Skill(file.clone());
            let resource = resource.clone();
            self.resources.insert(resource.uri.clone(), ResourceEntry { resource, listings, source });
        }
        for dir in entry.dirs.keys() {
            self.skill_dirs.insert(dir.clone(), entry.uri().to_owned());
        }
        self.skills.insert(entry.uri().to_owned(), entry);
        Ok(())
    }

    /// Unregisters the skill whose `SKILL.md` is at `uri`, and its files.
    pub(crate) fn remove_skill(&mut self, uri: &str) -> Option<crate::skills::Skill> {
        let entry = self.skills.remove(uri)?;
        for (r, _) in &entry.files {
            self.resources.remove(&r.uri);
        }
        for dir in entry.dirs.keys() {
            self.skill_dirs.remove(dir);
        }
        Some(entry.skill)
    }

    pub(crate) fn add_template(
        &mut self,
        template: ResourceTemplate,
        handler: H,
        completion: Option<H>,
    ) -> Result<(), RegistryError> {
        if template.name.is_empty() {
            return Err(RegistryError::InvalidUri(format!(
                "{:?}: the name must be non-empty",
                template.uri_template
            )));
        }
        if self.templates.contains_key(&template.uri_template) {
            return Err(RegistryError::Duplicate(template.uri_template));
        }
        let matcher = UriTemplate::parse(&template.uri_template)?;
        if let Some(shell) = self.apps.shell.as_ref().filter(|s| matcher.matches(&s.resource.uri).is_some()) {
            let item = format!("template {:?}", template.uri_template);
            return Err(AppError::ShellConflict { uri: shell.resource.uri.clone(), item }.into());
        }
        let listings = listings(|v| template.listing(v));
        self.templates.insert(
            template.uri_template.clone(),
            TemplateEntry { template, matcher, listings, handler, completion },
        );
        Ok(())
    }

    pub(crate) fn add_prompt(
        &mut self,
        prompt: Prompt,
        handler: H,
        completion: Option<H>,
    ) -> Result<(), RegistryError> {
        if prompt.name.is_empty() {
            return Err(RegistryError::InvalidName(prompt.name));
        }
        if self.prompts.contains_key(&prompt.name) {
            return Err(RegistryError::Duplicate(prompt.name));
        }
        let listings = listings(|v| prompt.listing(v));
        self.prompts.insert(prompt.name.clone(), PromptEntry { prompt, listings, handler, completion });
        Ok(())
    }

    pub(crate) fn add_tool(&mut self, tool: Tool, handler: H) -> Result<(), RegistryError> {
        if !valid_tool_name(&tool.name) {
            return Err(RegistryError::InvalidName(tool.name));
        }
        if self.tools.contains_key(&tool.name) {
            return Err(RegistryError::Duplicate(tool.name));
        }
        if tool.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(RegistryError::InvalidSchema(format!(
                "the input schema of {:?} must be an object schema (\"type\": \"object\")",
                tool.name
            )));
        }
        if let Some(link) = tool.ui.as_ref().filter(|l| !self.apps.knows(&l.resource_uri)) {
            let e = AppError::NotAnApp { tool: tool.name.clone(), uri: link.resource_uri.clone() };
            return Err(e.into());
        }
        let input = if tool.validate_input { Some(compile(&tool.input_schema)?) } else { None };
        let output = tool.output_schema.as_ref().map(compile).transpose()?;
        let diagnostics = tool.diagnostics_schema.as_ref().map(compile).transpose()?;
        let legacy_visible = tool
            .output_schema
            .as_ref()
            .is_none_or(|s| s.get("type").and_then(Value::as_str) == Some("object"));
        let header_params = crate::http::x_mcp_headers(&tool.input_schema)
            .map_err(|e| RegistryError::InvalidSchema(format!("the input schema of {:?}: {e}", tool.name)))?;
        let listings = listings(|v| tool.listing(v));
        if let Some(index) = &mut self.search {
            index.insert(&tool);
        }
        if tool.task != TaskSupport::Never {
            self.task_tools += 1;
        }
        let entry = ToolEntry {
            tool,
            input,
            output,
            diagnostics,
            listings,
            enveloped: OnceCell::new(),
            legacy_visible,
            header_params,
            handler,
        };
        self.tools.insert(entry.tool.name.clone(), entry);
        Ok(())
    }

    pub(crate) fn add_extension(
        &mut self,
        extension: crate::extensions::Extension,
    ) -> Result<(), RegistryError> {
        extension.checked()?;
        // An explicit declaration of the apps extension replaces the one apps made.
        if extension.id() == apps::EXTENSION_ID && self.apps.auto_declared {
            self.extensions.remove(extension.id());
            self.apps.auto_declared = false;
        }
        if extension.id() == crate::skills::EXTENSION_ID {
            return Err(RegistryError::InvalidExtension(format!(
                "{:?} is declared by the engine itself, to the callers that can see a registered skill",
                extension.id()
            )));
        }
        if self.extensions.contains_key(extension.id()) {
            return Err(RegistryError::Duplicate(extension.id().to_owned()));
        }
        self.extensions.insert(extension.id().to_owned(), extension);
        Ok(())
    }

    pub(crate) fn remove_tool(&mut self, name: &str) -> Option<Tool> {
        let tool = self.tools.remove(name)?.tool;
        if let Some(index) = &mut self.search {
            index.remove(&tool);
        }
        if tool.task != TaskSupport::Never {
            self.task_tools = self.task_tools.saturating_sub(1);
        }
        Some(tool)
    }
}

/// MCP Apps: registering apps and mounting the shell ([`crate::apps`] checks them first).
impl<H> Registry<H> {
    /// Registers `app` (already [checked](App::check)) as a resource read by `handler`, and
    /// declares the extension.
    pub(crate) fn add_app(&mut self, app: &App, handler: H, max_uri: usize) -> Result<(), RegistryError> {
        self.add_resource(app.resource(), handler, max_uri)?;
        self.apps.views.insert(app.uri().to_owned(), app.declared_views().to_vec());
        self.declare_apps();
        Ok(())
    }

    /// Mounts the apps shell (already [checked](App::check)): exclusive, so no resource may
    /// have its URI and no template match it.
    pub(crate) fn mount_shell(
        &mut self,
        app: App,
        handler: H,
        compact: bool,
        max_uri: usize,
    ) -> Result<(), RegistryError> {
        if app.uri().len() > max_uri {
            // A read of a longer URI is refused before it is resolved: the shell could never be read.
            return Err(RegistryError::InvalidUri(format!(
                "{:?}: the URI must be at most {max_uri} bytes",
                app.uri()
            )));
        }
        if !compact {
            return Err(AppError::ShellNeedsCompact.into());
        }
        if let Some(s) = &self.apps.shell {
            return Err(AppError::ShellTaken { uri: s.resource.uri.clone() }.into());
        }
        let uri = app.uri().to_owned();
        let conflict = if self.resources.contains_key(&uri) {
            Some(format!("resource {uri:?}"))
        } else {
            self.templates
                .values()
                .find(|t| t.matcher.matches(&uri).is_some())
                .map(|t| format!("template {:?}", t.template.uri_template))
        };
        if let Some(item) = conflict {
            return Err(AppError::ShellConflict { uri, item }.into());
        }
        self.apps.shell = Some(Shell { resource: app.resource(), app, handler });
        self.declare_apps();
        Ok(())
    }

    /// Declares the extension, unless the application already did. The settings name the
    /// media type this server's apps are served as: the specification defines settings only
    /// for clients (`mimeTypes`, the types a host renders), and the same member on the server
    /// side tells a client what it would be asked to render.
    fn declare_apps(&mut self) {
        if self.extensions.contains_key(apps::EXTENSION_ID) {
            return;
        }
        let settings = serde_json::json!({ "mimeTypes": [apps::APP_MIME_TYPE] });
        self.extensions.insert(
            apps::EXTENSION_ID.to_owned(),
            crate::extensions::Extension::new(apps::EXTENSION_ID, settings),
        );
        self.apps.auto_declared = true;
    }
}

/// Formats schema validation errors for a peer: at most 8 of them, each with its JSON
/// pointer, so the reply stays small whatever the input.
pub(crate) fn describe_errors(validator: &Validator, instance: &Value) -> Option<Vec<String>> {
    let out = validator.errors(instance, 8);
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        let mut r = Registry::<()>::default();
        let schema = json!({"type": "object"});
        assert!(r.add_tool(Tool::new("a.b-c_D9", "d", schema.clone()), ()).is_ok());
        assert!(matches!(
            r.add_tool(Tool::new("a.b-c_D9", "d", schema.clone()), ()),
            Err(RegistryError::Duplicate(_))
        ));
        for bad in ["", "has space", "ü", &"x".repeat(129)] {
            assert!(matches!(
                r.add_tool(Tool::new(bad, "d", schema.clone()), ()),
                Err(RegistryError::InvalidName(_))
            ));
        }
        assert!(matches!(
            r.add_tool(Tool::new("s", "d", json!({"type": "string"})), ()),
            Err(RegistryError::InvalidSchema(_))
        ));
    }

    #[test]
    fn remote_refs_do_not_compile() {
        let mut r = Registry::<()>::default();
        let schema = json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}});
        assert!(matches!(r.add_tool(Tool::new("t", "d", schema), ()), Err(RegistryError::InvalidSchema(_))));
    }

    // Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
    #[cfg(feature = "exact-json")]
    #[test]
    fn listings_follow_versions() {
        let mut r = Registry::<()>::default();
        let t = Tool::new("t", "d", json!({"type": "object"}))
            .title("T")
            .output_schema(json!({"type": "object"}))
            .icons(json!([{"src": "https://x/i.png"}]));
        r.add_tool(t, ()).unwrap();
        let e = r.tools.get("t").unwrap();
        assert_eq!(
            e.listing(ProtocolVersion::V2025_03_26),
            r#"{"name":"t","description":"d","inputSchema":{"type":"object"}}"#
        );
        assert!(e.listing(ProtocolVersion::V2025_06_18).contains("outputSchema"));
        assert!(!e.listing(ProtocolVersion::V2025_06_18).contains("icons"));
        assert!(e.listing(ProtocolVersion::V2025_11_25).contains("icons"));
    }

    #[test]
    fn catalogues_count_gates_and_remember_the_longest_key() {
        let mut r = Registry::<()>::default();
        let schema = json!({"type": "object"});
        r.add_tool(Tool::new("plain", "d", schema.clone()), ()).unwrap();
        assert!(!r.tools.any_gated());
        r.add_tool(Tool::new("gated_a", "d", schema.clone()).gate(Gate::role("x")), ()).unwrap();
        r.add_tool(Tool::new("gated_b", "d", schema.clone()).gate(Gate::role("x")), ()).unwrap();
        assert!(r.tools.any_gated());
        assert!(r.remove_tool("gated_a").is_some());
        assert!(r.tools.any_gated());
        assert!(r.remove_tool("gated_b").is_some());
        assert!(r.remove_tool("gated_b").is_none());
        assert!(!r.tools.any_gated(), "no gated tool is left");
        assert_eq!(r.tools.longest_key(), "gated_a".len(), "removed keys still count");
    }

    #[test]
    fn skills_are_refused_whole_when_they_collide_or_nest() {
        let mut r = Registry::<()>::default();
        let skill =
            |root: &str| crate::skills::Skill::new(root, "d", "b").file("docs/a.md", "text/markdown", "a");
        r.add_skill(skill("skill://acme/refunds"), 2048).unwrap();
        assert_eq!(r.skills.len(), 1);
        assert_eq!(r.resources.len(), 2, "SKILL.md and docs/a.md");
        assert_eq!(
            r.add_skill(skill("skill://acme/refunds"), 2048),
            Err(RegistryError::Duplicate("skill://acme/refunds/SKILL.md".into()))
        );
        // A file whose URI an application resource already has: nothing of the skill is added.
        r.add_resource(Resource::new("skill://other/docs/a.md", "a"), (), 2048).unwrap();
        assert_eq!(
            r.add_skill(skill("skill://other"), 2048),
            Err(RegistryError::Duplicate("skill://other/docs/a.md".into()))
        );
        assert!(!r.resources.contains_key("skill://other/SKILL.md"));
        for nested in ["skill://acme/refunds/inner", "skill://acme"] {
            let e = r.add_skill(skill(nested), 2048).unwrap_err();
            assert!(e.to_string().contains("nests with"), "{nested}: {e}");
        }
        // A sibling whose root merely starts with the same characters does not nest.
        r.add_skill(skill("skill://acme/refunds-eu"), 2048).unwrap();
        let e = r.add_skill(skill("skill://a/b"), 10).unwrap_err();
        assert!(matches!(e, RegistryError::InvalidUri(_)), "{e}");
        assert!(r.remove_skill("skill://acme/refunds/SKILL.md").is_some());
        assert!(!r.resources.contains_key("skill://acme/refunds/docs/a.md"));
        assert!(!r.skill_dirs.contains_key("skill://acme/refunds/docs"));
        assert!(r.skill_dirs.contains_key("skill://acme/refunds-eu/docs"));
        assert!(r.remove_skill("skill://acme/refunds/SKILL.md").is_none());
        // The engine declares the extension itself.
        let e = r
            .add_extension(crate::extensions::Extension::new(crate::skills::EXTENSION_ID, json!({})))
            .unwrap_err();
        assert!(matches!(e, RegistryError::InvalidExtension(_)), "{e}");
    }

    #[test]
    fn array_output_schema_is_modern_only() {
        let mut r = Registry::<()>::default();
        r.add_tool(
            Tool::new("t", "d", json!({"type": "object"})).output_schema(json!({"type": "array"})),
            (),
        )
        .unwrap();
        let e = r.tools.get("t").unwrap();
        assert!(!e.visible_to(ProtocolVersion::V2025_11_25));
        assert!(e.visible_to(ProtocolVersion::V2026_07_28));
    }
}

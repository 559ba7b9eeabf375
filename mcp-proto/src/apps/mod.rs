//! MCP Apps (the `io.modelcontextprotocol/ui` extension, stable specification 2026-01-26):
//! interactive HTML views a host renders in a sandboxed iframe, served as `ui://` resources and
//! linked to the tools whose results they show.
//!
//! An [`App`] is pure data, checked when it is registered
//! ([`RegistryMut::add_app`](crate::engine::RegistryMut::add_app)): its `ui://` URI, its HTML, the
//! origins its content-security policy asks for ([`AppCsp`]), the browser permissions it asks
//! for ([`AppPermissions`]), its rendering hints, and the views a handler may select
//! ([`ToolOutput::presentation`]). Registering one registers a resource served as
//! [`APP_MIME_TYPE`], privately cacheable, whose `_meta.ui` (`csp`, `permissions`, `domain`,
//! `prefersBorder`) goes on its `resources/list` entry and on the contents of every read (the
//! contents a handler returns inherit the declared `mimeType` and `_meta`, see
//! [`ResourceContents::inheriting`](crate::content::ResourceContents::inheriting)), and declares the
//! extension once. [`Tool::ui`](crate::tool::Tool::ui) links a tool to a registered app.
//!
//! Where the two seed documents and the specification differ, the specification wins: the
//! resource's `_meta.ui` carries `domain` and `prefersBorder` as the specification names them,
//! and a linked tool's `_meta` carries the deprecated flat `"ui/resourceUri"` beside
//! `ui.resourceUri`, as the official server SDK writes it, so hosts older than the stable
//! specification find the app too.
//!
//! The engine does not parse, sanitise or run the HTML: the host owns the document and
//! enforces the policy. Keep secrets and private state out of it.

use serde_json::{Map, Value};

use crate::content::ToolOutput;
use crate::items::{CacheHint, Resource};
// Below the registry with `RegistryError`, which carries it; its public path is this one.
pub use crate::registry_error::AppError;

mod checks;

use checks::check_origin;
pub use checks::check_ui_uri;

/// The extension's id, declared under `capabilities.extensions` once any app is registered.
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/ui";
/// The media type of an app's HTML document (the specification's `RESOURCE_MIME_TYPE`).
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";
/// The largest HTML document an app may have: 8 MiB (seed 000's bound). A larger one is
/// refused at registration ([`AppError::HtmlTooLarge`]). The encoded read must also fit
/// [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes): JSON escaping can make a
/// smaller document too large ([`AppError::ReadTooLarge`]).
pub const MAX_APP_HTML_BYTES: usize = 8 * 1024 * 1024;
/// The largest encoded configuration of an app, everything but its HTML (URI, name, title,
/// description, views and `_meta.ui`): 64 KiB (seed 000's bound). A larger one is refused at
/// registration ([`AppError::ConfigTooLarge`]).
pub const MAX_APP_CONFIG_BYTES: usize = 64 * 1024;
/// The deprecated flat `_meta` key older hosts read a linked tool's app URI from.
pub const LEGACY_RESOURCE_URI_KEY: &str = "ui/resourceUri";
/// The failure code of an app tool's result the engine refuses to pass on: a view the app does
/// not offer, or no content a client without the app could show.
pub const INVALID_RESULT: &str = "invalid_result";

/// Who may call a tool linked to an app (`_meta.ui.visibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Visibility {
    /// `["model", "app"]`: the agent and the app (the specification's default).
    #[default]
    ModelAndApp,
    /// `["model"]`: the agent only; the host refuses the app's calls.
    Model,
    /// `["app"]`: the app only; the host leaves the tool out of the agent's list (and compact
    /// publication's `search_tools` leaves it out of its results).
    App,
}

impl Visibility {
    /// The wire form: `["model", "app"]`, `["model"]` or `["app"]`.
    pub fn to_json(self) -> Value {
        let names: &[&str] = match self {
            Visibility::ModelAndApp => &["model", "app"],
            Visibility::Model => &["model"],
            Visibility::App => &["app"],
        };
        Value::Array(names.iter().map(|n| Value::String((*n).to_owned())).collect())
    }

    /// Whether the agent may see and call the tool.
    pub fn includes_model(self) -> bool {
        !matches!(self, Visibility::App)
    }
}

/// A tool's link to an app: what [`Tool::ui`](crate::tool::Tool::ui) declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UiLink {
    pub(crate) resource_uri: String,
    pub(crate) visibility: Visibility,
}

impl UiLink {
    /// The `ui` object of a linked tool's `_meta`.
    pub(crate) fn ui_object(&self) -> Map<String, Value> {
        let mut ui = Map::new();
        ui.insert("resourceUri".into(), Value::String(self.resource_uri.clone()));
        ui.insert("visibility".into(), self.visibility.to_json());
        ui
    }

    /// `meta` with the link written in: `ui.resourceUri` and `ui.visibility` (other members of
    /// a declared `ui` object stay), and the legacy flat key.
    pub(crate) fn merged_into(&self, meta: Option<&Map<String, Value>>) -> Map<String, Value> {
        let mut meta = meta.cloned().unwrap_or_default();
        let mut ui = match meta.remove("ui") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        ui.extend(self.ui_object());
        meta.insert("ui".into(), Value::Object(ui));
        meta.insert(LEGACY_RESOURCE_URI_KEY.into(), Value::String(self.resource_uri.clone()));
        meta
    }
}

/// The origins an app's content-security policy asks the host to allow (`_meta.ui.csp`). Empty
/// lists (the default) ask for no external access; the host builds the actual policy and may
/// allow less.
///
/// Each entry is an origin: `https://` or `http://` (and for connections also `wss://` or
/// `ws://`), a host name, an IPv4 address or a bracketed IPv6 address, optionally with a
/// leading `*.` wildcard subdomain on a host name, and optionally a port (1 to 65535). Paths,
/// queries, credentials, a bare `*`, CSP keywords such as `'self'` and other schemes are
/// refused at registration ([`AppError::Csp`], naming the field and the entry). Plain `http`
/// origins are allowed for local development; production hosts decide what they approve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppCsp {
    connect: Vec<String>,
    resource: Vec<String>,
    frame: Vec<String>,
    base_uri: Vec<String>,
}

impl AppCsp {
    /// No external access.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an origin for network requests: fetch, XHR, WebSocket (`connectDomains`, CSP
    /// `connect-src`).
    pub fn connect_domain(mut self, origin: impl Into<String>) -> Self {
        self.connect.push(origin.into());
        self
    }

    /// Adds an origin for scripts, styles, images, fonts and media (`resourceDomains`).
    pub fn resource_domain(mut self, origin: impl Into<String>) -> Self {
        self.resource.push(origin.into());
        self
    }

    /// Adds an origin for nested frames (`frameDomains`, CSP `frame-src`).
    pub fn frame_domain(mut self, origin: impl Into<String>) -> Self {
        self.frame.push(origin.into());
        self
    }

    /// Adds an allowed base URI origin (`baseUriDomains`, CSP `base-uri`).
    pub fn base_uri_domain(mut self, origin: impl Into<String>) -> Self {
        self.base_uri.push(origin.into());
        self
    }

    /// The lists with their wire names, in wire order, and whether WebSocket schemes are allowed.
    fn fields(&self) -> [(&'static str, &[String], bool); 4] {
        [
            ("connectDomains", &self.connect, true),
            ("resourceDomains", &self.resource, false),
            ("frameDomains", &self.frame, false),
            ("baseUriDomains", &self.base_uri, false),
        ]
    }

    fn to_json(&self) -> Option<Value> {
        let mut m = Map::new();
        for (name, list, _) in self.fields() {
            if !list.is_empty() {
                m.insert(name.into(), list.iter().cloned().map(Value::String).collect());
            }
        }
        (!m.is_empty()).then_some(Value::Object(m))
    }

    fn check(&self) -> Result<(), AppError> {
        for (field, list, ws) in self.fields() {
            for entry in list {
                check_origin(entry, ws).map_err(|reason| AppError::Csp {
                    field,
                    entry: entry.clone(),
                    reason,
                })?;
            }
        }
        Ok(())
    }
}

/// The browser permissions an app asks for (`_meta.ui.permissions`), each sent as the standard
/// empty permission object when asked for. None by default. The host may deny any of them, and
/// a granted permission grants no tool or resource access.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppPermissions {
    camera: bool,
    microphone: bool,
    geolocation: bool,
    clipboard_write: bool,
}

impl AppPermissions {
    /// None.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks for the camera (`camera`).
    pub fn camera(mut self) -> Self {
        self.camera = true;
        self
    }

    /// Asks for the microphone (`microphone`).
    pub fn microphone(mut self) -> Self {
        self.microphone = true;
        self
    }

    /// Asks for the location (`geolocation`).
    pub fn geolocation(mut self) -> Self {
        self.geolocation = true;
        self
    }

    /// Asks to write to the clipboard (`clipboardWrite`, the `clipboard-write` feature).
    pub fn clipboard_write(mut self) -> Self {
        self.clipboard_write = true;
        self
    }

    fn to_json(self) -> Option<Value> {
        let mut m = Map::new();
        for (on, name) in [
            (self.camera, "camera"),
            (self.microphone, "microphone"),
            (self.geolocation, "geolocation"),
            (self.clipboard_write, "clipboardWrite"),
        ] {
            if on {
                m.insert(name.into(), Value::Object(Map::new()));
            }
        }
        (!m.is_empty()).then_some(Value::Object(m))
    }
}

/// An MCP App: a `ui://` resource holding an HTML document, with the policy and hints a host
/// needs to render it, and the views a tool's result may select. See the [module](self) docs.
///
/// ```
/// use mcp_proto::apps::{App, AppCsp, AppPermissions};
/// let app = App::new("ui://weather/dashboard", "Weather", "<!doctype html><p>Sunny</p>")
///     .description("Today's weather")
///     .csp(AppCsp::new().connect_domain("https://api.example.com"))
///     .permissions(AppPermissions::new().geolocation())
///     .views(["today", "week"])
///     .prefers_border(true);
/// assert!(app.check().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct App {
    uri: String,
    name: String,
    title: Option<String>,
    description: Option<String>,
    html: std::sync::Arc<str>,
    csp: AppCsp,
    permissions: AppPermissions,
    views: Vec<String>,
    prefers_border: Option<bool>,
    domain: Option<String>,
}

impl App {
    /// An app at `uri` (`ui://` with an authority, no credentials, query or fragment) named
    /// `name`, serving `html` (a complete HTML5 document, non-empty, at most
    /// [`MAX_APP_HTML_BYTES`]; UTF-8 by its type). No views, no external access, no
    /// permissions, the host's border default. Checked at registration.
    pub fn new(
        uri: impl Into<String>,
        name: impl Into<String>,
        html: impl Into<std::sync::Arc<str>>,
    ) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            html: html.into(),
            csp: AppCsp::default(),
            permissions: AppPermissions::default(),
            views: Vec::new(),
            prefers_border: None,
            domain: None,
        }
    }

    /// A display title for the resource listing.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// A description for the resource listing.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The origins the app's content-security policy asks for (default none).
    pub fn csp(mut self, csp: AppCsp) -> Self {
        self.csp = csp;
        self
    }

    /// The browser permissions the app asks for (default none).
    pub fn permissions(mut self, permissions: AppPermissions) -> Self {
        self.permissions = permissions;
        self
    }

    /// Adds a view a tool's result may select ([`ToolOutput::presentation`]): a non-empty
    /// identifier, unique within the app.
    pub fn view(mut self, view: impl Into<String>) -> Self {
        self.views.push(view.into());
        self
    }

    /// Adds several views (see [`view`](Self::view)).
    pub fn views<I, S>(mut self, views: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.views.extend(views.into_iter().map(Into::into));
        self
    }

    /// Asks the host for a visible border and background (`true`) or none (`false`)
    /// (`_meta.ui.prefersBorder`). Default: not said, the host decides.
    pub fn prefers_border(mut self, border: bool) -> Self {
        self.prefers_border = Some(border);
        self
    }

    /// A dedicated sandbox origin for the app (`_meta.ui.domain`), in the format the host
    /// documents (the specification leaves it to each host). Default none. Refused when empty
    /// or containing whitespace or control characters.
    pub fn domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }

    /// The URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The HTML document.
    pub fn html(&self) -> &str {
        &self.html
    }

    /// The HTML document, shared (for a read handler that serves it).
    pub fn shared_html(&self) -> std::sync::Arc<str> {
        self.html.clone()
    }

    /// The views a result may select, in the order declared.
    pub fn declared_views(&self) -> &[String] {
        &self.views
    }

    /// Checks everything that does not depend on the server: the URI, the HTML's size, the
    /// CSP origins, the domain, the views and the size of the configuration. Registration runs
    /// it, and also checks that the encoded read fits the server's response ceiling.
    pub fn check(&self) -> Result<(), AppError> {
        check_ui_uri(&self.uri)?;
        if self.html.is_empty() {
            return Err(AppError::EmptyHtml);
        }
        if self.html.len() > MAX_APP_HTML_BYTES {
            return Err(AppError::HtmlTooLarge { bytes: self.html.len(), max: MAX_APP_HTML_BYTES });
        }
        self.csp.check()?;
        if let Some(d) = &self.domain {
            if d.is_empty() || d.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(AppError::Domain { domain: d.clone() });
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for v in &self.views {
            if v.is_empty() {
                return Err(AppError::View {
                    view: v.clone(),
                    reason: "a view identifier must not be empty",
                });
            }
            if !seen.insert(v.as_str()) {
                return Err(AppError::View { view: v.clone(), reason: "views must be unique" });
            }
        }
        let bytes = self.config_json().to_string().len();
        if bytes > MAX_APP_CONFIG_BYTES {
            return Err(AppError::ConfigTooLarge { bytes, max: MAX_APP_CONFIG_BYTES });
        }
        Ok(())
    }

    /// The `ui` object of the resource's `_meta`: `csp`, `permissions`, `domain` and
    /// `prefersBorder`, each only when set.
    pub fn ui_meta(&self) -> Map<String, Value> {
        let mut ui = Map::new();
        if let Some(csp) = self.csp.to_json() {
            ui.insert("csp".into(), csp);
        }
        if let Some(p) = self.permissions.to_json() {
            ui.insert("permissions".into(), p);
        }
        if let Some(d) = &self.domain {
            ui.insert("domain".into(), Value::String(d.clone()));
        }
        if let Some(b) = self.prefers_border {
            ui.insert("prefersBorder".into(), Value::Bool(b));
        }
        ui
    }

    /// The resource's `_meta`: `{"ui": ...}`, or none when the app sets nothing there.
    fn resource_meta(&self) -> Option<Map<String, Value>> {
        let ui = self.ui_meta();
        (!ui.is_empty()).then(|| {
            let mut m = Map::new();
            m.insert("ui".into(), Value::Object(ui));
            m
        })
    }

    /// The resource this app is served as: its URI, name, title and description, the app media
    /// type, its `_meta.ui`, and private caching (what the HTML holds may depend on the server's
    /// deployment, so nothing shared should keep it).
    pub fn resource(&self) -> Resource {
        let mut r = Resource::new(self.uri.clone(), self.name.clone())
            .mime_type(APP_MIME_TYPE)
            .cache(CacheHint::private());
        if let Some(t) = &self.title {
            r = r.title(t.clone());
        }
        if let Some(d) = &self.description {
            r = r.description(d.clone());
        }
        if let Some(m) = self.resource_meta() {
            r = r.meta(m);
        }
        r
    }

    /// Everything but the HTML, as [`MAX_APP_CONFIG_BYTES`] measures it.
    fn config_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("uri".into(), Value::String(self.uri.clone()));
        m.insert("name".into(), Value::String(self.name.clone()));
        if let Some(t) = &self.title {
            m.insert("title".into(), Value::String(t.clone()));
        }
        if let Some(d) = &self.description {
            m.insert("description".into(), Value::String(d.clone()));
        }
        m.insert("views".into(), self.views.iter().cloned().map(Value::String).collect());
        m.insert("_meta".into(), Value::Object(self.resource_meta().unwrap_or_default()));
        Value::Object(m)
    }
}

impl ToolOutput {
    /// A result that shows `data` in the app view `view`: `data` is the structured output
    /// (`structuredContent`, from which the engine writes the text copy clients without the
    /// app read) and `view` goes in the result's `_meta.ui.view`.
    ///
    /// The view must be one the linked app declares ([`App::view`]); otherwise the engine
    /// replaces the result with an [`INVALID_RESULT`] tool failure that carries nothing of the
    /// rejected result. A tool linked to no app (and, in compact mode, on a server without an
    /// apps shell) has no views to check: its result passes as it is.
    pub fn presentation(view: impl Into<String>, data: Value) -> Self {
        Self::structured(data).with_view(view)
    }

    /// This result, selecting the app view `view` (see [`presentation`](Self::presentation)).
    pub fn with_view(mut self, view: impl Into<String>) -> Self {
        let meta = self.meta.get_or_insert_with(Map::new);
        let ui = meta.entry("ui").or_insert_with(|| Value::Object(Map::new()));
        if !ui.is_object() {
            *ui = Value::Object(Map::new());
        }
        if let Value::Object(ui) = ui {
            ui.insert("view".into(), Value::String(view.into()));
        }
        self
    }

    /// The view this result selects (`_meta.ui.view`), if any. `Some(None)`: a `view` member
    /// that is not a string, which selects no view an app can declare.
    pub fn selected_view(&self) -> Option<Option<&str>> {
        let view = self.meta.as_ref()?.get("ui")?.get("view")?;
        Some(view.as_str())
    }
}

/// The apps the registry knows: the views of each registered app, and the shell.
pub(crate) struct Apps<H> {
    /// The declared views of each registered app, by URI.
    pub(crate) views: std::collections::BTreeMap<String, Vec<String>>,
    /// The compact apps shell: not in the resource catalogue, read by exact URI.
    pub(crate) shell: Option<Shell<H>>,
    /// The extension was declared by registering an app (not by the application): an explicit
    /// declaration replaces it.
    pub(crate) auto_declared: bool,
}

impl<H> Default for Apps<H> {
    fn default() -> Self {
        Self { views: Default::default(), shell: None, auto_declared: false }
    }
}

impl<H> Apps<H> {
    /// Whether a tool may link to `uri`.
    pub(crate) fn knows(&self, uri: &str) -> bool {
        self.views.contains_key(uri) || self.shell.as_ref().is_some_and(|s| s.resource.uri == uri)
    }

    /// The views of the app at `uri` (a registered app or the shell).
    pub(crate) fn views_of(&self, uri: &str) -> Option<&[String]> {
        match self.views.get(uri) {
            Some(v) => Some(v),
            None => self.shell.as_ref().filter(|s| s.resource.uri == uri).map(|s| s.app.declared_views()),
        }
    }
}

/// The mounted apps shell.
pub(crate) struct Shell<H> {
    pub(crate) app: App,
    /// The resource it is read as (never listed): what its reads inherit.
    pub(crate) resource: Resource,
    pub(crate) handler: H,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csp_err(csp: AppCsp) -> Option<(&'static str, String)> {
        match csp.check() {
            Ok(()) => None,
            Err(AppError::Csp { field, entry, .. }) => Some((field, entry)),
            Err(e) => panic!("unexpected {e}"),
        }
    }

    #[test]
    fn csp_origins() {
        let ok = AppCsp::new()
            .connect_domain("https://api.example.com")
            .connect_domain("wss://rt.example.com:8443")
            .connect_domain("ws://localhost:3000")
            .connect_domain("http://127.0.0.1:8080")
            .connect_domain("https://[::1]:9000")
            .resource_domain("https://*.cdn.example.com")
            .frame_domain("https://www.youtube.com")
            .base_uri_domain("https://cdn.example.com:443");
        assert_eq!(csp_err(ok), None);
        for (csp, field, entry) in [
            (AppCsp::new().connect_domain("*"), "connectDomains", "*"),
            (AppCsp::new().resource_domain("'self'"), "resourceDomains", "'self'"),
            (AppCsp::new().resource_domain("wss://x.example"), "resourceDomains", "wss://x.example"),
            (AppCsp::new().frame_domain("https://x.example/path"), "frameDomains", "https://x.example/path"),
            (AppCsp::new().frame_domain("https://x.example/"), "frameDomains", "https://x.example/"),
            (
                AppCsp::new().base_uri_domain("https://u:p@x.example"),
                "baseUriDomains",
                "https://u:p@x.example",
            ),
            (AppCsp::new().connect_domain("https://x.example:0"), "connectDomains", "https://x.example:0"),
            (
                AppCsp::new().connect_domain("https://x.example:65536"),
                "connectDomains",
                "https://x.example:65536",
            ),
            (AppCsp::new().connect_domain("https://x.example:"), "connectDomains", "https://x.example:"),
            (AppCsp::new().connect_domain("https://x.example:*"), "connectDomains", "https://x.example:*"),
            (AppCsp::new().connect_domain("https://x.*.example"), "connectDomains", "https://x.*.example"),
            (AppCsp::new().connect_domain("https://*"), "connectDomains", "https://*"),
            (AppCsp::new().connect_domain("https://-x.example"), "connectDomains", "https://-x.example"),
            (AppCsp::new().connect_domain("https://x_y.example"), "connectDomains", "https://x_y.example"),
            (AppCsp::new().connect_domain("https://999.1.1.1"), "connectDomains", "https://999.1.1.1"),
            (AppCsp::new().connect_domain("https://*.10.0.0.1"), "connectDomains", "https://*.10.0.0.1"),
            (AppCsp::new().connect_domain("https://[::g]"), "connectDomains", "https://[::g]"),
            (AppCsp::new().connect_domain("https://"), "connectDomains", "https://"),
            (AppCsp::new().connect_domain("data:"), "connectDomains", "data:"),
            (AppCsp::new().connect_domain("example.com"), "connectDomains", "example.com"),
            (AppCsp::new().connect_domain("https://x.example?q"), "connectDomains", "https://x.example?q"),
        ] {
            assert_eq!(csp_err(csp), Some((field, entry.to_owned())), "{entry}");
        }
        let long = format!("https://{}.example", "a".repeat(64));
        assert!(csp_err(AppCsp::new().connect_domain(long)).is_some(), "a label over 63 bytes");
    }

    // Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
    #[cfg(feature = "exact-json")]
    #[test]
    fn permissions_are_empty_objects_under_their_spec_names() {
        let p = AppPermissions::new().camera().microphone().geolocation().clipboard_write();
        assert_eq!(
            p.to_json().unwrap().to_string(),
            r#"{"camera":{},"microphone":{},"geolocation":{},"clipboardWrite":{}}"#
        );
        assert_eq!(AppPermissions::new().to_json(), None);
        assert_eq!(
            AppPermissions::new().clipboard_write().to_json().unwrap().to_string(),
            r#"{"clipboardWrite":{}}"#
        );
    }

    // Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
    #[cfg(feature = "exact-json")]
    #[test]
    fn meta_names_only_what_is_set() {
        let app = App::new("ui://a", "a", "<p>");
        assert!(app.ui_meta().is_empty());
        assert_eq!(
            app.resource().listing(crate::version::ProtocolVersion::V2025_11_25),
            r#"{"uri":"ui://a","name":"a","mimeType":"text/html;profile=mcp-app"}"#
        );
        let app = app
            .csp(AppCsp::new().resource_domain("https://cdn.example.com"))
            .permissions(AppPermissions::new().camera())
            .domain("abc.example.net")
            .prefers_border(false);
        assert_eq!(
            Value::Object(app.ui_meta()).to_string(),
            r#"{"csp":{"resourceDomains":["https://cdn.example.com"]},"permissions":{"camera":{}},"domain":"abc.example.net","prefersBorder":false}"#
        );
    }

    #[test]
    fn html_views_domain_and_config_bounds() {
        assert_eq!(App::new("ui://a", "a", "").check(), Err(AppError::EmptyHtml));
        let big = "x".repeat(MAX_APP_HTML_BYTES + 1);
        assert!(matches!(App::new("ui://a", "a", big).check(), Err(AppError::HtmlTooLarge { .. })));
        let at_bound = "x".repeat(MAX_APP_HTML_BYTES);
        assert_eq!(App::new("ui://a", "a", at_bound).check(), Ok(()));
        assert!(matches!(App::new("ui://a", "a", "h").view("").check(), Err(AppError::View { .. })));
        assert!(matches!(
            App::new("ui://a", "a", "h").views(["x", "y", "x"]).check(),
            Err(AppError::View { view, .. }) if view == "x"
        ));
        assert_eq!(App::new("ui://a", "a", "h").views(["x", "é"]).check(), Ok(()));
        for d in ["", "a b", "a\nb"] {
            assert!(
                matches!(App::new("ui://a", "a", "h").domain(d).check(), Err(AppError::Domain { .. })),
                "{d:?}"
            );
        }
        let many = (0..10_000).map(|i| format!("view-{i}"));
        assert!(matches!(
            App::new("ui://a", "a", "h").views(many).check(),
            Err(AppError::ConfigTooLarge { max: MAX_APP_CONFIG_BYTES, .. })
        ));
    }

    #[test]
    fn links_keep_declared_meta_and_write_the_legacy_key() {
        let link = UiLink { resource_uri: "ui://a".into(), visibility: Visibility::App };
        let mut declared = Map::new();
        declared.insert("example.com/x".into(), Value::from(1));
        declared.insert("ui".into(), serde_json::json!({"extra": true, "resourceUri": "ui://old"}));
        assert_eq!(
            Value::Object(link.merged_into(Some(&declared))).to_string(),
            r#"{"example.com/x":1,"ui":{"extra":true,"resourceUri":"ui://a","visibility":["app"]},"ui/resourceUri":"ui://a"}"#
        );
    }

    #[test]
    fn presentation_selects_a_view_beside_structured_data() {
        let out = ToolOutput::presentation("today", serde_json::json!({"t": 21}));
        assert_eq!(out.structured, Some(serde_json::json!({"t": 21})));
        assert_eq!(out.selected_view(), Some(Some("today")));
        assert_eq!(ToolOutput::text("x").selected_view(), None);
        let mut odd = ToolOutput::text("x");
        odd.meta = Some(serde_json::from_str(r#"{"ui":{"view":3}}"#).unwrap());
        assert_eq!(odd.selected_view(), Some(None));
    }
}

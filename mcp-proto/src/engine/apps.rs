//! MCP Apps in the engine: registering apps and the compact apps shell, and what a result of
//! a tool shown in an app must satisfy (see [`crate::apps`]).

use std::time::Duration;

use serde_json::{Map, Value};

use super::encode::ToolOutcome;
use super::subscriptions::List;
use super::{Engine, RegistryMut};
use crate::apps::{App, AppError, APP_MIME_TYPE, INVALID_RESULT};
use crate::content::{ContentsWire, ResourceBody, ResourceContents, ToolFailure};
use crate::items::{CacheHint, Resource};
use crate::jsonrpc::{encode_result, RequestId};
use crate::registry::RegistryError;
use crate::version::ProtocolVersion;

impl<H: Clone> RegistryMut<'_, H> {
    /// Registers an MCP App: checks it ([`App::check`]) and that its encoded read fits
    /// [`Limits::max_response_bytes`](crate::Limits::max_response_bytes) with the largest id a
    /// request may carry ([`AppError::ReadTooLarge`]), then registers [`App::resource`] (listed,
    /// served as [`APP_MIME_TYPE`] with its `_meta.ui`, cached privately) read by `handler`,
    /// and declares the `io.modelcontextprotocol/ui` extension unless it is declared already.
    /// Tools may then link to it ([`Tool::ui`](crate::Tool::ui)).
    ///
    /// `handler` serves the HTML: it should answer the app's URI with
    /// [`ResourceContents::inheriting`] (the read then carries the declared media type and
    /// `_meta`). Refused with [`RegistryError::InvalidApp`] naming what is wrong, or
    /// [`RegistryError::Duplicate`] when a resource has the URI. Connections are told
    /// `notifications/resources/list_changed`, as for any resource.
    pub fn add_app(&mut self, app: App, handler: H) -> Result<(), RegistryError> {
        app.check()?;
        self.engine.check_app_read(&app)?;
        let max = self.engine.config.limits.max_uri_bytes;
        self.engine.registry.add_app(&app, handler, max)?;
        self.engine.changed(List::Resources, None);
        Ok(())
    }

    /// Mounts the compact apps shell (seed 000's "Optional Apps shell"): one app for the
    /// whole server, linked from compact publication's `call_tool` (its listing's `_meta.ui`:
    /// the shell's URI and visibility `["model", "app"]`), whose views every result reached
    /// through `call_tool` may select (a tool linked to an app of its own selects that app's
    /// views instead). The shell is checked as [`add_app`](Self::add_app) checks an app.
    ///
    /// Its URI is an exclusive mount: refused while a resource has it or a template matches it,
    /// and later resources and templates that would are refused
    /// ([`AppError::ShellConflict`]). It is left out of `resources/list` (the specification
    /// lets a server omit UI-only resources: hosts find it through `call_tool`) yet every
    /// caller may read it: no item gate applies, only the server-wide gate. Reads go to
    /// `handler` and are cached privately. Refused on a direct server
    /// ([`AppError::ShellNeedsCompact`]) and when a shell is mounted
    /// ([`AppError::ShellTaken`]). Connections are told `notifications/tools/list_changed`
    /// (`call_tool`'s listing changed).
    pub fn mount_apps_shell(&mut self, app: App, handler: H) -> Result<(), RegistryError> {
        app.check()?;
        self.engine.check_app_read(&app)?;
        let uri = app.uri().to_owned();
        let compact = self.engine.compact();
        self.engine.registry.mount_shell(app, handler, compact)?;
        self.engine.published = Some(super::compact::catalogue(Some(&uri)));
        self.engine.changed(List::Tools, None);
        Ok(())
    }

    /// Unmounts the apps shell, returning it if one was mounted. Tools that link to it keep
    /// their link: remove or re-register them.
    pub fn unmount_apps_shell(&mut self) -> Option<App> {
        let shell = self.engine.registry.apps.shell.take()?;
        if self.engine.compact() {
            self.engine.published = Some(super::compact::catalogue(None));
            self.engine.changed(List::Tools, None);
        }
        Some(shell.app)
    }
}

impl<H: Clone> Engine<H> {
    /// Refuses an app whose `resources/read` result could not be sent: the HTML escaped, the
    /// metadata, the modern result's extras and the longest id a request may carry.
    fn check_app_read(&self, app: &App) -> Result<(), AppError> {
        let max = self.config.limits.max_response_bytes;
        let bytes = self.app_read_bytes(app);
        if bytes > max {
            return Err(AppError::ReadTooLarge { bytes, max });
        }
        Ok(())
    }

    /// The largest encoding of a read of `app`: 2026-07-28's (the only one adding members),
    /// answering a string id of [`Limits::max_id_bytes`](crate::Limits::max_id_bytes) bytes.
    fn app_read_bytes(&self, app: &App) -> usize {
        let resource = app.resource();
        let item = ResourceContents {
            uri: resource.uri.clone(),
            mime_type: Some(APP_MIME_TYPE.to_owned()),
            body: ResourceBody::Text(app.html().to_owned()),
            meta: resource.meta.clone(),
        };
        let v = ProtocolVersion::V2026_07_28;
        let contents =
            serde_json::to_vec(&ContentsWire(std::slice::from_ref(&item), v)).map_or(0, |c| c.len());
        let mut r = Map::new();
        // Two bytes of placeholder, replaced by the contents' length below.
        r.insert("contents".into(), Value::Array(Vec::new()));
        self.cacheable(&mut r, v, CacheHint::private_for(Duration::MAX));
        self.finish(&mut r, v);
        let id_bytes = self.config.limits.max_id_bytes.max(2);
        let id = RequestId::from_json(&format!("\"{}\"", "x".repeat(id_bytes - 2)))
            .or_else(|| RequestId::from_json("0"));
        let base = id.map_or(0, |id| encode_result(&id, &r).len());
        base.saturating_sub(2) + contents
    }

    /// What a read of `uri` inherits when the handler's contents leave the media type or
    /// `_meta` out: the declaration that answered it (the shell, the exact resource, or the
    /// template), as registered when the read completes.
    pub(super) fn declared_for(
        &self,
        uri: &str,
        template: Option<&str>,
    ) -> Option<(Option<&str>, Option<&Map<String, Value>>)> {
        if let Some(t) = template {
            let t = &self.registry.templates.get(t)?.template;
            return Some((t.mime_type.as_deref(), t.meta.as_ref()));
        }
        let shell = self.registry.apps.shell.as_ref().filter(|s| s.resource.uri == uri).map(|s| &s.resource);
        let r: &Resource = match shell {
            Some(r) => r,
            None => &self.registry.resources.get(uri)?.resource,
        };
        Some((r.mime_type.as_deref(), r.meta.as_ref()))
    }

    /// An app tool's outcome as it may be sent. A tool shown in an app is one linked to it
    /// ([`Tool::ui`](crate::Tool::ui)) or, on a compact server with an apps shell, any tool
    /// reached through `call_tool`. Its successful result must select a view the app
    /// declares, if it selects one, and must carry content or structured output, which
    /// the text copy is then written from: otherwise it becomes an [`INVALID_RESULT`]
    /// failure that carries nothing of it. Through compact `call_tool`, a linked tool's result
    /// also carries its link (`_meta.ui.resourceUri` and `visibility`): the only channel
    /// through which a compact server's host and shell can learn it. Any other outcome passes
    /// as it is.
    pub(super) fn app_outcome(&self, name: Option<&str>, outcome: ToolOutcome) -> ToolOutcome {
        let ToolOutcome::Output(mut out) = outcome else { return outcome };
        let Some(name) = name else { return ToolOutcome::Output(out) };
        let link = self.registry.tools.get(name).and_then(|e| e.tool.ui.as_ref());
        let shell = self.registry.apps.shell.as_ref().filter(|_| self.compact());
        let app = match (link, shell) {
            (Some(l), _) => l.resource_uri.as_str(),
            (None, Some(s)) => s.resource.uri.as_str(),
            (None, None) => return ToolOutcome::Output(out),
        };
        if !out.is_error {
            let views = self.registry.apps.views_of(app).unwrap_or_default();
            let approved = match out.selected_view() {
                None => true,
                Some(Some(v)) => views.iter().any(|x| x == v),
                Some(None) => false,
            };
            if !approved {
                let msg =
                    format!("{INVALID_RESULT}: the result selects a view that app {app} does not declare");
                return ToolOutcome::Failure(ToolFailure::new(INVALID_RESULT, msg));
            }
            if out.content.is_empty() && out.structured.is_none() {
                let msg = format!(
                    "{INVALID_RESULT}: a tool shown in app {app} must return content or structured output \
                     for clients that do not show the app"
                );
                return ToolOutcome::Failure(ToolFailure::new(INVALID_RESULT, msg));
            }
        }
        if let Some(link) = link.filter(|_| self.compact()) {
            let meta = out.meta.get_or_insert_with(Map::new);
            let ui = meta.entry("ui").or_insert_with(|| Value::Object(Map::new()));
            if !ui.is_object() {
                *ui = Value::Object(Map::new());
            }
            if let Value::Object(ui) = ui {
                ui.extend(link.ui_object());
            }
        }
        ToolOutcome::Output(out)
    }
}

/// Fills what `contents` leave out from the declaration a read of `uri` inherits: the media type
/// and `_meta` of each item for `uri` itself (an item for another URI, a child a read lists, is
/// not the declared resource). A value the handler gave wins.
pub(super) fn inherit(
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

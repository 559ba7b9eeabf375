//! MCP Apps in the engine: registering apps and the compact apps shell, and what a result of
//! a tool shown in an app must satisfy (see [`crate::apps`]).

use serde_json::{Map, Value};

use crate::apps::{App, AppError, APP_MIME_TYPE, INVALID_RESULT};
use crate::content::{ContentsWire, ResourceBody, ResourceContents, ToolFailure};
use crate::engine::protocol::encode::ToolOutcome;
use crate::engine::state::subscriptions::List;
use crate::engine::{Engine, RegistryMut};
use crate::items::Resource;
use crate::jsonrpc::{encode_result, RequestId};
use crate::registry::RegistryError;
use crate::version::ProtocolVersion;

impl<H: Clone> RegistryMut<'_, H> {
    /// Registers an MCP App: checks it ([`App::check`]) and that its encoded read fits
    /// [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes) with the largest id a
    /// request may carry ([`AppError::ReadTooLarge`]), then registers [`App::resource`] (listed,
    /// served as [`APP_MIME_TYPE`] with its `_meta.ui`, cached privately) read by `handler`,
    /// and declares the `io.modelcontextprotocol/ui` extension unless it is declared already.
    /// Tools may then link to it ([`Tool::ui`](crate::registry::Tool::ui)).
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

    /// Unregisters the app at `uri`, returning its resource if `uri` is a registered app (a
    /// resource of any other kind stays). Tools that link to it keep their link: remove or
    /// re-register them.
    pub fn remove_app(&mut self, uri: &str) -> Option<Resource> {
        if !self.engine.registry.apps.views.contains_key(uri) {
            return None;
        }
        self.remove_resource(uri)
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
        let max_uri = self.engine.config.limits.max_uri_bytes;
        self.engine.registry.mount_shell(app, handler, compact, max_uri)?;
        self.engine.published = Some(crate::engine::extensions::compact::catalogue(Some(&uri)));
        self.engine.changed(List::Tools, None);
        Ok(())
    }

    /// Unmounts the apps shell, returning it if one was mounted. Tools that link to it keep
    /// their link: remove or re-register them.
    pub fn unmount_apps_shell(&mut self) -> Option<App> {
        let shell = self.engine.registry.apps.shell.take()?;
        if self.engine.compact() {
            self.engine.published = Some(crate::engine::extensions::compact::catalogue(None));
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
    /// answering a string id of [`Limits::max_id_bytes`](crate::limits::Limits::max_id_bytes) bytes.
    fn app_read_bytes(&self, app: &App) -> usize {
        let resource = app.resource();
        let item = ResourceContents {
            uri: resource.uri.clone(),
            mime_type: Some(APP_MIME_TYPE.to_owned()),
            body: ResourceBody::Text(app.html().to_owned()),
            meta: resource.info.meta.clone(),
        };
        let v = ProtocolVersion::V2026_07_28;
        let contents =
            serde_json::to_vec(&ContentsWire(std::slice::from_ref(&item), v)).map_or(0, |c| c.len());
        let mut r = Map::new();
        // Two bytes of placeholder, replaced by the contents' length below.
        r.insert("contents".into(), Value::Array(Vec::new()));
        // The hint sent is the app's (a retried read's is private with TTL 0 too).
        self.cacheable(&mut r, v, resource.cache);
        self.finish(&mut r, v);
        let id_bytes = self.config.limits.max_id_bytes.max(2);
        let id = RequestId::from_json(&format!("\"{}\"", "x".repeat(id_bytes - 2)))
            .or_else(|| RequestId::from_json("0"));
        let base = id.map_or(0, |id| encode_result(&id, &r).len());
        base.saturating_sub(2) + contents
    }

    /// An app tool's outcome as it may be sent. A tool shown in an app is one linked to it
    /// ([`Tool::ui`](crate::registry::Tool::ui)) or, on a compact server with an apps shell, any tool
    /// reached through `call_tool`. Its successful result must select a view the app
    /// declares, if it selects one, and must carry content or structured output, which
    /// the text copy is then written from: otherwise it becomes an [`INVALID_RESULT`]
    /// failure that carries nothing of it. Through compact `call_tool`, a linked tool's result
    /// also carries its link (`_meta.ui.resourceUri` and `visibility`): the only channel
    /// through which a compact server's host and shell can learn it. Any other outcome passes
    /// as it is.
    pub(in crate::engine) fn app_outcome(&self, name: Option<&str>, outcome: ToolOutcome) -> ToolOutcome {
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::apps::Visibility;
    use crate::caller::Caller;
    use crate::cursor::KeyRing;
    use crate::engine::{Config, ConnKind, Implementation, Mode, Output, Reply};
    use crate::items::ResourceTemplate;
    use crate::registry::Tool;

    fn engine(mode: Mode, max_response: Option<usize>) -> (Engine<u32>, Instant) {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([7; 32]));
        config.mode = mode;
        if let Some(max) = max_response {
            config.limits.max_response_bytes(max);
        }
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        (Engine::new(config, now), now)
    }

    fn app(uri: &str) -> App {
        App::new(uri, "a", "<!doctype html><p>\"quoted\" \u{1F600}</p>").views(["v"])
    }

    fn invalid(r: Result<(), RegistryError>) -> AppError {
        match r {
            Err(RegistryError::InvalidApp(e)) => e,
            other => panic!("expected an app refusal, got {other:?}"),
        }
    }

    #[test]
    fn the_read_bound_is_the_longest_read_exactly() {
        let (probe, _) = engine(Mode::Direct, None);
        let bytes = probe.app_read_bytes(&app("ui://a"));

        // At the bound it registers, and the longest read is exactly that long.
        let (mut e, now) = engine(Mode::Direct, Some(bytes));
        e.registry_mut(now).add_app(app("ui://a"), 1).unwrap();
        let conn = e.open(now, ConnKind::Stdio, Caller::anonymous()).unwrap();
        let id = format!("\"{}\"", "i".repeat(256 - 2));
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/read","params":{{"uri":"ui://a","_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        e.handle_frame(now, conn, frame.as_bytes());
        let mut sent = Vec::new();
        while let Some(out) = e.poll_output() {
            match out {
                Output::Invoke(inv) => {
                    let contents = vec![ResourceContents::inheriting("ui://a", app("ui://a").html())];
                    e.complete(now, inv.ticket, Reply::Resource(Ok(contents))).unwrap();
                }
                Output::Frame { bytes, .. } => sent.push(bytes),
                _ => {}
            }
        }
        assert_eq!(sent.len(), 1);
        assert!(!String::from_utf8_lossy(&sent[0]).contains("error"));
        assert_eq!(sent[0].len(), bytes, "the bound is the read's real size");

        // One byte less and the app is refused.
        let (mut e, now) = engine(Mode::Direct, Some(bytes - 1));
        let err = invalid(e.registry_mut(now).add_app(app("ui://a"), 1));
        assert_eq!(err, AppError::ReadTooLarge { bytes, max: bytes - 1 });
    }

    #[test]
    fn links_must_name_a_registered_app() {
        let (mut e, now) = engine(Mode::Direct, None);
        let mut r = e.registry_mut(now);
        let tool = || Tool::new("t", "d", json!({"type": "object"})).ui("ui://a", Visibility::App);
        let err = invalid(r.add_tool(tool(), 1));
        assert_eq!(err, AppError::NotAnApp { tool: "t".into(), uri: "ui://a".into() });
        r.add_app(app("ui://a"), 1).unwrap();
        r.add_tool(tool(), 1).unwrap();
        assert!(matches!(r.add_app(app("ui://a"), 1), Err(RegistryError::Duplicate(_))));
        assert!(matches!(invalid(r.add_app(app("https://a"), 1)), AppError::Uri { .. }));
        r.add_resource(Resource::new("ui://plain", "p"), 1).unwrap();
        assert!(r.remove_app("ui://plain").is_none(), "a plain resource is no app");
        assert!(r.remove_app("ui://a").is_some());
        let later = Tool::new("t2", "d", json!({"type": "object"})).ui("ui://a", Visibility::Model);
        assert!(
            matches!(invalid(r.add_tool(later, 1)), AppError::NotAnApp { .. }),
            "a removed app links nothing"
        );
    }

    #[test]
    fn the_extension_is_declared_once_and_yields_to_an_explicit_one() {
        let (mut e, now) = engine(Mode::Direct, None);
        let mut r = e.registry_mut(now);
        r.add_app(app("ui://a"), 1).unwrap();
        r.add_app(app("ui://b"), 1).unwrap();
        assert_eq!(e.registry.extensions.len(), 1);
        let settings = e.registry.extensions.get(crate::apps::EXTENSION_ID).map(|x| x.settings().clone());
        assert_eq!(settings, Some(json!({"mimeTypes": [APP_MIME_TYPE]})));
        let own = crate::extensions::Extension::new(crate::apps::EXTENSION_ID, json!({"own": true}));
        e.registry_mut(now).add_extension(own).unwrap();
        let settings = e.registry.extensions.get(crate::apps::EXTENSION_ID).map(|x| x.settings().clone());
        assert_eq!(settings, Some(json!({"own": true})));
        // Declared by the application, it is not declared twice.
        let again = crate::extensions::Extension::new(crate::apps::EXTENSION_ID, json!({}));
        assert!(matches!(e.registry_mut(now).add_extension(again), Err(RegistryError::Duplicate(_))));
        e.registry_mut(now).add_app(app("ui://c"), 1).unwrap();
        assert_eq!(e.registry.extensions.len(), 1);
    }

    #[test]
    fn the_shell_is_compact_only_single_and_exclusive() {
        let (mut e, now) = engine(Mode::Direct, None);
        assert_eq!(
            invalid(e.registry_mut(now).mount_apps_shell(app("ui://s"), 1)),
            AppError::ShellNeedsCompact
        );

        let (mut e, now) = engine(Mode::Compact, None);
        let mut r = e.registry_mut(now);
        r.add_resource(Resource::new("ui://taken", "t"), 1).unwrap();
        assert!(matches!(invalid(r.mount_apps_shell(app("ui://taken"), 1)), AppError::ShellConflict { .. }));
        r.add_template(ResourceTemplate::new("ui://tpl/{x}", "t"), 1, None).unwrap();
        let err = invalid(r.mount_apps_shell(app("ui://tpl/main"), 1));
        assert!(
            matches!(&err, AppError::ShellConflict { item, .. } if item.contains("ui://tpl/{x}")),
            "{err}"
        );

        let long = format!("ui://s/{}", "x".repeat(2048));
        assert!(matches!(r.mount_apps_shell(app(&long), 1), Err(RegistryError::InvalidUri(_))));
        r.mount_apps_shell(app("ui://s/main"), 1).unwrap();
        assert_eq!(
            invalid(r.mount_apps_shell(app("ui://other"), 1)),
            AppError::ShellTaken { uri: "ui://s/main".into() }
        );
        // Later items may not take the mount either.
        assert!(matches!(
            invalid(r.add_resource(Resource::new("ui://s/main", "x"), 1)),
            AppError::ShellConflict { .. }
        ));
        assert!(matches!(invalid(r.add_app(app("ui://s/main"), 1)), AppError::ShellConflict { .. }));
        let t = ResourceTemplate::new("ui://s/{page}", "t");
        assert!(matches!(invalid(r.add_template(t, 1, None)), AppError::ShellConflict { .. }));
        // A tool may link to the shell itself.
        let linked =
            Tool::new("t", "d", json!({"type": "object"})).ui("ui://s/main", Visibility::ModelAndApp);
        r.add_tool(linked, 1).unwrap();
        assert!(r.unmount_apps_shell().is_some());
        assert!(r.unmount_apps_shell().is_none());
        r.add_resource(Resource::new("ui://s/main", "x"), 1).unwrap();
    }
}

//! MCP Apps on a server: registering [`App`]s (each a `ui://` resource serving its HTML), tools
//! linked to them, and the compact apps shell. The rules (validation, bounds, views, what goes
//! on the wire) are the engine's: see [`mcp_proto::apps`].

use std::future::Future;

use mcp_proto::apps::{App, Visibility};
use mcp_proto::{RegistryError, ResourceContents, Tool};

use crate::builder::{tool_item, Item, ServerBuilder};
use crate::handler::{resource_fn, tool_fn, Handler, IntoToolResult, ReadResource, ToolCall};
use crate::panics::Gated;
use crate::server::Server;

/// The read handler of `app`: its HTML, as contents that inherit the app's media type and
/// `_meta.ui` from its declaration. The document is shared, not copied per registration.
fn app_handler(app: &App) -> Handler {
    let html = app.shared_html();
    resource_fn(move |read: ReadResource| {
        let html = html.clone();
        async move { Ok(vec![ResourceContents::inheriting(read.uri, &*html)]) }
    })
}

/// `tool` linked to `app`, with the visibility it declares (default `["model", "app"]`).
fn linked(app: &App, tool: Tool) -> Tool {
    let visibility = tool.declared_ui().map_or(Visibility::ModelAndApp, |(_, v)| v);
    tool.ui(app.uri(), visibility)
}

impl ServerBuilder {
    /// Serves an MCP App: registers its `ui://` resource, read as the app's HTML with media type
    /// `text/html;profile=mcp-app`, private caching and the app's `_meta.ui` (CSP, permissions,
    /// domain, border) on both the `resources/list` entry and the read contents, and declares
    /// the `io.modelcontextprotocol/ui` extension (once, however many apps). Link tools to it
    /// with [`Tool::ui`] or register app and tool together with
    /// [`app_tool`](Self::app_tool). Apps are registered before every other item, so a tool
    /// added earlier may link to an app added later. [`build`](Self::build) fails with
    /// [`RegistryError::InvalidApp`] naming what is wrong (see
    /// [`App::check`](mcp_proto::apps::App::check) and
    /// [`RegistryMut::add_app`](mcp_proto::RegistryMut::add_app)).
    pub fn app(mut self, app: App) -> Self {
        self.items.push(Item::App(app));
        self
    }

    /// Serves `app` and a tool linked to it, in one call (seed 004's `RegisterApp`): `tool`
    /// gets `_meta.ui.resourceUri` (and the flat `"ui/resourceUri"` older hosts read) and the
    /// visibility it declared with [`Tool::ui`] (its URI is replaced by the app's), else
    /// `["model", "app"]`. The handler is an async closure, as for
    /// [`tool`](Self::tool); its results may select one of the app's views
    /// ([`ToolOutput::presentation`](mcp_proto::ToolOutput::presentation)).
    pub fn app_tool<F, Fut, R>(mut self, app: App, tool: Tool, f: F) -> Self
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = linked(&app, tool);
        self.items.push(Item::App(app));
        self.items.push(tool_item::<R>(tool, tool_fn(f)));
        self
    }

    /// Mounts the compact apps shell (one per server): compact publication's `call_tool` links
    /// to it, every result reached through `call_tool` may select one of its views (unless its
    /// tool links to an app of its own), and it is readable by every caller the server admits
    /// though left out of `resources/list`. Its URI is exclusive. [`build`](Self::build)
    /// fails on a direct server (set [`mode`](Self::mode) to `Mode::Compact`), for a second
    /// shell, and where a resource or template takes the URI; see
    /// [`RegistryMut::mount_apps_shell`](mcp_proto::RegistryMut::mount_apps_shell).
    pub fn apps_shell(mut self, app: App) -> Self {
        self.items.push(Item::Shell(app));
        self
    }

    /// Registers an app or the shell item, with the handler that serves its HTML.
    pub(crate) fn register_app(
        reg: &mut mcp_proto::RegistryMut<'_, Handler>,
        app: App,
        shell: bool,
    ) -> Result<(), RegistryError> {
        let handler = app_handler(&app);
        if shell {
            reg.mount_apps_shell(app, handler)
        } else {
            reg.add_app(app, handler)
        }
    }
}

impl Server {
    /// Serves an MCP App, at any time (see [`ServerBuilder::app`]); listening clients are
    /// told the resource list changed.
    pub fn add_app(&self, app: App) -> Result<(), RegistryError> {
        let handler = app_handler(&app);
        let uri = app.uri().to_owned();
        self.add_item(
            |r| r.add_app(app.clone(), handler.clone()),
            |r| {
                r.remove_app(&uri);
            },
        )
    }

    /// Serves `app` and a tool linked to it, at any time (see [`ServerBuilder::app_tool`]).
    /// Both or neither: when the tool is refused, the app is removed again.
    pub fn add_app_tool<F, Fut, R>(&self, app: App, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = crate::handler::with_output::<R>(linked(&app, tool))?.observed();
        let uri = app.uri().to_owned();
        let name = tool.name().to_owned();
        let handler = app_handler(&app);
        let tool_handler = tool_fn(f);
        self.add_item(
            |r| {
                r.add_app(app.clone(), handler.clone())?;
                r.add_tool(tool.clone(), tool_handler.clone()).inspect_err(|_| {
                    r.remove_app(&uri);
                })
            },
            |r| {
                r.remove_tool(&name);
                r.remove_app(&uri);
            },
        )
    }

    /// Stops serving the app at `uri`; whether an app was served there (a resource of another
    /// kind stays). Tools linked to it keep their link: remove or re-register them.
    pub fn remove_app(&self, uri: &str) -> bool {
        self.remove_item(|r| r.remove_app(uri).is_some())
    }
}

#[cfg(test)]
mod tests {
    use mcp_proto::apps::{AppCsp, AppError};
    use mcp_proto::{Mode, ToolOutput};
    use serde_json::json;

    use super::*;
    use crate::BuildError;

    fn app(uri: &str) -> App {
        App::new(uri, "counter", "<!doctype html><p>0</p>").views(["count"])
    }

    fn refusal(r: Result<Server, BuildError>) -> AppError {
        match r {
            Err(BuildError::Registry(RegistryError::InvalidApp(e))) => e,
            Err(e) => panic!("expected an app refusal, got {e}"),
            Ok(_) => panic!("expected an app refusal, got a server"),
        }
    }

    #[test]
    fn builder_registers_apps_before_the_tools_that_link_them() {
        let tool =
            Tool::new("count", "Counts", json!({"type": "object"})).ui("ui://demo/counter", Visibility::App);
        let server = Server::builder("t", "1")
            .tool(tool, |_| async { ToolOutput::presentation("count", json!({"n": 1})) })
            .app(app("ui://demo/counter"))
            .build();
        assert!(server.is_ok());
        let server = Server::builder("t", "1")
            .app_tool(app("ui://demo/a"), Tool::new("a", "A", json!({"type": "object"})), |_| async { "ok" })
            .app_tool(app("ui://demo/b"), Tool::new("b", "B", json!({"type": "object"})), |_| async { "ok" })
            .build()
            .unwrap();
        assert_eq!(
            server.introspect().tools.iter().map(|t| t.declared_ui()).collect::<Vec<_>>(),
            [Some(("ui://demo/a", Visibility::ModelAndApp)), Some(("ui://demo/b", Visibility::ModelAndApp))]
        );
    }

    #[test]
    fn builder_refusals_name_the_field() {
        let bad = app("ui://a").csp(AppCsp::new().frame_domain("'self'"));
        let e = refusal(Server::builder("t", "1").app(bad).build());
        assert!(e.to_string().contains("csp.frameDomains"), "{e}");
        let unlinked = Tool::new("t", "T", json!({"type": "object"})).ui("ui://nowhere", Visibility::Model);
        let e = refusal(Server::builder("t", "1").tool(unlinked, |_| async { "ok" }).build());
        assert_eq!(e, AppError::NotAnApp { tool: "t".into(), uri: "ui://nowhere".into() });
        assert_eq!(
            refusal(Server::builder("t", "1").apps_shell(app("ui://s")).build()),
            AppError::ShellNeedsCompact
        );
        let shells =
            Server::builder("t", "1").mode(Mode::Compact).apps_shell(app("ui://s")).apps_shell(app("ui://t"));
        assert_eq!(refusal(shells.build()), AppError::ShellTaken { uri: "ui://s".into() });
        assert!(Server::builder("t", "1").mode(Mode::Compact).apps_shell(app("ui://s")).build().is_ok());
    }

    #[test]
    fn add_app_tool_is_all_or_nothing() {
        let server = Server::builder("t", "1").build().unwrap();
        let bad_tool = Tool::new("has space", "T", json!({"type": "object"}));
        assert!(matches!(
            server.add_app_tool(app("ui://a"), bad_tool, |_| async { "ok" }),
            Err(RegistryError::InvalidName(_))
        ));
        assert!(!server.remove_app("ui://a"), "the app went with its refused tool");
        let tool = Tool::new("count", "T", json!({"type": "object"}));
        server.add_app_tool(app("ui://a"), tool, |_| async { "ok" }).unwrap();
        assert!(server.remove_app("ui://a"));
    }
}

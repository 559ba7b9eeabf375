//! A tool's declaration ([`Tool`], [`TaskSupport`]) and its `tools/list` entry per version.
//!
//! Below the registry (which compiles and stores tools) and the search index (which reads
//! them), so both import it and neither imports the other.

use serde_json::{Map, Value};

use crate::apps::{UiLink, Visibility};
use crate::items::{builder_fields, Described};
use crate::version::ProtocolVersion;

/// The declaration of a tool, as `tools/list` shows it.
#[derive(Debug, Clone)]
pub struct Tool {
    pub(crate) name: String,
    pub(crate) info: Described,
    pub(crate) input_schema: Value,
    pub(crate) output_schema: Option<Value>,
    annotations: Option<Map<String, Value>>,
    execution: Option<Value>,
    pub(crate) diagnostics_schema: Option<Value>,
    pub(crate) validate_input: bool,
    /// The app this tool's results are shown in ([`Tool::ui`]); boxed, since few tools have
    /// one and every tool carries the field.
    pub(crate) ui: Option<Box<UiLink>>,
    pub(crate) task: TaskSupport,
    pub(crate) task_by_handler: bool,
}

/// Whether a tool may run as a task of the `io.modelcontextprotocol/tasks` extension
/// (2026-07-28). The server decides; the client only declares the extension in the request's
/// `_meta` client capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TaskSupport {
    /// Always answered synchronously (the default).
    #[default]
    Never,
    /// Runs as a task when the request declares the extension, synchronously otherwise.
    Optional,
    /// Runs only as a task: a request that does not declare the extension is refused with
    /// `-32021` naming it in `requiredCapabilities`, before the handler runs.
    Required,
}

impl Tool {
    /// A tool with a name, a description and a JSON Schema for its arguments (an object schema).
    pub fn new(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Self {
        Self {
            name: name.into(),
            info: Described::with_description(Some(description.into())),
            input_schema,
            output_schema: None,
            annotations: None,
            execution: None,
            diagnostics_schema: None,
            validate_input: true,
            ui: None,
            task: TaskSupport::Never,
            task_by_handler: false,
        }
    }

    /// Whether calls may run as tasks (see [`TaskSupport`]). Default [`TaskSupport::Never`].
    ///
    /// A task-capable call from a request declaring the extension is answered at once with
    /// `resultType: "task"` while its handler goes on running; the client reads the outcome
    /// with `tasks/get`. Not listed in `tools/list`: 2026-07-28 has no `execution.taskSupport`.
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task = support;
        self
    }

    /// Lets the handler decide when a task-capable call becomes a task: it runs as an ordinary
    /// call (it may ask for input over 2026-07-28 rounds, or answer at once) until it starts
    /// the task itself ([`Engine::start_task`](crate::engine::Engine::start_task)). Without this, the
    /// engine makes the task before the handler runs.
    pub fn task_started_by_handler(mut self) -> Self {
        self.task_by_handler = true;
        self
    }

    /// The task support declared with [`task_support`](Self::task_support).
    pub fn declared_task_support(&self) -> TaskSupport {
        self.task
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The input schema as declared.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// Replaces the input schema: for a declaration whose schema comes from elsewhere, as a
    /// typed tool's is derived from its argument type once the handler is known.
    pub fn with_input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    /// The output schema as declared with [`output_schema`](Self::output_schema), if any.
    pub fn declared_output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    builder_fields!();

    /// The title as declared with [`title`](Self::title), if any.
    pub fn declared_title(&self) -> Option<&str> {
        self.info.title.as_deref()
    }

    /// The description given to [`new`](Self::new), or the one set with
    /// [`description`](Self::description) after it.
    pub fn declared_description(&self) -> Option<&str> {
        self.info.description.as_deref()
    }

    /// A JSON Schema every `structuredContent` must satisfy (2025-06-18 and later). A schema
    /// whose type is not `object` is legal only on 2026-07-28; such a tool is hidden from older
    /// sessions.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// `ToolAnnotations` (readOnlyHint, destructiveHint, ...); 2025-03-26 and later.
    pub fn annotations(mut self, annotations: Map<String, Value>) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// `execution` (2025-11-25 only; dropped for other versions).
    pub fn execution(mut self, execution: Value) -> Self {
        self.execution = Some(execution);
        self
    }

    /// A JSON Schema the `diagnostics` of this tool's [`ToolFailure`](crate::content::ToolFailure)s must
    /// satisfy. Compiled at registration like the other schemas; not listed by itself (the
    /// output-schema wrapper of envelope mode is where a client sees it). A failure whose
    /// diagnostics break it is the application breaking its own contract, answered as an
    /// invalid `structuredContent` is: the generic internal error (`-32603`). Without one, any
    /// JSON value is accepted. Default none.
    pub fn failure_diagnostics_schema(mut self, schema: Value) -> Self {
        self.diagnostics_schema = Some(schema);
        self
    }

    /// The diagnostics schema as declared with
    /// [`failure_diagnostics_schema`](Self::failure_diagnostics_schema), if any.
    pub fn declared_diagnostics_schema(&self) -> Option<&Value> {
        self.diagnostics_schema.as_ref()
    }

    /// Links the tool to the app at `resource_uri` (MCP Apps): a host that supports apps renders
    /// the tool's results in it. The listing's `_meta` gets `ui.resourceUri` and
    /// `ui.visibility` (other members of a `ui` object declared with [`meta`](Self::meta)
    /// stay), and the deprecated flat `"ui/resourceUri"` that hosts older than the stable
    /// specification read. The app must be registered first
    /// ([`RegistryMut::add_app`](crate::engine::RegistryMut::add_app), or the compact apps shell):
    /// linking to any other URI is refused
    /// ([`RegistryError::InvalidApp`](crate::registry_error::RegistryError::InvalidApp)). A result of a linked
    /// tool that selects a view the app does not declare, or has no content at all, is replaced
    /// by an `invalid_result` tool failure (see
    /// [`ToolOutput::presentation`](crate::content::ToolOutput::presentation)).
    pub fn ui(mut self, resource_uri: impl Into<String>, visibility: Visibility) -> Self {
        self.ui = Some(Box::new(UiLink { resource_uri: resource_uri.into(), visibility }));
        self
    }

    /// The app this tool links to and who may call it, as declared with [`ui`](Self::ui).
    pub fn declared_ui(&self) -> Option<(&str, Visibility)> {
        self.ui.as_ref().map(|l| (l.resource_uri.as_str(), l.visibility))
    }

    /// Skips validating arguments against the input schema before the handler runs, for a
    /// handler that validates them itself. The schema is still listed.
    pub fn skip_input_validation(mut self) -> Self {
        self.validate_input = false;
        self
    }

    pub(crate) fn listing(&self, v: ProtocolVersion) -> String {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(self.name.clone()));
        if v.has_structured_output() {
            if let Some(t) = &self.info.title {
                m.insert("title".into(), Value::String(t.clone()));
            }
        }
        if let Some(d) = &self.info.description {
            m.insert("description".into(), Value::String(d.clone()));
        }
        m.insert("inputSchema".into(), self.input_schema.clone());
        if v.has_structured_output() {
            if let Some(s) = &self.output_schema {
                m.insert("outputSchema".into(), s.clone());
            }
        }
        if let Some(a) = &self.annotations {
            m.insert("annotations".into(), Value::Object(a.clone()));
        }
        if v.has_icons() {
            if let Some(i) = &self.info.icons {
                m.insert("icons".into(), i.clone());
            }
        }
        if v.has_tool_execution() {
            if let Some(e) = &self.execution {
                m.insert("execution".into(), e.clone());
            }
        }
        if v.has_structured_output() {
            match (&self.ui, &self.info.meta) {
                (Some(link), meta) => {
                    m.insert("_meta".into(), Value::Object(link.merged_into(meta.as_ref())));
                }
                (None, Some(meta)) => {
                    m.insert("_meta".into(), Value::Object(meta.clone()));
                }
                (None, None) => {}
            }
        }
        serde_json::to_string(&Value::Object(m)).unwrap_or_default()
    }
}

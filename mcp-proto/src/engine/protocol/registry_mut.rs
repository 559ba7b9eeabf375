//! Registering and unregistering items while the engine runs: each edit raises the
//! `list_changed` notifications it causes.

use crate::caller::{Gate, Recheck};
use crate::engine::state::subscriptions::List;
use crate::engine::Engine;
use crate::extensions::Extension;
use crate::items::{Prompt, Resource, ResourceTemplate};
use crate::registry::{RegistryError, Tool};

/// Registers and unregisters items; see [`Engine::registry_mut`].
pub struct RegistryMut<'a, H> {
    pub(in crate::engine) engine: &'a mut Engine<H>,
}

impl<H: Clone> RegistryMut<'_, H> {
    /// Registers a tool. Its schemas are compiled now; a tool that cannot be served is refused
    /// here rather than failing at call time. Connections the tool's gate admits are told
    /// `notifications/tools/list_changed`, in direct mode: a compact server's list (its three
    /// tools) does not change, and the tool is found by the next search.
    pub fn add_tool(&mut self, tool: Tool, handler: H) -> Result<(), RegistryError> {
        let gate = tool.info.gate.clone();
        self.engine.registry.add_tool(tool, handler)?;
        if !self.engine.compact() {
            self.engine.changed(List::Tools, gate.as_ref());
        }
        Ok(())
    }

    /// Unregisters a tool, returning its declaration if it was registered (told as
    /// [`add_tool`](Self::add_tool) tells).
    pub fn remove_tool(&mut self, name: &str) -> Option<Tool> {
        let tool = self.engine.registry.remove_tool(name)?;
        if !self.engine.compact() {
            self.engine.changed(List::Tools, tool.info.gate.as_ref());
        }
        Some(tool)
    }

    /// Sets the handler that looks up tasks this engine no longer (or never) held, in a store
    /// kept beyond it: a `tasks/get` for an id the engine does not hold is then handed to it
    /// ([`Request::GetTask`](crate::engine::Request::GetTask)) instead of being answered `-32602` at
    /// once. `None` (the default) turns the lookup off. Raises no notification.
    pub fn set_task_lookup(&mut self, handler: Option<H>) {
        self.engine.registry.task_lookup = handler;
    }

    /// Whether a tool of that name is registered (whatever its gate).
    pub fn has_tool(&self, name: &str) -> bool {
        self.engine.registry.tools.contains_key(name)
    }

    /// Registers a resource read by exact URI.
    pub fn add_resource(&mut self, resource: Resource, handler: H) -> Result<(), RegistryError> {
        let gate = resource.info.gate.clone();
        let max = self.engine.config.limits.max_uri_bytes;
        self.engine.registry.add_resource(resource, handler, max)?;
        self.engine.changed(List::Resources, gate.as_ref());
        Ok(())
    }

    /// Unregisters a resource (an app too: tools that link to it keep their link, so remove
    /// or re-register them). A file of a registered skill is not removed (`None`): it goes
    /// with its skill ([`remove_skill`](Self::remove_skill)).
    pub fn remove_resource(&mut self, uri: &str) -> Option<Resource> {
        let skill_file = self
            .engine
            .registry
            .resources
            .get(uri)
            .is_some_and(|e| matches!(e.source, crate::registry::Source::Skill(_)));
        if skill_file {
            return None;
        }
        let entry = self.engine.registry.resources.remove(uri)?;
        self.engine.registry.apps.views.remove(uri);
        self.engine.changed(List::Resources, entry.resource.info.gate.as_ref());
        Some(entry.resource)
    }

    /// Registers a resource template: reads of matching URIs go to `handler`, and
    /// `completion/complete` for its variables to `completion` (an empty answer without one).
    pub fn add_template(
        &mut self,
        template: ResourceTemplate,
        handler: H,
        completion: Option<H>,
    ) -> Result<(), RegistryError> {
        let gate = template.info.gate.clone();
        self.engine.registry.add_template(template, handler, completion)?;
        self.engine.changed(List::Resources, gate.as_ref());
        Ok(())
    }

    /// Unregisters a template.
    pub fn remove_template(&mut self, uri_template: &str) -> Option<ResourceTemplate> {
        let entry = self.engine.registry.templates.remove(uri_template)?;
        self.engine.changed(List::Resources, entry.template.info.gate.as_ref());
        Some(entry.template)
    }

    /// Registers a prompt, with an optional completion handler for its arguments.
    pub fn add_prompt(
        &mut self,
        prompt: Prompt,
        handler: H,
        completion: Option<H>,
    ) -> Result<(), RegistryError> {
        let gate = prompt.info.gate.clone();
        self.engine.registry.add_prompt(prompt, handler, completion)?;
        self.engine.changed(List::Prompts, gate.as_ref());
        Ok(())
    }

    /// Unregisters a prompt.
    pub fn remove_prompt(&mut self, name: &str) -> Option<Prompt> {
        let entry = self.engine.registry.prompts.remove(name)?;
        self.engine.changed(List::Prompts, entry.prompt.info.gate.as_ref());
        Some(entry.prompt)
    }

    /// Declares a protocol extension in `capabilities.extensions` (2025-11-25 and later; see
    /// [`Extension`]), to the callers its gate admits. Refused when the id is malformed, the
    /// settings are not an object ([`RegistryError::InvalidExtension`]) or the id is already
    /// declared ([`RegistryError::Duplicate`]). Capabilities are fixed for a legacy session:
    /// one already initialized learns of it only when it starts again; a 2026-07-28 client on
    /// its next `server/discover`.
    pub fn add_extension(&mut self, extension: Extension) -> Result<(), RegistryError> {
        self.engine.registry.add_extension(extension)
    }

    /// Withdraws a declared extension, returning it if it was declared. As with
    /// [`add_extension`](Self::add_extension), sessions already initialized keep what they
    /// were told.
    pub fn remove_extension(&mut self, id: &str) -> Option<Extension> {
        self.engine.registry.extensions.remove(id)
    }

    /// Sets (or with `None` clears) the server-wide gate over the data methods (every method but
    /// `initialize`, `ping`, `server/discover` and notifications). A refused caller gets
    /// `-32602` "forbidden" and no change notifications.
    pub fn set_gate(&mut self, gate: Option<Gate>) {
        self.engine.registry.gate = gate;
    }

    /// Sets (or with `None` clears) the re-check of held streams' callers. Default none: a
    /// stream is judged, for as long as it is open, as the caller its request presented.
    ///
    /// With one, before the engine delivers anything to a held stream (a legacy session's `GET`
    /// stream, a `subscriptions/listen` stream, and at each keep-alive any SSE response it keeps
    /// open) it calls `recheck` with the stream's stored caller, at most once per stream per
    /// input: for a list change, only streams a gated item's change would reach, and for a
    /// resource update, only streams subscribed to it; a stream with nothing to deliver costs
    /// nothing. What it returns decides:
    ///
    /// - `None` (or a panic): the caller is gone. The stream is closed
    ///   ([`CloseReason::Revoked`](crate::engine::CloseReason::Revoked)) without what it was
    ///   owed.
    /// - a caller with another [`binding`](crate::Caller::binding) (another user, another tenant): closed
    ///   the same way, because a stream belongs to the caller that opened it.
    /// - otherwise it becomes the stream's stored caller, and the server-wide gate and the
    ///   item's gate are decided against it: a role withdrawn at run time hides a gated tool's
    ///   change from the stream. Notifications owed to a legacy session are then judged as its
    ///   `GET` stream's caller rather than as the caller that initialized the session.
    ///
    /// It runs inside the engine, on the thread that drives it: a slow re-check holds up every
    /// connection, so it must answer from memory.
    pub fn set_recheck(&mut self, recheck: Option<Recheck>) {
        self.engine.registry.recheck = recheck;
    }
}

//! Serving skills (`io.modelcontextprotocol/skills`): registering [`Skill`]s on the builder and
//! at run time. The engine serves them by itself (`skills/list`, `skills/get`,
//! `resources/directory/read`, reads of their files); see [`mcp_proto::skills`].

use mcp_proto::{RegistryError, Skill};

use crate::builder::{Item, ServerBuilder};
use crate::server::Server;

impl ServerBuilder {
    /// Adds a skill (see [`Skill`]): the server then declares
    /// `io.modelcontextprotocol/skills` (with `directoryRead`) to the callers that can see a
    /// skill, serves its entry through `skills/list` and `skills/get`, its files as resources
    /// and its directories through `resources/directory/read`. No handler is involved: the
    /// files' bytes are held by the engine, hashed once. A skill that cannot be served (an
    /// invalid root, name or path, over 512 files or 16 MiB, nested in another, a URI taken)
    /// makes [`build`](Self::build) fail with the [`RegistryError`] that says why.
    ///
    /// ```
    /// # use mcp_server::Server;
    /// use mcp_proto::Skill;
    /// let skill = Skill::new("skill://git-workflow", "Follow the team's Git conventions", "# Git\n")
    ///     .file("templates/commit.md", "text/markdown", "feat: ...\n");
    /// assert!(Server::builder("demo", "1.0.0").skill(skill).build().is_ok());
    /// let bad = Skill::new("skill://Git_Workflow", "Bad name", "");
    /// assert!(Server::builder("demo", "1.0.0").skill(bad).build().is_err());
    /// ```
    pub fn skill(mut self, skill: Skill) -> Self {
        self.items.push(Item::Skill(skill));
        self
    }
}

impl Server {
    /// Registers a skill at any time (as [`ServerBuilder::skill`]); clients listening for
    /// resource list changes are told, since its files are resources.
    pub fn add_skill(&self, skill: Skill) -> Result<(), RegistryError> {
        let skill = crate::panics::Gated::observed(skill);
        let uri = skill.uri();
        self.add_item(
            |r| r.add_skill(skill.clone()),
            |r| {
                r.remove_skill(&uri);
            },
        )
    }

    /// Unregisters the skill whose `SKILL.md` is at `uri`, with its files; whether it was
    /// registered.
    pub fn remove_skill(&self, uri: &str) -> bool {
        self.remove_item(|r| r.remove_skill(uri).is_some())
    }
}

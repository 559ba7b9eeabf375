//! Who is calling: resolved by the application's auth layer, handed to the engine at `open`.

use std::collections::BTreeMap;

/// The identity behind a connection.
///
/// The engine never authenticates anyone: a shim (or the application's middleware) fills this in
/// and the engine uses it to bind cursors to their caller and, through gates, to decide what the
/// caller may see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The resolved principal (a user id, a token subject), if any.
    pub identity: Option<String>,
    /// Roles or scopes granted to the principal.
    pub roles: Vec<String>,
    /// The transport peer (for HTTP the client's address), used when there is no identity.
    pub peer: Option<String>,
    /// Anything else the auth layer wants gates to see.
    pub attributes: BTreeMap<String, String>,
}

impl Caller {
    /// An anonymous caller.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// A caller with an identity.
    pub fn identified(identity: impl Into<String>) -> Self {
        Self { identity: Some(identity.into()), ..Self::default() }
    }

    /// Adds a role.
    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        self.roles.push(role.into());
        self
    }

    /// Whether the caller holds `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// The key this caller's cursors and subscriptions are bound to: the identity, else the
    /// peer, else the empty string (every anonymous local caller is one caller).
    pub fn binding(&self) -> &str {
        self.identity.as_deref().or(self.peer.as_deref()).unwrap_or("")
    }
}

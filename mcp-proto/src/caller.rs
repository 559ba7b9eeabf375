//! Who is calling: resolved by the application's auth layer, handed to the engine at `open`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::http::HttpRequestHead;

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
    /// The HTTP request this caller came with (headers, cookies, `Host`, the connection's
    /// peer), for handlers and gates to read; `None` over stdio. A shim sets it for each HTTP
    /// request, so a legacy session's handlers see the request that carried their call, and a
    /// held stream's gates the request that opened it. It is not part of the identity:
    /// [`binding`](Self::binding) ignores it.
    pub http: Option<Arc<HttpRequestHead>>,
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

/// A synchronous predicate over a [`Caller`]: may this caller see and use an item (or, as the
/// server-wide gate, the data methods at all)?
///
/// Gates run inside the engine, because listings, pagination and notification delivery depend
/// on them, so they must be quick and must not block. A gate that panics counts as a refusal:
/// gates fail closed.
#[derive(Clone)]
pub struct Gate(std::sync::Arc<dyn Fn(&Caller) -> bool + Send + Sync>);

impl Gate {
    /// A gate from any predicate.
    pub fn new(f: impl Fn(&Caller) -> bool + Send + Sync + 'static) -> Self {
        Gate(std::sync::Arc::new(f))
    }

    /// Admits callers holding `role`.
    pub fn role(role: impl Into<String>) -> Self {
        let role = role.into();
        Gate::new(move |c| c.has_role(&role))
    }

    /// Admits callers with a resolved identity.
    pub fn identified() -> Self {
        Gate::new(|c| c.identity.is_some())
    }

    /// Whether the gate admits `caller`; a panic is a refusal.
    pub fn allows(&self, caller: &Caller) -> bool {
        self.try_allows(caller).unwrap_or(false)
    }

    /// Whether the gate admits `caller`, or the panic it raised instead: for a layer above the
    /// engine that logs a gate's panics (the engine has no logger), typically by wrapping each
    /// gate it is given in a [`Gate::new`] that calls this and refuses on `Err`, so that gates
    /// still fail closed.
    pub fn try_allows(&self, caller: &Caller) -> Result<bool, GatePanicked> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.0)(caller))).map_err(GatePanicked)
    }
}

/// A gate's panic, caught by [`Gate::try_allows`]: what it panicked with.
pub struct GatePanicked(Box<dyn std::any::Any + Send>);

impl GatePanicked {
    /// The panic's message: the `&str` or `String` given to `panic!`, `None` for any other
    /// payload (`std::panic::panic_any`). Raw: it may hold control characters, so a log should
    /// escape it.
    pub fn message(&self) -> Option<&str> {
        let payload = &*self.0;
        payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
    }

    /// The panic's payload, as `std::panic::catch_unwind` returned it.
    pub fn into_payload(self) -> Box<dyn std::any::Any + Send> {
        self.0
    }
}

impl std::fmt::Debug for GatePanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("GatePanicked").field(&self.message()).finish()
    }
}

impl std::fmt::Display for GatePanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.message() {
            Some(m) => write!(f, "the gate panicked: {}", m.escape_debug()),
            None => f.write_str("the gate panicked (non-string panic payload)"),
        }
    }
}

impl std::error::Error for GatePanicked {}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

/// The application's re-check of a held stream's caller: given the [`Caller`] the stream was
/// opened as (or the last re-check returned), its current form, or `None` when it is gone (a
/// revoked session, a withdrawn token).
///
/// Held streams (a legacy session's `GET` stream, a `subscriptions/listen` stream, an SSE
/// response kept open for a call) outlive the request that resolved their caller; without a
/// re-check, what a stream is sent is decided against that caller for as long as its connection
/// lasts. With one, the engine re-resolves the caller before it delivers anything to such a
/// stream (see [`RegistryMut::set_recheck`](crate::engine::RegistryMut::set_recheck)).
///
/// Like a [`Gate`] it runs inside the engine, so it must be quick and must not block: look the
/// caller up in memory the application keeps current, do not call out. A re-check that panics
/// counts as `None`: re-checks fail closed, and only the stream it was about is closed.
#[derive(Clone)]
pub struct Recheck(std::sync::Arc<RecheckFn>);

/// What a [`Recheck`] wraps.
type RecheckFn = dyn Fn(&Caller) -> Option<Caller> + Send + Sync;

impl Recheck {
    /// A re-check from any function of the stored caller.
    pub fn new(f: impl Fn(&Caller) -> Option<Caller> + Send + Sync + 'static) -> Self {
        Recheck(std::sync::Arc::new(f))
    }

    /// The current form of `caller`, or `None` when it is gone; a panic is `None`.
    pub fn current(&self, caller: &Caller) -> Option<Caller> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.0)(caller))).unwrap_or(None)
    }
}

impl std::fmt::Debug for Recheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recheck")
    }
}

/// Whether an optional gate admits `caller`.
pub(crate) fn admits(gate: Option<&Gate>, caller: &Caller) -> bool {
    gate.is_none_or(|g| g.allows(caller))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_fail_closed() {
        let admin = Caller::identified("a").with_role("admin");
        assert!(Gate::role("admin").allows(&admin));
        assert!(!Gate::role("admin").allows(&Caller::anonymous()));
        let boom = Gate::new(|_| panic!("gate bug"));
        assert!(!boom.allows(&admin));
        assert!(admits(None, &Caller::anonymous()));
    }

    #[test]
    fn try_allows_hands_over_the_panic_instead_of_refusing() {
        let admin = Caller::identified("a").with_role("admin");
        assert!(matches!(Gate::role("admin").try_allows(&admin), Ok(true)));
        assert!(matches!(Gate::role("admin").try_allows(&Caller::anonymous()), Ok(false)));
        let panicked = Gate::new(|c| panic!("no {}\n", c.binding())).try_allows(&admin).unwrap_err();
        assert_eq!(panicked.message(), Some("no a\n"));
        assert_eq!(panicked.to_string(), "the gate panicked: no a\\n", "control bytes escaped");
        let odd = Gate::new(|_| std::panic::panic_any(7u8)).try_allows(&admin).unwrap_err();
        assert_eq!(odd.message(), None);
        assert_eq!(odd.into_payload().downcast_ref::<u8>(), Some(&7));
    }

    #[test]
    fn rechecks_fail_closed() {
        let alice = Caller::identified("alice");
        let promote = Recheck::new(|c| Some(c.clone().with_role("admin")));
        assert_eq!(promote.current(&alice), Some(alice.clone().with_role("admin")));
        assert_eq!(Recheck::new(|_| None).current(&alice), None);
        assert_eq!(Recheck::new(|_| panic!("re-check bug")).current(&alice), None);
    }
}

//! The warnings that matter for safety: a configuration under which a protection the operator
//! may count on is off. Each is logged (`tracing`, `WARN`), recorded in the server's
//! [`Status::warnings`](crate::Status::warnings), and, when no `tracing` subscriber would
//! record it, printed once per process on stderr: a warning nobody can see protects nobody.

use std::sync::atomic::{AtomicU8, Ordering};

/// A configuration the server runs under that leaves a protection off. Raised at most once per
/// server (and printed on stderr at most once per process), and kept in
/// [`Status::warnings`](crate::Status::warnings) for the server's life: the configuration does
/// not change while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Warning {
    /// A mounted endpoint (`McpService`) got a request without the
    /// client's address (no `PeerAddr` extension, no runtime convention
    /// such as axum's `ConnectInfo<SocketAddr>`) while
    /// [`HttpConfig::loopback_only`](mcp_proto::http::HttpConfig::loopback_only) is on: the
    /// loopback-only rule cannot be applied, so clients from the network are served. The `Host`
    /// and `Origin` rules still apply.
    NoPeerAddress,
    /// A standalone endpoint (`HttpService::serve`, a shim's
    /// `serve_http` or `serve_https`) accepts peers from any address
    /// ([`HttpConfig::loopback_only`](mcp_proto::http::HttpConfig::loopback_only) off), and
    /// the server neither verifies tokens (feature `auth`) nor identifies callers
    /// (`ServerBuilder::identify`): whoever reaches it is
    /// served, as an anonymous caller.
    Unauthenticated,
}

impl Warning {
    /// Every warning, in the order [`Warnings::iter`] lists them.
    pub const ALL: [Warning; 2] = [Warning::NoPeerAddress, Warning::Unauthenticated];

    /// A stable snake_case name, for metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Warning::NoPeerAddress => "no_peer_address",
            Warning::Unauthenticated => "unauthenticated",
        }
    }

    /// What is off and how to turn it back on, as logged and printed.
    pub fn message(self) -> &'static str {
        match self {
            Warning::NoPeerAddress => {
                "McpService: the request carries no client address (no ConnectInfo<SocketAddr> and no \
                 PeerAddr extension), so the loopback-only rule is not applied; serve the router with \
                 `into_make_service_with_connect_info::<SocketAddr>()`, insert a PeerAddr, or turn the \
                 rule off with HttpConfig::loopback_only(false)"
            }
            Warning::Unauthenticated => {
                "the HTTP endpoint accepts peers from any address (HttpConfig::loopback_only(false)) \
                 and nothing identifies them (no authorization, no identify hook): every client that \
                 reaches it is served as an anonymous caller; protect it with \
                 ServerBuilder::authorization or ServerBuilder::identify, or keep it on loopback"
            }
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// The [`Warning`]s a server raised since it started: a small set, cheap to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Warnings(u8);

impl Warnings {
    /// Whether `warning` was raised.
    pub fn contains(self, warning: Warning) -> bool {
        self.0 & warning.bit() != 0
    }

    /// Whether none was.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The warnings raised, in the order of [`Warning::ALL`].
    pub fn iter(self) -> impl Iterator<Item = Warning> {
        Warning::ALL.into_iter().filter(move |w| self.contains(*w))
    }
}

/// The warnings printed on stderr by this process: once each, however many servers raise them.
#[cfg(feature = "http")]
static PRINTED: AtomicU8 = AtomicU8::new(0);

/// A server's raised warnings, shared by its endpoints.
#[derive(Default)]
pub(crate) struct Raised(AtomicU8);

impl Raised {
    /// Raises `warning`: the first time for this server it is logged and recorded, and printed
    /// on stderr when no subscriber would record the log and this process has not printed it.
    #[cfg(feature = "http")]
    pub(crate) fn raise(&self, warning: Warning) {
        if self.0.fetch_or(warning.bit(), Ordering::AcqRel) & warning.bit() != 0 {
            return;
        }
        if tracing::enabled!(tracing::Level::WARN) {
            tracing::warn!(warning = warning.name(), "{}", warning.message());
        } else if PRINTED.fetch_or(warning.bit(), Ordering::AcqRel) & warning.bit() == 0 {
            eprintln!("mcp-server warning ({}): {}", warning.name(), warning.message());
        }
    }

    pub(crate) fn snapshot(&self) -> Warnings {
        Warnings(self.0.load(Ordering::Acquire))
    }
}

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;

    #[test]
    fn raised_once_and_listed_in_order() {
        let raised = Raised::default();
        assert!(raised.snapshot().is_empty());
        raised.raise(Warning::Unauthenticated);
        raised.raise(Warning::NoPeerAddress);
        raised.raise(Warning::Unauthenticated);
        let seen = raised.snapshot();
        assert!(seen.contains(Warning::NoPeerAddress) && seen.contains(Warning::Unauthenticated));
        assert_eq!(seen.iter().collect::<Vec<_>>(), Warning::ALL);
        assert_eq!(Warning::ALL.map(Warning::name), ["no_peer_address", "unauthenticated"]);
    }
}

//! Per-item scopes: a caller admitted to an item but lacking a scope it needs is refused with
//! [`Blame::Scope`], and an HTTP exchange sends that refusal as the resource's step-up
//! challenge (`403 insufficient_scope`, RFC 6750 §3.1, with every scope to ask for).

use serde_json::Value;

use crate::auth::{Denial, ProtectedResource, Scopes};
use crate::blame::{Blame, ErrorCode};
use crate::caller::Caller;
use crate::jsonrpc::{Encoded, RpcError};

/// `Ok` when `caller` holds every scope of `needed` (as a role); otherwise the refusal, whose
/// `data.scopes` lists what to ask for: every needed scope, then those held.
pub(in crate::engine) fn check(needed: &[String], caller: &Caller) -> Result<(), RpcError> {
    if needed.iter().all(|s| caller.has_role(s)) {
        return Ok(());
    }
    // Roles that are not scope tokens (an application's own) are not asked for again.
    let held = Scopes::from_iter_checked(
        caller.roles.iter().map(String::as_str).filter(|r| Scopes::parse(r).is_ok()),
    )
    .unwrap_or_default();
    let ask = held.step_up(needed.iter().map(String::as_str)).unwrap_or_else(|| needed.to_vec());
    let message = "insufficient scope: the caller's token lacks a scope this request needs";
    Err(RpcError::blamed(Blame::Scope, ErrorCode::InsufficientScope, message)
        .with_data(serde_json::json!({ "scopes": ask })))
}

/// The `WWW-Authenticate` value of an HTTP answer carrying `msg`: the step-up challenge of
/// `resource` when `msg` is a [`check`] refusal, else `None`.
pub(in crate::engine) fn challenge(resource: Option<&ProtectedResource>, msg: &Encoded) -> Option<String> {
    let resource = resource?;
    if !matches!(msg.fault, Some((Blame::Scope, _))) {
        return None;
    }
    // Read back from the refusal this module wrote: rare (refusals only), and the scopes
    // travel with the message instead of beside every message.
    let body: Value = serde_json::from_slice(&msg.bytes).ok()?;
    let scopes = body.pointer("/error/data/scopes")?.as_array()?;
    let scopes = scopes.iter().filter_map(Value::as_str).map(str::to_owned).collect();
    Denial::InsufficientScope(scopes).www_authenticate(resource)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ResourceUrl;

    fn caller(roles: &[&str]) -> Caller {
        roles.iter().fold(Caller::identified("ann"), |c, r| c.with_role(*r))
    }

    #[test]
    fn a_caller_without_a_needed_scope_is_asked_for_every_one_plus_what_it_holds() {
        let needed = vec!["files:write".to_owned(), "files:read".to_owned()];
        assert!(check(&needed, &caller(&["files:read", "files:write", "x"])).is_ok());
        assert!(check(&[], &caller(&[])).is_ok());
        let err =
            check(&needed, &caller(&["files:read", "mcp", "offline_access", "not a scope\\"])).unwrap_err();
        assert_eq!((err.blame, err.code), (Blame::Scope, ErrorCode::InsufficientScope));
        let data = err.data.clone().unwrap();
        assert_eq!(data["scopes"], serde_json::json!(["files:write", "files:read", "mcp"]));

        let resource = ProtectedResource::new(
            ResourceUrl::parse("https://mcp.example.com/mcp").unwrap(),
            ["https://as.example.com"],
        )
        .unwrap();
        let challenge = challenge(Some(&resource), &err.encode(None)).unwrap();
        assert!(challenge.starts_with("Bearer error=\"insufficient_scope\""), "{challenge}");
        assert!(challenge.contains("scope=\"files:write files:read mcp\""), "{challenge}");
        assert!(challenge.contains(
            "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        ));
        // Other errors, and a server that is no protected resource, carry no challenge.
        assert_eq!(challenge_of(Some(&resource), &RpcError::invalid_params("x")), None);
        assert_eq!(super::challenge(None, &err.encode(None)), None);
    }

    fn challenge_of(resource: Option<&ProtectedResource>, err: &RpcError) -> Option<String> {
        challenge(resource, &err.encode(None))
    }
}

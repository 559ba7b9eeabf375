//! DPoP-bound tokens (RFC 9449) at the gate: the request's proof held to the request, its
//! signature verified with the key it carries, that key matched to the token's `cnf.jkt`, and
//! the proof admitted once.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use mcp_proto::auth::dpop::{check_proof, Nonces, Proof, ProofRules, ProofTarget, Replays};
use mcp_proto::auth::{Denial, ProtectedResource};

use super::verify::verifies;

/// How long a DPoP proof is good for either side of its `iat`: 60 s by default
/// ([`Authorization::dpop_window`](super::Authorization::dpop_window)). An older or later
/// proof is refused `401 invalid_dpop_proof`.
pub const PROOF_WINDOW: Duration = Duration::from_secs(60);

/// DPoP proofs remembered against replay: 65,536 by default
/// ([`Authorization::dpop_replay_capacity`](super::Authorization::dpop_replay_capacity)),
/// about 4 MiB. A proof is remembered for twice the window; when the cache is full the oldest
/// is forgotten and no proof made at or before it is admitted after (`503`: the client retries
/// with a fresh proof), so a replay is never admitted, whatever the load.
pub const REPLAY_CAPACITY: usize = 65_536;

/// The proof side of an [`Authorization`](super::Authorization).
#[derive(Debug)]
pub(crate) struct Proofs {
    rules: ProofRules,
    replays: Mutex<Replays>,
    /// Set when nonces are required, once the server's key ring is known.
    nonces: Option<Nonces>,
}

impl Proofs {
    pub(crate) fn new(window: Duration, capacity: usize, nonces: Option<Nonces>) -> Self {
        let rules = ProofRules::default().window(window);
        Self { rules, replays: Mutex::new(Replays::new(capacity, window)), nonces }
    }

    /// The proof of a request presenting `token` with the `DPoP` scheme, held to the request
    /// (`method` on the resource's URL) at `now`, before the token itself is verified: only
    /// what costs nothing but parsing.
    pub(crate) fn check(
        &self,
        resource: &ProtectedResource,
        headers: &http::HeaderMap,
        method: &str,
        token: &str,
        now: u64,
    ) -> Result<Proof, Denial> {
        let mut values = headers.get_all("dpop").iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(Denial::InvalidProof("the request must carry exactly one DPoP proof"));
        };
        let value = value.to_str().map_err(|_| Denial::InvalidProof("the DPoP proof is not a JWT"))?;
        let target = ProofTarget {
            method,
            url: resource.resource(),
            token,
            nonces: self.nonces.as_ref().map(|n| (n, now)),
        };
        let proof = check_proof(value, target, &self.rules, now)?;
        if !resource.dpop_algs().contains(&proof.alg) {
            return Err(Denial::InvalidProof("the DPoP proof's alg is not one this resource accepts"));
        }
        Ok(proof)
    }

    /// Admits `proof`, checked by [`check`](Self::check), for a token verified as bound to the
    /// key thumbprint `jkt`: the key must be that one, the signature must verify, and the proof
    /// must not have been seen. Last, so that only a holder of a valid token spends a slot.
    pub(crate) fn admit(&self, proof: &Proof, jkt: &str, now: u64) -> Result<(), Denial> {
        if proof.jkt != jkt {
            return Err(Denial::InvalidToken("the token is bound to another key than the DPoP proof's"));
        }
        let input = proof.signing_input.as_bytes();
        if !verifies(proof.kind, &proof.alg, &proof.jwk, input, &proof.signature) {
            return Err(Denial::InvalidProof("the DPoP proof's signature does not verify"));
        }
        self.replays.lock().unwrap_or_else(PoisonError::into_inner).admit(proof, now)
    }

    /// A fresh nonce for a `DPoP-Nonce` header, when nonces are required.
    pub(crate) fn nonce(&self, now: u64) -> Option<String> {
        self.nonces.as_ref().map(|n| n.issue(now))
    }
}

//! DPoP-bound tokens (RFC 9449) at the gate: the request's proof held to the request, its
//! signature verified with the key it carries, that key matched to the token's `cnf.jkt`, and
//! the proof admitted once.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcp_proto::auth::dpop::{check_proof, Nonces, Proof, ProofRules, ProofTarget, Replays};
use mcp_proto::auth::{Denial, ProtectedResource};

use super::gate::Forwarded;
use super::verify::verifies;
use crate::cluster::{Cluster, CLAIM_TIMEOUT};
use crate::runtime::Runtime;

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
pub(crate) struct Proofs {
    rules: ProofRules,
    replays: Mutex<Replays>,
    /// Set when nonces are required, once the server's key ring is known.
    nonces: Option<Nonces>,
    /// The cluster whose replay ledger every replica claims proofs in, when the server is a
    /// replica: a proof spent on one is refused on all.
    shared: Option<Arc<dyn Cluster>>,
}

impl std::fmt::Debug for Proofs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proofs").field("rules", &self.rules).field("shared", &self.shared.is_some()).finish()
    }
}

impl Proofs {
    pub(crate) fn new(
        window: Duration,
        capacity: usize,
        nonces: Option<Nonces>,
        shared: Option<Arc<dyn Cluster>>,
    ) -> Self {
        let rules = ProofRules::default().window(window);
        Self { rules, replays: Mutex::new(Replays::new(capacity, window)), nonces, shared }
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
    /// must not have been seen, here nor (in a cluster) on another replica. Last, so that only
    /// a holder of a valid token spends a slot.
    ///
    /// In a cluster the proof is claimed in the shared replay ledger until its window has
    /// passed; when the ledger cannot answer within [`CLAIM_TIMEOUT`] the request is refused
    /// `503` (a replay cannot be ruled out: it fails closed). A proof on a request another
    /// replica forwarded was claimed there, and is not claimed again.
    pub(crate) async fn admit(
        &self,
        proof: &Proof,
        jkt: &str,
        now: u64,
        rt: &Arc<dyn Runtime>,
        from: Forwarded,
    ) -> Result<(), Denial> {
        if proof.jkt != jkt {
            return Err(Denial::InvalidToken("the token is bound to another key than the DPoP proof's"));
        }
        let input = proof.signing_input.as_bytes();
        if !verifies(proof.kind, &proof.alg, &proof.jwk, input, &proof.signature) {
            return Err(Denial::InvalidProof("the DPoP proof's signature does not verify"));
        }
        if from == Forwarded::Vouched {
            return Ok(());
        }
        self.replays.lock().unwrap_or_else(PoisonError::into_inner).admit(proof, now)?;
        let Some(cluster) = &self.shared else { return Ok(()) };
        let digest: String =
            Replays::key(&proof.jkt, &proof.jti).iter().map(|b| format!("{b:02x}")).collect();
        let remembered = self.rules.window_len().as_secs().saturating_mul(2).saturating_add(1);
        let until_ms = now.saturating_add(remembered).saturating_mul(1000);
        let deadline = rt.now().checked_add(CLAIM_TIMEOUT);
        let claimed =
            crate::runtime::within(rt.as_ref(), deadline, cluster.claim(&format!("dpop:{digest}"), until_ms));
        match claimed.await {
            Some(Ok(None)) => Ok(()),
            Some(Ok(Some(_))) => Err(Denial::InvalidProof("the DPoP proof was used before")),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "cannot claim a DPoP proof in the cluster's replay ledger: refusing 503");
                Err(Denial::Unavailable)
            }
            None => {
                tracing::warn!(
                    "the cluster's replay ledger did not answer a DPoP claim in time: refusing 503"
                );
                Err(Denial::Unavailable)
            }
        }
    }

    /// A fresh nonce for a `DPoP-Nonce` header, when nonces are required.
    pub(crate) fn nonce(&self, now: u64) -> Option<String> {
        self.nonces.as_ref().map(|n| n.issue(now))
    }
}

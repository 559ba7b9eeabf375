//! The nonces a holder remembers of the `Mcp-Forwarded-Peer` tokens it accepted, kept with the
//! cluster membership (each replica has one set): a token vouches for one request only.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// How long a `Mcp-Forwarded-Peer` token is accepted after it was made: 10 s (either way, for
/// replicas' clocks that disagree a little). A token is made for one request just before it is
/// sent, so it needs only the trip to the holder; the bound keeps one seen on the network from
/// vouching for long, and it is how long the holder remembers a token's nonce.
pub const PEER_TOKEN_TTL_MS: u64 = 10_000;

/// Nonces of `Mcp-Forwarded-Peer` tokens a holder remembers at most: 65,536 (about 6,500
/// forwarded requests a second over [`PEER_TOKEN_TTL_MS`]). Past it a token is not accepted
/// until older nonces expire: the holder then sees the forwarding replica's address, as for a
/// token that does not verify, and nothing is lost but the address.
pub const MAX_PEER_NONCES: usize = 65_536;

/// The nonces of the `Mcp-Forwarded-Peer` tokens a holder accepted within
/// [`PEER_TOKEN_TTL_MS`]: a token is accepted once.
#[derive(Default)]
pub(crate) struct PeerNonces {
    inner: Mutex<NonceSet>,
}

#[derive(Default)]
struct NonceSet {
    seen: HashSet<String>,
    /// Oldest first, with the time each token was made: what expires first.
    order: VecDeque<(u64, String)>,
}

impl PeerNonces {
    /// Takes `nonce`, made at `at`, if it was not taken before and there is room for it.
    pub(crate) fn take(&self, nonce: &str, at: u64, now: u64) -> bool {
        let Ok(mut set) = self.inner.lock() else { return false };
        while let Some((made, _)) = set.order.front() {
            if made.saturating_add(2 * PEER_TOKEN_TTL_MS) > now {
                break;
            }
            if let Some((_, old)) = set.order.pop_front() {
                set.seen.remove(&old);
            }
        }
        if set.seen.len() >= MAX_PEER_NONCES || set.seen.contains(nonce) {
            return false;
        }
        set.seen.insert(nonce.to_owned());
        set.order.push_back((at, nonce.to_owned()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nonces_are_bounded_and_expire() {
        let nonces = PeerNonces::default();
        let now = 1_000_000;
        for i in 0..MAX_PEER_NONCES {
            assert!(nonces.take(&i.to_string(), now, now));
        }
        assert!(!nonces.take("one more", now, now), "full: refused, nothing forgotten early");
        assert!(!nonces.take("0", now, now), "still remembered");
        let later = now + 2 * PEER_TOKEN_TTL_MS;
        assert!(nonces.take("one more", later, later), "the old ones expired");
        assert_eq!(nonces.inner.lock().unwrap().seen.len(), 1);
    }
}

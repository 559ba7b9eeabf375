//! Opaque, signed pagination cursors.
//!
//! A cursor is `v1.<base64url payload>.<base64url HMAC-SHA256>`. The payload is
//! `{"m":method,"c":caller tag,"k":last key}`: the list method, a keyed tag of the caller's
//! identity ([`caller_digest`]) and the key (name or URI) of the last item of the page it
//! follows, and nothing else (no total, no page size, no offset), so a cursor reveals nothing
//! about what the caller cannot see and is useless to anyone else. The next page starts after
//! that key in key order, which the registry's ordered maps find in O(log n), and a key that
//! has since been removed still marks a place. Replicas that share a [`KeyRing`] accept each
//! other's cursors.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// HMAC keys: one signs, every one verifies, so keys can be rotated without breaking cursors
/// already handed out.
#[derive(Clone)]
pub struct KeyRing {
    keys: Vec<[u8; 32]>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyRing({} keys)", self.keys.len())
    }
}

impl KeyRing {
    /// A ring whose only key is `key`. A shim draws it from the OS's randomness by default.
    pub fn new(key: [u8; 32]) -> Self {
        Self { keys: vec![key] }
    }

    /// Adds a key that verifies but does not sign (an older key being rotated out, or a
    /// replica's).
    pub fn with_verify_key(mut self, key: [u8; 32]) -> Self {
        self.keys.push(key);
        self
    }

    fn signing(&self) -> &[u8; 32] {
        // `new` guarantees one key; the fallback only exists to keep this total.
        self.keys.first().unwrap_or(&[0; 32])
    }

    fn mac(key: &[u8; 32], data: &[u8]) -> HmacSha256 {
        // HMAC zero-pads a key shorter than the hash's block, so padding it here gives the same
        // MAC through the infallible constructor.
        let mut block = [0u8; 64];
        block.split_at_mut(32).0.copy_from_slice(key);
        let mut mac = <HmacSha256 as KeyInit>::new(&block.into());
        mac.update(data);
        mac
    }

    /// Signs `payload`.
    pub(crate) fn seal(&self, payload: &[u8]) -> String {
        let tag = Self::mac(self.signing(), payload).finalize().into_bytes();
        format!("v1.{}.{}", URL_SAFE_NO_PAD.encode(payload), URL_SAFE_NO_PAD.encode(tag))
    }

    /// A token carrying `payload` that any holder of a ring sharing this one's signing key can
    /// check ([`verify_token`](Self::verify_token)): how one replica vouches for what it tells
    /// another (the client address of a request it forwards). `domain` names the use and is
    /// signed with the payload, so a token of one use (a cursor, a request state) is never
    /// accepted as another.
    pub fn sign_token(&self, domain: &str, payload: &[u8]) -> String {
        self.seal(&Self::domained(domain, payload))
    }

    /// The payload of a token [`sign_token`](Self::sign_token) made for `domain` with any key of
    /// this ring; `None` when it is not one.
    pub fn verify_token(&self, domain: &str, token: &str) -> Option<Vec<u8>> {
        let opened = self.open(token)?;
        let prefix = Self::domained(domain, b"");
        opened.strip_prefix(prefix.as_slice()).map(<[u8]>::to_vec)
    }

    /// `token:`, `domain`, a NUL, then `payload`: cursor and request-state payloads are JSON and
    /// start with `{`, so neither is ever taken for the other, and the NUL keeps one domain from
    /// being a prefix of another's payload.
    fn domained(domain: &str, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(domain.len() + 8 + payload.len());
        out.extend_from_slice(b"token:");
        out.extend_from_slice(domain.as_bytes());
        out.push(0);
        out.extend_from_slice(payload);
        out
    }

    /// Returns the payload when `token` was sealed by any key of the ring.
    pub(crate) fn open(&self, token: &str) -> Option<Vec<u8>> {
        let rest = token.strip_prefix("v1.")?;
        let (payload, tag) = rest.split_once('.')?;
        let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.keys.iter().any(|k| Self::mac(k, &payload).verify_slice(&tag).is_ok()).then_some(payload)
    }
}

/// Whether `token` has the shape [`KeyRing::seal`] produces (`v1.`, a base64url payload, a
/// base64url 32-byte tag), whatever key signed it. Lets a caller whose [`KeyRing::open`] failed
/// tell "not one of our tokens at all" from "one of our tokens, altered or signed elsewhere".
pub(crate) fn is_well_formed(token: &str) -> bool {
    let Some((payload, tag)) = token.strip_prefix("v1.").and_then(|rest| rest.split_once('.')) else {
        return false;
    };
    URL_SAFE_NO_PAD.decode(payload).is_ok() && URL_SAFE_NO_PAD.decode(tag).is_ok_and(|t| t.len() == 32)
}

/// Bytes of a caller tag: 96 bits, enough that nobody forges one by chance (the tag is
/// inside a sealed payload anyway) while a cursor stays short.
const CALLER_TAG_BYTES: usize = 12;

/// The caller tag of `identity` under `key`: HMAC-SHA256 of `"caller\0" || identity`, cut to
/// [`CALLER_TAG_BYTES`]. Keyed because identities are guessable (a user name, an IP address):
/// a bare hash in a readable payload would give the caller away to a dictionary. The prefix
/// keeps the tag from ever equalling a seal's MAC, whose payloads start with `{`.
fn caller_mac(key: &[u8; 32], identity: &str) -> HmacSha256 {
    let mut mac = KeyRing::mac(key, b"caller\0");
    mac.update(identity.as_bytes());
    mac
}

/// A caller tag under the ring's signing key, so a cursor or request state is bound to the
/// caller without carrying who they are, not even as a hash.
pub(crate) fn caller_digest(ring: &KeyRing, identity: &str) -> String {
    let tag = caller_mac(ring.signing(), identity).finalize().into_bytes();
    URL_SAFE_NO_PAD.encode(tag.get(..CALLER_TAG_BYTES).unwrap_or(&tag))
}

/// Whether `tag` is the caller tag of `identity` under any key of the ring, so a token sealed
/// before a rotation still names its caller. Compared in constant time.
pub(crate) fn caller_matches(ring: &KeyRing, tag: &str, identity: &str) -> bool {
    let Ok(tag) = URL_SAFE_NO_PAD.decode(tag) else {
        return false;
    };
    tag.len() == CALLER_TAG_BYTES
        && ring.keys.iter().any(|k| caller_mac(k, identity).verify_truncated_left(&tag).is_ok())
}

/// The longest cursor that can carry a key of `max_key` bytes for `method`: `read` refuses a
/// longer token before decoding it or computing a MAC.
fn max_token_len(method: &str, max_key: usize) -> usize {
    // `{"m":"","c":"","k":""}` around the method, the tag and the key, which JSON escaping
    // can grow six-fold (`\u0000`).
    let tag = CALLER_TAG_BYTES.div_ceil(3) * 4;
    let payload =
        22usize.saturating_add(method.len()).saturating_add(tag).saturating_add(max_key.saturating_mul(6));
    // `v1.`, the base64url payload, `.`, the base64url 32-byte tag.
    3usize.saturating_add(payload.saturating_mul(4).div_ceil(3)).saturating_add(1 + 43)
}

/// Makes the cursor for the page of `method` that follows the item keyed `last`.
pub(crate) fn make(ring: &KeyRing, method: &str, caller: &str, last: &str) -> String {
    let payload = serde_json::json!({ "m": method, "c": caller_digest(ring, caller), "k": last });
    ring.seal(payload.to_string().as_bytes())
}

/// Reads a cursor back: the key the next page starts after, or `None` when it is malformed,
/// tampered with, made for another method or caller, or carries a key longer than `max_key`
/// bytes (the longest key the list can hold, so no genuine cursor does).
pub(crate) fn read(
    ring: &KeyRing,
    token: &str,
    method: &str,
    caller: &str,
    max_key: usize,
) -> Option<String> {
    if token.len() > max_token_len(method, max_key) {
        return None;
    }
    let payload = ring.open(token)?;
    let v: serde_json::Value = serde_json::from_slice(&payload).ok()?;
    if v.get("m")?.as_str()? != method || !caller_matches(ring, v.get("c")?.as_str()?, caller) {
        return None;
    }
    let last = v.get("k")?.as_str()?;
    (last.len() <= max_key).then(|| last.to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_verify_in_their_domain_under_any_key_of_the_ring_only() {
        let a = super::KeyRing::new([1; 32]);
        let token = a.sign_token("forward", b"127.0.0.2");
        assert_eq!(a.verify_token("forward", &token).as_deref(), Some(&b"127.0.0.2"[..]));
        assert_eq!(a.verify_token("other", &token), None, "another domain");
        let rotated = super::KeyRing::new([2; 32]).with_verify_key([1; 32]);
        assert!(rotated.verify_token("forward", &token).is_some(), "a kept key still verifies");
        assert_eq!(super::KeyRing::new([3; 32]).verify_token("forward", &token), None);
        assert_eq!(a.open(&token).map(|p| p.first().copied()), Some(Some(b't')), "never a JSON payload");
        let mut forged = token.clone();
        forged.push('A');
        assert_eq!(a.verify_token("forward", &forged), None);
    }

    use super::*;
    use sha2::Digest;

    #[test]
    fn round_trip_and_refusals() {
        let ring = KeyRing::new([7; 32]);
        let c = make(&ring, "tools/list", "alice", "tool_9");
        let read = |ring: &KeyRing, c: &str, method: &str, caller: &str| read(ring, c, method, caller, 128);
        assert_eq!(read(&ring, &c, "tools/list", "alice").as_deref(), Some("tool_9"));
        assert_eq!(read(&ring, &c, "prompts/list", "alice"), None);
        assert_eq!(read(&ring, &c, "tools/list", "bob"), None);
        let mut t = c.clone();
        t.insert(5, 'A');
        assert_eq!(read(&ring, &t, "tools/list", "alice"), None);
        assert_eq!(read(&ring, "", "tools/list", "alice"), None);
        assert_eq!(read(&KeyRing::new([8; 32]), &c, "tools/list", "alice"), None);
        let rotated = KeyRing::new([8; 32]).with_verify_key([7; 32]);
        assert_eq!(read(&rotated, &c, "tools/list", "alice").as_deref(), Some("tool_9"));
        // The rotated ring's own cursors name the caller under its new signing key.
        let fresh = make(&rotated, "tools/list", "alice", "tool_9");
        assert_eq!(read(&rotated, &fresh, "tools/list", "alice").as_deref(), Some("tool_9"));
        assert_eq!(read(&rotated, &fresh, "tools/list", "bob"), None);
    }

    #[test]
    fn keys_are_bounded() {
        let ring = KeyRing::new([7; 32]);
        let at_bound = "k".repeat(128);
        let c = make(&ring, "tools/list", "alice", &at_bound);
        assert_eq!(read(&ring, &c, "tools/list", "alice", 128), Some(at_bound));
        assert_eq!(read(&ring, &c, "tools/list", "alice", 127), None);
        // The worst-case escaping of a key still fits the token bound.
        let escaped = "\u{1}".repeat(64);
        let c = make(&ring, "prompts/list", "", &escaped);
        assert_eq!(read(&ring, &c, "prompts/list", "", 64), Some(escaped));
        let long = format!("v1.{}", "A".repeat(max_token_len("tools/list", 128)));
        assert_eq!(read(&ring, &long, "tools/list", "alice", 128), None);
    }

    /// The readable part of a token, decoded.
    fn payload(token: &str) -> String {
        let b64 = token.split('.').nth(1).unwrap_or_default();
        String::from_utf8(URL_SAFE_NO_PAD.decode(b64).unwrap()).unwrap()
    }

    #[test]
    fn caller_tags_are_keyed() {
        let bare = |identity: &str| {
            let d = Sha256::digest(identity.as_bytes());
            URL_SAFE_NO_PAD.encode(d.get(..12).unwrap())
        };
        assert_eq!(bare("127.0.0.1"), "EsoXtJryKJQ28wPg");
        let (seven, eight) = (KeyRing::new([7; 32]), KeyRing::new([8; 32]));
        for identity in ["127.0.0.1", "alice", ""] {
            let c7 = make(&seven, "tools/list", identity, "t");
            let c8 = make(&eight, "tools/list", identity, "t");
            for c in [&c7, &c8] {
                assert!(!payload(c).contains(&bare(identity)), "{identity}: {}", payload(c));
                assert!(!payload(c).contains(&bare(identity)[..8]));
            }
            assert_ne!(payload(&c7), payload(&c8), "the tag depends on the key");
            assert_eq!(payload(&c7).len(), payload(&c8).len());
        }
        assert_ne!(caller_digest(&seven, "alice"), caller_digest(&seven, "bob"));
        let tag = caller_digest(&seven, "alice");
        assert!(caller_matches(&seven, &tag, "alice"));
        assert!(!caller_matches(&seven, &tag, "bob"));
        assert!(!caller_matches(&eight, &tag, "alice"));
        assert!(caller_matches(&eight.clone().with_verify_key([7; 32]), &tag, "alice"));
        assert!(!caller_matches(&seven, &tag[..8], "alice"), "a shortened tag is not a tag");
        assert!(!caller_matches(&seven, "", "alice"));
        assert!(!caller_matches(&seven, "not base64!", "alice"));
    }

    #[test]
    fn request_states_carry_keyed_caller_tags() {
        use crate::interaction::{arguments_digest, open_state, seal_state, RequestState, StateBinding};
        let bare = |identity: &str| {
            let d = Sha256::digest(identity.as_bytes());
            URL_SAFE_NO_PAD.encode(d.get(..12).unwrap())
        };
        let state = RequestState::default();
        for identity in ["127.0.0.1", "alice"] {
            let b = StateBinding {
                caller: identity,
                method: "tools/call",
                arguments_digest: arguments_digest(None),
                epoch: 0,
            };
            let s7 = seal_state(&KeyRing::new([7; 32]), &b, &state, 1000).unwrap();
            let s8 = seal_state(&KeyRing::new([8; 32]), &b, &state, 1000).unwrap();
            for s in [&s7, &s8] {
                assert!(payload(s).contains("\"who\":"), "{}", payload(s));
                assert!(!payload(s).contains(&bare(identity)), "{identity}: {}", payload(s));
            }
            assert_ne!(payload(&s7), payload(&s8), "the tag depends on the key");
            // A state sealed before a rotation still names its caller.
            let rotated = KeyRing::new([8; 32]).with_verify_key([7; 32]);
            assert_eq!(open_state(&rotated, &s7, &b, 0), Ok(state.clone()));
            let other = StateBinding { caller: "mallory", ..b };
            assert!(open_state(&rotated, &s7, &other, 0).is_err());
        }
    }
}

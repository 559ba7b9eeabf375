//! Opaque, signed pagination cursors.
//!
//! A cursor is `v1.<base64url payload>.<base64url HMAC-SHA256>`. The payload names the list
//! method, the offset of the next page and a digest of the caller's identity, and nothing else
//! (no total, no page size), so a cursor reveals nothing about what the caller cannot see and
//! is useless to anyone else. Replicas that share a [`KeyRing`] accept each other's cursors.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

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

/// A short digest of a caller's identity, so a cursor is bound to the caller without carrying
/// who they are.
pub(crate) fn caller_digest(identity: &str) -> String {
    let d = Sha256::digest(identity.as_bytes());
    URL_SAFE_NO_PAD.encode(d.get(..12).unwrap_or(&d))
}

/// Makes the cursor for the page starting at `offset` of `method`.
pub(crate) fn make(ring: &KeyRing, method: &str, caller: &str, offset: usize) -> String {
    let payload = serde_json::json!({ "m": method, "c": caller_digest(caller), "o": offset });
    ring.seal(payload.to_string().as_bytes())
}

/// Reads a cursor back: the offset, or `None` when it is malformed, tampered with, or made for
/// another method or caller.
pub(crate) fn read(ring: &KeyRing, token: &str, method: &str, caller: &str) -> Option<usize> {
    let payload = ring.open(token)?;
    let v: serde_json::Value = serde_json::from_slice(&payload).ok()?;
    if v.get("m")?.as_str()? != method || v.get("c")?.as_str()? != caller_digest(caller) {
        return None;
    }
    usize::try_from(v.get("o")?.as_u64()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let ring = KeyRing::new([7; 32]);
        let c = make(&ring, "tools/list", "alice", 100);
        assert_eq!(read(&ring, &c, "tools/list", "alice"), Some(100));
        assert_eq!(read(&ring, &c, "prompts/list", "alice"), None);
        assert_eq!(read(&ring, &c, "tools/list", "bob"), None);
        let mut t = c.clone();
        t.insert(5, 'A');
        assert_eq!(read(&ring, &t, "tools/list", "alice"), None);
        assert_eq!(read(&ring, "", "tools/list", "alice"), None);
        assert_eq!(read(&KeyRing::new([8; 32]), &c, "tools/list", "alice"), None);
        let rotated = KeyRing::new([8; 32]).with_verify_key([7; 32]);
        assert_eq!(read(&rotated, &c, "tools/list", "alice"), Some(100));
    }
}

//! Legacy HTTP sessions by id, and the seats held streams take: the indexes over connections
//! that the HTTP layer keeps, and the session-id PRF.
//!
//! The connections themselves (a session's state, an exchange, a `GET` stream) live in the
//! engine's connection table; this part only knows them by [`ConnId`].

use std::collections::{HashMap, VecDeque};

use super::{ConnId, Seed};
use crate::limits::{Limits, SeatPolicy};

/// Sessions and seats.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    /// Legacy HTTP sessions by `Mcp-Session-Id`.
    by_id: HashMap<String, ConnId>,
    /// Held streams by caller binding, oldest first.
    seats: HashMap<String, VecDeque<ConnId>>,
    /// Held streams over all callers.
    streams: usize,
    /// Session ids minted so far: the counter of the session-id PRF.
    minted: u64,
}

/// Whether a caller may hold one more stream.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Room {
    /// It may.
    Free,
    /// Only once this stream, its oldest, is closed ([`SeatPolicy::EvictOldest`]).
    Evict(ConnId),
    /// It may not, for this reason (answered with 429).
    Refused(String),
}

impl Sessions {
    /// Sessions alive.
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Held streams over all callers.
    pub(super) fn streams(&self) -> usize {
        self.streams
    }

    /// The session of this id.
    pub(super) fn get(&self, id: &str) -> Option<ConnId> {
        self.by_id.get(id).copied()
    }

    /// Mints a fresh session id and records `conn` under it; `None` without a seed.
    ///
    /// Ids are HMAC-SHA256 keyed with the seed over a domain label and a counter, so they are
    /// unguessable while the seed is secret, never repeat for one engine, and are the same for
    /// the same seed and inputs. Base64url without padding: 43 characters of the
    /// `Mcp-Session-Id` alphabet (visible ASCII, see [`crate::http::is_valid_session_id`]). A
    /// repeat would take 2^128 ids to be likely, but must still never join two clients'
    /// sessions, so one is refused.
    pub(super) fn mint(&mut self, seed: Option<&Seed>) -> Option<String> {
        use base64::Engine as _;
        use hmac::{Hmac, Mac};
        let seed = seed?;
        let mut mac = <Hmac<sha2::Sha256> as hmac::digest::KeyInit>::new_from_slice(&seed.0).ok()?;
        mac.update(b"mcp-proto/session-id/v1");
        mac.update(&self.minted.to_be_bytes());
        self.minted = self.minted.wrapping_add(1);
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        (!self.by_id.contains_key(&id)).then_some(id)
    }

    /// Records the session `conn` under `id`.
    pub(super) fn insert(&mut self, id: String, conn: ConnId) {
        self.by_id.insert(id, conn);
    }

    /// Forgets the session of this id.
    pub(super) fn remove(&mut self, id: &str) {
        self.by_id.remove(id);
    }

    /// Whether `binding` may hold one more stream under `limits`.
    pub(super) fn room(&self, binding: &str, limits: &Limits) -> Room {
        if limits.max_streams.is_some_and(|max| self.streams >= max) {
            return Room::Refused("too many open streams; try again later".to_owned());
        }
        let Some(per) = limits.max_streams_per_caller else { return Room::Free };
        let held = self.seats.get(binding);
        if held.map_or(0, VecDeque::len) < per {
            return Room::Free;
        }
        if per == 0 || limits.seat_policy == SeatPolicy::Refuse {
            return Room::Refused(format!("too many open streams for this caller (limit {per})"));
        }
        match held.and_then(|q| q.front()) {
            Some(oldest) => Room::Evict(*oldest),
            None => Room::Free,
        }
    }

    /// `conn`, a stream of `binding`, takes a seat.
    pub(super) fn seat(&mut self, binding: &str, conn: ConnId) {
        self.seats.entry(binding.to_owned()).or_default().push_back(conn);
        self.streams += 1;
    }

    /// `conn`, a stream of `binding` that held a seat, gives it up.
    pub(super) fn unseat(&mut self, binding: &str, conn: ConnId) {
        self.streams = self.streams.saturating_sub(1);
        if let Some(q) = self.seats.get_mut(binding) {
            q.retain(|s| *s != conn);
            if q.is_empty() {
                self.seats.remove(binding);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slab::Slab;

    #[test]
    fn seats_refuse_or_evict_the_oldest() {
        let mut keys: Slab<()> = Slab::default();
        let (a, b, c) = (ConnId(keys.insert(())), ConnId(keys.insert(())), ConnId(keys.insert(())));
        let mut limits = Limits::default();
        limits.max_streams_per_caller(Some(2)).max_streams(Some(3));
        let mut s = Sessions::default();
        s.seat("x", a);
        s.seat("x", b);
        assert_eq!(s.room("y", &limits), Room::Free);
        assert!(matches!(s.room("x", &limits), Room::Refused(_)));
        limits.seat_policy(SeatPolicy::EvictOldest);
        assert_eq!(s.room("x", &limits), Room::Evict(a));
        s.unseat("x", a);
        assert_eq!(s.room("x", &limits), Room::Free);
        s.seat("x", c);
        s.seat("y", a);
        assert_eq!(s.streams(), 3);
        assert!(matches!(s.room("z", &limits), Room::Refused(_)), "the server-wide bound comes first");
    }

    #[test]
    fn ids_need_a_seed_and_are_reproducible() {
        let mut s = Sessions::default();
        assert_eq!(s.mint(None), None);
        let seed = Seed([1; 32]);
        let (first, second) = (s.mint(Some(&seed)).unwrap(), s.mint(Some(&seed)).unwrap());
        assert_ne!(first, second);
        assert_eq!(first.len(), 43);
        assert_eq!(Sessions::default().mint(Some(&seed)), Some(first.clone()));
        s.insert(first.clone(), ConnId(Slab::default().insert(())));
        assert!(s.get(&first).is_some());
        s.remove(&first);
        assert_eq!(s.len(), 0);
    }
}

//! Legacy HTTP sessions by id, and the seats held streams take: the indexes over connections
//! that the HTTP layer keeps, and the session-id PRF.
//!
//! The connections themselves (a session's state, an exchange, a `GET` stream) live in the
//! engine's connection table; this part only knows them by [`ConnId`].

use std::collections::{HashMap, VecDeque};

use crate::engine::state::config::Seed;
use crate::engine::state::ids::ConnId;
use crate::limits::{Limits, SeatPolicy};

/// Sessions and seats.
#[derive(Debug, Default)]
pub(in crate::engine) struct Sessions {
    /// Legacy HTTP sessions by `Mcp-Session-Id`.
    by_id: HashMap<String, ConnId>,
    /// Sessions per caller binding: the holdings fair shares are judged by.
    owners: HashMap<String, usize>,
    /// Held streams by caller binding, oldest first.
    seats: HashMap<String, VecDeque<ConnId>>,
    /// Held streams over all callers.
    streams: usize,
    /// Session ids minted so far: the counter of the session-id PRF.
    minted: u64,
    /// Bytes of `POST` stream events the sessions keep, by caller.
    pub(in crate::engine) kept: crate::engine::state::post_store::Kept,
}

/// Whether a caller may hold one more stream.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::engine) enum Room {
    /// It may.
    Free,
    /// Only once this stream is closed: the caller's oldest ([`SeatPolicy::EvictOldest`]).
    Evict(ConnId),
    /// Only once this stream is closed: the oldest of the caller holding the most seats, because
    /// every seat is taken and the asking caller holds less than its fair share.
    Displace(ConnId),
    /// It may not, for this reason (answered with 429).
    Refused(String),
}

impl Sessions {
    /// Sessions alive.
    pub(in crate::engine) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Held streams over all callers.
    pub(in crate::engine) fn streams(&self) -> usize {
        self.streams
    }

    /// The session of this id.
    pub(in crate::engine) fn get(&self, id: &str) -> Option<ConnId> {
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
    pub(in crate::engine) fn mint(&mut self, seed: Option<&Seed>) -> Option<String> {
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

    /// Records the session `conn` of the caller `binding` under `id`.
    pub(in crate::engine) fn insert(&mut self, id: String, conn: ConnId, binding: &str) {
        if self.by_id.insert(id, conn).is_none() {
            *self.owners.entry(binding.to_owned()).or_default() += 1;
        }
    }

    /// Forgets the session of this id, which `binding` held.
    pub(in crate::engine) fn remove(&mut self, id: &str, binding: &str) {
        if self.by_id.remove(id).is_none() {
            return;
        }
        if let Some(n) = self.owners.get_mut(binding) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.owners.remove(binding);
            }
        }
    }

    /// Sessions `binding` holds.
    pub(in crate::engine) fn held(&self, binding: &str) -> usize {
        self.owners.get(binding).copied().unwrap_or(0)
    }

    /// Callers holding sessions, counting `binding` whether or not it holds any: the divisor of
    /// its fair share.
    pub(in crate::engine) fn holders_with(&self, binding: &str) -> usize {
        self.owners.len() + usize::from(!self.owners.contains_key(binding))
    }

    /// Every session, for choosing one to displace.
    pub(in crate::engine) fn all(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.by_id.values().copied()
    }

    /// Whether `binding` may hold one more stream under `limits`.
    pub(in crate::engine) fn room(&self, binding: &str, limits: &Limits) -> Room {
        let held = self.seats.get(binding);
        if let Some(max) = limits.max_streams.filter(|max| self.streams >= *max) {
            let holders = self.seats.len() + usize::from(held.is_none());
            let share = Limits::fair_share(max, holders);
            if held.map_or(0, VecDeque::len) < share {
                if let Some(oldest) = self.greediest_oldest(share) {
                    return Room::Displace(oldest);
                }
            }
            return Room::Refused("too many open streams; try again later".to_owned());
        }
        let Some(per) = limits.max_streams_per_caller else { return Room::Free };
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

    /// The oldest stream of the caller holding the most seats, if it holds more than `share`;
    /// of callers holding equally many, the one whose oldest stream has the smallest id, so the
    /// choice depends on the inputs alone and not on the map's order.
    fn greediest_oldest(&self, share: usize) -> Option<ConnId> {
        self.seats
            .values()
            .filter(|q| q.len() > share)
            .filter_map(|q| q.front().map(|oldest| (q.len(), std::cmp::Reverse(*oldest))))
            .max()
            .map(|(_, std::cmp::Reverse(oldest))| oldest)
    }

    /// `conn`, a stream of `binding`, takes a seat.
    pub(in crate::engine) fn seat(&mut self, binding: &str, conn: ConnId) {
        self.seats.entry(binding.to_owned()).or_default().push_back(conn);
        self.streams += 1;
    }

    /// `conn`, a stream of `binding` that held a seat, gives it up.
    pub(in crate::engine) fn unseat(&mut self, binding: &str, conn: ConnId) {
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
        // Every seat is taken. x and y are at or above their share of 3 among them and a
        // newcomer (1 each): they are refused, and z, below it, displaces x's oldest stream.
        assert!(matches!(s.room("x", &limits), Room::Refused(_)), "the server-wide bound comes first");
        assert!(matches!(s.room("y", &limits), Room::Refused(_)));
        assert_eq!(s.room("z", &limits), Room::Displace(b));
        s.unseat("x", b);
        s.seat("z", b);
        // Now every caller holds its share: nobody is displaced.
        assert!(matches!(s.room("w", &limits), Room::Refused(_)));
    }

    #[test]
    fn session_holdings_count_per_caller() {
        let mut keys: Slab<()> = Slab::default();
        let (a, b) = (ConnId(keys.insert(())), ConnId(keys.insert(())));
        let mut s = Sessions::default();
        s.insert("1".into(), a, "x");
        s.insert("2".into(), b, "x");
        assert_eq!((s.held("x"), s.held("y")), (2, 0));
        assert_eq!((s.holders_with("x"), s.holders_with("y")), (1, 2));
        s.remove("1", "x");
        s.remove("1", "x");
        assert_eq!(s.held("x"), 1);
        s.remove("2", "x");
        assert_eq!((s.held("x"), s.holders_with("x"), s.len()), (0, 1, 0));
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
        s.insert(first.clone(), ConnId(Slab::default().insert(())), "");
        assert!(s.get(&first).is_some());
        s.remove(&first, "");
        assert_eq!(s.len(), 0);
    }
}

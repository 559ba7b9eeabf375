//! The connection shares by client address ([`Peers`]): who holds which share, displacing the
//! oldest idle connection when the server is full, and re-seating a forwarded request on the
//! address it was forwarded for.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Admitted connections by the address they count against, each address's oldest first.
///
/// A connection counts against its client's address, except while it carries a request another
/// replica forwarded with a verified `Mcp-Forwarded-Peer`: then against the address that token
/// vouches for ([`Peers::seat`]). Every forward comes from its replica's address, so without this
/// one caller's calls through a replica would take that replica's whole share here, and every
/// other caller's forwards through it would be turned away.
#[derive(Default)]
pub(crate) struct Peers {
    pub(crate) by_addr: HashMap<IpAddr, Vec<Held>>,
    /// The address each admitted connection counts against now, by its number.
    pub(crate) seats: HashMap<u64, IpAddr>,
    /// The next connection's number: connections are numbered in admission order, so a smaller
    /// number is an older connection.
    pub(crate) next: u64,
}

/// One admitted connection, as the accept loop sees it.
pub(crate) struct Held {
    pub(crate) id: u64,
    /// Requests of it being answered (from a complete head until the response is written):
    /// while none are, it is reading a head, an idle keep-alive or a slow one.
    pub(crate) busy: Arc<AtomicUsize>,
    /// Closes it.
    pub(crate) cut: async_channel::Sender<()>,
}

/// Why [`Peers::admit`] turned a connection away.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Turned {
    /// Its address holds the per-address bound.
    PerPeer,
    /// Every place is taken and its address holds at least its fair share.
    Full,
}

impl Peers {
    /// Admits a connection from `addr` (with its `busy` counter and `cut` switch) when `open`
    /// connections are served out of `max`, at most `per` per address: its number, and the
    /// connection it displaced (already forgotten here, to be cut by the caller).
    ///
    /// When every place is taken, an address below its fair share
    /// ([`Limits::fair_share`](mcp_proto::Limits::fair_share)) takes the place of the oldest
    /// connection still reading its head among addresses above theirs, else of the oldest
    /// connection of the address holding the most; an address at or above its share is turned
    /// away.
    pub(crate) fn admit(
        &mut self,
        addr: IpAddr,
        open: usize,
        max: usize,
        per: Option<usize>,
        busy: Arc<AtomicUsize>,
        cut: async_channel::Sender<()>,
    ) -> Result<(u64, Option<Held>), Turned> {
        let mine = self.by_addr.get(&addr).map_or(0, Vec::len);
        if per.is_some_and(|per| mine >= per) {
            return Err(Turned::PerPeer);
        }
        let displaced = if open < max {
            None
        } else {
            let holders = self.by_addr.len() + usize::from(mine == 0);
            let share = mcp_proto::Limits::fair_share(max, holders);
            if mine >= share {
                return Err(Turned::Full);
            }
            Some(self.displace(share).ok_or(Turned::Full)?)
        };
        let id = self.next;
        self.next += 1;
        self.by_addr.entry(addr).or_default().push(Held { id, busy, cut });
        self.seats.insert(id, addr);
        Ok((id, displaced))
    }

    /// Forgets and returns the connection to displace for an address below `share`.
    pub(crate) fn displace(&mut self, share: usize) -> Option<Held> {
        let over = self.by_addr.iter().filter(|(_, held)| held.len() > share);
        // The oldest connection reading a head among the addresses above their share...
        let idle = over
            .clone()
            .filter_map(|(addr, held)| {
                held.iter().find(|h| h.busy.load(Ordering::Acquire) == 0).map(|h| (h.id, *addr))
            })
            .min();
        // ...else the oldest of the address holding the most (ties: the older connection).
        let victim = idle.or_else(|| {
            over.filter_map(|(addr, held)| held.first().map(|h| (held.len(), std::cmp::Reverse(h.id), *addr)))
                .max()
                .map(|(_, std::cmp::Reverse(id), addr)| (id, addr))
        });
        let (id, _) = victim?;
        self.forget(id)
    }

    /// Forgets connection `id`, if it is still held.
    pub(crate) fn forget(&mut self, id: u64) -> Option<Held> {
        let addr = self.seats.remove(&id)?;
        self.take(addr, id)
    }

    /// Takes connection `id` out of `addr`'s list.
    pub(crate) fn take(&mut self, addr: IpAddr, id: u64) -> Option<Held> {
        let held = self.by_addr.get_mut(&addr)?;
        let at = held.iter().position(|h| h.id == id)?;
        let gone = held.remove(at);
        if held.is_empty() {
            self.by_addr.remove(&addr);
        }
        Some(gone)
    }

    /// Counts connection `id` against `to` from now on, unless `to` already holds `per`
    /// connections (`Turned::PerPeer`). Answers the address it counted against before, or `None`
    /// when nothing moved (the same address, or a connection already forgotten).
    pub(crate) fn seat(&mut self, id: u64, to: IpAddr, per: Option<usize>) -> Result<Option<IpAddr>, Turned> {
        let Some(&from) = self.seats.get(&id) else { return Ok(None) };
        if from == to {
            return Ok(None);
        }
        if per.is_some_and(|per| self.by_addr.get(&to).map_or(0, Vec::len) >= per) {
            return Err(Turned::PerPeer);
        }
        let Some(held) = self.take(from, id) else { return Ok(None) };
        let list = self.by_addr.entry(to).or_default();
        // Oldest first, as admitted.
        let at = list.partition_point(|h| h.id < id);
        list.insert(at, held);
        self.seats.insert(id, to);
        Ok(Some(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(peers: &Peers) -> Vec<(IpAddr, Vec<u64>)> {
        let mut all: Vec<_> =
            peers.by_addr.iter().map(|(a, h)| (*a, h.iter().map(|h| h.id).collect())).collect();
        all.sort();
        all
    }

    #[test]
    fn connections_are_shared_among_addresses() {
        let (a, b, c): (IpAddr, IpAddr, IpAddr) =
            ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap(), "127.0.0.3".parse().unwrap());
        let mut peers = Peers::default();
        let busy: Vec<Arc<AtomicUsize>> = (0..8).map(|_| Arc::new(AtomicUsize::new(0))).collect();
        // Connection n gets busy[n].
        let admit = |peers: &mut Peers, addr, open| {
            let counter = busy.get(usize::try_from(peers.next).unwrap()).unwrap().clone();
            peers.admit(addr, open, 4, Some(5), counter, async_channel::bounded(1).0)
        };
        for open in 0..4 {
            assert!(matches!(admit(&mut peers, a, open), Ok((_, None))));
        }
        // Full, and a holds the whole table: its next connection is turned away.
        assert_eq!(admit(&mut peers, a, 4).err(), Some(Turned::Full));
        // b, below its share of 2, takes the place of a's oldest connection reading its head.
        busy[0].store(1, Ordering::Release);
        let (_, gone) = admit(&mut peers, b, 4).unwrap();
        assert_eq!(gone.map(|h| h.id), Some(1));
        let (_, gone) = admit(&mut peers, b, 4).unwrap();
        assert_eq!(gone.map(|h| h.id), Some(2));
        assert_eq!(held(&peers), vec![(b, vec![4, 5]), (a, vec![0, 3])]);
        // Both hold their share: nobody is displaced.
        assert_eq!(admit(&mut peers, b, 4).err(), Some(Turned::Full));
        assert_eq!(admit(&mut peers, a, 4).err(), Some(Turned::Full));
        // A third address has a share of 1; a and b hold 2 each, so it displaces the oldest
        // connection still reading its head of either (a's 3: a's 0 is busy).
        let (_, gone) = admit(&mut peers, c, 4).unwrap();
        assert_eq!(gone.map(|h| h.id), Some(3));
        // Busy everywhere above the share: the oldest connection of the address holding most.
        busy.iter().for_each(|b| b.store(1, Ordering::Release));
        assert!(peers.forget(6).is_some());
        let (_, gone) = admit(&mut peers, c, 4).unwrap();
        assert_eq!(gone.map(|h| h.id), Some(4));
        assert_eq!(peers.forget(4).map(|h| h.id), None, "a displaced connection is forgotten");
        assert_eq!(held(&peers), vec![(b, vec![5]), (a, vec![0]), (c, vec![7])]);
    }

    #[test]
    fn the_per_address_bound_comes_first() {
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let mut peers = Peers::default();
        let mut admit = |open| {
            peers.admit(a, open, 10, Some(2), Arc::new(AtomicUsize::new(0)), async_channel::bounded(1).0)
        };
        assert!(admit(0).is_ok() && admit(1).is_ok());
        assert_eq!(admit(2).err(), Some(Turned::PerPeer));
    }

    #[test]
    fn a_forwarded_request_counts_against_the_address_it_was_forwarded_for() {
        let (replica, x, y): (IpAddr, IpAddr, IpAddr) =
            ("127.0.0.1".parse().unwrap(), "127.0.0.3".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let mut peers = Peers::default();
        let admit = |peers: &mut Peers, addr| {
            peers
                .admit(addr, 0, 100, Some(2), Arc::new(AtomicUsize::new(0)), async_channel::bounded(1).0)
                .map(|(id, _)| id)
        };
        // Two connections of the replica carry x's requests: they count against x, and the
        // replica's own address holds nothing, so a third connection of it is admitted.
        let (c0, c1) = (admit(&mut peers, replica).unwrap(), admit(&mut peers, replica).unwrap());
        assert_eq!(peers.seat(c0, x, Some(2)), Ok(Some(replica)));
        assert_eq!(peers.seat(c1, x, Some(2)), Ok(Some(replica)));
        assert_eq!(held(&peers), vec![(x, vec![c0, c1])]);
        let c2 = admit(&mut peers, replica).unwrap();
        // x holds its share: another of its requests is refused, and y's is not.
        assert_eq!(peers.seat(c2, x, Some(2)), Err(Turned::PerPeer));
        assert_eq!(peers.seat(c2, y, Some(2)), Ok(Some(replica)));
        // Back where they were admitted, even past the bound; the same address moves nothing.
        assert_eq!(peers.seat(c0, replica, None), Ok(Some(x)));
        assert_eq!(peers.seat(c0, replica, Some(0)), Ok(None));
        assert_eq!(held(&peers), vec![(replica, vec![c0]), (y, vec![c2]), (x, vec![c1])]);
        // A connection counted elsewhere is forgotten from there.
        assert_eq!(peers.forget(c1).map(|h| h.id), Some(c1));
        assert_eq!(peers.seat(c1, x, None), Ok(None), "forgotten: nothing to move");
        assert_eq!(held(&peers), vec![(replica, vec![c0]), (y, vec![c2])]);
    }
}

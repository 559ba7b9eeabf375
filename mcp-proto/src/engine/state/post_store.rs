//! The data of resumable legacy `POST` streams: where each exchange stands
//! ([`Attachment`]) and a session's kept events ([`PostStreams`]). A leaf that `streams` and
//! `http` use and `resume` (the engine's rules for parking and resuming) acts on, so none of
//! them imports another in a circle.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crate::engine::state::ids::ConnId;
use crate::sse::{EventId, ReplayBuffer};

/// Whether the client still reads a legacy `POST` response stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::engine) enum Attachment {
    /// It does: events are written to it.
    #[default]
    Live,
    /// The client dropped it within the resume window: events go to the store only, and its
    /// calls may still ask (the questions wait in the store for the resume).
    Parked,
    /// Dropped, and the window passed: still resumable, but nothing new is asked through it.
    Lapsed,
}

/// A session's kept `POST` stream events, by stream number.
#[derive(Default)]
pub(in crate::engine) struct PostStreams {
    pub(in crate::engine) streams: BTreeMap<u64, PostStream>,
    /// Bytes kept over all streams.
    pub(in crate::engine) bytes: usize,
}

pub(in crate::engine) struct PostStream {
    pub(in crate::engine) events: ReplayBuffer,
    /// The exchange its calls send to, while any run.
    pub(in crate::engine) carrier: Option<ConnId>,
    /// When it stops waiting to be resumed; `None` while the client reads it, or after a lapse
    /// while its calls still run.
    pub(in crate::engine) expires: Option<Instant>,
}

impl PostStreams {
    /// The exchange carrying `stream_no`: `None` when the stream is not kept, `Some(None)` when
    /// its calls are over.
    pub(in crate::engine) fn carrier(&self, stream_no: u64) -> Option<Option<ConnId>> {
        self.streams.get(&stream_no).map(|s| s.carrier)
    }

    /// Every exchange carrying one of the streams.
    pub(in crate::engine) fn carriers(&self) -> Vec<ConnId> {
        self.streams.values().filter_map(|s| s.carrier).collect()
    }

    /// Forgets `stream_no`; returns when its resume timer was armed for, so the caller can
    /// disarm it (a timer must not outlive what it is for).
    #[must_use]
    pub(in crate::engine) fn remove(&mut self, stream_no: u64) -> Option<Instant> {
        let s = self.streams.remove(&stream_no)?;
        self.bytes = self.bytes.saturating_sub(s.events.bytes());
        s.expires
    }

    /// Evicts the oldest events, oldest stream first, until `need` bytes are freed or none are
    /// left; returns the bytes freed. The streams stay (their calls may still run, and a resume
    /// is sent what is left).
    pub(in crate::engine) fn shed(&mut self, need: usize) -> usize {
        let mut freed = 0;
        for s in self.streams.values_mut() {
            if freed >= need {
                break;
            }
            freed = freed.saturating_add(s.events.shed(need - freed));
        }
        self.bytes = self.bytes.saturating_sub(freed);
        freed
    }

    /// Every armed resume timer, by stream: what dropping the whole store must disarm.
    pub(in crate::engine) fn armed(&self) -> Vec<(u64, Instant)> {
        self.streams.iter().filter_map(|(n, s)| s.expires.map(|at| (*n, at))).collect()
    }

    /// Keeps `bytes`, the event `id`, evicting its own stream's oldest events while the stream
    /// is over `per_stream` bytes or the session over `total`.
    pub(in crate::engine) fn record(&mut self, id: EventId, bytes: &[u8], per_stream: usize, total: usize) {
        let Some(s) = self.streams.get_mut(&id.stream) else { return };
        let others = self.bytes.saturating_sub(s.events.bytes());
        s.events.max_bytes(per_stream.min(total.saturating_sub(others)));
        s.events.push(id.seq, bytes.to_vec());
        self.bytes = others.saturating_add(s.events.bytes());
    }

    /// `stream_no`'s calls are over while the client is away: its events wait until `until`.
    /// Past `max_finished` such streams the oldest goes.
    /// Returns the resume timers this leaves without a purpose (the stream's previous one, and
    /// those of streams pushed out), to disarm.
    #[must_use]
    pub(in crate::engine) fn finish(
        &mut self,
        stream_no: u64,
        until: Option<Instant>,
        max_finished: usize,
    ) -> Vec<(u64, Instant)> {
        let mut stale = Vec::new();
        let Some(s) = self.streams.get_mut(&stream_no) else { return stale };
        s.carrier = None;
        if let Some(at) = std::mem::replace(&mut s.expires, until) {
            stale.push((stream_no, at));
        }
        let finished: Vec<u64> =
            self.streams.iter().filter(|(_, s)| s.carrier.is_none()).map(|(n, _)| *n).collect();
        for n in finished.iter().take(finished.len().saturating_sub(max_finished)) {
            if let Some(at) = self.remove(*n) {
                stale.push((*n, at));
            }
        }
        stale
    }
}

/// Bytes of `POST` stream events kept over every session, by caller binding: what
/// [`Limits::max_resume_bytes`](crate::limits::Limits::max_resume_bytes) and its fair shares are judged
/// by. Kept in step by whoever changes a session's [`PostStreams`] ([`Kept::moved`]).
#[derive(Debug, Default)]
pub(in crate::engine) struct Kept {
    by_caller: HashMap<String, usize>,
    total: usize,
}

impl Kept {
    /// `binding`'s sessions went from keeping `before` bytes to `after`.
    pub(in crate::engine) fn moved(&mut self, binding: &str, before: usize, after: usize) {
        if before == after {
            return;
        }
        self.total = self.total.saturating_sub(before).saturating_add(after);
        let held = self.by_caller.get(binding).copied().unwrap_or(0);
        let now = held.saturating_sub(before).saturating_add(after);
        if now == 0 {
            self.by_caller.remove(binding);
        } else {
            self.by_caller.insert(binding.to_owned(), now);
        }
    }

    /// Bytes kept over every session.
    pub(in crate::engine) fn total(&self) -> usize {
        self.total
    }

    /// Bytes `binding`'s sessions keep.
    pub(in crate::engine) fn of(&self, binding: &str) -> usize {
        self.by_caller.get(binding).copied().unwrap_or(0)
    }

    /// Whose events go when the total is over `cap` after `binding` recorded one: `binding`'s
    /// own when it keeps at least its fair share, else those of the caller keeping the most
    /// (over its share, since the total is over `cap`).
    pub(in crate::engine) fn victim<'a>(&'a self, binding: &'a str, cap: usize) -> &'a str {
        let holders = self.by_caller.len().max(1);
        if self.of(binding) >= crate::limits::Limits::fair_share(cap, holders) {
            return binding;
        }
        // Ties go to the smallest binding: the choice follows the inputs, never the map's order.
        self.by_caller
            .iter()
            .max_by(|(a, x), (b, y)| x.cmp(y).then_with(|| b.cmp(a)))
            .map_or(binding, |(k, _)| k.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;

    #[test]
    fn the_victim_is_the_recorder_at_its_share_else_the_greediest_and_ties_follow_the_bindings() {
        let mut kept = Kept::default();
        kept.moved("b", 0, 40);
        kept.moved("c", 0, 40);
        kept.moved("a", 0, 10);
        // The total (90) is over a cap of 60: "a" is below its share (20), so the greediest
        // gives way; "b" and "c" tie, and the smaller binding is chosen whatever the map's order.
        assert_eq!(kept.victim("a", 60), "b");
        // At its share, the recorder gives way itself.
        assert_eq!(kept.victim("c", 60), "c");
        kept.moved("b", 40, 0);
        assert_eq!((kept.total(), kept.of("b")), (50, 0));
    }
}

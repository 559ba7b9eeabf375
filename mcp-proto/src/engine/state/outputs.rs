//! The engine's one output queue ([`Engine::poll_output`](crate::engine::Engine::poll_output)):
//! everything the engine emits, for its connections and calls as for its cluster, a task store
//! or a tracer, in the one order the engine decided. A shim drains it after every input and
//! acts on each output as it comes; no rule of its own says which kind goes first.
//!
//! The kinds a shim may have no use for (replica events, ended tasks, records of answered
//! requests) are each bounded while they wait ([`Bounded`]): a shim that drains after every
//! input never comes near a bound, and one that does not drain loses the newest (or, for
//! ended tasks and records, the oldest) of that kind, counted, never anything else.

use std::collections::VecDeque;

use crate::engine::state::io::Output;

/// The kinds of output bounded while they wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Bounded {
    /// [`Output::Change`].
    Change,
    /// [`Output::Holding`].
    Holding,
    /// [`Output::Claim`].
    Claim,
    /// [`Output::Record`].
    Record,
    /// [`Output::TaskEnded`].
    TaskEnded,
    /// [`Output::Answered`].
    Answered,
}

impl Bounded {
    fn of<H>(o: &Output<H>) -> Option<Self> {
        Some(match o {
            Output::Change(_) => Bounded::Change,
            Output::Holding(_) => Bounded::Holding,
            Output::Claim(_) => Bounded::Claim,
            Output::Record(_) => Bounded::Record,
            Output::TaskEnded(_) => Bounded::TaskEnded,
            Output::Answered(_) => Bounded::Answered,
            _ => return None,
        })
    }
}

/// How many of one kind wait, and how many were dropped.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    waiting: usize,
    dropped: u64,
}

/// A [`Count`] per bounded kind.
#[derive(Debug, Default)]
struct Counts {
    change: Count,
    holding: Count,
    claim: Count,
    record: Count,
    task_ended: Count,
    answered: Count,
}

impl Counts {
    fn of(&mut self, kind: Bounded) -> &mut Count {
        match kind {
            Bounded::Change => &mut self.change,
            Bounded::Holding => &mut self.holding,
            Bounded::Claim => &mut self.claim,
            Bounded::Record => &mut self.record,
            Bounded::TaskEnded => &mut self.task_ended,
            Bounded::Answered => &mut self.answered,
        }
    }
}

/// The queue, and per bounded kind how many wait and how many were dropped.
#[derive(Debug)]
pub(in crate::engine) struct Outputs<H> {
    queue: VecDeque<Output<H>>,
    counts: Counts,
    /// The bytes each waiting [`Output::TaskEnded`] counts for, oldest first.
    ended_bytes: VecDeque<usize>,
    /// Their sum.
    ended_total: usize,
}

impl<H> Default for Outputs<H> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            counts: Counts::default(),
            ended_bytes: VecDeque::new(),
            ended_total: 0,
        }
    }
}

impl<H> Outputs<H> {
    /// Queues `o`; for a bounded kind, use [`push_bounded`](Self::push_bounded) or
    /// [`push_evicting`](Self::push_evicting) instead, which count it.
    pub(in crate::engine) fn push_back(&mut self, o: Output<H>) {
        debug_assert!(Bounded::of(&o).is_none(), "a bounded output queued without its bound");
        self.queue.push_back(o);
    }

    /// Queues `o` of a bounded kind unless `cap` of its kind wait already: then it is dropped
    /// and counted. Whether it was queued.
    pub(in crate::engine) fn push_bounded(&mut self, o: Output<H>, cap: usize) -> bool {
        let Some(kind) = Bounded::of(&o) else {
            self.queue.push_back(o);
            return true;
        };
        let count = self.counts.of(kind);
        if count.waiting >= cap {
            count.dropped = count.dropped.saturating_add(1);
            return false;
        }
        count.waiting += 1;
        self.queue.push_back(o);
        true
    }

    /// Queues `o` of a bounded kind, counting `bytes` for it (ended tasks), then drops the
    /// oldest waiting of its kind while more than `cap` of them wait or, for ended tasks, they
    /// count more than `max_bytes` together. Each drop is counted.
    pub(in crate::engine) fn push_evicting(
        &mut self,
        o: Output<H>,
        cap: usize,
        bytes: usize,
        max_bytes: usize,
    ) {
        let Some(kind) = Bounded::of(&o) else {
            self.queue.push_back(o);
            return;
        };
        self.counts.of(kind).waiting += 1;
        if kind == Bounded::TaskEnded {
            self.ended_bytes.push_back(bytes);
            self.ended_total = self.ended_total.saturating_add(bytes);
        }
        self.queue.push_back(o);
        while self.counts.of(kind).waiting > cap
            || (kind == Bounded::TaskEnded && self.ended_total > max_bytes)
        {
            let Some(at) = self.queue.iter().position(|w| Bounded::of(w) == Some(kind)) else { break };
            if let Some(gone) = self.queue.remove(at) {
                self.taken(&gone);
                let count = self.counts.of(kind);
                count.dropped = count.dropped.saturating_add(1);
            }
        }
    }

    /// The next output, oldest first.
    pub(in crate::engine) fn pop_front(&mut self) -> Option<Output<H>> {
        let o = self.queue.pop_front()?;
        self.taken(&o);
        Some(o)
    }

    /// `o` left the queue: its kind's counts go down.
    fn taken(&mut self, o: &Output<H>) {
        let Some(kind) = Bounded::of(o) else { return };
        let count = self.counts.of(kind);
        count.waiting = count.waiting.saturating_sub(1);
        if kind == Bounded::TaskEnded {
            let bytes = self.ended_bytes.pop_front().unwrap_or(0);
            self.ended_total = self.ended_total.saturating_sub(bytes);
        }
    }

    /// Drops every waiting output of `kind` (its switch was turned off), uncounted.
    pub(in crate::engine) fn clear(&mut self, kind: Bounded) {
        if self.counts.of(kind).waiting == 0 {
            return;
        }
        let (keep, gone): (VecDeque<_>, VecDeque<_>) =
            std::mem::take(&mut self.queue).into_iter().partition(|o| Bounded::of(o) != Some(kind));
        self.queue = keep;
        for o in &gone {
            self.taken(o);
        }
    }

    /// Outputs of `kind` dropped so far.
    pub(in crate::engine) fn dropped(&self, kind: Bounded) -> u64 {
        let c = &self.counts;
        let count = match kind {
            Bounded::Change => c.change,
            Bounded::Holding => c.holding,
            Bounded::Claim => c.claim,
            Bounded::Record => c.record,
            Bounded::TaskEnded => c.task_ended,
            Bounded::Answered => c.answered,
        };
        count.dropped
    }

    pub(in crate::engine) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(in crate::engine) fn iter(&self) -> impl Iterator<Item = &Output<H>> {
        self.queue.iter()
    }

    /// Keeps only the outputs `keep` accepts (used for outputs of no bounded kind).
    pub(in crate::engine) fn retain(&mut self, mut keep: impl FnMut(&Output<H>) -> bool) {
        let (kept, gone): (VecDeque<_>, VecDeque<_>) =
            std::mem::take(&mut self.queue).into_iter().partition(|o| keep(o));
        self.queue = kept;
        for o in &gone {
            self.taken(o);
        }
    }

    /// Queues every output of `outs` (of no bounded kind).
    pub(in crate::engine) fn extend(&mut self, outs: impl IntoIterator<Item = Output<H>>) {
        for o in outs {
            self.push_back(o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::ids::ConnId;
    use crate::engine::state::io::{CloseReason, TaskRecord};
    use crate::engine::state::messages::{Change, ChangedList};
    use crate::slab::Key;

    fn close(n: u32) -> Output<u32> {
        Output::Close { conn: ConnId(Key { idx: n, gen: 0 }), reason: CloseReason::Closed }
    }

    fn ended(id: &str) -> Output<u32> {
        Output::TaskEnded(TaskRecord {
            task_id: id.into(),
            owner: String::new(),
            task: serde_json::Map::new(),
            ended_unix_ms: 0,
            ttl_ms: 0,
        })
    }

    fn ids(q: &mut Outputs<u32>) -> Vec<String> {
        std::iter::from_fn(|| q.pop_front())
            .map(|o| match o {
                Output::TaskEnded(r) => r.task_id,
                Output::Change(c) => format!("{c:?}"),
                other => format!("{other:?}").chars().take(5).collect(),
            })
            .collect()
    }

    #[test]
    fn a_bounded_kind_past_its_cap_drops_its_newest_and_nothing_else() {
        let mut q = Outputs::default();
        let change = || Output::Change(Change::ListChanged(ChangedList::Tools));
        assert!(q.push_bounded(change(), 2));
        q.push_back(close(1));
        assert!(q.push_bounded(change(), 2));
        assert!(!q.push_bounded(change(), 2), "two wait: the third is refused");
        q.push_back(close(2));
        assert_eq!(q.dropped(Bounded::Change), 1);
        assert_eq!(q.pop_front().map(|o| matches!(o, Output::Change(_))), Some(true));
        // One taken: room for one more, behind what was queued before it.
        assert!(q.push_bounded(change(), 2));
        let kinds: Vec<bool> =
            std::iter::from_fn(|| q.pop_front()).map(|o| matches!(o, Output::Change(_))).collect();
        assert_eq!(kinds, [false, true, false, true]);
    }

    #[test]
    fn ended_tasks_past_a_bound_drop_the_oldest_waiting_and_clear_takes_a_kind_out() {
        let mut q = Outputs::default();
        q.push_evicting(ended("a"), 2, 10, 25);
        q.push_back(close(1));
        q.push_evicting(ended("b"), 2, 10, 25);
        // 30 bytes over 25: the oldest goes.
        q.push_evicting(ended("c"), 2, 10, 25);
        assert_eq!(q.dropped(Bounded::TaskEnded), 1);
        assert_eq!(ids(&mut q), ["Close", "b", "c"]);
        // Taken ones free their bytes: two fit again.
        q.push_evicting(ended("d"), 2, 10, 25);
        q.push_evicting(ended("e"), 2, 10, 25);
        assert_eq!(q.dropped(Bounded::TaskEnded), 1);
        q.push_back(close(2));
        q.clear(Bounded::TaskEnded);
        assert_eq!(ids(&mut q), ["Close"]);
        assert_eq!(q.dropped(Bounded::TaskEnded), 1, "cleared is not dropped");
        q.push_evicting(ended("f"), 2, 25, 25);
        assert_eq!(ids(&mut q), ["f"], "the bytes of the cleared ones are forgotten");
    }
}

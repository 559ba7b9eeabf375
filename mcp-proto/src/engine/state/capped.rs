//! A queue of output beside [`Engine::poll_output`](crate::engine::Engine::poll_output) for a shim's
//! cluster (changes, claims, records, holdings): bounded, and counting what it refused.

use std::collections::VecDeque;

/// At most `cap` items waiting; past it the newest is refused and counted.
#[derive(Debug)]
pub(in crate::engine) struct Capped<T> {
    queue: VecDeque<T>,
    cap: usize,
    dropped: u64,
}

impl<T> Capped<T> {
    pub(in crate::engine) const fn new(cap: usize) -> Self {
        Self { queue: VecDeque::new(), cap, dropped: 0 }
    }

    /// Queues `item`, unless `cap` items are waiting: then it is dropped and counted. Whether
    /// it was queued.
    pub(in crate::engine) fn push(&mut self, item: T) -> bool {
        if self.queue.len() >= self.cap {
            self.dropped = self.dropped.saturating_add(1);
            return false;
        }
        self.queue.push_back(item);
        true
    }

    pub(in crate::engine) fn pop(&mut self) -> Option<T> {
        self.queue.pop_front()
    }

    pub(in crate::engine) fn clear(&mut self) {
        self.queue.clear();
    }

    pub(in crate::engine) fn contains(&self, item: &T) -> bool
    where
        T: PartialEq,
    {
        self.queue.contains(item)
    }

    /// Items refused so far.
    pub(in crate::engine) fn dropped(&self) -> u64 {
        self.dropped
    }
}

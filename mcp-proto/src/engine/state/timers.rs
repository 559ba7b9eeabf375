//! Every deadline the engine waits for, in one ordered queue: call timeouts, ask deadlines,
//! legacy session expiry, held-stream keep-alives, resume windows and stall checks of full
//! paced streams.
//!
//! A step ([`Timers::expired`]) takes everything due at once, calls (and their asks) before HTTP
//! timers and each kind in time order: the order the engine has always fired them in, and it shows on the wire
//! (a timed-out call no longer keeps its session busy, so a session whose idle timer fell due
//! before the call's deadline, within the same step, is expired rather than re-armed). Taking
//! them at once changes nothing: nothing handled in a step arms a timer due within it (a call
//! is admitted only by a request, and HTTP timers are at least 1 ms away, see
//! [`Timers::arm_after`]), and a timer whose subject went away in the same step finds nothing
//! to do when it fires.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::engine::state::ids::{CallId, ConnId};

/// What a deadline is for. Within one instant, variants fire in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::engine) enum Timer {
    /// A call's [`Limits::call_timeout`](crate::limits::Limits::call_timeout).
    Call(CallId),
    /// A call's legacy ask ran past [`crate::limits::Limits::ask_timeout`].
    Ask(CallId),
    /// Expire a legacy session (handshake or idle).
    Session(ConnId),
    /// Re-check a held stream's caller and write a keep-alive comment.
    KeepAlive(ConnId),
    /// A dropped `POST` response stream of this legacy session (by its stream number) stops
    /// waiting to be resumed ([`crate::limits::Limits::resume_window`]).
    Resume(ConnId, u64),

    /// Look whether a full paced stream's reader is stalled.
    Stall(ConnId),
    /// An ended task (by its serial) reaches [`crate::limits::Limits::task_ttl`].
    Task(u64),
}

/// The queue, by time.
#[derive(Debug, Default)]
pub(in crate::engine) struct Timers {
    queue: BTreeSet<(Instant, Timer)>,
}

impl Timers {
    /// Arms `timer` to fire at `at`. The same timer armed for two instants fires twice; its
    /// handler checks whether it still applies.
    pub(in crate::engine) fn arm(&mut self, at: Instant, timer: Timer) {
        self.queue.insert((at, timer));
    }

    /// Arms `timer` for `after` past `from`. A delay too long for the clock to express never
    /// fires (a `Duration::MAX` limit means "never"); a zero delay counts as 1 ms, so a timer
    /// re-armed while timers are handled cannot fire again in the same step.
    pub(in crate::engine) fn arm_after(&mut self, from: Instant, after: Duration, timer: Timer) {
        if let Some(at) = from.checked_add(after.max(Duration::from_millis(1))) {
            self.arm(at, timer);
        }
    }

    /// Removes `timer` armed for `at`, if it has not fired.
    pub(in crate::engine) fn disarm(&mut self, at: Instant, timer: Timer) {
        self.queue.remove(&(at, timer));
    }

    /// The earliest instant anything is armed for.
    pub(in crate::engine) fn next(&self) -> Option<Instant> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Takes every timer due at or before `now`, in firing order (see the module docs).
    pub(in crate::engine) fn expired(&mut self, now: Instant) -> impl Iterator<Item = Timer> {
        let mut due = Vec::new();
        while let Some(&(at, timer)) = self.queue.first() {
            if at > now {
                break;
            }
            self.queue.remove(&(at, timer));
            due.push(timer);
        }
        let (calls, http): (Vec<Timer>, Vec<Timer>) =
            due.into_iter().partition(|t| matches!(t, Timer::Call(_) | Timer::Ask(_)));
        calls.into_iter().chain(http)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slab::Slab;

    #[test]
    fn calls_fire_before_http_timers_and_each_in_time_order() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let t0 = Instant::now();
        let mut keys: Slab<()> = Slab::default();
        let (a, b) = (keys.insert(()), keys.insert(()));
        let ms = Duration::from_millis;
        let mut timers = Timers::default();
        timers.arm(t0 + ms(5), Timer::Call(CallId(b)));
        timers.arm(t0 + ms(1), Timer::Session(ConnId(a)));
        timers.arm(t0 + ms(3), Timer::Call(CallId(a)));
        timers.arm(t0 + ms(1), Timer::KeepAlive(ConnId(a)));
        timers.arm(t0 + ms(4), Timer::Ask(CallId(a)));
        timers.arm(t0 + ms(9), Timer::KeepAlive(ConnId(b)));
        timers.arm_after(t0, Duration::MAX, Timer::Session(ConnId(b)));
        timers.disarm(t0 + ms(3), Timer::Call(CallId(a)));
        assert_eq!(timers.next(), Some(t0 + ms(1)));
        let due: Vec<Timer> = timers.expired(t0 + ms(5)).collect();
        assert_eq!(
            due,
            [
                Timer::Ask(CallId(a)),
                Timer::Call(CallId(b)),
                Timer::Session(ConnId(a)),
                Timer::KeepAlive(ConnId(a))
            ]
        );
        assert_eq!(timers.next(), Some(t0 + ms(9)));
        assert_eq!(timers.expired(t0 + ms(8)).count(), 0);
    }
}

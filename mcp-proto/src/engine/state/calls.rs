//! Calls in flight and JSON-RPC batches: admission (the in-flight bound, id uniqueness, the
//! deadline), the per-connection index by request id, batch slots, and the batch reply.
//!
//! What a call's end means for its connection (closing a drained one, ending an HTTP exchange)
//! and where replies go are the engine's business: this part hands back the call or the bytes.

use std::collections::HashMap;
use std::time::Instant;

use crate::engine::state::call_state::{self, Ctx};
use crate::engine::state::ids::{CallId, ConnId};
use crate::engine::state::io::LogLevel;
use crate::engine::state::replay_ledger::StateUse;
use crate::engine::state::timers::{Timer, Timers};
use crate::jsonrpc::{RequestId, RpcError};
use crate::slab::{Key, Slab};
use crate::version::ProtocolVersion;

/// One call in flight.
pub(in crate::engine) struct Call {
    /// The connection whose request this is: it owns the id and the session state.
    pub(in crate::engine) conn: ConnId,
    /// Where the call's frames go: `conn` itself, or the HTTP exchange that carried it.
    pub(in crate::engine) reply_to: ConnId,
    pub(in crate::engine) id: RequestId,
    pub(in crate::engine) version: ProtocolVersion,
    pub(in crate::engine) kind: CallKind,
    /// The batch this call belongs to, and its slot in the batch's reply (set on admission).
    batch: Option<(Key, usize)>,
    /// When the call times out (arming the timer is [`Calls::admit`]'s).
    pub(in crate::engine) deadline: Option<Instant>,
    /// The modern request's `_meta` logLevel: logs below it (or all, when absent) are not sent.
    pub(in crate::engine) log_level: Option<LogLevel>,
    /// A gate shaped what this call may see (2026: `cacheScope: "private"`).
    pub(in crate::engine) private: bool,
    /// Where progress goes, if the request asked for it.
    pub(in crate::engine) progress: Option<call_state::Progress>,
    /// What the handler may ask the client for, and what it was answered.
    pub(in crate::engine) input: Option<Box<call_state::CallInput>>,
    /// The 2026-07-28 request state this call continues: its outcome goes in the replay
    /// ledger.
    pub(in crate::engine) used: Option<StateUse>,
    /// Its invocation is held while a shared ledger is asked whether it may run here
    /// ([`Output::Claim`](crate::engine::Output::Claim)); it stays set if the call ends
    /// meanwhile, or is answered from another replica's record: either way its outcome was
    /// not made here and is not published.
    pub(in crate::engine) claiming: bool,
    /// The caller (its binding) it counts for under [`crate::limits::Limits::max_calls`], once held.
    holder: Option<String>,
    /// The task this call runs as (its serial in the task table), once it became one: its
    /// request is answered and its outcome goes to the task.
    pub(in crate::engine) task: Option<u64>,
    #[cfg(debug_assertions)]
    pub(in crate::engine) live: crate::engine::state::io::Live,
}

impl Call {
    /// The call a request of `ctx` makes: not yet admitted ([`Calls::admit`] gives it its
    /// batch slot).
    pub(in crate::engine) fn new(
        ctx: Ctx<'_>,
        reply_to: ConnId,
        kind: CallKind,
        deadline: Option<Instant>,
    ) -> Self {
        Self {
            conn: ctx.conn,
            reply_to,
            id: ctx.id.clone(),
            version: ctx.version,
            kind,
            batch: None,
            deadline,
            log_level: ctx.log_level,
            private: ctx.private,
            progress: ctx.progress.cloned().map(call_state::Progress::new),
            input: call_state::CallInput::new(ctx),
            used: ctx.mrtr.and_then(|m| m.used),
            claiming: false,
            holder: None,
            task: None,
            #[cfg(debug_assertions)]
            live: crate::engine::state::io::Live(std::sync::Arc::new(true.into())),
        }
    }

    /// Whether the request was a 2026-07-28 retry (it carried `requestState` or
    /// `inputResponses`): its answer depends on what the user answered.
    pub(in crate::engine) fn retried(&self) -> bool {
        self.used.is_some() || self.input.as_ref().is_some_and(|i| i.retried())
    }

    /// The batch this call's reply belongs in, and its slot there.
    pub(in crate::engine) fn batch(&self) -> Option<(Key, usize)> {
        self.batch
    }
}

/// What a call's reply must be.
#[derive(Debug)]
pub(in crate::engine) enum CallKind {
    /// The tool run, and how its outcome is encoded (a compact `call_tool` always envelopes).
    Tool(String, crate::engine::protocol::encode::ToolEncoding),
    /// The URI read, how the resource or template that answers it may be cached, and the
    /// template that answers it (`None`: the exact resource or the apps shell), whose
    /// declaration the contents inherit.
    Resource(String, crate::items::CacheHint, Option<String>),
    Prompt,
    Complete,
    /// A `tasks/get` looked up in the task store: the id, and the binding of its caller.
    TaskLookup(String, String),
}

/// One connection's requests awaiting an answer, by id: for duplicate detection, cancellation
/// and the in-flight bound.
#[derive(Debug, Default)]
pub(in crate::engine) struct ConnCalls {
    by_id: HashMap<RequestId, CallId>,
    /// Requests counted against the in-flight limit.
    in_flight: usize,
}

impl ConnCalls {
    /// Requests counted against [`crate::limits::Limits::max_in_flight`].
    pub(in crate::engine) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The call answering the request `id`.
    pub(in crate::engine) fn get(&self, id: &RequestId) -> Option<CallId> {
        self.by_id.get(id).copied()
    }

    /// Whether a request with this id is in flight.
    pub(in crate::engine) fn holds(&self, id: &RequestId) -> bool {
        self.by_id.contains_key(id)
    }

    /// Every call in flight, in no particular order.
    pub(in crate::engine) fn ids(&self) -> impl Iterator<Item = CallId> + '_ {
        self.by_id.values().copied()
    }

    /// Releases the slot of the finished call of request `id`.
    pub(in crate::engine) fn release(&mut self, id: &RequestId) {
        self.by_id.remove(id);
        self.in_flight = self.in_flight.saturating_sub(1);
    }
}

struct Batch {
    /// Where the batch's reply goes.
    reply_to: ConnId,
    pending: usize,
    /// One slot per member that is answered, in request order: replies come back in the order
    /// of the requests whatever order handlers finish in, so a batch reply is deterministic.
    parts: Vec<Option<Vec<u8>>>,
    /// Its members are still being read: a member cancelled by a later member of the same
    /// batch must not complete the batch before the rest are answered.
    open: bool,
}

/// Every call in flight and every batch awaiting replies.
#[derive(Default)]
pub(in crate::engine) struct Calls {
    calls: Slab<Call>,
    batches: Slab<Batch>,
    /// Calls in flight per caller binding, for [`crate::limits::Limits::max_calls`]: only callers with
    /// at least one.
    held: HashMap<String, usize>,
}

impl Calls {
    /// Calls in flight over the engine.
    pub(in crate::engine) fn len(&self) -> usize {
        self.calls.len()
    }

    /// Calls in flight of the caller `binding`.
    pub(in crate::engine) fn held(&self, binding: &str) -> usize {
        self.held.get(binding).copied().unwrap_or(0)
    }

    /// Callers with calls in flight, counting `binding` whether or not it has any: the divisor
    /// of its fair share of [`crate::limits::Limits::max_calls`].
    pub(in crate::engine) fn holders_with(&self, binding: &str) -> usize {
        self.held.len() + usize::from(!self.held.contains_key(binding))
    }

    /// Counts the admitted `call` as the caller `binding`'s until it ends.
    pub(in crate::engine) fn hold(&mut self, call: CallId, binding: &str) {
        let Some(c) = self.calls.get_mut(call.0) else { return };
        if c.holder.is_some() {
            return;
        }
        c.holder = Some(binding.to_owned());
        // The caller usually holds calls already: count without building a key.
        match self.held.get_mut(binding) {
            Some(n) => *n += 1,
            None => {
                self.held.insert(binding.to_owned(), 1);
            }
        }
    }

    fn unhold(held: &mut HashMap<String, usize>, c: &mut Call) {
        let Some(binding) = c.holder.take() else { return };
        if let Some(n) = held.get_mut(&binding) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&binding);
            }
        }
    }

    pub(in crate::engine) fn get(&self, call: CallId) -> Option<&Call> {
        self.calls.get(call.0)
    }

    pub(in crate::engine) fn get_mut(&mut self, call: CallId) -> Option<&mut Call> {
        self.calls.get_mut(call.0)
    }

    /// Every call in flight, in [`CallId`] order.
    pub(in crate::engine) fn ids(&self) -> Vec<CallId> {
        self.calls.iter().map(|(k, _)| CallId(k)).collect()
    }

    /// Records `call`, a request of the connection whose calls are `owner`, enforcing the
    /// in-flight bound `max` and id uniqueness (`listening`: a listen stream of that connection
    /// holds the id). Inside `batch`, the call's reply takes the batch's next slot.
    pub(in crate::engine) fn admit(
        &mut self,
        owner: &mut ConnCalls,
        mut call: Call,
        batch: Option<Key>,
        max: usize,
        listening: bool,
        timers: &mut Timers,
    ) -> Result<CallId, RpcError> {
        if owner.in_flight >= max {
            let msg = format!("too many requests in flight (limit {max})");
            return Err(RpcError::limit(crate::blame::Bound::Share, msg));
        }
        if owner.by_id.contains_key(&call.id) || listening {
            return Err(RpcError::misbehaving("a request with this id is already in flight"));
        }
        call.batch = batch.map(|b| (b, self.batches.get(b).map_or(0, |x| x.parts.len())));
        let (id, deadline) = (call.id.clone(), call.deadline);
        let call = CallId(self.calls.insert(call));
        owner.by_id.insert(id, call);
        owner.in_flight += 1;
        if let Some(d) = deadline {
            timers.arm(d, Timer::Call(call));
        }
        Ok(call)
    }

    /// Removes a call and disarms its deadline. The caller releases its slot in its
    /// connection's [`ConnCalls`].
    pub(in crate::engine) fn finish(&mut self, call: CallId, timers: &mut Timers) -> Option<Call> {
        let mut c = self.calls.remove(call.0)?;
        Self::unhold(&mut self.held, &mut c);
        if let Some(d) = c.deadline {
            timers.disarm(d, Timer::Call(call));
        }
        Some(c)
    }

    /// Drops every call of a closed connection, with its batch, in [`CallId`] order (the
    /// index is keyed by peer-chosen ids, so its own order is a hash order): each call, and
    /// where its frames went and the request it was if it was still in flight.
    pub(in crate::engine) fn drop_all(
        &mut self,
        owned: ConnCalls,
        timers: &mut Timers,
    ) -> Vec<(CallId, Option<Call>)> {
        let mut calls: Vec<CallId> = owned.by_id.into_values().collect();
        calls.sort_unstable();
        calls
            .into_iter()
            .map(|call| {
                let dropped = self.calls.remove(call.0).map(|mut k| {
                    Self::unhold(&mut self.held, &mut k);
                    if let Some(d) = k.deadline {
                        timers.disarm(d, Timer::Call(call));
                    }
                    if let Some(d) = k.input.as_ref().and_then(|i| i.ask_deadline()) {
                        timers.disarm(d, Timer::Ask(call));
                    }
                    if let Some((b, _)) = k.batch {
                        self.batches.remove(b);
                    }
                    k
                });
                (call, dropped)
            })
            .collect()
    }

    /// Sends what `call` sends to `from` (and its batch's reply) to `to` instead: its response
    /// stream was resumed on another connection.
    pub(in crate::engine) fn redirect(&mut self, call: CallId, from: ConnId, to: ConnId) {
        let Some(c) = self.calls.get_mut(call.0).filter(|c| c.reply_to == from) else { return };
        c.reply_to = to;
        if let Some(b) = c.batch.and_then(|(b, _)| self.batches.get_mut(b)) {
            b.reply_to = to;
        }
    }

    /// Starts reading a batch whose reply goes to `reply_to`.
    pub(in crate::engine) fn open_batch(&mut self, reply_to: ConnId) -> Key {
        self.batches.insert(Batch { reply_to, pending: 0, parts: Vec::new(), open: true })
    }

    /// A member of `batch` was answered at once.
    pub(in crate::engine) fn answered(&mut self, batch: Key, bytes: Vec<u8>) {
        if let Some(b) = self.batches.get_mut(batch) {
            b.parts.push(Some(bytes));
        }
    }

    /// A member of `batch` was admitted as a call: it took the next slot.
    pub(in crate::engine) fn awaits(&mut self, batch: Key) {
        if let Some(b) = self.batches.get_mut(batch) {
            b.pending += 1;
            b.parts.push(None);
        }
    }

    /// Every member of `batch` was read. `None`: the batch is gone (its connection closed);
    /// `Some(false)`: nothing in it will be answered, and it is forgotten.
    pub(in crate::engine) fn close_batch(&mut self, batch: Key) -> Option<bool> {
        let b = self.batches.get_mut(batch)?;
        b.open = false;
        if b.pending == 0 && b.parts.iter().all(Option::is_none) {
            self.batches.remove(batch);
            return Some(false);
        }
        Some(true)
    }

    /// The call in `slot` of `batch` is over: with its reply, or (`None`) cancelled.
    pub(in crate::engine) fn settle(&mut self, batch: Key, slot: Option<(usize, Vec<u8>)>) {
        if let Some(b) = self.batches.get_mut(batch) {
            if let Some((slot, bytes)) = slot {
                if let Some(part) = b.parts.get_mut(slot) {
                    *part = Some(bytes);
                }
            }
            b.pending = b.pending.saturating_sub(1);
        }
    }

    /// The reply of `batch` and where it goes, once it is read and every member is over; the
    /// batch is then forgotten.
    pub(in crate::engine) fn flush(&mut self, batch: Key) -> Option<(ConnId, Vec<u8>)> {
        let done = self.batches.get(batch).is_some_and(|b| b.pending == 0 && !b.open);
        if !done {
            return None;
        }
        let b = self.batches.remove(batch)?;
        // Slots left empty belong to members cancelled before they were answered.
        let parts: Vec<Vec<u8>> = b.parts.into_iter().flatten().collect();
        if parts.is_empty() {
            return None;
        }
        let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 1);
        bytes.push(b'[');
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                bytes.push(b',');
            }
            bytes.extend_from_slice(p);
        }
        bytes.push(b']');
        Some((b.reply_to, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(conn: ConnId, id: &RequestId) -> Ctx<'_> {
        Ctx {
            conn,
            id,
            version: ProtocolVersion::V2025_03_26,
            log_level: None,
            private: false,
            progress: None,
            client_caps: None,
            mrtr: None,
        }
    }

    fn id(n: u32) -> RequestId {
        RequestId::from_json(&n.to_string()).unwrap()
    }

    #[test]
    fn admission_bounds_and_ids() {
        let mut keys: Slab<()> = Slab::default();
        let conn = ConnId(keys.insert(()));
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let (mut calls, mut owned, mut timers) = (Calls::default(), ConnCalls::default(), Timers::default());
        let (one, two, three) = (id(1), id(2), id(3));
        let call = |i| Call::new(ctx(conn, i), conn, CallKind::Prompt, Some(now));
        let a = calls.admit(&mut owned, call(&one), None, 2, false, &mut timers).unwrap();
        assert!(calls.admit(&mut owned, call(&one), None, 2, false, &mut timers).is_err(), "a duplicate id");
        assert!(calls.admit(&mut owned, call(&two), None, 2, true, &mut timers).is_err(), "a listen's id");
        calls.admit(&mut owned, call(&two), None, 2, false, &mut timers).unwrap();
        assert!(
            calls.admit(&mut owned, call(&three), None, 2, false, &mut timers).is_err(),
            "over the bound"
        );
        assert_eq!((owned.in_flight(), owned.get(&one)), (2, Some(a)));
        assert_eq!(
            timers.expired(now).collect::<Vec<_>>(),
            [Timer::Call(a), Timer::Call(owned.get(&two).unwrap())]
        );
        let b = calls.admit(&mut owned, call(&three), None, 3, false, &mut timers).unwrap();
        let done = calls.finish(a, &mut timers).unwrap();
        owned.release(&done.id);
        assert!(calls.get(a).is_none() && !owned.holds(&one));
        let dropped = calls.drop_all(owned, &mut timers);
        assert_eq!(dropped.iter().map(|(c, _)| *c).collect::<Vec<_>>().last(), Some(&b));
        assert!(dropped.iter().all(|(_, c)| c.as_ref().map(|c| c.reply_to) == Some(conn)));
        assert_eq!(timers.next(), None, "every deadline is disarmed");
    }

    #[test]
    fn a_batch_replies_in_request_order_once_read_and_answered() {
        let mut keys: Slab<()> = Slab::default();
        let conn = ConnId(keys.insert(()));
        let (mut calls, mut owned, mut timers) = (Calls::default(), ConnCalls::default(), Timers::default());
        let batch = calls.open_batch(conn);
        let (one, three, four) = (id(1), id(3), id(4));
        let call = |i| Call::new(ctx(conn, i), conn, CallKind::Complete, None);
        let first = calls.admit(&mut owned, call(&one), Some(batch), 9, false, &mut timers).unwrap();
        calls.awaits(batch);
        calls.answered(batch, b"2".to_vec());
        let third = calls.admit(&mut owned, call(&three), Some(batch), 9, false, &mut timers).unwrap();
        calls.awaits(batch);
        let fourth = calls.admit(&mut owned, call(&four), Some(batch), 9, false, &mut timers).unwrap();
        calls.awaits(batch);
        assert_eq!(calls.close_batch(batch), Some(true));
        // Answered out of order, one cancelled: the reply keeps request order and skips it.
        let slot = |c: CallId, calls: &Calls| calls.get(c).and_then(Call::batch).map(|(_, s)| s).unwrap();
        let (s1, s4) = (slot(first, &calls), slot(fourth, &calls));
        assert_eq!((s1, slot(third, &calls), s4), (0, 2, 3));
        calls.settle(batch, Some((s4, b"4".to_vec())));
        calls.settle(batch, None);
        assert_eq!(calls.flush(batch), None, "one member is still running");
        calls.settle(batch, Some((s1, b"1".to_vec())));
        assert_eq!(calls.flush(batch), Some((conn, b"[1,2,4]".to_vec())));
        assert_eq!(calls.flush(batch), None, "a batch replies once");
    }
}

#[cfg(test)]
mod share_tests;

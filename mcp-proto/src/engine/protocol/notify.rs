//! Change notifications, resource subscriptions (legacy and `subscriptions/listen`) and logging.
//!
//! Pending notifications are flags and a URI set per connection, not queues: a burst of
//! registrations costs nothing until the shim drains, and then becomes one notification per
//! connection and list. Gates are applied twice: the item's gate when the change happens (a
//! caller it refuses never learns of it), the server-wide gate when the notification is
//! delivered.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use crate::blame::{Blame, Bound};
use crate::caller::{admits, Caller, Gate};
use crate::engine::state::subscriptions::{Filter, List, Pending};
use crate::engine::transport::backlog::Backlog;
use crate::engine::LogLevel;
use crate::engine::{Answer, CallId, ConnId, Ctx, Engine, Listen, Stale, META_SUBSCRIPTION_ID};
use crate::jsonrpc::{encode_result, ErrorCode, RequestId, RpcError};
use crate::slab::Key;

/// `_meta.progressToken` when it is a string or an integer of at most `max` encoded bytes;
/// anything else disables progress for the request without failing it.
pub(in crate::engine) fn progress_token(
    params: Option<&Map<String, Value>>,
    max: usize,
) -> Option<RequestId> {
    let token = params?.get("_meta")?.get("progressToken")?;
    let text = serde_json::to_string(token).ok()?;
    if text.len() > max {
        return None;
    }
    RequestId::from_json(&text)
}

/// The strings of the listen filter's array member `key` (none when it is absent or null),
/// all checked before any is used: refused when it is not an array, holds more than `max`
/// items, or holds anything but strings. Resource URIs and task ids are bounded alike.
fn listen_strings<'a>(
    requested: &'a Map<String, Value>,
    key: &str,
    max: usize,
) -> Result<impl Iterator<Item = &'a String>, RpcError> {
    let items: &[Value] = match requested.get(key) {
        None | Some(Value::Null) => &[],
        Some(Value::Array(items)) => items,
        Some(_) => return Err(RpcError::invalid_params(format!("\"{key}\" must be an array"))),
    };
    if items.len() > max {
        let msg = format!("at most {max} {key} per listen");
        return Err(RpcError::blamed(Blame::Limit(Bound::Size), ErrorCode::InvalidParams, msg));
    }
    if !items.iter().all(Value::is_string) {
        return Err(RpcError::invalid_params(format!("\"{key}\" must hold strings")));
    }
    Ok(items.iter().filter_map(|item| match item {
        Value::String(s) => Some(s),
        _ => None,
    }))
}

/// Acknowledges the array member `key` of the listen filter as honoured (`values`, in order)
/// when the client asked for it and the server `serves` it.
fn echo_honoured<'a>(
    honoured: &mut Map<String, Value>,
    requested: &Map<String, Value>,
    key: &str,
    serves: bool,
    values: impl Iterator<Item = &'a String>,
) {
    if requested.contains_key(key) && serves {
        honoured.insert(key.into(), values.cloned().map(Value::String).collect::<Vec<_>>().into());
    }
}

/// What became of a progress update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressOutcome {
    /// Sent.
    Sent,
    /// The request carried no (valid) progress token.
    NoToken,
    /// Less than [`Limits::progress_interval`](crate::limits::Limits::progress_interval) since the last
    /// one sent.
    TooSoon,
    /// Not greater than the last progress sent (progress must increase).
    NotIncreasing,
    /// Over [`Limits::max_progress_bytes`](crate::limits::Limits::max_progress_bytes).
    TooLarge,
    /// The paced stream it goes to ([`Engine::pace`](crate::engine::Engine::pace)) has a full queue:
    /// dropped, and counted in
    /// [`EngineStatus::dropped_notifications`](crate::engine::EngineStatus::dropped_notifications).
    Dropped,
}

fn notification(
    method: &str,
    subscription: Option<&RequestId>,
    params: Option<Map<String, Value>>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"");
    out.extend_from_slice(method.as_bytes());
    out.push(b'"');
    if subscription.is_some() || params.is_some() {
        out.extend_from_slice(b",\"params\":{");
        let mut first = true;
        if let Some(id) = subscription {
            out.extend_from_slice(b"\"_meta\":{\"");
            out.extend_from_slice(META_SUBSCRIPTION_ID.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(id.as_json().as_bytes());
            out.push(b'}');
            first = false;
        }
        for (k, v) in params.into_iter().flatten() {
            if !first {
                out.push(b',');
            }
            first = false;
            let _ = serde_json::to_writer(&mut out, &k);
            out.push(b':');
            let _ = serde_json::to_writer(&mut out, &v);
        }
        out.push(b'}');
    }
    out.push(b'}');
    out
}

/// A notification a connection is owed, as its pending flags say.
enum Owed {
    List(List),
    Updated(String),
    Task(String, Map<String, Value>),
}

/// The notifications `pending` owes `c`, in order (see [`Engine::flush_notifications`]), each
/// with its bytes.
fn owed_notes(c: &crate::engine::Conn, pending: &Pending) -> Vec<(Owed, Vec<u8>)> {
    let mut notes = Vec::new();
    let updated = |uri: &String, id: Option<&RequestId>| {
        let mut p = Map::new();
        p.insert("uri".into(), uri.clone().into());
        (Owed::Updated(uri.clone()), notification("notifications/resources/updated", id, Some(p)))
    };
    if let Some(session) = c.session.as_ref().filter(|s| s.initialized) {
        for list in List::ALL {
            let offered = session.lists.get(list.index()).copied().unwrap_or(false);
            if offered && pending.has(list) {
                notes.push((Owed::List(list), notification(list.method(), None, None)));
            }
        }
        notes.extend(pending.updated().map(|uri| updated(uri, None)));
    }
    for listen in &c.listens {
        for list in List::ALL {
            if listen.filter.wants(list) && pending.has(list) {
                notes.push((Owed::List(list), notification(list.method(), Some(&listen.id), None)));
            }
        }
        notes.extend(
            pending
                .updated()
                .filter(|u| listen.filter.uris.contains(*u))
                .map(|u| updated(u, Some(&listen.id))),
        );
        for (id, task) in pending.tasks().filter(|(id, _)| listen.filter.tasks.contains(*id)) {
            let note = notification("notifications/tasks", Some(&listen.id), Some(task.clone()));
            notes.push((Owed::Task(id.clone(), task.clone()), note));
        }
    }
    notes
}

impl<H: Clone> Engine<H> {
    /// A list changed: every connection the item's gate admits is owed a notification.
    pub(in crate::engine) fn tell_changed(&mut self, list: List, gate: Option<&Gate>) {
        // An ungated change is owed to everyone: whether a stream may still hear it is decided
        // at delivery, re-check and all.
        if gate.is_some() && self.rechecks() {
            return self.tell_changed_rechecked(list, gate);
        }
        for (_, c) in self.conns.iter_mut() {
            if admits(gate, &c.caller) {
                self.notes.owe_list(&mut c.pending, list);
            }
        }
    }

    /// [`tell_changed`](Self::tell_changed) for a gated item under a re-check: the item's gate
    /// decides against the current caller of the stream the change would go to, so a role
    /// withdrawn since the stream opened hides the item's change from it.
    fn tell_changed_rechecked(&mut self, list: List, gate: Option<&Gate>) {
        let keys: Vec<Key> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            let stream = self.held_stream(ConnId(key)).filter(|_| self.wants_list(key, list));
            let admitted = match stream {
                Some(stream) => self.rechecked(stream).is_some_and(|caller| admits(gate, &caller)),
                None => self.conns.get(key).is_some_and(|c| admits(gate, &c.caller)),
            };
            if let Some(c) = self.conns.get_mut(key).filter(|_| admitted) {
                self.notes.owe_list(&mut c.pending, list);
            }
        }
    }

    /// Tells every connection subscribed to `uri` (legacy `resources/subscribe`, or a listen
    /// filter naming it) that the resource changed, if the caller may still read it.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    /// While publishing is on ([`Engine::set_publishing`]), the update is also queued for
    /// [`Output::Change`](crate::engine::Output::Change).
    pub fn notify_resource_updated(&mut self, now: Instant, uri: &str) {
        self.input(now);
        self.publish_updated(uri);
        self.tell_resource_updated(uri);
    }

    /// Owes `notifications/resources/updated` to every connection subscribed to `uri` that may
    /// still read it.
    pub(in crate::engine) fn tell_resource_updated(&mut self, uri: &str) {
        let keys: Vec<Key> = self.conns.iter().map(|(k, _)| k).collect();
        let max = self.config.limits.max_subscribed_uris;
        for key in keys {
            let Some(c) = self.conns.get(key) else { continue };
            let legacy = c.session.as_ref().is_some_and(|s| s.initialized)
                && self.notes.holds(c.caller.binding(), uri);
            let listening = c.listens.iter().any(|l| l.filter.uris.contains(uri));
            if !(legacy || listening) {
                continue;
            }
            let mut caller = c.caller.clone();
            if let Some(stream) = self.rechecks().then(|| self.held_stream(ConnId(key))).flatten() {
                // The resource's gate decides against the subscriber's current caller.
                let Some(current) = self.rechecked(stream) else { continue };
                caller = current;
            }
            if self.resolve(&caller, uri).is_none() {
                continue;
            }
            if let Some(c) = self.conns.get_mut(key) {
                self.notes.owe_update(&mut c.pending, uri, max);
            }
        }
    }

    /// Turns pending flags into frames; see the module docs.
    ///
    /// For a paced destination ([`Engine::pace`]) a notification identical to one still queued
    /// is folded into it, and what does not fit in the queue stays owed (coalesced) until the
    /// reader takes frames. Order: per connection, lists in tools, resources, prompts order, then
    /// updated URIs in order, for the session and then for each listen stream. A notification
    /// folded into a queued one keeps that one's place; one held back goes after everything
    /// queued before it was sent, responses included. Neither changes what the client learns:
    /// each says only "re-list" or "re-read", which it does after reading it.
    pub(in crate::engine) fn flush_notifications(&mut self) {
        self.notes.take_dirty();
        let server_gate = self.registry.gate.clone();
        let owed: Vec<Key> =
            self.conns.iter().filter(|(_, c)| !c.pending.is_empty()).map(|(k, _)| k).collect();
        let max_uris = self.config.limits.max_subscribed_uris;
        for key in owed {
            let conn = ConnId(key);
            // Kept, coalesced, until a legacy session opens a stream to carry them.
            let Some(dest) = self.route(conn) else { continue };
            let stream = if self.rechecks() { self.held_stream(conn) } else { None };
            let Some(c) = self.conns.get_mut(key) else { continue };
            let pending = std::mem::take(&mut c.pending);
            let admitted = match stream {
                // Re-resolved before anything is written: a caller that is gone is told nothing,
                // and its stream is closed.
                Some(stream) => {
                    self.rechecked(stream).is_some_and(|caller| admits(server_gate.as_ref(), &caller))
                }
                None => admits(server_gate.as_ref(), &c.caller),
            };
            if !admitted {
                continue;
            }
            let Some(c) = self.conns.get(key) else { continue };
            let notes = owed_notes(c, &pending);
            for (what, bytes) in notes {
                let backlog = self.backlog(dest);
                if backlog.is_some_and(|b| b.holds(&bytes)) {
                    continue;
                }
                if backlog.is_some_and(|b| b.is_full()) {
                    if let Some(c) = self.conns.get_mut(key) {
                        match what {
                            Owed::List(list) => self.notes.owe_list(&mut c.pending, list),
                            Owed::Updated(uri) => self.notes.owe_update(&mut c.pending, &uri, max_uris),
                            Owed::Task(id, task) => self.notes.owe_task(&mut c.pending, &id, task, max_uris),
                        }
                    }
                    continue;
                }
                let before = backlog.map_or(0, |b| b.len());
                self.send(conn, bytes.clone(), false);
                self.tag_note(dest, before, bytes);
            }
        }
        // Re-owing raised the flag, but what was re-owed waits for a full queue: nothing changes
        // until its reader takes frames (`written` raises the flag again). Only what can go out
        // now keeps it raised.
        self.notes.take_dirty();
        let deliverable = self.conns.iter().any(|(k, c)| {
            !c.pending.is_empty()
                && self.route(ConnId(k)).is_some_and(|d| !self.backlog(d).is_some_and(Backlog::is_full))
        });
        if deliverable {
            self.notes.wake();
        }
    }

    pub(in crate::engine) fn set_level(
        &mut self,
        ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
    ) -> Result<Vec<u8>, RpcError> {
        self.check_server_gate(ctx)?;
        let level = params.and_then(|p| p.get("level")).and_then(LogLevel::from_json);
        let Some(level) = level else {
            return Err(RpcError::invalid_params(
                "\"level\" must be one of debug, info, notice, warning, error, critical, alert, emergency",
            ));
        };
        if let Some(s) = self.conns.get_mut(ctx.conn.0).and_then(|c| c.session.as_mut()) {
            s.log_level = Some(level);
        }
        Ok(encode_result(ctx.id, &Map::new()))
    }

    /// The URI a `resources/subscribe` or `resources/unsubscribe` names, and who asks: the
    /// server gate is checked before the URI, so a refused caller learns nothing of its params.
    fn subscription_target<'p>(
        &self,
        ctx: Ctx<'_>,
        params: Option<&'p Map<String, Value>>,
    ) -> Result<(&'p str, Arc<Caller>), RpcError> {
        self.check_server_gate(ctx)?;
        let uri = self.checked_uri(params)?;
        Ok((uri, self.caller(ctx.conn)))
    }

    pub(in crate::engine) fn subscribe(
        &mut self,
        ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
    ) -> Result<Vec<u8>, RpcError> {
        let (uri, caller) = self.subscription_target(ctx, params)?;
        if self.resolve(&caller, uri).is_none() {
            return Err(self.not_found(ctx.version, uri));
        }
        let l = &self.config.limits;
        self.notes
            .subscribe(caller.binding(), uri, l.max_subscribed_uris, l.max_subscriptions)
            // Both bounds are server-wide tables, whoever fills them.
            .map_err(|msg| RpcError::blamed(Blame::Limit(Bound::Capacity), ErrorCode::InvalidParams, msg))?;
        Ok(encode_result(ctx.id, &Map::new()))
    }

    pub(in crate::engine) fn unsubscribe(
        &mut self,
        ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
    ) -> Result<Vec<u8>, RpcError> {
        let (uri, caller) = self.subscription_target(ctx, params)?;
        self.notes.unsubscribe(caller.binding(), uri);
        Ok(encode_result(ctx.id, &Map::new()))
    }

    /// `subscriptions/listen`: acknowledges the honoured filter at once; the stream then stays
    /// open (no response) until the client cancels it or the connection ends.
    pub(in crate::engine) fn listen(
        &mut self,
        ctx: Ctx<'_>,
        params: Option<&Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        if batch.is_some() {
            return Err(RpcError::misbehaving("subscriptions/listen cannot be part of a batch"));
        }
        self.check_server_gate(ctx)?;
        let Some(Value::Object(requested)) = params.and_then(|p| p.get("notifications")) else {
            return Err(RpcError::invalid_params("\"notifications\" must be a SubscriptionFilter object"));
        };
        let flag = |name: &str| -> Result<bool, RpcError> {
            match requested.get(name) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(RpcError::invalid_params(format!("\"{name}\" must be a boolean"))),
            }
        };
        let caller = self.caller(ctx.conn);
        let offers = self.offers(&caller);
        let mut filter = Filter::new([
            flag("toolsListChanged")? && offers.tools,
            flag("resourcesListChanged")? && offers.resources,
            flag("promptsListChanged")? && offers.prompts,
        ]);
        let limits = &self.config.limits;
        for u in listen_strings(requested, "resourceSubscriptions", limits.max_subscribed_uris)? {
            if offers.subscriptions && u.len() <= limits.max_uri_bytes && self.resolve(&caller, u).is_some() {
                filter.uris.insert(u.clone());
            }
        }
        let serves_tasks = self.serves_tasks();
        for id in listen_strings(requested, "taskIds", limits.max_subscribed_uris)? {
            // Only the caller's own tasks, and only while they are held: another caller's id is
            // unknown to it, as on tasks/get.
            if serves_tasks && self.owns_task(caller.binding(), id) {
                filter.tasks.insert(id.clone());
            }
        }
        let max_listens = limits.max_listens;
        let conn = self.conns.get_mut(ctx.conn.0).ok_or_else(RpcError::misuse)?;
        if conn.listens.len() >= max_listens {
            let msg = format!("too many open listen streams (limit {max_listens})");
            return Err(RpcError::limit(Bound::Share, msg));
        }
        if conn.calls.holds(ctx.id) || conn.listens.iter().any(|l| &l.id == ctx.id) {
            return Err(RpcError::misbehaving("a request with this id is already in flight"));
        }
        let mut honoured = Map::new();
        for (name, on) in
            ["toolsListChanged", "resourcesListChanged", "promptsListChanged"].iter().zip(filter.lists())
        {
            if on {
                honoured.insert((*name).into(), true.into());
            }
        }
        // Left out, not empty, when the server offers this caller no resource subscriptions.
        let subscriptions = offers.subscriptions;
        echo_honoured(&mut honoured, requested, "resourceSubscriptions", subscriptions, filter.uris.iter());
        // Left out, not empty, when the server serves no tasks.
        echo_honoured(&mut honoured, requested, "taskIds", serves_tasks, filter.tasks.iter());
        conn.listens.push(Listen { id: ctx.id.clone(), filter });
        let mut p = Map::new();
        p.insert("notifications".into(), Value::Object(honoured));
        let ack = notification("notifications/subscriptions/acknowledged", Some(ctx.id), Some(p));
        let to = self.reply_to.unwrap_or(ctx.conn);
        self.send(to, ack, false);
        Ok(Answer::Open)
    }

    /// Ends a listen stream the client cancelled; whether one had that id.
    pub(in crate::engine) fn end_listen(&mut self, conn: ConnId, id: &RequestId) -> bool {
        let Some(c) = self.conns.get_mut(conn.0) else { return false };
        let before = c.listens.len();
        c.listens.retain(|l| &l.id != id);
        before != c.listens.len()
    }

    /// Reports progress of `call` to its client, if the request carried a progress token:
    /// `notifications/progress` with the token exactly as received. Updates must increase, come
    /// at most once per [`Limits::progress_interval`](crate::limits::Limits::progress_interval), and
    /// stop with the response (afterwards this is [`Stale`]). `progress` and `total` keep their
    /// exact digits on the wire; only the increase check compares them as floating point.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn progress(
        &mut self,
        now: Instant,
        call: CallId,
        progress: serde_json::Number,
        total: Option<serde_json::Number>,
        message: Option<&str>,
    ) -> Result<ProgressOutcome, Stale> {
        self.input(now);
        let interval = self.config.limits.progress_interval;
        let max = self.config.limits.max_progress_bytes;
        let to = self.calls.get(call).ok_or(Stale)?.reply_to;
        let full = self.lands_full(to);
        let c = self.calls.get_mut(call).ok_or(Stale)?;
        let Some(p) = c.progress.as_mut() else { return Ok(ProgressOutcome::NoToken) };
        let value = progress.as_f64().unwrap_or(f64::NAN);
        if let Some((at, last)) = p.last {
            if now.saturating_duration_since(at) < interval {
                return Ok(ProgressOutcome::TooSoon);
            }
            if value.is_nan() || value <= last {
                return Ok(ProgressOutcome::NotIncreasing);
            }
        }
        let mut params = Map::new();
        params.insert("progressToken".into(), Value::Null);
        params.insert("progress".into(), Value::Number(progress));
        if let Some(t) = total {
            params.insert("total".into(), Value::Number(t));
        }
        if let Some(m) = message {
            params.insert("message".into(), m.into());
        }
        // The token goes out as the client wrote it (string or integer text).
        let token: Value = serde_json::from_str(p.token.as_json()).unwrap_or(Value::Null);
        params.insert("progressToken".into(), token);
        let bytes = notification("notifications/progress", None, Some(params));
        if bytes.len() > max {
            return Ok(ProgressOutcome::TooLarge);
        }
        if full {
            // Not recorded as sent: the next update may go as soon as the reader catches up.
            self.dropped_notes = self.dropped_notes.saturating_add(1);
            return Ok(ProgressOutcome::Dropped);
        }
        p.last = Some((now, value));
        self.send(to, bytes, false);
        Ok(ProgressOutcome::Sent)
    }

    /// Sends a log message about `call` to its client, if the server logs
    /// ([`Config::logging`](crate::engine::Config::logging); nothing is sent otherwise) and the client
    /// asked for that level: on a legacy session at or above the level of `logging/setLevel` (every level before it is
    /// set), on 2026-07-28 only when the request's `_meta` carried a logLevel and at or above it.
    ///
    /// Returns [`Stale`] when the call is no longer in flight. Follow with
    /// [`poll_output`](Self::poll_output).
    pub fn log(
        &mut self,
        now: Instant,
        call: CallId,
        level: LogLevel,
        logger: Option<&str>,
        data: Value,
    ) -> Result<(), Stale> {
        self.input(now);
        let c = self.calls.get(call).ok_or(Stale)?;
        let send = if !self.config.logging {
            // Not advertised, so no client asked for it.
            false
        } else if c.version.is_modern() {
            c.log_level.is_some_and(|min| level >= min)
        } else {
            let session = self.conns.get(c.conn.0).and_then(|conn| conn.session.as_ref());
            session.is_some_and(|s| s.log_level.is_none_or(|min| level >= min))
        };
        if !send {
            return Ok(());
        }
        let mut p = Map::new();
        p.insert("level".into(), level.as_str().into());
        if let Some(l) = logger {
            p.insert("logger".into(), l.into());
        }
        p.insert("data".into(), data);
        let bytes = notification("notifications/message", None, Some(p));
        if bytes.len() <= self.config.limits.max_response_bytes {
            let to = c.reply_to;
            self.send_droppable(to, bytes);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notification_frames() {
        let id = RequestId::from_json("7").unwrap();
        assert_eq!(
            String::from_utf8(notification("notifications/tools/list_changed", Some(&id), None)).unwrap(),
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}}"#
        );
        assert_eq!(
            String::from_utf8(notification("notifications/tools/list_changed", None, None)).unwrap(),
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
        );
    }
}

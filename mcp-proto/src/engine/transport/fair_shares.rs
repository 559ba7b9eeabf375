//! Per-caller shares of the session and connection tables: who gives up a place when a table is
//! full (the rule is in the per-caller block of [`Limits`]).
//!
//! Victims are found by scanning the table, which happens only while it is full; the tables are
//! bounded (1024 sessions, 4096 connections by default), and a scan costs less than the session
//! id the `initialize` that triggered it would mint. Ties are broken by [`ConnId`], so the
//! choice depends on the inputs alone, never on a map's order.

use crate::caller::Caller;
use crate::engine::state::streams::Transport;
use crate::engine::{CloseReason, ConnId, Engine};
use crate::limits::Limits;

/// Why there is no room for one more session.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::engine) enum NoSession {
    /// The caller holds [`Limits::max_sessions_per_caller`] sessions, all past their handshake.
    PerCaller(usize),
    /// The table is full and the caller holds at least its share.
    Full,
}

/// Which sessions [`Engine::session_victim`] may pick.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pick {
    /// Only sessions still in their handshake.
    Handshakes,
    /// Handshakes first, then idle sessions (no call in flight, no `GET` stream).
    Idle,
    /// Handshakes, then idle sessions, then busy ones.
    Any,
}

impl<H: Clone> Engine<H> {
    /// Makes room for one more session of `caller`: displaces what the per-caller rules allow,
    /// or says why there is no room.
    pub(in crate::engine) fn room_for_session(&mut self, caller: &Caller) -> Result<(), NoSession> {
        let binding = caller.binding().to_owned();
        let (max, per) = (self.config.limits.max_sessions, self.config.limits.max_sessions_per_caller);
        loop {
            let held = self.sessions.held(&binding);
            if let Some(per) = per.filter(|per| held >= *per) {
                // A client that initializes again and again (a retrying one, or a flood) pushes
                // out its own stale handshakes, not its working sessions.
                let own = self.session_victim(|b| b == binding, Pick::Handshakes);
                let Some(victim) = own else { return Err(NoSession::PerCaller(per)) };
                self.turn_away(victim, CloseReason::Displaced);
                continue;
            }
            if self.sessions.len() < max {
                return Ok(());
            }
            let share = Limits::fair_share(max, self.sessions.holders_with(&binding));
            let victim = if held < share {
                let greediest = self.sessions_greediest();
                let sessions = &self.sessions;
                self.session_victim(|b| sessions.held(b) > share, Pick::Handshakes).or_else(|| {
                    self.session_victim(|b| greediest > share && sessions.held(b) == greediest, Pick::Any)
                })
            } else {
                self.session_victim(|b| b == binding, Pick::Handshakes)
            };
            let Some(victim) = victim else { return Err(NoSession::Full) };
            self.turn_away(victim, CloseReason::Displaced);
        }
    }

    /// Makes room for `need` more connections of `caller` under
    /// [`Limits::max_connections`]: whether there is room now.
    ///
    /// A caller below its fair share displaces sessions of callers above theirs: the least
    /// recently active unfinished handshake, else the least recently active idle session of the
    /// caller holding the most connections. Exchanges (requests being answered) and held
    /// streams are never displaced here: the former are bounded by the HTTP server's
    /// connections, the latter by their own table.
    pub(in crate::engine) fn room_for_conns(&mut self, caller: &Caller, need: usize) -> bool {
        let max = self.config.limits.max_connections;
        let binding = caller.binding();
        loop {
            if self.conns.len().saturating_add(need) <= max {
                return true;
            }
            let held = self.notes.conns_of(binding);
            let share = Limits::fair_share(max, self.notes.conn_holders_with(binding));
            if held.saturating_add(need) > share {
                return false;
            }
            let notes = &self.notes;
            let greediest = self
                .sessions
                .all()
                .filter_map(|s| self.conns.get(s.0))
                .fold(0, |most, c| most.max(notes.conns_of(c.caller.binding())));
            let victim = self.session_victim(|b| notes.conns_of(b) > share, Pick::Handshakes).or_else(|| {
                self.session_victim(|b| greediest > share && notes.conns_of(b) == greediest, Pick::Idle)
            });
            let Some(victim) = victim else { return false };
            self.turn_away(victim, CloseReason::Displaced);
        }
    }

    /// Most sessions any one caller holds.
    fn sessions_greediest(&self) -> usize {
        self.sessions
            .all()
            .filter_map(|s| self.conns.get(s.0))
            .map(|c| self.sessions.held(c.caller.binding()))
            .max()
            .unwrap_or(0)
    }

    /// The session to displace among those of callers `eligible` accepts: the least recently
    /// active one still in its handshake, then (as `pick` allows) the least recently active
    /// idle one, then the least recently active one.
    fn session_victim(&self, eligible: impl Fn(&str) -> bool, pick: Pick) -> Option<ConnId> {
        self.sessions
            .all()
            .filter_map(|id| {
                let c = self.conns.get(id.0)?;
                let Transport::Session(s) = &c.transport else { return None };
                let busy = c.calls.in_flight() > 0 || s.get().is_some();
                let allowed = match pick {
                    Pick::Handshakes => !s.is_established(),
                    Pick::Idle => !s.is_established() || !busy,
                    Pick::Any => true,
                };
                (allowed && eligible(c.caller.binding())).then_some((
                    s.is_established(),
                    busy,
                    s.last_active(),
                    id,
                ))
            })
            .min()
            .map(|(.., id)| id)
    }
}

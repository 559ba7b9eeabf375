//! What the engine and its cluster say to each other, as data: the changes it publishes
//! ([`Change`]), the sessions and tasks it holds ([`Holding`]), the claims and records of the
//! shared replay ledger ([`Claim`], [`ClaimResult`], [`Record`]) and what that ledger holds for a
//! state ([`SharedOutcome`], with its encoding for a backend). A leaf: the output queue, the
//! local ledger and the replica wing all speak it, so none imports another for it.

use crate::blame::Blame;
use crate::engine::state::ids::CallId;
use crate::engine::state::subscriptions::List;
use crate::jsonrpc::ErrorCode;

/// What the shared ledger holds for a state, and so what became of its call on the replica
/// that claimed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SharedOutcome {
    /// The call is still running there: a copy is refused `in_progress` (send it again shortly).
    Running,
    /// The call answered: the answer after its request id, and what its HTTP status follows
    /// from (`None` for a result).
    Kept {
        /// The response's bytes after `{"jsonrpc":"2.0","id":<id>`.
        tail: Vec<u8>,
        /// The error's blame and code, for an error answer.
        fault: Option<(Blame, ErrorCode)>,
    },
    /// The answer was too large to keep: a copy is refused `outcome_too_large`.
    TooLarge,
    /// The call ended without an answer: a copy is refused `interrupted`.
    Interrupted,
}

/// The first byte of every encoding: a backend holding bytes of an older or newer layout reads
/// them as garbage (`None`) rather than as something else.
const VERSION: u8 = 1;

impl SharedOutcome {
    /// The outcome as bytes for a backend: a version byte, a kind byte and, for `Kept`, the
    /// fault and the tail. Compact (a `Kept` costs its tail and at most 12 bytes) and stable
    /// across builds of the same version.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            SharedOutcome::Running => vec![VERSION, 0],
            SharedOutcome::TooLarge => vec![VERSION, 2],
            SharedOutcome::Interrupted => vec![VERSION, 3],
            SharedOutcome::Kept { tail, fault } => {
                let mut out = Vec::with_capacity(tail.len() + 12);
                out.extend_from_slice(&[VERSION, 1]);
                match fault {
                    None => out.push(0),
                    Some((blame, code)) => {
                        out.push(1);
                        out.push(blame_byte(*blame));
                        match code_byte(*code) {
                            Some(b) => out.push(b),
                            None => {
                                out.push(OTHER_CODE);
                                out.extend_from_slice(&code.code().to_le_bytes());
                            }
                        }
                    }
                }
                out.extend_from_slice(tail);
                out
            }
        }
    }

    /// The outcome [`encode`](Self::encode) wrote; `None` for anything else (another version,
    /// truncated bytes, a tail that cannot end a response). Never panics.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let (&version, rest) = bytes.split_first()?;
        if version != VERSION {
            return None;
        }
        let (&kind, rest) = rest.split_first()?;
        match (kind, rest.is_empty()) {
            (0, true) => return Some(SharedOutcome::Running),
            (2, true) => return Some(SharedOutcome::TooLarge),
            (3, true) => return Some(SharedOutcome::Interrupted),
            (1, false) => {}
            _ => return None,
        }
        let (&has_fault, mut rest) = rest.split_first()?;
        let fault = match has_fault {
            0 => None,
            1 => {
                let (&blame, after) = rest.split_first()?;
                let (&code, after) = after.split_first()?;
                let blame = byte_blame(blame)?;
                let (code, after) = if code == OTHER_CODE {
                    let (n, after) = after.split_first_chunk::<8>()?;
                    (ErrorCode::Other(i64::from_le_bytes(*n)), after)
                } else {
                    (byte_code(code)?, after)
                };
                rest = after;
                Some((blame, code))
            }
            _ => return None,
        };
        // A tail follows the id: `,"result":...}` or `,"error":...}`.
        if rest.first() != Some(&b',') || rest.last() != Some(&b'}') {
            return None;
        }
        Some(SharedOutcome::Kept { tail: rest.to_vec(), fault })
    }
}

fn blame_byte(blame: Blame) -> u8 {
    // Every blame is in the table; the fallback only keeps this total.
    Blame::ALL.iter().position(|b| *b == blame).and_then(|i| u8::try_from(i).ok()).unwrap_or(7)
}

fn byte_blame(b: u8) -> Option<Blame> {
    Blame::ALL.get(usize::from(b)).copied()
}

/// The byte of an [`ErrorCode::Other`]: its number follows, 8 bytes little-endian.
const OTHER_CODE: u8 = 255;

const CODES: [ErrorCode; 11] = [
    ErrorCode::ParseError,
    ErrorCode::InvalidRequest,
    ErrorCode::MethodNotFound,
    ErrorCode::InvalidParams,
    ErrorCode::InternalError,
    ErrorCode::ResourceNotFound,
    ErrorCode::SessionNotFound,
    ErrorCode::HeaderMismatch,
    ErrorCode::MissingClientCapability,
    ErrorCode::UnsupportedProtocolVersion,
    ErrorCode::InsufficientScope,
];

fn code_byte(code: ErrorCode) -> Option<u8> {
    CODES.iter().position(|c| *c == code).and_then(|i| u8::try_from(i).ok())
}

fn byte_code(b: u8) -> Option<ErrorCode> {
    CODES.get(usize::from(b)).copied()
}

/// A list whose membership changed: which `notifications/*/list_changed` it raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangedList {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/resources/list_changed` (resources and templates).
    Resources,
    /// `notifications/prompts/list_changed`.
    Prompts,
}

impl ChangedList {
    /// A stable name (`tools`, `resources`, `prompts`), for a wire format between replicas.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangedList::Tools => "tools",
            ChangedList::Resources => "resources",
            ChangedList::Prompts => "prompts",
        }
    }

    /// The list named `name` by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "tools" => Some(ChangedList::Tools),
            "resources" => Some(ChangedList::Resources),
            "prompts" => Some(ChangedList::Prompts),
            _ => None,
        }
    }

    pub(in crate::engine) fn list(self) -> List {
        match self {
            ChangedList::Tools => List::Tools,
            ChangedList::Resources => List::Resources,
            ChangedList::Prompts => List::Prompts,
        }
    }

    pub(in crate::engine) fn of(list: List) -> Self {
        match list {
            List::Tools => ChangedList::Tools,
            List::Resources => ChangedList::Resources,
            List::Prompts => ChangedList::Prompts,
        }
    }
}

/// A change one replica tells the others of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Change {
    /// An ungated item was added to or removed from a list.
    ListChanged(ChangedList),
    /// The resource at this URI changed (`notifications/resources/updated`).
    ResourceUpdated(String),
}

/// What a [`Holding`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeldKind {
    /// A legacy (pre-2026) Streamable HTTP session, by its `Mcp-Session-Id`.
    Session,
    /// A task of the Tasks extension while it runs, by its task id.
    Task,
}

impl HeldKind {
    /// A stable name (`session`, `task`), for a wire format or a storage key.
    pub fn as_str(self) -> &'static str {
        match self {
            HeldKind::Session => "session",
            HeldKind::Task => "task",
        }
    }

    /// The kind named `name` by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "session" => Some(HeldKind::Session),
            "task" => Some(HeldKind::Task),
            _ => None,
        }
    }
}

/// This engine began or stopped holding a session or a running task
/// ([`Output::Holding`](crate::engine::Output::Holding)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holding {
    /// A session or a task.
    pub kind: HeldKind,
    /// Its `Mcp-Session-Id` or task id.
    pub id: String,
    /// Whether it is held from now on (`true`) or no longer (`false`).
    pub held: bool,
}

/// A retry the engine asks the shared ledger about ([`Output::Claim`](crate::engine::Output::Claim)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The call held back until [`Engine::claim_result`](crate::engine::Engine::claim_result) answers for it.
    pub call: CallId,
    /// The state's key: its SHA-256 digest in hex (64 characters; see the module docs).
    pub key: String,
    /// Until when (unix milliseconds) the claim holds if no record replaces it (see
    /// [`CLAIM_MARGIN_MS`](crate::engine::CLAIM_MARGIN_MS)).
    pub lease_until_ms: u64,
}

/// The backend's answer to a [`Claim`] ([`Engine::claim_result`](crate::engine::Engine::claim_result)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimResult {
    /// The state is now marked running for this replica: the handler runs here.
    Won,
    /// Another replica claimed the state first; this is what it holds now.
    Taken(SharedOutcome),
    /// The backend could not say (unreachable, too slow): the handler runs here.
    Unavailable,
}

/// What a shared ledger should keep for a state ([`Output::Record`](crate::engine::Output::Record)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The state's key, as in its [`Claim`].
    pub key: String,
    /// When the state expires (unix milliseconds): the record may be forgotten then.
    pub expires_at_ms: u64,
    /// What to keep in place of the running marker this replica's claim put there; `None`
    /// gives the claim back (delete the key, if it still holds the running marker): the call
    /// was refused for what the retry itself brought, so its state was not used and a
    /// corrected copy may run on any replica.
    pub outcome: Option<SharedOutcome>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blame::Bound;

    #[test]
    fn outcomes_round_trip_and_garbage_decodes_to_none() {
        let tail = br#","result":{"content":[]}}"#.to_vec();
        let all = [
            SharedOutcome::Running,
            SharedOutcome::TooLarge,
            SharedOutcome::Interrupted,
            SharedOutcome::Kept { tail: tail.clone(), fault: None },
            SharedOutcome::Kept {
                tail: tail.clone(),
                fault: Some((Blame::Limit(Bound::Time), ErrorCode::Other(-7))),
            },
        ];
        let mut faults: Vec<_> = Blame::ALL.iter().zip(CODES.iter()).map(|(b, c)| Some((*b, *c))).collect();
        faults.push(Some((Blame::Application, ErrorCode::Other(i64::MIN))));
        for o in all
            .into_iter()
            .chain(faults.into_iter().map(|fault| SharedOutcome::Kept { tail: tail.clone(), fault }))
        {
            let bytes = o.encode();
            assert_eq!(SharedOutcome::decode(&bytes), Some(o.clone()));
            // Every truncation and every single-byte change either decodes to something else
            // that encodes back to itself, or to nothing; none panics.
            for n in 0..bytes.len() {
                if let Some(d) = SharedOutcome::decode(&bytes[..n]) {
                    assert_eq!(d.encode(), &bytes[..n]);
                }
                for flip in [0u8, 1, 2, 0x7f, 0xff] {
                    let mut b = bytes.clone();
                    b[n] = flip;
                    if let Some(d) = SharedOutcome::decode(&b) {
                        assert_eq!(d.encode(), b);
                    }
                }
            }
        }
        for garbage in [
            &b""[..],
            b"\x00",
            b"\x02\x00",
            b"\x01\x09",
            b"\x01\x00x",
            b"\x01\x01\x00",
            b"\x01\x01\x00{}",
            b"{\"result\":1}",
        ] {
            assert_eq!(SharedOutcome::decode(garbage), None, "{garbage:?}");
        }
    }
}

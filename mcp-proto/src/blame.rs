//! Errors sorted by who is to blame, and the one table that turns a blame into an HTTP status.
//!
//! Every [`RpcError`](crate::jsonrpc::RpcError) the engine emits carries a [`Blame`]. The JSON-RPC code
//! says what the error is; the blame says whose doing it is, and that is what the HTTP status
//! reports. [`Blame::http_status`] is the only place a status is derived from an error, so
//! the same error gets the same status wherever it is raised, and nothing re-reads encoded
//! bytes to find one.
//!
//! [`ErrorCode`] lives here, beside the blame that picks its status, so this file imports
//! nothing from `jsonrpc.rs` (which builds error objects from both and re-exports it).

/// Who is to blame for an error, as rustls sorts its errors: the peer's bytes, the peer's
/// conduct, the peer's version or capabilities, a bound, the application, the shim, or the
/// server stopping.
///
/// Set by the [`RpcError`](crate::jsonrpc::RpcError) constructors ([`RpcError::malformed`](crate::jsonrpc::RpcError::malformed),
/// [`RpcError::limit`](crate::jsonrpc::RpcError::limit), ...; [`RpcError::new`](crate::jsonrpc::RpcError::new) is
/// [`Blame::Application`]). It never travels on the wire itself: it picks the HTTP status
/// ([`Blame::http_status`]) and the default code ([`Blame::default_code`]).
///
/// ```
/// use mcp_proto::{Blame, Bound, Era, ErrorCode, RpcError};
///
/// // A bound the client crossed: on a 2026-07-28 request, a plain bad request.
/// let err = RpcError::limit(Bound::Size, "id of 300 bytes exceeds the 256-byte limit");
/// assert_eq!((err.code, err.http_status(Era::Modern)), (ErrorCode::InvalidRequest, 400));
/// // The same blame refusing a held stream before any exchange: 429.
/// assert_eq!(RpcError::limit(Bound::Share, "too many streams").http_status(Era::Transport), 429);
/// // An application's own error travels in the body.
/// assert_eq!(RpcError::new(ErrorCode::Other(-1), "quota").blame, Blame::Application);
/// assert_eq!(RpcError::new(ErrorCode::Other(-1), "quota").http_status(Era::Modern), 200);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Blame {
    /// The peer's bytes cannot be read as what they claim to be: not JSON, JSON nested past
    /// the parser's depth, not a JSON-RPC object, an id that is neither string nor integer, a
    /// missing `Mcp-Session-Id`. Examples: `-32700` "parse error", `-32600` "a JSON-RPC message
    /// must be an object".
    Malformed,
    /// Well-formed, but not what the protocol allows at this point: bad or missing params, an
    /// unknown tool, prompt or resource, a request before `initialize`, an id already in
    /// flight, an HTTP header that contradicts the body (`-32020`), an unknown session (`-32001`,
    /// HTTP 404), a tampered `requestState`.
    Misbehaving,
    /// The peer speaks a version, or lacks a capability, this server cannot work with: an
    /// unsupported protocol version (`-32022`), a method this version does not have (`-32601`),
    /// a missing client capability (`-32021`), a batch outside 2025-03-26, a request whose
    /// answer must stream sent by a client that does not accept SSE (HTTP 406).
    Incompatible,
    /// A bound was reached; the [`Bound`] says which kind, and with it the status. Examples: a
    /// frame over [`Limits::max_frame_bytes`](crate::limits::Limits::max_frame_bytes), too many requests
    /// in flight, no free stream seat, the connection table full.
    Limit(Bound),
    /// The application's own doing: a handler's public error, its private failure or panic
    /// (the generic `-32603`), a call that ran past its timeout, a server gate that refuses a
    /// whole HTTP request (403). Inside an exchange a refused caller is answered as if the item
    /// were not there (`-32602`, [`Blame::Misbehaving`]), so a gate betrays nothing.
    Application,
    /// The engine's API was misused by the shim or application: a reply of the wrong kind, a
    /// legacy session without [`Config::seed`](crate::engine::Config::seed), a tool result that breaks
    /// the tool's own output schema. The peer learns only that the server failed.
    Misuse,
    /// The server is shutting down and takes no new work (`-32603` with
    /// `data.reason: "shutting_down"`).
    ShuttingDown,
    /// The caller may see the item but lacks a scope using it needs (`-32023` with
    /// `data.scopes`, every scope to ask for): HTTP 403 in every era, which an HTTP exchange
    /// sends with the `insufficient_scope` challenge of the protected resource, so that an
    /// OAuth client steps up (asks for a token with those scopes) and retries.
    Scope,
}

/// Which kind of bound a [`Blame::Limit`] error reached. It decides the status of a refusal
/// made before the request became a JSON-RPC exchange ([`Era::Transport`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Bound {
    /// The size of one message or of a part of it: a body, a frame, an id, a method name, a
    /// batch, a URI. HTTP 413 at the transport.
    Size,
    /// The caller's share of something counted: requests in flight on a connection, listen
    /// streams, held SSE streams, subscriptions, input rounds of one call. HTTP 429 at the
    /// transport.
    Share,
    /// A time the client had to do something in: send its request body. HTTP 408.
    Time,
    /// The server's own capacity, whoever asks: the connection or session table is full.
    /// HTTP 503, code `-32603` (the client did nothing wrong and may retry later).
    Capacity,
}

/// Whose rules set the HTTP status of an error.
///
/// Stdio has no status; an HTTP response is either refused by the transport before any
/// protocol era applies, or is a JSON-RPC answer under one of the two eras' rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Era {
    /// No era yet: the HTTP layer refuses the request before it becomes a JSON-RPC exchange (a
    /// body the engine cannot decode, a missing or unknown session, a full table, no stream
    /// seat, a body read too slowly). The status says what went wrong.
    Transport,
    /// A JSON-RPC answer in a legacy Streamable HTTP session (2025-03-26 to 2025-11-25). Errors
    /// travel with 200, because a legacy client reads 404 as "session gone" and other 4xx as a
    /// transport failure; only an unparsable message (`-32700`) is 400.
    Legacy,
    /// A JSON-RPC answer on the 2026-07-28 wire, whose statuses say what failed
    /// (VERSIONS.md §5c): 400 for request faults, 404 for an unknown method, 503 when shutting
    /// down, 200 for the application's errors.
    Modern,
}

/// The JSON-RPC and MCP error codes this engine emits, mapped to their numbers in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `-32700`: the frame is not JSON.
    ParseError,
    /// `-32600`: JSON, but not a valid JSON-RPC request, or over a bound.
    InvalidRequest,
    /// `-32601`: unknown method, or one the request's protocol version does not have.
    MethodNotFound,
    /// `-32602`: bad parameters.
    InvalidParams,
    /// `-32603`: the server failed; the message never carries private detail.
    InternalError,
    /// `-32002`: resource not found (legacy versions).
    ResourceNotFound,
    /// `-32001`: unknown or expired legacy session, what the reference SDKs answer one with
    /// (HTTP 404, which tells a legacy client to initialize again).
    SessionNotFound,
    /// `-32020`: an HTTP header disagrees with the body (2026-07-28).
    HeaderMismatch,
    /// `-32021`: the request lacks a client capability the call needs (2026-07-28).
    MissingClientCapability,
    /// `-32022`: unsupported protocol version (2026-07-28).
    UnsupportedProtocolVersion,
    /// `-32023`: the caller's token lacks a scope the request needs (this engine's code; over
    /// HTTP the status is 403 with the step-up challenge, see [`Blame::Scope`]).
    InsufficientScope,
    /// Any other code, such as an application's own public error.
    Other(i64),
}

impl ErrorCode {
    /// The wire number.
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::ResourceNotFound => -32002,
            ErrorCode::SessionNotFound => -32001,
            ErrorCode::HeaderMismatch => -32020,
            ErrorCode::MissingClientCapability => -32021,
            ErrorCode::UnsupportedProtocolVersion => -32022,
            ErrorCode::InsufficientScope => -32023,
            ErrorCode::Other(c) => c,
        }
    }
}

impl Blame {
    /// Every blame, in a fixed order: the shared replay ledger encodes a blame as its index
    /// here (`engine/state/messages.rs`), so new blames go at the end and none is ever reordered.
    pub(crate) const ALL: [Blame; 11] = [
        Blame::Malformed,
        Blame::Misbehaving,
        Blame::Incompatible,
        Blame::Limit(Bound::Size),
        Blame::Limit(Bound::Share),
        Blame::Limit(Bound::Time),
        Blame::Limit(Bound::Capacity),
        Blame::Application,
        Blame::Misuse,
        Blame::ShuttingDown,
        Blame::Scope,
    ];

    /// The JSON-RPC code an error of this blame gets when nothing more specific applies:
    /// `-32600` for what the peer did (malformed, misbehaving, incompatible, a bound it
    /// crossed), `-32603` for what the server did or cannot do (its capacity, the application,
    /// misuse, shutting down).
    pub fn default_code(self) -> ErrorCode {
        match self {
            Blame::Malformed | Blame::Misbehaving | Blame::Incompatible => ErrorCode::InvalidRequest,
            Blame::Limit(Bound::Capacity) => ErrorCode::InternalError,
            Blame::Limit(_) => ErrorCode::InvalidRequest,
            Blame::Application | Blame::Misuse | Blame::ShuttingDown => ErrorCode::InternalError,
            Blame::Scope => ErrorCode::InsufficientScope,
        }
    }

    /// The HTTP status of an error of this blame with JSON-RPC `code`, under `era`'s rules.
    /// The one table every HTTP error status comes from:
    ///
    /// | blame | [`Era::Transport`] | [`Era::Legacy`] | [`Era::Modern`] |
    /// |---|---|---|---|
    /// | `Malformed` | 400 | 400 for `-32700`, else 200 | 400 |
    /// | `Misbehaving` | 404 for `-32001` (unknown session), else 400 | 200 | 400 |
    /// | `Incompatible` | 406 | 200 | 404 for `-32601`, else 400 |
    /// | `Limit(Size)` | 413 | 200 | 400 |
    /// | `Limit(Share)` | 429 | 200 | 400 |
    /// | `Limit(Time)` | 408 | 200 | 408 |
    /// | `Limit(Capacity)` | 503 | 200 | 503 |
    /// | `Application` | 403 (a gate refused the request) | 200 | 200 |
    /// | `Misuse` | 500 | 200 | 200 |
    /// | `ShuttingDown` | 503 | 200 | 503 |
    /// | `Scope` | 403 | 403 | 403 |
    ///
    /// A JSON-RPC-level bound on 2026-07-28 is a `-32600` bad request like any other (400); a
    /// server failure there travels in the body with 200, the usual choice the spec leaves open.
    pub fn http_status(self, code: ErrorCode, era: Era) -> u16 {
        if self == Blame::Scope {
            // The step-up challenge is an HTTP answer in every era (RFC 6750 §3.1).
            return 403;
        }
        match era {
            Era::Legacy if self == Blame::Malformed && code == ErrorCode::ParseError => 400,
            Era::Legacy => 200,
            Era::Modern => match self {
                Blame::Malformed | Blame::Misbehaving => 400,
                Blame::Incompatible if code == ErrorCode::MethodNotFound => 404,
                Blame::Incompatible => 400,
                Blame::Limit(Bound::Size | Bound::Share) => 400,
                Blame::Limit(Bound::Time) => 408,
                Blame::Limit(Bound::Capacity) | Blame::ShuttingDown => 503,
                Blame::Application | Blame::Misuse => 200,
                Blame::Scope => 403,
            },
            Era::Transport => match self {
                Blame::Malformed => 400,
                Blame::Misbehaving if code == ErrorCode::SessionNotFound => 404,
                Blame::Misbehaving => 400,
                Blame::Incompatible => 406,
                Blame::Limit(Bound::Size) => 413,
                Blame::Limit(Bound::Share) => 429,
                Blame::Limit(Bound::Time) => 408,
                Blame::Limit(Bound::Capacity) | Blame::ShuttingDown => 503,
                Blame::Application | Blame::Scope => 403,
                Blame::Misuse => 500,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every blame in every era, with the blame's default code: the table in the docs.
    #[test]
    fn status_table() {
        let expect: [(Blame, [u16; 3]); 11] = [
            (Blame::Malformed, [400, 200, 400]),
            (Blame::Misbehaving, [400, 200, 400]),
            (Blame::Incompatible, [406, 200, 400]),
            (Blame::Limit(Bound::Size), [413, 200, 400]),
            (Blame::Limit(Bound::Share), [429, 200, 400]),
            (Blame::Limit(Bound::Time), [408, 200, 408]),
            (Blame::Limit(Bound::Capacity), [503, 200, 503]),
            (Blame::Application, [403, 200, 200]),
            (Blame::Misuse, [500, 200, 200]),
            (Blame::ShuttingDown, [503, 200, 503]),
            (Blame::Scope, [403, 403, 403]),
        ];
        assert_eq!(expect.map(|(b, _)| b), Blame::ALL);
        for (blame, statuses) in expect {
            let code = blame.default_code();
            for (era, status) in [Era::Transport, Era::Legacy, Era::Modern].into_iter().zip(statuses) {
                assert_eq!(blame.http_status(code, era), status, "{blame:?} {era:?}");
            }
        }
    }

    /// The codes that refine a blame's status: an unparsable message on a legacy session, an
    /// unknown session at the transport, an unknown method on 2026-07-28.
    #[test]
    fn codes_that_refine_a_status() {
        assert_eq!(Blame::Malformed.http_status(ErrorCode::ParseError, Era::Legacy), 400);
        assert_eq!(Blame::Misbehaving.http_status(ErrorCode::SessionNotFound, Era::Transport), 404);
        assert_eq!(Blame::Misbehaving.http_status(ErrorCode::SessionNotFound, Era::Legacy), 200);
        assert_eq!(Blame::Incompatible.http_status(ErrorCode::MethodNotFound, Era::Modern), 404);
        assert_eq!(Blame::Incompatible.http_status(ErrorCode::MethodNotFound, Era::Legacy), 200);
        for code in [ErrorCode::UnsupportedProtocolVersion, ErrorCode::MissingClientCapability] {
            assert_eq!(Blame::Incompatible.http_status(code, Era::Modern), 400, "{code:?}");
        }
        // An application's code never turns its error into a request fault.
        for code in [ErrorCode::InvalidParams, ErrorCode::MethodNotFound, ErrorCode::Other(-32001)] {
            assert_eq!(Blame::Application.http_status(code, Era::Modern), 200, "{code:?}");
        }
    }

    #[test]
    fn default_codes() {
        let server_side =
            [Blame::Limit(Bound::Capacity), Blame::Application, Blame::Misuse, Blame::ShuttingDown];
        for blame in Blame::ALL {
            let want = if blame == Blame::Scope {
                ErrorCode::InsufficientScope
            } else if server_side.contains(&blame) {
                ErrorCode::InternalError
            } else {
                ErrorCode::InvalidRequest
            };
            assert_eq!(blame.default_code(), want, "{blame:?}");
        }
    }
}

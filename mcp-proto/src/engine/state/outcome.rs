//! What a shared replay ledger holds for a state ([`SharedOutcome`]), and its encoding for a
//! backend: the data the local ledger and the replica wing both speak, so neither imports the
//! other for it.

use crate::blame::Blame;
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

const CODES: [ErrorCode; 10] = [
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
];

fn code_byte(code: ErrorCode) -> Option<u8> {
    CODES.iter().position(|c| *c == code).and_then(|i| u8::try_from(i).ok())
}

fn byte_code(b: u8) -> Option<ErrorCode> {
    CODES.get(usize::from(b)).copied()
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

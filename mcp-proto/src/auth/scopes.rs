//! Scopes: what a token grants and what an operation needs.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

/// The most scopes read from one token: 256. A token granting more is refused as malformed
/// ([`token::TokenError::Malformed`](super::token::TokenError::Malformed)), so that a token
/// cannot make every scope check walk a huge set.
pub const MAX_SCOPES: usize = 256;

/// The longest scope token, in bytes: 256.
const MAX_SCOPE_LEN: usize = 256;

/// Why a string is not a scope token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeError {
    /// Empty, longer than 256 bytes, or with a byte RFC 6749 §3.3 does not allow (a space, a
    /// quote, a backslash, a control).
    Invalid(String),
    /// More than [`MAX_SCOPES`].
    TooMany,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(s) => write!(f, "{s:?} is not a scope token (RFC 6749 §3.3)"),
            Self::TooMany => write!(f, "more than {MAX_SCOPES} scopes"),
        }
    }
}

impl std::error::Error for ScopeError {}

/// Checks one scope token: 1 to 256 bytes of `%x21 / %x23-5B / %x5D-7E`, so that it can stand
/// in a space-separated list and in a quoted challenge without escaping.
pub(super) fn check_scope(scope: &str) -> Result<(), ScopeError> {
    let ok = !scope.is_empty()
        && scope.len() <= MAX_SCOPE_LEN
        && scope.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ScopeError::Invalid(scope.chars().take(64).collect()))
    }
}

/// A set of scopes, in a stable (sorted) order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes(BTreeSet<String>);

impl Scopes {
    /// No scope.
    pub fn new() -> Self {
        Self::default()
    }

    /// The scopes of a space-separated list (the `scope` claim of RFC 9068 §2.2.3, or of an
    /// introspection answer).
    pub fn parse(list: &str) -> Result<Self, ScopeError> {
        Self::from_iter_checked(list.split(' ').filter(|s| !s.is_empty()))
    }

    /// The scopes of a token's claims: `scope` (a space-separated string), or else `scp` (an
    /// array of strings, or a string, as some servers issue it). Neither: no scope.
    pub fn from_claim(scope: Option<&Value>, scp: Option<&Value>) -> Result<Self, ScopeError> {
        match (scope, scp) {
            (Some(Value::String(s)), _) => Self::parse(s),
            (Some(_), _) => Err(ScopeError::Invalid("scope claim that is not a string".into())),
            (None, Some(Value::Array(items))) => {
                if items.len() > MAX_SCOPES {
                    return Err(ScopeError::TooMany);
                }
                let strings: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
                let strings =
                    strings.ok_or_else(|| ScopeError::Invalid("scp item that is not a string".into()))?;
                Self::from_iter_checked(strings)
            }
            (None, Some(Value::String(s))) => Self::parse(s),
            (None, Some(_)) => {
                Err(ScopeError::Invalid("scp claim that is neither a string nor an array".into()))
            }
            (None, None) => Ok(Self::new()),
        }
    }

    /// These scopes, each checked.
    pub fn from_iter_checked<'a>(scopes: impl IntoIterator<Item = &'a str>) -> Result<Self, ScopeError> {
        let mut set = BTreeSet::new();
        for s in scopes {
            check_scope(s)?;
            set.insert(s.to_owned());
            if set.len() > MAX_SCOPES {
                return Err(ScopeError::TooMany);
            }
        }
        Ok(Self(set))
    }

    /// Whether `scope` is granted.
    pub fn contains(&self, scope: &str) -> bool {
        self.0.contains(scope)
    }

    /// Whether every scope of `needed` is granted.
    pub fn covers<'a>(&self, needed: impl IntoIterator<Item = &'a str>) -> bool {
        needed.into_iter().all(|s| self.contains(s))
    }

    /// The scopes, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What to ask for when an operation needing `needed` finds only these granted: `None` when
    /// they cover it, else every scope the operation needs (not only the missing ones, so the
    /// token the client obtains next is enough for it at once, SEP-2350), followed by those
    /// granted already, so that stepping up loses nothing the client holds. `offline_access`
    /// is never asked for.
    pub fn step_up<'a>(&self, needed: impl IntoIterator<Item = &'a str>) -> Option<Vec<String>> {
        let needed: Vec<&str> = needed.into_iter().collect();
        if self.covers(needed.iter().copied()) {
            return None;
        }
        let mut ask: Vec<String> = Vec::new();
        for s in needed.into_iter().chain(self.iter()) {
            if s != "offline_access" && !ask.iter().any(|a| a == s) {
                ask.push(s.to_owned());
            }
        }
        Some(ask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let s = Scopes::from_claim(Some(&json!("b a  a")), None).unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), ["a", "b"]);
        let s = Scopes::from_claim(None, Some(&json!(["x", "y"]))).unwrap();
        assert!(s.contains("x") && s.covers(["x", "y"]) && !s.covers(["x", "z"]));
        assert!(Scopes::from_claim(None, None).unwrap().is_empty());
        assert!(Scopes::from_claim(Some(&json!(["a"])), None).is_err());
        assert!(Scopes::from_claim(None, Some(&json!([1]))).is_err());
        assert!(Scopes::parse("a \"b\"").is_err());
        let many: Vec<String> = (0..=MAX_SCOPES).map(|i| format!("s{i}")).collect();
        assert_eq!(Scopes::parse(&many.join(" ")), Err(ScopeError::TooMany));
        assert_eq!(Scopes::from_claim(None, Some(&json!(many))), Err(ScopeError::TooMany));
    }

    #[test]
    fn step_up_asks_for_everything_needed_and_keeps_what_is_held() {
        let held = Scopes::parse("read offline_access").unwrap();
        assert_eq!(held.step_up(["read"]), None);
        assert_eq!(held.step_up(["write", "admin", "read"]).unwrap(), ["write", "admin", "read"]);
        assert_eq!(
            held.step_up(["write"]).unwrap(),
            ["write", "read"],
            "held scopes follow, offline_access never"
        );
    }
}

//! The access token of a request: from its `Authorization` header, and nowhere else.
//!
//! The MCP specification requires the header (a token in the URI query is refused, RFC 6750
//! §2.3 being exactly what it forbids), and the token is a `token68` (RFC 7235 §2.1). What is
//! read here is bounded before anything else looks at it.

use super::challenge::Denial;

/// The longest `Authorization` header value read, in bytes: 16 KiB, room for a JWT carrying
/// many claims. A longer one is refused with `400 invalid_request` before it is parsed.
pub const MAX_AUTHORIZATION: usize = 16 * 1024;

/// How the token is presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `Authorization: Bearer` (RFC 6750).
    Bearer,
    /// `Authorization: DPoP` (RFC 9449 §7.1): the token is bound to a key, and the request
    /// carries a `DPoP` proof.
    Dpop,
}

/// The token a request presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credential<'a> {
    /// How.
    pub scheme: Scheme,
    /// The token itself. Never log it, echo it or forward it.
    pub token: &'a str,
}

/// The credential of a request whose `Authorization` header values are `values` (in the order
/// they came; usually zero or one), and whose URI query is `query`.
///
/// - no header: `Ok(None)` (the request is anonymous; a protected endpoint answers
///   [`Denial::Missing`]);
/// - a scheme other than `Bearer` or `DPoP`: [`Denial::Missing`] too (it presents no token
///   this resource takes; the challenge says which scheme to use);
/// - a token in the query (`access_token=`), two `Authorization` headers, a value over
///   [`MAX_AUTHORIZATION`], or a token that is not a `token68`: [`Denial::InvalidRequest`].
///
/// ```
/// use mcp_proto::auth::credentials::{credential, Scheme};
/// let c = credential(&[b"Bearer eyJ.abc-_.x"], None).unwrap().unwrap();
/// assert_eq!((c.scheme, c.token), (Scheme::Bearer, "eyJ.abc-_.x"));
/// assert!(credential(&[], Some("access_token=abc")).is_err());
/// ```
pub fn credential<'a>(values: &[&'a [u8]], query: Option<&str>) -> Result<Option<Credential<'a>>, Denial> {
    if query.is_some_and(names_access_token) {
        return Err(Denial::InvalidRequest("an access token is accepted only in the Authorization header"));
    }
    let value = match values {
        [] => return Ok(None),
        [one] => *one,
        _ => return Err(Denial::InvalidRequest("more than one Authorization header")),
    };
    if value.len() > MAX_AUTHORIZATION {
        return Err(Denial::InvalidRequest("the Authorization header is too long"));
    }
    let value = std::str::from_utf8(value)
        .map_err(|_| Denial::InvalidRequest("the Authorization header is not ASCII"))?
        .trim_matches([' ', '\t']);
    let (scheme, token) = value.split_once([' ', '\t']).unwrap_or((value, ""));
    let scheme = if scheme.eq_ignore_ascii_case("bearer") {
        Scheme::Bearer
    } else if scheme.eq_ignore_ascii_case("dpop") {
        Scheme::Dpop
    } else {
        return Err(Denial::Missing);
    };
    let token = token.trim_start_matches([' ', '\t']);
    if !is_token68(token) {
        return Err(Denial::InvalidRequest("the access token is not a token68"));
    }
    Ok(Some(Credential { scheme, token }))
}

/// `token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_token68(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    // A pattern the compiler turns into range checks: every request with a token runs this
    // over its ~1 KB (a search of a punctuation list per byte cost ~3 us).
    !body.is_empty()
        && body.bytes().all(|b| {
            matches!(b, b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
        })
}

/// Whether a URI query carries an `access_token` parameter (RFC 6750 §2.3), however it is
/// cased or encoded in its name's letters.
fn names_access_token(query: &str) -> bool {
    query.split('&').any(|pair| {
        let name = pair.split('=').next().unwrap_or_default();
        decode_name(name).is_some_and(|n| n.eq_ignore_ascii_case("access_token"))
    })
}

/// A query parameter name with its `%XX` escapes decoded; `None` when it is not valid UTF-8
/// once decoded or is longer than a name worth comparing.
fn decode_name(name: &str) -> Option<String> {
    if name.len() > 64 {
        return None;
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(v) => {
                    out.push(v);
                    i += 3;
                    continue;
                }
                None => out.push(b),
            }
        } else {
            out.push(b);
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_from_one_well_formed_header() {
        let c = credential(&[b"bearer  abc.def=="], None).unwrap().unwrap();
        assert_eq!((c.scheme, c.token), (Scheme::Bearer, "abc.def=="));
        let c = credential(&[b"DPoP abc"], Some("x=1")).unwrap().unwrap();
        assert_eq!(c.scheme, Scheme::Dpop);
        assert_eq!(credential(&[], None), Ok(None));
        assert_eq!(credential(&[b"Basic dXNlcjpwYXNz"], None), Err(Denial::Missing));
        let malformed: [&[u8]; 5] = [b"Bearer", b"Bearer ", b"Bearer a b", b"Bearer a\"b", b"Bearer \xff"];
        for value in malformed {
            assert!(matches!(credential(&[value], None), Err(Denial::InvalidRequest(_))), "{value:?}");
        }
        assert!(matches!(credential(&[b"Bearer a", b"Bearer b"], None), Err(Denial::InvalidRequest(_))));
    }

    #[test]
    fn a_huge_header_is_refused_unread() {
        let mut huge = b"Bearer ".to_vec();
        huge.resize(8 << 20, b'a');
        assert_eq!(
            credential(&[&huge], None),
            Err(Denial::InvalidRequest("the Authorization header is too long"))
        );
        let mut fits = b"Bearer ".to_vec();
        fits.resize(MAX_AUTHORIZATION, b'a');
        assert!(credential(&[&fits], None).unwrap().is_some());
    }

    #[test]
    fn a_token_in_the_query_is_refused_however_it_is_spelled() {
        for query in ["access_token=abc", "a=1&ACCESS_TOKEN=x", "access%5Ftoken=x", "%61ccess_token"] {
            assert!(
                matches!(credential(&[b"Bearer ok"], Some(query)), Err(Denial::InvalidRequest(_))),
                "{query}"
            );
        }
        for query in ["token=abc", "access_tokens=1", "x=access_token", "%zz=1", ""] {
            assert!(credential(&[], Some(query)).is_ok(), "{query}");
        }
    }
}

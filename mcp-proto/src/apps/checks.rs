//! The text checks an app's declaration passes at registration: its `ui://` URI and the
//! origins its content-security policy lists.
//!
//! Only syntax: the engine never resolves a name or fetches anything. Kept apart from the
//! declarations in `mod.rs` so those read as data; this file takes nothing from them.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::registry_error::AppError;

/// Whether `uri` may name an app: `ui://`, an authority without userinfo, no query or
/// fragment, and only characters a URI may hold (RFC 3986: ASCII, no space, no `"<>\^`{|}`,
/// `%` only before two hex digits).
pub fn check_ui_uri(uri: &str) -> Result<(), AppError> {
    let bad = |reason| Err(AppError::Uri { uri: uri.to_owned(), reason });
    let Some(rest) = uri.strip_prefix("ui://") else { return bad("must start with \"ui://\"") };
    let b = uri.as_bytes();
    for (i, c) in b.iter().enumerate() {
        let ok = c.is_ascii_graphic() && !b"\"<>\\^`{|}".contains(c);
        if !ok {
            return bad(
                "holds a character a URI cannot (non-ASCII, a space, a control or one of \"<>\\^`{|})",
            );
        }
        if *c == b'%' {
            let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return bad("'%' must start a percent-encoding of two hex digits");
            }
        }
    }
    if uri.contains('?') {
        return bad("must not have a query");
    }
    if uri.contains('#') {
        return bad("must not have a fragment");
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return bad("needs an authority (ui://name/...)");
    }
    if authority.contains('@') {
        return bad("must not carry credentials (userinfo)");
    }
    Ok(())
}

/// Whether `entry` is an origin a CSP list allows (see [`AppCsp`](super::AppCsp)); the reason
/// when not.
pub(super) fn check_origin(entry: &str, websockets: bool) -> Result<(), &'static str> {
    if entry == "*" {
        return Err("a bare wildcard allows every origin; name the origins");
    }
    if entry.starts_with('\'') {
        return Err("a CSP keyword ('self', 'none', ...) is not an origin");
    }
    let rest = ["https://", "http://"]
        .into_iter()
        .chain(if websockets { ["wss://", "ws://"].as_slice() } else { [].as_slice() }.iter().copied())
        .find_map(|s| entry.strip_prefix(s));
    let Some(rest) = rest else {
        return Err(if websockets {
            "must be an http(s) or ws(s) origin, such as https://api.example.com"
        } else {
            "must be an http(s) origin, such as https://cdn.example.com"
        });
    };
    if rest.contains('@') {
        return Err("must not carry credentials");
    }
    if rest.contains(['/', '?', '#']) {
        return Err("must be an origin without a path, query or fragment");
    }
    // The host, and the port after the last ':' outside an IPv6 literal's brackets.
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else { return Err("an IPv6 address needs its ']'") };
        if addr.parse::<Ipv6Addr>().is_err() {
            return Err("not a valid IPv6 address");
        }
        match after {
            "" => (None, None),
            p => match p.strip_prefix(':') {
                Some(p) => (None, Some(p)),
                None => return Err("only a port may follow the host"),
            },
        }
    } else {
        match rest.rsplit_once(':') {
            Some((h, p)) => (Some(h), Some(p)),
            None => (Some(rest), None),
        }
    };
    if let Some(p) = port {
        let valid = !p.is_empty() && p.len() <= 5 && p.bytes().all(|c| c.is_ascii_digit());
        if !valid || !p.parse::<u32>().is_ok_and(|n| (1..=65_535).contains(&n)) {
            return Err("the port must be a number from 1 to 65535");
        }
    }
    if let Some(host) = host {
        let (wild, name) = match host.strip_prefix("*.") {
            Some(n) => (true, n),
            None => (false, host),
        };
        if name.contains('*') {
            return Err("a wildcard may only be a leading \"*.\" subdomain");
        }
        if !valid_host(name, wild) {
            return Err("not a valid host name or IPv4 address");
        }
    }
    Ok(())
}

/// A DNS name (labels of letters, digits and inner hyphens, each 1 to 63 bytes, 253 in all), or
/// (without a wildcard) an IPv4 address. A name whose last label is all digits must be an IPv4
/// address: no top-level domain is numeric.
fn valid_host(name: &str, wildcard: bool) -> bool {
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let last_numeric =
        name.rsplit('.').next().is_some_and(|l| !l.is_empty() && l.bytes().all(|c| c.is_ascii_digit()));
    if last_numeric {
        return !wildcard && name.parse::<Ipv4Addr>().is_ok();
    }
    name.split('.').all(|l| {
        let b = l.as_bytes();
        (1..=63).contains(&b.len())
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
            && b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ui_uris() {
        for ok in ["ui://a", "ui://weather/dashboard", "ui://x.example:8/p/q%20r", "ui://a/b/"] {
            assert_eq!(check_ui_uri(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("https://a", "ui://"),
            ("UI://a", "ui://"),
            ("ui:/a", "ui://"),
            ("ui://", "authority"),
            ("ui:///path", "authority"),
            ("ui://user:pw@a/x", "credentials"),
            ("ui://a/x?q=1", "query"),
            ("ui://a/x#f", "fragment"),
            ("ui://a/x y", "character"),
            ("ui://a/ü", "character"),
            ("ui://a/x%2", "percent"),
            ("ui://a/x%zz", "percent"),
            ("ui://a/{x}", "character"),
        ] {
            let e = check_ui_uri(bad).unwrap_err();
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }
}

//! Unit tests of the Streamable HTTP rules.

use serde_json::Value;

use super::head::split_target;
#[cfg(feature = "exact-json")]
use super::headers::header_integer;
use super::*;
use serde_json::json;

type Headers = Vec<(&'static str, &'static [u8])>;

fn post_headers() -> Headers {
    vec![
        ("Host", b"localhost:3000"),
        ("Content-Type", b"application/json"),
        ("Accept", b"application/json, text/event-stream"),
    ]
}

fn run(method: &str, path: &str, headers: &[(&str, &[u8])]) -> Result<(), u16> {
    let head = RequestHead { method, path, headers };
    check_head(&HttpConfig::default(), &Limits::default(), &head).map(|_| ()).map_err(|r| r.status)
}

fn with(mut base: Headers, name: &'static str, value: &'static [u8]) -> Headers {
    base.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    base.push((name, value));
    base
}

fn without(mut base: Headers, name: &str) -> Headers {
    base.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    base
}

#[test]
fn defaults() {
    let cfg = HttpConfig::default();
    assert_eq!(cfg.endpoint_path(), "/mcp");
    assert_eq!(cfg.allowed_hosts(), ["localhost", "127.0.0.1", "[::1]"]);
    assert!(cfg.allowed_origins().is_empty());
    assert!(cfg.is_loopback_only());
    assert!(cfg.is_keep_alive());
    let limits = Limits::default();
    assert_eq!(limits.head_bytes(), 8192);
    assert_eq!(limits.frame_bytes(), 2 * 1024 * 1024);
}

#[test]
fn a_good_post_routes_with_its_headers() {
    let mut h = post_headers();
    h.push(("mcp-session-id", b" abc-123 "));
    h.push(("MCP-PROTOCOL-VERSION", b"2025-11-25"));
    let head = RequestHead { method: "POST", path: "/mcp", headers: &h };
    let route = check_head(&HttpConfig::default(), &Limits::default(), &head).unwrap();
    assert_eq!(
        route,
        Route::Post {
            headers: RouteHeaders { session_id: Some("abc-123"), protocol_version: Some("2025-11-25") },
            accepts: Accepts { json: true, sse: true, prefers_sse: false },
        }
    );
    assert_eq!(route.headers().session_id, Some("abc-123"));
}

#[test]
fn head_size_431_comes_first() {
    let big: &'static [u8] = Box::leak(vec![b'a'; 9000].into_boxed_slice());
    let h = with(post_headers(), "X-Big", big);
    assert_eq!(run("POST", "/elsewhere", &h), Err(431));
    let mut limits = Limits::default();
    limits.max_head_bytes(20_000);
    let head = RequestHead { method: "POST", path: "/mcp", headers: &h };
    assert!(check_head(&HttpConfig::default(), &limits, &head).is_ok());
    let exact = RequestHead { method: "GET", path: "/", headers: &[("a", b"b")] };
    assert_eq!(exact.encoded_len(), "GET / HTTP/1.1\r\na: b\r\n\r\n".len());
}

#[test]
fn other_paths_404_without_a_body() {
    for path in ["/", "/mcp/", "/MCP", "/mcpx", "/api/mcp"] {
        assert_eq!(run("POST", path, &post_headers()), Err(404), "{path}");
    }
    assert_eq!(run("POST", "/mcp?session=1", &post_headers()), Ok(()));
    let refusal = check_head(
        &HttpConfig::default(),
        &Limits::default(),
        &RequestHead { method: "POST", path: "/x", headers: &post_headers() },
    )
    .unwrap_err();
    assert_eq!(refusal.body(), None);
    let mut cfg = HttpConfig::default();
    cfg.endpoint("/v1/rpc");
    let head = RequestHead { method: "POST", path: "/v1/rpc", headers: &post_headers() };
    assert!(check_head(&cfg, &Limits::default(), &head).is_ok());
}

#[test]
fn host_rules() {
    let ok: [&'static [u8]; 9] = [
        b"localhost",
        b"localhost:3000",
        b"LOCALHOST:1",
        b"127.0.0.1",
        b"127.0.0.1:65535",
        b"[::1]",
        b"[::1]:8080",
        b"[0:0:0:0:0:0:0:1]:8080",
        b" localhost:80 ",
    ];
    for host in ok {
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "Host", host)), Ok(()), "{host:?}");
    }
    let foreign: [&'static [u8]; 6] =
        [b"evil.example.com", b"evil.example.com:3000", b"localhost.", b"127.0.0.2", b"[::2]", b"0.0.0.0:80"];
    for host in foreign {
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "Host", host)), Err(403), "{host:?}");
    }
    let malformed: [&'static [u8]; 9] = [
        b"",
        b"localhost:",
        b"localhost:99999",
        b"localhost:80:80",
        b"::1",
        b"[::1",
        b"[::1]x",
        b"user@localhost",
        b"local\xffhost",
    ];
    for host in malformed {
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "Host", host)), Err(400), "{host:?}");
    }
    assert_eq!(run("POST", "/mcp", &without(post_headers(), "host")), Err(400));
    let mut twice = post_headers();
    twice.push(("host", b"localhost"));
    assert_eq!(run("POST", "/mcp", &twice), Err(400));
}

#[test]
fn configured_hosts() {
    let mut cfg = HttpConfig::default();
    cfg.clear_allowed_hosts().allow_host("mcp.example.com:443").allow_host("Api.Example.com:*");
    let check = |host: &'static [u8]| {
        let h = with(post_headers(), "Host", host);
        check_head(&cfg, &Limits::default(), &RequestHead { method: "POST", path: "/mcp", headers: &h })
            .map(|_| ())
            .map_err(|r| r.status)
    };
    assert_eq!(check(b"mcp.example.com:443"), Ok(()));
    assert_eq!(check(b"mcp.example.com"), Err(403));
    assert_eq!(check(b"mcp.example.com:8443"), Err(403));
    assert_eq!(check(b"api.example.com:1"), Ok(()));
    assert_eq!(check(b"localhost"), Err(403));
}

#[test]
fn origin_rules() {
    let base = with(post_headers(), "Host", b"localhost:3000");
    // Absent: any non-browser client.
    assert_eq!(run("POST", "/mcp", &base), Ok(()));
    for same in [&b"http://localhost:3000"[..], b"https://LOCALHOST:3000", b" http://localhost:3000 "] {
        assert_eq!(run("POST", "/mcp", &with(base.clone(), "Origin", same)), Ok(()), "{same:?}");
    }
    let foreign: [&'static [u8]; 9] = [
        b"http://evil.example.com",
        b"http://localhost:3001",
        b"http://localhost",
        b"http://127.0.0.1:3000",
        b"null",
        b"http://localhost:3000/",
        b"localhost:3000",
        b"",
        b"http://localhost:3000\xff",
    ];
    for origin in foreign {
        assert_eq!(run("POST", "/mcp", &with(base.clone(), "Origin", origin)), Err(403), "{origin:?}");
    }
    let mut twice = with(base.clone(), "Origin", b"http://localhost:3000");
    twice.push(("origin", b"http://localhost:3000"));
    assert_eq!(run("POST", "/mcp", &twice), Err(403));

    // Default ports line up with a Host that has none.
    let bare = with(post_headers(), "Host", b"localhost");
    for same in [&b"http://localhost"[..], b"http://localhost:80", b"https://localhost:443"] {
        assert_eq!(run("POST", "/mcp", &with(bare.clone(), "Origin", same)), Ok(()), "{same:?}");
    }
    assert_eq!(run("POST", "/mcp", &with(bare.clone(), "Origin", b"http://localhost:8080")), Err(403));
    let v6 = with(post_headers(), "Host", b"[::1]:9");
    assert_eq!(run("POST", "/mcp", &with(v6.clone(), "Origin", b"http://[::1]:9")), Ok(()));
    assert_eq!(run("POST", "/mcp", &with(v6, "Origin", b"http://[::2]:9")), Err(403));

    // The conformance probe: foreign Host and Origin, then the same request done right.
    let evil = with(with(post_headers(), "Host", b"evil.example.com"), "Origin", b"http://evil.example.com");
    assert_eq!(run("POST", "/mcp", &evil), Err(403));
    let good = with(with(post_headers(), "Host", b"127.0.0.1:5555"), "Origin", b"http://127.0.0.1:5555");
    assert_eq!(run("POST", "/mcp", &good), Ok(()));
}

#[test]
fn allow_listed_origins() {
    let mut cfg = HttpConfig::default();
    cfg.allow_origin("https://app.example.com").allow_origin("http://localhost:*").allow_origin("null");
    let check = |origin: &'static [u8]| {
        let h = with(post_headers(), "Origin", origin);
        check_head(&cfg, &Limits::default(), &RequestHead { method: "POST", path: "/mcp", headers: &h })
            .map(|_| ())
            .map_err(|r| r.status)
    };
    assert_eq!(check(b"https://app.example.com"), Ok(()));
    assert_eq!(check(b"https://APP.example.com:443"), Ok(()));
    assert_eq!(check(b"http://app.example.com"), Err(403));
    assert_eq!(check(b"https://app.example.com:8443"), Err(403));
    assert_eq!(check(b"http://localhost:6274"), Ok(()));
    assert_eq!(check(b"https://localhost:6274"), Err(403));
    assert_eq!(check(b"null"), Ok(()));
}

#[test]
fn methods_405_with_allow() {
    for method in ["PUT", "PATCH", "HEAD", "OPTIONS", "post", "CONNECT"] {
        let head = RequestHead { method, path: "/mcp", headers: &post_headers() };
        let refusal = check_head(&HttpConfig::default(), &Limits::default(), &head).unwrap_err();
        assert_eq!(refusal.status, 405, "{method}");
        assert_eq!(refusal.headers, vec![("Allow", "GET, POST, DELETE".to_owned())]);
        assert_eq!(
            String::from_utf8(refusal.body().unwrap()).unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"method not allowed"}}"#
        );
    }
    let delete = [("Host", &b"localhost"[..]), ("Mcp-Session-Id", b"s1")];
    let head = RequestHead { method: "DELETE", path: "/mcp", headers: &delete };
    assert_eq!(
        check_head(&HttpConfig::default(), &Limits::default(), &head).unwrap(),
        Route::Delete { headers: RouteHeaders { session_id: Some("s1"), protocol_version: None } }
    );
}

#[test]
fn content_type_415() {
    let ok: [&'static [u8]; 8] = [
        b"application/json",
        b"application/json; charset=\"ut\\f-8\"",
        b"Application/JSON",
        b"application/json; charset=utf-8",
        b"application/json;charset=\"UTF-8\"",
        b"application/json ; foo=bar;",
        b"application/vnd.example+json",
        b"application/json-rpc+json; charset=utf8",
    ];
    for ct in ok {
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "Content-Type", ct)), Ok(()), "{ct:?}");
    }
    let bad: [&'static [u8]; 11] = [
        b"text/plain",
        b"application/json; charset=\"utf-8\\\"",
        b"application/x-www-form-urlencoded",
        b"application/jsonx",
        b"application/+json",
        b"text/json",
        b"application/json; charset=latin1",
        b"application/json; charset",
        b"application",
        b"",
        b"application/json; q=\"unterminated",
    ];
    for ct in bad {
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "Content-Type", ct)), Err(415), "{ct:?}");
    }
    assert_eq!(run("POST", "/mcp", &without(post_headers(), "content-type")), Err(415));
    let mut twice = post_headers();
    twice.push(("content-type", b"application/json"));
    assert_eq!(run("POST", "/mcp", &twice), Err(400));
}

#[test]
fn accept_406_and_what_is_accepted() {
    let accepts = |accept: Option<&'static [u8]>| {
        let h = match accept {
            Some(a) => with(post_headers(), "Accept", a),
            None => without(post_headers(), "Accept"),
        };
        match check_head(
            &HttpConfig::default(),
            &Limits::default(),
            &RequestHead { method: "POST", path: "/mcp", headers: &h },
        ) {
            Ok(Route::Post { accepts, .. }) => Ok((accepts.json, accepts.sse)),
            Ok(other) => panic!("{other:?}"),
            Err(r) => Err(r.status),
        }
    };
    assert_eq!(accepts(None), Ok((true, true)));
    assert_eq!(accepts(Some(b"application/json, text/event-stream")), Ok((true, true)));
    assert_eq!(accepts(Some(b"application/json")), Ok((true, false)));
    assert_eq!(accepts(Some(b"text/event-stream")), Ok((false, true)));
    assert_eq!(accepts(Some(b"*/*")), Ok((true, true)));
    assert_eq!(accepts(Some(b"application/*;q=0.5")), Ok((true, false)));
    assert_eq!(accepts(Some(b"TEXT/*")), Ok((false, true)));
    assert_eq!(accepts(Some(b"text/html, application/json;q=1.0")), Ok((true, false)));
    assert_eq!(accepts(Some(b"text/html")), Err(406));
    assert_eq!(accepts(Some(b"application/xml, text/plain")), Err(406));
    assert_eq!(accepts(Some(b"application/json;q=0, text/event-stream;q=0.000")), Err(406));
    assert_eq!(accepts(Some(b"application/json;q=2")), Err(406));
    assert_eq!(accepts(Some(b"")), Err(406));
    assert_eq!(accepts(Some(b"application/json;x=\"a,b\", text/html")), Ok((true, false)));
    // An escaped quote does not end the string: the comma after it is still inside.
    assert_eq!(accepts(Some(b"text/html;x=\"a\\\",text/event-stream\"")), Err(406));
    assert_eq!(accepts(Some(b"text/html;x=\"a\\\\\",text/event-stream")), Ok((false, true)));
    assert_eq!(accepts(Some(b"application/json;q=\"0\", text/event-stream;q=\"0.\\5\"")), Ok((false, true)));
    // Repeated Accept headers combine.
    let mut two = without(post_headers(), "Accept");
    two.push(("accept", b"application/json"));
    two.push(("Accept", b"text/event-stream"));
    let head = RequestHead { method: "POST", path: "/mcp", headers: &two };
    assert!(matches!(
        check_head(&HttpConfig::default(), &Limits::default(), &head),
        Ok(Route::Post { accepts: Accepts { json: true, sse: true, prefers_sse: false }, .. })
    ));
}

#[test]
fn content_length_413_and_body_bound() {
    let mut limits = Limits::default();
    limits.max_frame_bytes(100);
    let check = |len: &'static [u8]| {
        let h = with(post_headers(), "Content-Length", len);
        check_head(
            &HttpConfig::default(),
            &limits,
            &RequestHead { method: "POST", path: "/mcp", headers: &h },
        )
        .map(|_| ())
        .map_err(|r| r.status)
    };
    assert_eq!(check(b"100"), Ok(()));
    assert_eq!(check(b"101"), Err(413));
    assert_eq!(check(b"99999999999999999999999"), Err(400));
    assert_eq!(check(b"12, 12"), Ok(()));
    assert_eq!(check(b"12, 13"), Err(400));
    assert_eq!(check(b"-1"), Err(400));
    assert_eq!(check(b""), Err(400));
    assert!(check_body_len(&limits, 100).is_ok());
    assert_eq!(check_body_len(&limits, 101).unwrap_err().status, 413);
}

#[test]
fn session_and_version_headers_400() {
    let long: &'static [u8] = Box::leak(vec![b'a'; 129].into_boxed_slice());
    let longest: &'static [u8] = Box::leak(vec![b'~'; 128].into_boxed_slice());
    assert_eq!(run("POST", "/mcp", &with(post_headers(), "Mcp-Session-Id", longest)), Ok(()));
    for bad in [long, b"", b"has space", b"tab\there", b"caf\xc3\xa9", b"nul\0"] {
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "Mcp-Session-Id", bad)), Err(400), "{bad:?}");
        assert_eq!(run("DELETE", "/mcp", &with(post_headers(), "Mcp-Session-Id", bad)), Err(400), "{bad:?}");
    }
    let mut twice = with(post_headers(), "Mcp-Session-Id", b"a");
    twice.push(("mcp-session-id", b"b"));
    assert_eq!(run("POST", "/mcp", &twice), Err(400));
    assert_eq!(run("POST", "/mcp", &with(post_headers(), "MCP-Protocol-Version", b"v999.0.0")), Ok(()));
    assert_eq!(run("POST", "/mcp", &with(post_headers(), "MCP-Protocol-Version", b"2025 06 18")), Err(400));
    assert_eq!(run("POST", "/mcp", &with(post_headers(), "MCP-Protocol-Version", b"  ")), Err(400));
    assert!(is_valid_session_id("0123-abcd"));
    assert!(!is_valid_session_id(""));
}

#[test]
fn get_needs_sse_and_carries_last_event_id() {
    let base: Headers = vec![("Host", b"localhost"), ("Accept", b"text/event-stream")];
    let head = RequestHead { method: "GET", path: "/mcp", headers: &base };
    assert_eq!(
        check_head(&HttpConfig::default(), &Limits::default(), &head).unwrap(),
        Route::Get {
            headers: RouteHeaders { session_id: None, protocol_version: None },
            last_event_id: None
        }
    );
    let resumed = with(base.clone(), "Last-Event-ID", b" 3-17 ");
    let head = RequestHead { method: "GET", path: "/mcp", headers: &resumed };
    assert!(matches!(
        check_head(&HttpConfig::default(), &Limits::default(), &head),
        Ok(Route::Get { last_event_id: Some("3-17"), .. })
    ));
    let empty = with(base.clone(), "Last-Event-ID", b"");
    let head = RequestHead { method: "GET", path: "/mcp", headers: &empty };
    assert!(matches!(
        check_head(&HttpConfig::default(), &Limits::default(), &head),
        Ok(Route::Get { last_event_id: None, .. })
    ));
    assert_eq!(run("GET", "/mcp", &with(base.clone(), "Last-Event-ID", b"a\x01b")), Err(400));
    assert_eq!(run("GET", "/mcp", &with(base.clone(), "Accept", b"*/*")), Ok(()));
    assert_eq!(run("GET", "/mcp", &with(base.clone(), "Accept", b"application/json")), Err(406));
    assert_eq!(run("GET", "/mcp", &without(base.clone(), "Accept")), Err(406));
    // GET needs no Content-Type.
    assert_eq!(run("GET", "/mcp", &base), Ok(()));
}

#[test]
fn refusal_bodies() {
    let head =
        RequestHead { method: "POST", path: "/mcp", headers: &without(post_headers(), "content-type") };
    let refusal = check_head(&HttpConfig::default(), &Limits::default(), &head).unwrap_err();
    assert_eq!(refusal.to_string(), "415 Content-Type must be application/json");
    let body: Value = serde_json::from_slice(&refusal.body().unwrap()).unwrap();
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["code"], -32600);
}

#[test]
fn peers() {
    let cfg = HttpConfig::default();
    assert!(check_peer(&cfg, "127.0.0.1".parse().unwrap()).is_ok());
    assert!(check_peer(&cfg, "127.8.9.10".parse().unwrap()).is_ok());
    assert!(check_peer(&cfg, "::1".parse().unwrap()).is_ok());
    assert!(check_peer(&cfg, "::ffff:127.0.0.1".parse().unwrap()).is_ok());
    assert_eq!(check_peer(&cfg, "192.168.1.2".parse().unwrap()).unwrap_err().status, 403);
    assert_eq!(check_peer(&cfg, "::ffff:10.0.0.1".parse().unwrap()).unwrap_err().status, 403);
    let mut open = HttpConfig::default();
    open.loopback_only(false);
    assert!(check_peer(&open, "192.168.1.2".parse().unwrap()).is_ok());
}

/// The statuses VERSIONS.md §5c gives 2026-07-28 errors, as the engine's errors carry them.
#[test]
fn modern_statuses_for_errors() {
    use crate::blame::Era;
    use crate::jsonrpc::{ErrorCode, RpcError};
    assert_eq!(RpcError::method_not_found("x").http_status(Era::Modern), 404);
    let faults = [
        RpcError::unparsable("x"),
        RpcError::malformed("x"),
        RpcError::invalid_params("x"),
        RpcError::incompatible(ErrorCode::MissingClientCapability, "x"),
        RpcError::incompatible(ErrorCode::UnsupportedProtocolVersion, "x"),
    ];
    for err in faults {
        assert_eq!(err.http_status(Era::Modern), 400, "{err:?}");
    }
    for err in [RpcError::internal(), RpcError::misuse(), RpcError::new(ErrorCode::Other(-32042), "x")] {
        assert_eq!(err.http_status(Era::Modern), 200, "{err:?}");
    }
}

#[test]
fn header_values_decode() {
    // CONTRACT.md §9.8 and the SEP-2243 examples.
    assert_eq!(decode_header_value(b"=?base64?SGVsbG8=?=").unwrap(), "Hello");
    assert_eq!(decode_header_value(b"=?base64?SGVsbG8?=").unwrap_err(), HeaderError::Base64);
    assert_eq!(decode_header_value(b"=?base64?SGVs!!!bG8=?=").unwrap_err(), HeaderError::Base64);
    assert_eq!(decode_header_value(b"=?base64?SGVsbG8==?=").unwrap_err(), HeaderError::Base64);
    assert_eq!(decode_header_value(b"=?base64?SGVs bG8=?=").unwrap_err(), HeaderError::Base64);
    assert_eq!(decode_header_value(b"=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(), "Hello, 世界");
    assert_eq!(decode_header_value(b"=?base64?IHBhZGRlZCA=?=").unwrap(), " padded ");
    assert_eq!(decode_header_value(b"=?base64?bGluZTEKbGluZTI=?=").unwrap(), "line1\nline2");
    assert_eq!(decode_header_value(b"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=").unwrap(), "=?base64?literal?=");
    assert_eq!(decode_header_value(b"=?base64??=").unwrap(), "");
    assert_eq!(decode_header_value(b"=?base64?/w==?=").unwrap_err(), HeaderError::Utf8);
    // Missing the prefix or the suffix: a literal.
    assert_eq!(decode_header_value(b"=?base64?SGVsbG8=").unwrap(), "=?base64?SGVsbG8=");
    assert_eq!(decode_header_value(b"SGVsbG8=?=").unwrap(), "SGVsbG8=?=");
    assert_eq!(decode_header_value(b"=?BASE64?SGVsbG8=?=").unwrap(), "=?BASE64?SGVsbG8=?=");
    assert_eq!(decode_header_value(b"=?base64?=").unwrap(), "=?base64?=");
    // Plain values: trimmed, printable ASCII only.
    assert_eq!(decode_header_value(b"  us-west1\t").unwrap(), "us-west1");
    assert_eq!(decode_header_value(b"a b").unwrap(), "a b");
    assert_eq!(decode_header_value(b"").unwrap(), "");
    assert_eq!(decode_header_value(b"a\tb").unwrap_err(), HeaderError::InvalidChar);
    assert_eq!(decode_header_value(b"a\x7fb").unwrap_err(), HeaderError::InvalidChar);
    assert_eq!(decode_header_value("café".as_bytes()).unwrap_err(), HeaderError::InvalidChar);
    // Padding around an encoded value is trimmed, the encoded value itself is exact.
    assert_eq!(decode_header_value(b" =?base64?IHBhZGRlZCA=?= ").unwrap(), " padded ");
}

fn modern(extra: &[(&'static str, &'static [u8])]) -> Headers {
    let mut h: Headers = vec![("MCP-Protocol-Version", b"2026-07-28")];
    h.extend_from_slice(extra);
    h
}

fn check(
    h: &Headers,
    method: &str,
    name: Option<&str>,
    custom: &[(String, HeaderExpect)],
) -> Result<(), String> {
    let head = RequestHead { method: "POST", path: "/mcp", headers: h };
    check_modern_headers(&head, method, name, "2026-07-28", custom).map_err(|m| m.header)
}

#[test]
fn standard_modern_headers() {
    let list = modern(&[("Mcp-Method", b"tools/list")]);
    assert_eq!(check(&list, "tools/list", None, &[]), Ok(()));
    // Names in any case.
    let lower = vec![("mcp-protocol-version", &b"2026-07-28"[..]), ("MCP-METHOD", b"tools/list")];
    assert_eq!(check(&lower, "tools/list", None, &[]), Ok(()));
    // Values are case-sensitive; a different or missing method mismatches.
    assert_eq!(
        check(&modern(&[("Mcp-Method", b"TOOLS/LIST")]), "tools/list", None, &[]),
        Err("Mcp-Method".into())
    );
    assert_eq!(
        check(&modern(&[("Mcp-Method", b"prompts/list")]), "tools/list", None, &[]),
        Err("Mcp-Method".into())
    );
    assert_eq!(check(&modern(&[]), "tools/list", None, &[]), Err("Mcp-Method".into()));
    // Version: missing, different, or from the body's _meta.
    assert_eq!(
        check(&vec![("Mcp-Method", &b"tools/list"[..])], "tools/list", None, &[]),
        Err("MCP-Protocol-Version".into())
    );
    let head = RequestHead { method: "POST", path: "/mcp", headers: &list };
    let mismatch = check_modern_headers(&head, "tools/list", None, "v999.0.0", &[]).unwrap_err();
    assert_eq!(mismatch.header, "MCP-Protocol-Version");
    let err = mismatch.rpc_error();
    assert_eq!(err.code.code(), -32020);
    assert_eq!(err.data, Some(json!({"header": "MCP-Protocol-Version"})));
    assert_eq!(err.http_status(crate::blame::Era::Modern), 400);
    // Repeated headers mismatch.
    let twice = modern(&[("Mcp-Method", b"tools/list"), ("mcp-method", b"tools/list")]);
    assert_eq!(check(&twice, "tools/list", None, &[]), Err("Mcp-Method".into()));
}

#[test]
fn mcp_name() {
    let call = |name: &'static [u8]| modern(&[("Mcp-Method", b"tools/call"), ("Mcp-Name", name)]);
    assert_eq!(check(&call(b"echo"), "tools/call", Some("echo"), &[]), Ok(()));
    assert_eq!(check(&call(b"  echo  "), "tools/call", Some("echo"), &[]), Ok(()));
    assert_eq!(check(&call(b"=?base64?ZWNobw==?="), "tools/call", Some("echo"), &[]), Ok(()));
    assert_eq!(check(&call(b"Echo"), "tools/call", Some("echo"), &[]), Err("Mcp-Name".into()));
    assert_eq!(check(&call(b"echo"), "tools/call", None, &[]), Err("Mcp-Name".into()));
    assert_eq!(check(&call(b"=?base64?ZWNobw?="), "tools/call", Some("echo"), &[]), Err("Mcp-Name".into()));
    let missing = modern(&[("Mcp-Method", b"tools/call")]);
    assert_eq!(check(&missing, "tools/call", Some("echo"), &[]), Err("Mcp-Name".into()));
    let read = modern(&[("Mcp-Method", b"resources/read"), ("Mcp-Name", b"test://static-text")]);
    assert_eq!(check(&read, "resources/read", Some("test://static-text"), &[]), Ok(()));
    let prompt = modern(&[("Mcp-Method", b"prompts/get")]);
    assert_eq!(check(&prompt, "prompts/get", Some("p"), &[]), Err("Mcp-Name".into()));
    // Methods without a name ignore a stray Mcp-Name.
    let stray = modern(&[("Mcp-Method", b"tools/list"), ("Mcp-Name", b"x")]);
    assert_eq!(check(&stray, "tools/list", None, &[]), Ok(()));
    assert_eq!(name_param("tools/call"), Some("name"));
    assert_eq!(name_param("resources/read"), Some("uri"));
    assert_eq!(name_param("tasks/get"), Some("taskId"));
    assert_eq!(name_param("tools/list"), None);
}

#[cfg(feature = "exact-json")]
fn call_with(params: &[(&'static str, &'static [u8])]) -> Headers {
    let mut h = modern(&[("Mcp-Method", b"tools/call"), ("Mcp-Name", b"t")]);
    h.extend_from_slice(params);
    h
}

// Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
#[cfg(feature = "exact-json")]
#[test]
fn custom_param_headers() {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "limit": {"type": "integer", "x-mcp-header": "Limit"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry"},
        "query": {"type": "string"}
    }});
    let params = x_mcp_headers(&schema).unwrap();
    let args = json!({"region": "us-west1", "limit": 7, "dry": false, "query": "x"});
    let custom = header_expectations(&params, Some(&args));
    assert_eq!(custom[0], ("Mcp-Param-Region".to_owned(), HeaderExpect::Text("us-west1".into())));
    let good = call_with(&[
        ("mcp-param-region", b"us-west1"),
        ("Mcp-Param-Limit", b"007"),
        ("Mcp-Param-Dry", b"false"),
    ]);
    assert_eq!(check(&good, "tools/call", Some("t"), &custom), Ok(()));
    let cases: [(&'static str, &'static [u8]); 6] = [
        ("Mcp-Param-Region", b"us-east1"),
        ("Mcp-Param-Region", b"US-WEST1"),
        ("Mcp-Param-Limit", b"8"),
        ("Mcp-Param-Limit", b"7.0"),
        ("Mcp-Param-Dry", b"False"),
        ("Mcp-Param-Region", b"=?base64?SGVsbG8?="),
    ];
    for (name, value) in cases {
        let mut h = good.clone();
        h.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        h.push((name, value));
        assert_eq!(check(&h, "tools/call", Some("t"), &custom), Err(name.to_owned()), "{name}: {value:?}");
    }
    // A value in the body whose header is missing.
    let missing = call_with(&[("Mcp-Param-Limit", b"7"), ("Mcp-Param-Dry", b"false")]);
    assert_eq!(check(&missing, "tools/call", Some("t"), &custom), Err("Mcp-Param-Region".into()));
    // Base64 values decode before comparing.
    let args = json!({"region": "Hello, 世界", "limit": -0, "dry": true});
    let custom = header_expectations(&params, Some(&args));
    let encoded = call_with(&[
        ("Mcp-Param-Region", b"=?base64?SGVsbG8sIOS4lueVjA==?="),
        ("Mcp-Param-Limit", b"0"),
        ("Mcp-Param-Dry", b"true"),
    ]);
    assert_eq!(check(&encoded, "tools/call", Some("t"), &custom), Ok(()));
    // Absent and null arguments expect no header; a header for one mismatches.
    let args = json!({"region": null});
    let custom = header_expectations(&params, Some(&args));
    assert!(custom.iter().all(|(_, e)| *e == HeaderExpect::Absent));
    assert_eq!(check(&call_with(&[]), "tools/call", Some("t"), &custom), Ok(()));
    let extra = call_with(&[("Mcp-Param-Dry", b"true")]);
    assert_eq!(check(&extra, "tools/call", Some("t"), &custom), Err("Mcp-Param-Dry".into()));
    // Headers nobody declared are ignored.
    let unknown = call_with(&[("Mcp-Param-Other", b"\xff")]);
    assert_eq!(check(&unknown, "tools/call", Some("t"), &custom), Ok(()));
}

// Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
#[cfg(feature = "exact-json")]
#[test]
fn integers_compare_numerically() {
    let want = |v: Value| HeaderExpect::from_value(Some(&v));
    assert_eq!(want(json!(7)), HeaderExpect::Integer("7".into()));
    let n = |text: &str| serde_json::from_str::<Value>(text).unwrap();
    assert_eq!(want(n("-0")), HeaderExpect::Integer("0".into()));
    assert_eq!(want(n("7.0")), HeaderExpect::Integer("7".into()));
    assert_eq!(want(n("1.50e1")), HeaderExpect::Integer("15".into()));
    assert_eq!(want(n("1e2")), HeaderExpect::Integer("100".into()));
    assert_eq!(want(n("1500e-2")), HeaderExpect::Integer("15".into()));
    assert_eq!(want(n("0.0e-5")), HeaderExpect::Integer("0".into()));
    assert_eq!(
        want(n("123456789012345678901234567890")),
        HeaderExpect::Integer("123456789012345678901234567890".into())
    );
    assert_eq!(want(n("1.5")), HeaderExpect::Text("1.5".into()));
    assert_eq!(want(n("15e-1")), HeaderExpect::Text("15e-1".into()));
    // Too many digits to compare numerically: compared as the number's text.
    assert!(matches!(want(n("1e1000000000")), HeaderExpect::Text(_)));
    assert!(matches!(want(n("1e-1000000000")), HeaderExpect::Text(_)));
    assert_eq!(want(json!([1])), HeaderExpect::Text("[1]".into()));
    assert_eq!(header_integer("-007"), Some("-7".into()));
    assert_eq!(header_integer("+7"), None);
    assert_eq!(header_integer("1e2"), None);
    assert_eq!(header_integer("-"), None);
    let h = call_with(&[("Mcp-Param-N", b"123456789012345678901234567890")]);
    let custom = [("Mcp-Param-N".to_owned(), want(n("123456789012345678901234567890")))];
    assert_eq!(check(&h, "tools/call", Some("t"), &custom), Ok(()));
}

#[test]
fn x_mcp_header_annotations() {
    let nested = json!({"type": "object", "properties": {
        "options": {"type": "object", "properties": {
            "limit": {"type": ["integer", "null"], "x-mcp-header": "Limit"}
        }},
        "tenant": {"type": "string", "x-mcp-header": "Tenant-Id"},
        "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Ignored"}},
        "choice": {"anyOf": [{"type": "string", "x-mcp-header": "AlsoIgnored"}]}
    }, "$defs": {"x": {"type": "string", "x-mcp-header": "Ignored3"}}});
    let params = x_mcp_headers(&nested).unwrap();
    assert_eq!(
        params,
        vec![
            HeaderParam { name: "Tenant-Id".into(), kind: Kind::String, path: vec!["tenant".into()] },
            HeaderParam {
                name: "Limit".into(),
                kind: Kind::Integer,
                path: vec!["options".into(), "limit".into()]
            },
        ]
    );
    assert_eq!(params[1].header_name(), "Mcp-Param-Limit");
    assert_eq!(params[1].expect(Some(&json!({"options": {"limit": 3}}))), HeaderExpect::Integer("3".into()));
    assert_eq!(params[1].expect(Some(&json!({"options": null}))), HeaderExpect::Absent);
    assert_eq!(params[1].expect(None), HeaderExpect::Absent);
    assert_eq!(x_mcp_headers(&json!({"type": "object"})).unwrap(), vec![]);

    let refused = [
        json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
        json!({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}),
        json!({"properties": {"a": {"x-mcp-header": "A"}}}),
        json!({"properties": {"a": {"type": ["string", "integer"], "x-mcp-header": "A"}}}),
        json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
        json!({"properties": {"a": {"type": "string", "x-mcp-header": "Has Space"}}}),
        json!({"properties": {"a": {"type": "string", "x-mcp-header": "Bad\r\nX: y"}}}),
        json!({"properties": {"a": {"type": "string", "x-mcp-header": 5}}}),
        json!({"properties": {
            "a": {"type": "string", "x-mcp-header": "Region"},
            "b": {"type": "object", "properties": {"c": {"type": "boolean", "x-mcp-header": "REGION"}}}
        }}),
    ];
    for schema in refused {
        assert!(x_mcp_headers(&schema).is_err(), "{schema}");
    }
}

#[test]
fn absolute_form_targets_are_judged_by_their_authority() {
    let h = post_headers();
    // RFC 9112 §3.2.2: the target's authority, not `Host: localhost`, is what is checked.
    assert_eq!(run("POST", "http://evil.example/mcp", &h), Err(403));
    assert_eq!(run("POST", "HTTPS://evil.example:443/mcp?x=1", &h), Err(403));
    assert_eq!(run("POST", "http://localhost/mcp", &h), Ok(()));
    assert_eq!(run("POST", "http://127.0.0.1:3000/mcp?q", &h), Ok(()));
    // The path is the target's own: an allowed authority does not make another path ours.
    assert_eq!(run("POST", "http://localhost/other", &h), Err(404));
    assert_eq!(run("POST", "http://localhost", &h), Err(404));
    assert_eq!(run("POST", "http://user@localhost/mcp", &h), Err(400));
    // Even without a Host header, the target names the host.
    assert_eq!(run("POST", "http://localhost/mcp", &without(h.clone(), "host")), Ok(()));
    assert_eq!(split_target("/mcp?x"), (None, "/mcp?x"));
    assert_eq!(split_target("http://a:1?x"), (Some("a:1"), "/"));
}

#[test]
fn transfer_codings_other_than_chunked_are_501() {
    let h = without(post_headers(), "content-length");
    assert_eq!(run("POST", "/mcp", &with(h.clone(), "transfer-encoding", b"chunked")), Ok(()));
    assert_eq!(run("POST", "/mcp", &with(h.clone(), "transfer-encoding", b"Chunked")), Ok(()));
    assert_eq!(run("POST", "/mcp", &with(h.clone(), "transfer-encoding", b"gzip, chunked")), Err(501));
    assert_eq!(run("POST", "/mcp", &with(h.clone(), "transfer-encoding", b"deflate")), Err(501));
    let mut twice = with(h, "transfer-encoding", b"chunked");
    twice.push(("transfer-encoding", b"gzip"));
    assert_eq!(run("POST", "/mcp", &twice), Err(501));
}

#[test]
fn each_refusal_has_a_kind_and_the_kind_decides_the_status() {
    let refuse = |method: &str, path: &str, headers: &[(&str, &[u8])]| {
        let head = RequestHead { method, path, headers };
        let Err(refusal) = check_head(&HttpConfig::default(), &Limits::default(), &head) else {
            panic!("{method} {path} was not refused")
        };
        refusal
    };
    let cases = [
        (refuse("POST", "/other", &post_headers()), RefusalKind::NotFound),
        (refuse("PUT", "/mcp", &post_headers()), RefusalKind::MethodNotAllowed),
        (refuse("POST", "/mcp", &without(post_headers(), "Host")), RefusalKind::Malformed),
        (refuse("POST", "/mcp", &with(post_headers(), "Host", b"evil.example")), RefusalKind::Forbidden),
        (
            refuse("POST", "/mcp", &with(post_headers(), "Content-Type", b"text/plain")),
            RefusalKind::UnsupportedMediaType,
        ),
        (refuse("POST", "/mcp", &with(post_headers(), "Accept", b"text/html")), RefusalKind::NotAcceptable),
    ];
    for (refusal, kind) in cases {
        assert_eq!(refusal.kind, kind, "{refusal}");
        assert_eq!(refusal.status, kind.status(), "{refusal}");
        assert_eq!(refusal.body().is_none(), kind == RefusalKind::NotFound, "{refusal}");
    }
}

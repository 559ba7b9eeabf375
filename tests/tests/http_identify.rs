//! The identify hook (`ServerBuilder::identify`) over real loopback HTTP, on both runtimes: an
//! API key or a session cookie becomes the caller the gates and handlers see, a refusal is
//! answered before the body is read and before any handler, a slow hook delays only its own
//! request (and is cut at `header_read_timeout`), a panicking one refuses only its own, and the
//! hook's caller binds legacy sessions like any other. Also: a builder with an authorization
//! and a hook is refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_proto::{Caller, Gate, Limits, Tool, ToolOutput};
use mcp_server::{IdentityRefusal, Server, ServerBuilder, ToolCall};
use mcp_tests::http::{each, ensure, modern, serve, Client, Outcome, Req, Response, Shim};
use serde_json::{json, Value};

/// The API keys the hook knows: key, identity, role.
const KEYS: [(&str, &str, &str); 2] = [("k-alice", "alice", "admin"), ("k-bob", "bob", "reader")];

/// The challenge the hook sends with its 401.
const CHALLENGE: &str = "ApiKey realm=\"mcp\"";

/// What the hook is asked to do by the request: `X-Api-Key` (known, or refused 401 with
/// [`CHALLENGE`]), `Cookie: sid=s-carol` (a session of carol's), `X-Boom` (panic), `X-Wait`
/// (wait for the test's go-ahead), `X-Never` (never answer); nothing of these passes.
async fn hook(
    head: Arc<mcp_proto::HttpRequestHead>,
    go: async_channel::Receiver<()>,
) -> mcp_server::Identified {
    if head.header("x-boom").is_some() {
        panic!("the identify hook's own bug");
    }
    if head.header("x-wait").is_some() {
        let _ = go.recv().await;
    }
    if head.header("x-never").is_some() {
        std::future::pending::<()>().await;
    }
    if let Some(key) = head.header("x-api-key") {
        let Some((_, identity, role)) = KEYS.iter().find(|(k, _, _)| *k == key) else {
            return Err(IdentityRefusal::unauthorized("unknown API key").with_challenge(CHALLENGE));
        };
        return Ok(Some(Caller::identified(*identity).with_role(*role)));
    }
    if head.cookie("sid") == Some("s-carol") {
        return Ok(Some(Caller::identified("carol").with_role("reader")));
    }
    Ok(None)
}

/// A server with `whoami` (public) and `admin_echo` (admins only), the [`hook`] and a count of
/// the handler runs; `go` releases requests that wait in the hook.
struct Rig {
    server: Server,
    runs: Arc<AtomicUsize>,
    go: async_channel::Sender<()>,
}

fn builder(runs: &Arc<AtomicUsize>) -> ServerBuilder {
    let text = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let (who, echo) = (runs.clone(), runs.clone());
    Server::builder("identify", "1.0.0")
        .tool(
            Tool::new("whoami", "Says who the caller is", json!({"type": "object"})),
            move |call: ToolCall| {
                who.fetch_add(1, Ordering::SeqCst);
                async move {
                    let caller = &call.ctx.caller;
                    ToolOutput::text(format!(
                        "{} ({})",
                        caller.identity.as_deref().unwrap_or("anonymous"),
                        caller.roles.join(", ")
                    ))
                }
            },
        )
        .tool(Tool::new("admin_echo", "Echoes, for admins", text).gate(Gate::role("admin")), move |call| {
            echo.fetch_add(1, Ordering::SeqCst);
            async move { ToolOutput::text(call.arguments["text"].as_str().unwrap_or_default().to_owned()) }
        })
}

fn rig_with(limits: Limits) -> Rig {
    let runs = Arc::new(AtomicUsize::new(0));
    let (go, wait) = async_channel::unbounded();
    let mut b = builder(&runs).identify(move |head| hook(head, wait.clone()));
    b.config_mut().limits = limits;
    Rig { server: b.build().expect("the test tools are valid"), runs, go }
}

fn rig() -> Rig {
    rig_with(Limits::default())
}

fn send(client: &mut Client, req: &Req) -> Result<Response, String> {
    client.request(req)
}

/// The first text block of a tool result, or the error object.
fn answer(resp: &Response) -> Result<Value, String> {
    let body = resp.json()?;
    Ok(if body["error"].is_null() {
        body["result"]["content"][0]["text"].clone()
    } else {
        body["error"].clone()
    })
}

fn call(id: u64, tool: &str) -> Req {
    modern(id, "tools/call", json!({"name": tool, "arguments": {"text": "hi"}}))
}

fn listed(resp: &Response) -> Result<Vec<String>, String> {
    let body = resp.json()?;
    let tools = body["result"]["tools"].as_array().ok_or_else(|| format!("no tools: {body}"))?;
    Ok(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
}

/// An API key becomes an identity with a role: `whoami` sees it, the admin-only tool is listed
/// and callable for the admin's key only, and a request without a key stays anonymous.
#[test]
fn an_api_key_is_an_identity_with_roles_the_gates_use() {
    each(|shim| {
        let rig = rig();
        let addr = serve(shim, rig.server.clone(), HttpConfig::default());
        let mut c = Client::connect(addr).map_err(|e| e.to_string())?;
        let who = answer(&send(&mut c, &call(1, "whoami").header("X-Api-Key", "k-alice"))?)?;
        ensure(who == "alice (admin)", || format!("alice: {who}"))?;
        let who = answer(&send(&mut c, &call(2, "whoami").header("X-Api-Key", "k-bob"))?)?;
        ensure(who == "bob (reader)", || format!("bob: {who}"))?;
        let who = answer(&send(&mut c, &call(3, "whoami"))?)?;
        ensure(who == "anonymous ()", || format!("no key: {who}"))?;

        let list = |key: &str| modern(4, "tools/list", json!({})).header("X-Api-Key", key);
        let alice = listed(&send(&mut c, &list("k-alice"))?)?;
        ensure(alice == ["admin_echo", "whoami"], || format!("alice lists {alice:?}"))?;
        let bob = listed(&send(&mut c, &list("k-bob"))?)?;
        ensure(bob == ["whoami"], || format!("bob lists {bob:?}"))?;

        let echoed = answer(&send(&mut c, &call(5, "admin_echo").header("X-Api-Key", "k-alice"))?)?;
        ensure(echoed == "hi", || format!("alice's echo: {echoed}"))?;
        let runs = rig.runs.load(Ordering::SeqCst);
        let refused = answer(&send(&mut c, &call(6, "admin_echo").header("X-Api-Key", "k-bob"))?)?;
        ensure(refused["code"] == -32602, || format!("bob's echo: {refused}"))?;
        ensure(rig.runs.load(Ordering::SeqCst) == runs, || "bob's echo ran a handler".into())
    });
}

/// A session cookie identifies its holder; another cookie, or none, leaves the caller
/// anonymous (the hook passes).
#[test]
fn a_session_cookie_identifies_its_holder() {
    each(|shim| {
        let rig = rig();
        let addr = serve(shim, rig.server.clone(), HttpConfig::default());
        let mut c = Client::connect(addr).map_err(|e| e.to_string())?;
        let who = answer(&send(&mut c, &call(1, "whoami").header("Cookie", "theme=dark; sid=s-carol"))?)?;
        ensure(who == "carol (reader)", || format!("carol's cookie: {who}"))?;
        let who = answer(&send(&mut c, &call(2, "whoami").header("Cookie", "sid=s-someone"))?)?;
        ensure(who == "anonymous ()", || format!("an unknown session: {who}"))
    });
}

/// A refusal is the hook's 401 with its challenge and message; the handler never runs, and a
/// client that waits for `100 Continue` is answered without being asked for its body.
#[test]
fn a_refusal_is_answered_before_the_body_and_any_handler() {
    each(|shim| {
        let rig = rig();
        let addr = serve(shim, rig.server.clone(), HttpConfig::default());
        let mut c = Client::connect(addr).map_err(|e| e.to_string())?;
        let resp = send(&mut c, &call(1, "whoami").header("X-Api-Key", "k-mallory"))?;
        ensure(resp.status() == 401, || format!("status: {resp:?}"))?;
        ensure(resp.header("www-authenticate") == Some(CHALLENGE), || format!("challenge: {resp:?}"))?;
        let body = resp.json()?;
        ensure(body["error"]["message"] == "unknown API key", || format!("body: {body}"))?;
        ensure(rig.runs.load(Ordering::SeqCst) == 0, || "a refused request ran its handler".into())?;

        // The head alone, announcing a body it waits to be asked for.
        let mut waiting = Client::connect(addr).map_err(|e| e.to_string())?;
        let head = call(2, "whoami").header("X-Api-Key", "k-mallory").header("Expect", "100-continue");
        let bytes = head.to_bytes();
        let end = bytes.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no end of head")? + 4;
        waiting.send(&bytes[..end]).map_err(|e| e.to_string())?;
        let resp = waiting.response()?;
        ensure(resp.status() == 401, || format!("the first answer to a waiting client: {resp:?}"))?;
        ensure(rig.runs.load(Ordering::SeqCst) == 0, || "a refused request ran its handler".into())?;
        let refused = rig.server.status().http_refusals.unidentified;
        ensure(refused == 2, || format!("counted refusals: {refused}"))
    });
}

/// A hook that panics refuses its own request with 500; the same connection's next request,
/// and another connection's, are identified as usual.
#[test]
fn a_panicking_hook_refuses_only_its_request() {
    each(|shim| {
        let rig = rig();
        let addr = serve(shim, rig.server.clone(), HttpConfig::default());
        let mut c = Client::connect(addr).map_err(|e| e.to_string())?;
        let resp = send(&mut c, &call(1, "whoami").header("X-Boom", "1"))?;
        ensure(resp.status() == 500, || format!("a panicking hook: {resp:?}"))?;
        let code = resp.json()?["error"]["code"].clone();
        ensure(code == -32603, || format!("code: {code}"))?;
        let who = answer(&send(&mut c, &call(2, "whoami").header("X-Api-Key", "k-alice"))?)?;
        ensure(who == "alice (admin)", || format!("the next request: {who}"))?;
        let mut other = Client::connect(addr).map_err(|e| e.to_string())?;
        let who = answer(&send(&mut other, &call(3, "whoami").header("X-Api-Key", "k-bob"))?)?;
        ensure(who == "bob (reader)", || format!("another connection: {who}"))?;
        ensure(rig.server.status().http_refusals.identify_failed == 1, || "not counted".into())
    });
}

/// A hook waiting on something slow holds only its own request: another client is answered
/// meanwhile, and the waiting one once the hook answers.
#[test]
fn a_slow_hook_delays_only_its_request() {
    each(|shim| {
        let rig = rig();
        let addr = serve(shim, rig.server.clone(), HttpConfig::default());
        let mut slow = Client::connect(addr).map_err(|e| e.to_string())?;
        slow.send(&call(1, "whoami").header("X-Api-Key", "k-alice").header("X-Wait", "1").to_bytes())
            .map_err(|e| e.to_string())?;
        let mut other = Client::connect(addr).map_err(|e| e.to_string())?;
        let who = answer(&send(&mut other, &call(2, "whoami").header("X-Api-Key", "k-bob"))?)?;
        ensure(who == "bob (reader)", || format!("while the hook waits: {who}"))?;
        ensure(rig.runs.load(Ordering::SeqCst) == 1, || "the waiting request went ahead".into())?;
        rig.go.try_send(()).map_err(|e| e.to_string())?;
        let who = answer(&slow.response()?)?;
        ensure(who == "alice (admin)", || format!("once the hook answered: {who}"))
    });
}

/// A hook that never answers is cut at `header_read_timeout`: 503 with `Retry-After`.
#[test]
fn a_hook_that_never_answers_is_cut() {
    each(|shim| {
        let mut limits = Limits::default();
        limits.header_read_timeout(Duration::from_millis(200));
        let rig = rig_with(limits);
        let addr = serve(shim, rig.server.clone(), HttpConfig::default());
        let mut c = Client::connect(addr).map_err(|e| e.to_string())?;
        let resp = send(&mut c, &call(1, "whoami").header("X-Never", "1"))?;
        ensure(resp.status() == 503, || format!("a hook that never answers: {resp:?}"))?;
        ensure(resp.header("retry-after").is_some(), || format!("no Retry-After: {resp:?}"))?;
        ensure(rig.runs.load(Ordering::SeqCst) == 0, || "the cut request ran its handler".into())?;
        ensure(rig.server.status().http_refusals.identify_failed == 1, || "not counted".into())
    });
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"identify-test","version":"1"}}}"#;

fn legacy(key: &str, sid: &str, body: &str) -> Req {
    Req::post(body.to_owned())
        .header("X-Api-Key", key)
        .header("Mcp-Session-Id", sid)
        .header("MCP-Protocol-Version", "2025-11-25")
}

/// The hook's caller binds a legacy session: alice's session serves alice, and is unknown (404)
/// to bob holding its id.
#[test]
fn the_hooks_caller_binds_legacy_sessions() {
    each(|shim: Shim| -> Outcome {
        let rig = rig();
        let addr = serve(shim, rig.server.clone(), HttpConfig::default());
        let mut c = Client::connect(addr).map_err(|e| e.to_string())?;
        let resp = send(&mut c, &Req::post(INITIALIZE).header("X-Api-Key", "k-alice"))?;
        ensure(resp.status() == 200, || format!("initialize: {resp:?}"))?;
        let sid = resp.header("mcp-session-id").ok_or("no session id")?.to_owned();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let resp = send(&mut c, &legacy("k-alice", &sid, initialized))?;
        ensure(resp.status() == 202, || format!("initialized: {resp:?}"))?;
        let whoami =
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}"#;
        let who = answer(&send(&mut c, &legacy("k-alice", &sid, whoami))?)?;
        ensure(who == "alice (admin)", || format!("alice in her session: {who}"))?;
        let foreign = send(&mut c, &legacy("k-bob", &sid, whoami))?;
        ensure(foreign.status() == 404, || format!("bob with alice's session: {foreign:?}"))?;
        ensure(rig.runs.load(Ordering::SeqCst) == 1, || "bob's call ran a handler".into())
    });
}

/// Two answers to who a request is from are one too many: the builder says so.
#[test]
fn an_authorization_and_a_hook_are_refused_together() {
    use mcp_proto::auth::token::ClaimRules;
    use mcp_proto::auth::{ProtectedResource, ResourceUrl};
    use mcp_server::auth::{Authorization, JwtVerifier};
    let resource = ResourceUrl::parse("https://mcp.example.com/mcp").expect("a resource URL");
    let metadata = ProtectedResource::new(resource.clone(), ["https://as.example.com"]).expect("metadata");
    let verifier = JwtVerifier::new(ClaimRules::new("https://as.example.com", resource));
    let auth = Authorization::new(metadata, verifier);
    let built = builder(&Arc::default()).authorization(auth).identify(|_| async { Ok(None) }).build();
    let Err(e) = built else { panic!("a builder with both was built") };
    assert!(matches!(e, mcp_server::BuildError::IdentifyWithAuthorization), "{e:?}");
    assert!(e.to_string().contains("both an authorization and an identify hook"), "{e}");
}

/// A `tools/call` of `whoami` as a mounted service receives it: with `key` as `X-Api-Key`, and
/// `middleware`'s caller in the extensions, as an authentication layer in front puts it there.
fn mounted_whoami(key: Option<&str>, middleware: Option<Caller>) -> axum::http::Request<axum::body::Body> {
    let req = call(1, "whoami");
    let bytes = req.to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let mut builder = axum::http::Request::post("/mcp");
    for line in head.lines().skip(1) {
        let (name, value) = line.split_once(": ").expect("a header line");
        builder = builder.header(name, value);
    }
    if let Some(key) = key {
        builder = builder.header("X-Api-Key", key);
    }
    let mut req = builder.body(axum::body::Body::from(body.to_owned())).expect("a request");
    req.extensions_mut().insert(mcp_server::PeerAddr(([127, 0, 0, 1], 40000).into()));
    if let Some(caller) = middleware {
        req.extensions_mut().insert(caller);
    }
    req
}

/// The text `whoami` answers a mounted service's request with.
async fn mounted_answer<S>(svc: &mut S, req: axum::http::Request<axum::body::Body>) -> Result<String, String>
where
    S: tower_service::Service<
        axum::http::Request<axum::body::Body>,
        Response = axum::http::Response<mcp_server::McpBody>,
    >,
    S::Error: std::fmt::Debug,
{
    let resp = svc.call(req).await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status();
    let body = axum::body::Body::new(resp.into_body());
    let bytes = axum::body::to_bytes(body, usize::MAX).await.map_err(|e| e.to_string())?;
    let body: Value = serde_json::from_slice(&bytes).map_err(|e| format!("{status}: {e}"))?;
    body["result"]["content"][0]["text"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{status}: {body}"))
}

/// A mounted service (axum's, through `McpService`) runs the hook too: its caller wins over a
/// middleware's `Caller`; when it passes, the middleware's is who the handler sees; a refusal
/// is the hook's 401.
#[test]
fn a_mounted_service_runs_the_hook_before_the_middlewares_caller() {
    each(|shim| {
        let rig = rig();
        let dave = || Some(Caller::identified("dave").with_role("reader"));
        let reqs = [mounted_whoami(Some("k-alice"), dave()), mounted_whoami(None, dave())];
        let refused = mounted_whoami(Some("k-mallory"), dave());
        let server = rig.server.clone();
        let (answers, status) = match shim {
            Shim::Tokio => mcp_tests::http::tokio_runtime().block_on(async move {
                let mut svc = mcp_tokio::McpService::new(server, HttpConfig::default());
                let mut answers = Vec::new();
                for req in reqs {
                    answers.push(mounted_answer(&mut svc, req).await?);
                }
                let status = tower_service::Service::call(&mut svc, refused).await.map(|r| r.status());
                Ok::<_, String>((answers, status.map_or(0, |s| s.as_u16())))
            })?,
            Shim::Smol => smol::block_on(async move {
                let mut svc = mcp_smol::McpService::new(server, HttpConfig::default());
                let mut answers = Vec::new();
                for req in reqs {
                    answers.push(mounted_answer(&mut svc, req).await?);
                }
                let status = tower_service::Service::call(&mut svc, refused).await.map(|r| r.status());
                Ok::<_, String>((answers, status.map_or(0, |s| s.as_u16())))
            })?,
        };
        ensure(answers == ["alice (admin)", "dave (reader)"], || format!("answers: {answers:?}"))?;
        ensure(status == 401, || format!("a refusal through the mount: {status}"))
    });
}

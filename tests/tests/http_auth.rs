//! The resource server (feature `auth`) over real loopback HTTP on both runtimes, against an
//! authorization server played by the test (src/oauth.rs): metadata, challenges, JWT access
//! tokens verified against fetched keys, and what a hostile client or a failing authorization
//! server can do.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp_proto::auth::keys::KeyPolicy;
use mcp_proto::auth::token::{Audience, ClaimRules};
use mcp_proto::auth::{ProtectedResource, ResourceUrl};
use mcp_proto::http::HttpConfig;
use mcp_proto::{Tool, ToolOutput};
use mcp_server::auth::{Authorization, IntrospectionVerifier, JwtVerifier};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{
    block_on, each, ensure, modern, poll_until, serve_on, Client, Outcome, Req, Response, Shim,
};
use mcp_tests::oauth::{hs256, with_signature, Issuer, Signer};
use serde_json::{json, Value};

const RESOURCE: &str = "https://mcp.example.com/mcp";
const METADATA: &str = "/.well-known/oauth-protected-resource/mcp";

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A served server whose one tool, `whoami`, answers the caller's identity and roles, behind
/// tokens of `issuer` for [`RESOURCE`] under `rules` (default: the audience checked).
struct Rig {
    addr: SocketAddr,
    server: Server,
}

fn rig(shim: Shim, issuer: &Issuer, rules: impl FnOnce(ClaimRules) -> ClaimRules) -> Rig {
    // A short floor, so that the tests of a failing issuer see it recover quickly.
    rig_with_floor(shim, issuer, Duration::from_millis(300), rules)
}

/// Whether the rig's resource takes DPoP-bound tokens, and requires nonces in proofs.
#[derive(Clone, Copy, PartialEq)]
enum Dpop {
    Off,
    On,
    Nonces,
}

/// [`rig`] refetching keys at most once per `floor`.
fn rig_with_floor(
    shim: Shim,
    issuer: &Issuer,
    floor: Duration,
    rules: impl FnOnce(ClaimRules) -> ClaimRules,
) -> Rig {
    rig_with(shim, issuer, floor, rules, Dpop::Off)
}

fn rig_with(
    shim: Shim,
    issuer: &Issuer,
    floor: Duration,
    rules: impl FnOnce(ClaimRules) -> ClaimRules,
    dpop: Dpop,
) -> Rig {
    let resource = ResourceUrl::parse(RESOURCE).unwrap_or_else(|e| panic!("{e}"));
    let rules = rules(ClaimRules::new(issuer.url.clone(), resource.clone()));
    let verifier = JwtVerifier::new(rules)
        .key_policy(KeyPolicy::new(floor, Duration::from_secs(3600)))
        .fetch_timeout(Duration::from_secs(2));
    let protected = ProtectedResource::new(resource, [issuer.url.clone()])
        .and_then(|p| p.challenge_scopes(["mcp:tools"]))
        .unwrap_or_else(|e| panic!("{e}"));
    let protected = if dpop == Dpop::Off { protected } else { protected.dpop(["ES256", "EdDSA"]) };
    let mut authorization = Authorization::new(protected, verifier).keep_claims(["tenant"]);
    if dpop == Dpop::Nonces {
        authorization = authorization.dpop_nonces(Duration::from_secs(300));
    }
    serve(shim, authorization)
}

/// The test server (tools `whoami` and `admin`) behind `authorization`, served on `shim`.
fn serve(shim: Shim, authorization: Authorization) -> Rig {
    serve_replica(shim, authorization, None)
}

/// [`serve`] as the replica `name` of `cluster`.
fn serve_replica(
    shim: Shim,
    authorization: Authorization,
    replica: Option<(&std::sync::Arc<mcp_server::InMemoryCluster>, &str)>,
) -> Rig {
    let whoami = Tool::new("whoami", "Says who calls", json!({"type": "object"}));
    let admin = Tool::new("admin", "Needs mcp:admin", json!({"type": "object"})).scopes(["mcp:admin"]);
    let server = Server::builder("auth", "1.0.0")
        .authorization(authorization)
        .tool(whoami, |call: ToolCall| async move {
            let caller = &call.ctx.caller;
            let text = json!({
                "identity": caller.identity,
                "roles": caller.roles,
                "tenant": caller.attributes.get("tenant"),
                "client_id": caller.attributes.get("client_id"),
                // The token was for this server: a handler must not be able to pass it on.
                "token_seen": caller.http.as_ref().map(|h| h.header("authorization").is_some() || h.header("dpop").is_some()),
            });
            ToolOutput::text(text.to_string())
        })
        .tool(admin, |_: ToolCall| async move { ToolOutput::text("admin done") });
    let server = match replica {
        Some((cluster, name)) => {
            server.cluster(cluster.clone() as std::sync::Arc<dyn mcp_server::Cluster>, name)
        }
        None => server,
    };
    let server = server.build().unwrap_or_else(|e| panic!("the test server is valid: {e}"));
    let addr = mcp_tests::http::serve(shim, server.clone(), HttpConfig::default());
    Rig { addr, server }
}

fn claims(issuer: &Issuer) -> Value {
    json!({
        "iss": issuer.url, "aud": RESOURCE, "sub": "ann", "client_id": "cli",
        "scope": "mcp:tools mcp:read", "tenant": "acme", "exp": now() + 600, "iat": now()
    })
}

fn call(addr: SocketAddr, token: Option<&str>) -> Result<Response, String> {
    call_tool(addr, "whoami", token)
}

fn call_tool(addr: SocketAddr, tool: &str, token: Option<&str>) -> Result<Response, String> {
    let mut req = modern(1, "tools/call", json!({"name": tool, "arguments": {}}));
    if let Some(token) = token {
        req = req.header("Authorization", &format!("Bearer {token}"));
    }
    Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(&req)
}

fn whoami(resp: &Response) -> Result<Value, String> {
    let body = resp.json()?;
    let text = body["result"]["content"][0]["text"].as_str().ok_or_else(|| format!("no result: {body}"))?;
    serde_json::from_str(text).map_err(|e| format!("{e}: {text}"))
}

/// `resp` is `status` with a challenge whose `error` is `error` (none: no `error=`).
fn refused(resp: &Response, status: u16, error: Option<&str>) -> Outcome {
    let challenge = resp.header("www-authenticate").unwrap_or_default().to_owned();
    let has_error = |code: &str| challenge.contains(&format!("error=\"{code}\""));
    ensure(resp.status() == status, || format!("status {} (wanted {status}): {challenge}", resp.status()))?;
    ensure(challenge.starts_with("Bearer "), || format!("no Bearer challenge: {challenge:?}"))?;
    ensure(challenge.contains(&format!("resource_metadata=\"https://mcp.example.com{METADATA}\"")), || {
        format!("the challenge names no metadata: {challenge}")
    })?;
    match error {
        Some(code) => ensure(has_error(code), || format!("wanted error {code}: {challenge}")),
        None => {
            ensure(!challenge.contains("error="), || format!("an error without credentials: {challenge}"))
        }
    }
}

#[test]
fn the_metadata_is_served_at_both_well_known_paths() {
    let signer = Signer::new("k1");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let rig = rig(shim, &issuer, |r| r);
        for path in [METADATA, "/.well-known/oauth-protected-resource"] {
            let resp =
                Client::connect(rig.addr).map_err(|e| e.to_string())?.request(&Req::new("GET", path))?;
            ensure(resp.status() == 200, || format!("{path}: {}", resp.status()))?;
            let doc = resp.json()?;
            ensure(doc["resource"] == RESOURCE, || format!("{path}: resource {doc}"))?;
            ensure(doc["authorization_servers"] == json!([issuer.url]), || format!("{path}: servers {doc}"))?;
            ensure(doc["bearer_methods_supported"] == json!(["header"]), || {
                format!("{path}: methods {doc}")
            })?;
        }
        let resp =
            Client::connect(rig.addr).map_err(|e| e.to_string())?.request(&Req::post("{}").path(METADATA))?;
        ensure(resp.status() == 405, || format!("POST to the metadata: {}", resp.status()))
    });
}

#[test]
fn a_verified_token_is_the_caller_and_a_missing_one_is_challenged() {
    let signer = Signer::new("k1");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let rig = rig(shim, &issuer, |r| r);
        let resp = call(rig.addr, None)?;
        refused(&resp, 401, None)?;
        let challenge = resp.header("www-authenticate").unwrap_or_default();
        ensure(challenge.contains("scope=\"mcp:tools\""), || format!("no scope to obtain: {challenge}"))?;

        let resp = call(rig.addr, Some(&signer.token(&claims(&issuer))))?;
        ensure(resp.status() == 200, || format!("with a good token: {} {:?}", resp.status(), resp.json()))?;
        let who = whoami(&resp)?;
        let want = json!({"identity": "ann", "roles": ["mcp:read", "mcp:tools"], "tenant": "acme", "client_id": "cli", "token_seen": false});
        ensure(who == want, || format!("the caller: {who}"))?;
        // A token issued to a client alone names the client, apart from any user.
        let mut own = claims(&issuer);
        own.as_object_mut().map(|o| o.remove("sub"));
        let who = whoami(&call(rig.addr, Some(&signer.token(&own)))?)?;
        ensure(who["identity"] == "client:cli", || format!("a client's own token: {who}"))?;
        let refusals = rig.server.status().http_refusals;
        ensure(refusals.unauthorized == 1, || format!("refusals counted: {refusals:?}"))
    });
}

#[test]
fn bad_tokens_are_refused_with_invalid_token() {
    let signer = Signer::new("k1");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let rig = rig(shim, &issuer, |r| r);
        let with = |change: &dyn Fn(&mut serde_json::Map<String, Value>)| {
            let mut c = claims(&issuer);
            if let Some(o) = c.as_object_mut() {
                change(o);
            }
            signer.token(&c)
        };
        let good = claims(&issuer);
        let public_key = signer.jwk().to_string();
        let cases: Vec<(&str, String)> = vec![
            ("expired", with(&|c| drop(c.insert("exp".into(), json!(now() - 3600))))),
            ("not yet valid", with(&|c| drop(c.insert("nbf".into(), json!(now() + 3600))))),
            ("another issuer", with(&|c| drop(c.insert("iss".into(), json!("http://127.0.0.1:1"))))),
            (
                "another audience",
                with(&|c| drop(c.insert("aud".into(), json!("https://other.example.com/mcp")))),
            ),
            (
                "an audience list without this resource",
                with(&|c| {
                    drop(c.insert("aud".into(), json!(["https://a.example.com", "https://b.example.com"])))
                }),
            ),
            ("alg none", with_signature(&json!({"alg": "none", "kid": "k1"}), &good, b"")),
            (
                "HS256 with the public key",
                hs256(public_key.as_bytes(), &json!({"alg": "HS256", "kid": "k1"}), &good),
            ),
            ("another key's signature", Signer::new("k1").token(&good)),
            (
                "bound to a DPoP key, sent as bearer",
                with(&|c| drop(c.insert("cnf".into(), json!({"jkt": "abc"})))),
            ),
            ("not a JWT", "abc.def".to_owned()),
        ];
        for (what, token) in cases {
            let resp = call(rig.addr, Some(&token))?;
            refused(&resp, 401, Some("invalid_token")).map_err(|e| format!("{what}: {e}"))?;
        }
        // An audience list naming this resource among others is this resource's token.
        let listed = with(&|c| drop(c.insert("aud".into(), json!(["https://a.example.com", RESOURCE]))));
        let resp = call(rig.addr, Some(&listed))?;
        ensure(resp.status() == 200, || format!("an audience list with this resource: {}", resp.status()))
    });
}

#[test]
fn the_audience_check_is_off_only_when_asked() {
    let signer = Signer::new("k1");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let rig = rig(shim, &issuer, |r| r.audience(Audience::Unchecked));
        let mut other = claims(&issuer);
        other["aud"] = json!("https://other.example.com/mcp");
        let resp = call(rig.addr, Some(&signer.token(&other)))?;
        ensure(resp.status() == 200, || format!("audience unchecked: {}", resp.status()))
    });
}

#[test]
fn malformed_credentials_are_refused_with_invalid_request() {
    let signer = Signer::new("k1");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let rig = rig(shim, &issuer, |r| r);
        let token = signer.token(&claims(&issuer));
        let in_query = modern(1, "tools/call", json!({"name": "whoami", "arguments": {}}))
            .path(&format!("/mcp?access_token={token}"));
        let resp = Client::connect(rig.addr).map_err(|e| e.to_string())?.request(&in_query)?;
        refused(&resp, 400, Some("invalid_request")).map_err(|e| format!("a token in the query: {e}"))?;
        let twice = modern(1, "tools/call", json!({"name": "whoami", "arguments": {}}))
            .header("Authorization", &format!("Bearer {token}"))
            .header("Authorization", &format!("Bearer {token}"));
        let resp = Client::connect(rig.addr).map_err(|e| e.to_string())?.request(&twice)?;
        refused(&resp, 400, Some("invalid_request")).map_err(|e| format!("two headers: {e}"))?;
        // An 8 MiB header never reaches the verifier: the head bound refuses it, and the next
        // client is served.
        let huge = format!("Bearer {}", "a".repeat(8 << 20));
        let mut flood = Client::connect(rig.addr).map_err(|e| e.to_string())?;
        let req = modern(1, "tools/call", json!({"name": "whoami", "arguments": {}}))
            .header("Authorization", &huge);
        // An error is a connection closed while the header was still being written: refused
        // all the same.
        if let Ok(resp) = flood.request(&req) {
            ensure(resp.status() == 431, || format!("an 8 MiB header: {}", resp.status()))?;
        }
        let resp = call(rig.addr, Some(&token))?;
        ensure(resp.status() == 200, || format!("after the 8 MiB header: {}", resp.status()))
    });
}

#[test]
fn a_flood_of_unknown_key_ids_costs_one_refetch_per_floor_and_others_nothing() {
    let signer = Signer::new("k1");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        // One floor lasts the whole test: the flood may cause one refetch at most.
        let rig = rig_with_floor(shim, &issuer, Duration::from_secs(3600), |r| r);
        let good = signer.token(&claims(&issuer));
        ensure(call(rig.addr, Some(&good))?.status() == 200, || "the first call".into())?;
        let before = issuer.hits("/jwks");
        for n in 0..40 {
            let stranger = Signer::new(&format!("made-up-{n}"));
            let resp = call(rig.addr, Some(&stranger.token(&claims(&issuer))))?;
            refused(&resp, 401, Some("invalid_token")).map_err(|e| format!("unknown kid {n}: {e}"))?;
            ensure(call(rig.addr, Some(&good))?.status() == 200, || format!("the good caller, after {n}"))?;
        }
        let refetched = issuer.hits("/jwks") - before;
        ensure(refetched <= 1, || format!("{refetched} refetches within one floor"))
    });
}

#[test]
fn rotated_keys_are_fetched_when_a_token_names_the_new_one() {
    let old = Signer::new("old");
    let issuer = Issuer::start(json!({"keys": [old.jwk()]}));
    each(|shim| {
        let rig = rig(shim, &issuer, |r| r);
        ensure(call(rig.addr, Some(&old.token(&claims(&issuer))))?.status() == 200, || "the old key".into())?;
        let new = Signer::new(&format!("new-{shim:?}"));
        issuer.set_keys(json!({"keys": [old.jwk(), new.jwk()]}));
        let token = new.token(&claims(&issuer));
        // The floor may still run from the first fetch: the token is refused until it passes.
        poll_until("the rotated key is fetched", Duration::from_secs(20), || {
            Ok((call(rig.addr, Some(&token))?.status() == 200).then_some(()))
        })
    });
}

#[test]
fn an_unreachable_issuer_fails_closed_with_503_and_recovers() {
    let signer = Signer::new("k1");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        issuer.set_up(false);
        let rig = rig(shim, &issuer, |r| r);
        let token = signer.token(&claims(&issuer));
        let resp = call(rig.addr, Some(&token))?;
        ensure(resp.status() == 503, || format!("keys out of reach: {}", resp.status()))?;
        ensure(resp.header("retry-after").is_some(), || "503 without Retry-After".into())?;
        ensure(rig.server.status().http_refusals.auth_unavailable >= 1, || "not counted".into())?;
        // What is no JWT at all is refused as such, keys or none.
        refused(&call(rig.addr, Some("abc.def.ghi"))?, 401, Some("invalid_token"))?;
        issuer.set_up(true);
        poll_until("the issuer is back", Duration::from_secs(20), || {
            Ok((call(rig.addr, Some(&token))?.status() == 200).then_some(()))
        })?;
        // Down again: the keys held keep verifying the tokens they signed.
        issuer.set_up(false);
        let resp = call(rig.addr, Some(&signer.token(&claims(&issuer))))?;
        issuer.set_up(true);
        ensure(resp.status() == 200, || format!("with keys held and the issuer down: {}", resp.status()))
    });
}

#[test]
fn a_slow_issuer_is_given_up_on_and_a_key_set_too_large_is_refused() {
    let signer = Signer::new("k1");
    // Thousands of keys: more than a key set may hold.
    let many: Vec<Value> = (0..3000)
        .map(|n| json!({"kty": "EC", "crv": "P-256", "kid": format!("k{n}"), "x": "AA", "y": "AA"}))
        .collect();
    let crowded = Issuer::start(json!({"keys": many}));
    let slow = Issuer::start(json!({"keys": [signer.jwk()]}));
    slow.set_delay(Duration::from_secs(30));
    each(|shim| {
        let rig = rig(shim, &crowded, |r| r);
        let resp = call(rig.addr, Some(&signer.token(&claims(&crowded))))?;
        ensure(resp.status() == 503, || format!("a key set of 3000 keys: {}", resp.status()))?;
        let rig = rig_for(shim, &slow);
        let resp = call(rig.addr, Some(&signer.token(&claims(&slow))))?;
        ensure(resp.status() == 503, || format!("an issuer slower than the fetch timeout: {}", resp.status()))
    });
}

fn rig_for(shim: Shim, issuer: &Issuer) -> Rig {
    rig(shim, issuer, |r| r)
}

#[test]
fn a_tool_needing_a_scope_the_token_lacks_gets_the_step_up_challenge() {
    let signer = Signer::new("k1");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let rig = rig(shim, &issuer, |r| r);
        let resp = call_tool(rig.addr, "admin", Some(&signer.token(&claims(&issuer))))?;
        refused(&resp, 403, Some("insufficient_scope"))?;
        let challenge = resp.header("www-authenticate").unwrap_or_default();
        // Every scope the call needs, then those held, so the next token loses nothing.
        ensure(challenge.contains("scope=\"mcp:admin mcp:read mcp:tools\""), || {
            format!("the scopes: {challenge}")
        })?;
        let body = resp.json()?;
        ensure(body["error"]["code"] == -32023, || format!("the error: {body}"))?;
        let mut stepped = claims(&issuer);
        stepped["scope"] = json!("mcp:admin mcp:read mcp:tools");
        let resp = call_tool(rig.addr, "admin", Some(&signer.token(&stepped)))?;
        ensure(resp.status() == 200, || format!("after stepping up: {}", resp.status()))?;
        let text = resp.json()?["result"]["content"][0]["text"].clone();
        ensure(text == "admin done", || format!("the result: {text}"))
    });
}

/// `tools/call whoami` with `token` under the `DPoP` scheme and `proof` (none: no header).
fn call_bound(addr: SocketAddr, token: &str, proof: Option<&str>) -> Result<Response, String> {
    let mut req = modern(1, "tools/call", json!({"name": "whoami", "arguments": {}}))
        .header("Authorization", &format!("DPoP {token}"));
    if let Some(proof) = proof {
        req = req.header("DPoP", proof);
    }
    Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(&req)
}

/// `resp` is a `401` whose `DPoP` challenge has `error`.
fn refused_proof(resp: &Response, error: &str) -> Outcome {
    let challenge = resp.header("www-authenticate").unwrap_or_default();
    ensure(resp.status() == 401, || format!("status {} (wanted 401): {challenge}", resp.status()))?;
    ensure(challenge.starts_with("DPoP algs=\"ES256 EdDSA\""), || format!("no DPoP challenge: {challenge}"))?;
    ensure(challenge.contains(&format!("error=\"{error}\"")), || format!("wanted {error}: {challenge}"))
}

#[test]
fn dpop_bound_tokens_need_a_fresh_proof_of_their_key_once() {
    let signer = Signer::new("k1");
    let client_key = Signer::new("client");
    let other_key = Signer::new("other");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let rig = rig_with(shim, &issuer, Duration::from_millis(300), |r| r, Dpop::On);
        let mut bound = claims(&issuer);
        bound["cnf"] = json!({"jkt": client_key.thumbprint()});
        let token = signer.token(&bound);
        let proof = client_key.proof("POST", RESOURCE, &token, &json!({}));
        let resp = call_bound(rig.addr, &token, Some(&proof))?;
        ensure(resp.status() == 200, || {
            format!("a bound token with its proof: {} {:?}", resp.status(), resp.json())
        })?;
        let who = whoami(&resp)?;
        ensure(who["identity"] == "ann" && who["token_seen"] == false, || format!("the caller: {who}"))?;
        refused_proof(&call_bound(rig.addr, &token, Some(&proof))?, "invalid_dpop_proof")?;

        // Each of these is refused, and none spends the proof it carries but the last.
        let fresh = |extra: Value| client_key.proof("POST", RESOURCE, &token, &extra);
        let cases = [
            ("no proof", None),
            ("a proof for GET", Some(client_key.proof("GET", RESOURCE, &token, &json!({})))),
            (
                "a proof for another URL",
                Some(client_key.proof("POST", "https://mcp.example.com/other", &token, &json!({}))),
            ),
            ("a proof for another token", Some(client_key.proof("POST", RESOURCE, "another", &json!({})))),
            ("a proof from an hour ago", Some(fresh(json!({"iat": now() - 3600})))),
        ];
        for (what, proof) in cases {
            let resp = call_bound(rig.addr, &token, proof.as_deref())?;
            refused_proof(&resp, "invalid_dpop_proof").map_err(|e| format!("{what}: {e}"))?;
        }
        // The bound key's public key with another key's signature.
        let good = fresh(json!({}));
        let forged = {
            let parts: Vec<&str> = good.split('.').collect();
            let theirs = other_key.proof("POST", RESOURCE, &token, &json!({}));
            format!("{}.{}.{}", parts[0], parts[1], theirs.rsplit('.').next().unwrap_or_default())
        };
        refused_proof(&call_bound(rig.addr, &token, Some(&forged))?, "invalid_dpop_proof")?;
        let resp = call_bound(rig.addr, &token, Some(&good))?;
        ensure(resp.status() == 200, || format!("the real proof after its forgery: {}", resp.status()))?;

        // A proof by another key than the token's, the bound token as a bearer token, and a
        // bearer token dressed as a bound one.
        let resp =
            call_bound(rig.addr, &token, Some(&other_key.proof("POST", RESOURCE, &token, &json!({}))))?;
        refused(&resp, 401, Some("invalid_token"))?;
        refused(&call(rig.addr, Some(&token))?, 401, Some("invalid_token"))?;
        let plain = signer.token(&claims(&issuer));
        let resp =
            call_bound(rig.addr, &plain, Some(&client_key.proof("POST", RESOURCE, &plain, &json!({}))))?;
        refused(&resp, 401, Some("invalid_token"))?;
        // Bearer tokens keep working beside bound ones.
        let resp = call(rig.addr, Some(&plain))?;
        ensure(resp.status() == 200, || format!("a bearer token: {}", resp.status()))
    });
}

#[test]
fn a_resource_requiring_nonces_hands_one_out_and_takes_it_back() {
    let signer = Signer::new("k1");
    let client_key = Signer::new("client");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let rig = rig_with(shim, &issuer, Duration::from_millis(300), |r| r, Dpop::Nonces);
        let mut bound = claims(&issuer);
        bound["cnf"] = json!({"jkt": client_key.thumbprint()});
        let token = signer.token(&bound);
        let resp =
            call_bound(rig.addr, &token, Some(&client_key.proof("POST", RESOURCE, &token, &json!({}))))?;
        refused_proof(&resp, "use_dpop_nonce")?;
        let nonce = resp.header("dpop-nonce").ok_or("no DPoP-Nonce with use_dpop_nonce")?.to_owned();
        let stale = client_key.proof("POST", RESOURCE, &token, &json!({"nonce": "made-up"}));
        refused_proof(&call_bound(rig.addr, &token, Some(&stale))?, "use_dpop_nonce")?;
        let proof = client_key.proof("POST", RESOURCE, &token, &json!({"nonce": nonce}));
        let resp = call_bound(rig.addr, &token, Some(&proof))?;
        ensure(resp.status() == 200, || format!("with the nonce: {} {:?}", resp.status(), resp.json()))
    });
}

/// The resource server for opaque tokens of `issuer`, checked at its introspection endpoint
/// as the client `rs`, with `per_peer` requests in flight for one address.
fn introspected(shim: Shim, issuer: &Issuer, per_peer: usize) -> Rig {
    let resource = ResourceUrl::parse(RESOURCE).unwrap_or_else(|e| panic!("{e}"));
    let rules = ClaimRules::new(issuer.url.clone(), resource.clone());
    let verifier = IntrospectionVerifier::new(rules, format!("{}/introspect", issuer.url))
        .client_credentials("rs", "s3cret:x")
        .in_flight(32, per_peer)
        .fetch_timeout(Duration::from_secs(2));
    let protected = ProtectedResource::new(resource, [issuer.url.clone()])
        .and_then(|p| p.challenge_scopes(["mcp:tools"]))
        .unwrap_or_else(|e| panic!("{e}"));
    serve(shim, Authorization::new(protected, verifier))
}

#[test]
fn opaque_tokens_are_introspected_once_and_held_to_the_audience() {
    let issuer = Issuer::start(json!({"keys": []}));
    issuer.set_client(&mcp_proto::auth::introspection::client_basic("rs", "s3cret:x"));
    issuer.set_active("opaque-ann", claims(&issuer));
    let mut elsewhere = claims(&issuer);
    elsewhere["aud"] = json!("https://other.example.com/mcp");
    issuer.set_active("opaque-elsewhere", elsewhere);
    let mut expired = claims(&issuer);
    expired["exp"] = json!(now() - 3600);
    issuer.set_active("opaque-expired", expired);
    each(|shim| {
        let rig = introspected(shim, &issuer, 4);
        let before = issuer.hits("/introspect");
        for _ in 0..3 {
            let resp = call(rig.addr, Some("opaque-ann"))?;
            ensure(resp.status() == 200, || format!("an active token: {} {:?}", resp.status(), resp.json()))?;
            ensure(whoami(&resp)?["identity"] == "ann", || "the caller".to_owned())?;
        }
        let asked = issuer.hits("/introspect") - before;
        ensure(asked == 1, || format!("one token, asked about {asked} times"))?;
        // The endpoint answering 400 for a token it will not introspect (a JWT, say) refuses it.
        for token in ["opaque-elsewhere", "opaque-expired", "opaque-unknown", "unsupported-jwt"] {
            refused(&call(rig.addr, Some(token))?, 401, Some("invalid_token"))
                .map_err(|e| format!("{token}: {e}"))?;
        }
        // Refusals are remembered for a while too: a made-up token repeated costs one ask.
        let before = issuer.hits("/introspect");
        refused(&call(rig.addr, Some("opaque-unknown"))?, 401, Some("invalid_token"))?;
        let asked = issuer.hits("/introspect") - before;
        ensure(asked == 0, || format!("a refused token asked about again: {asked}"))
    });
}

#[test]
fn introspection_fails_closed_and_one_peer_cannot_take_every_slot() {
    let issuer = Issuer::start(json!({"keys": []}));
    issuer.set_active("opaque-ann", claims(&issuer));
    // Credentials the issuer does not take: the endpoint answers 401, so nothing is served.
    issuer.set_client("Basic d3Jvbmc6d3Jvbmc=");
    each(|shim| {
        let rig = introspected(shim, &issuer, 1);
        let resp = call(rig.addr, Some("opaque-ann"))?;
        ensure(resp.status() == 503, || format!("an endpoint refusing us: {}", resp.status()))?;
        ensure(resp.header("retry-after").is_some(), || "no Retry-After".to_owned())
    });
    issuer.set_client(&mcp_proto::auth::introspection::client_basic("rs", "s3cret:x"));
    each(|shim| {
        let rig = introspected(shim, &issuer, 1);
        // One slot for this address: while one made-up token is being asked about, a second
        // from the same address is refused at once, not queued, and costs the issuer nothing.
        issuer.set_held(true);
        let addr = rig.addr;
        let start = issuer.hits("/introspect");
        let slow = std::thread::spawn(move || call(addr, Some("opaque-made-up-1")).map(|r| r.status()));
        poll_until("the first ask", Duration::from_secs(30), || {
            Ok((issuer.hits("/introspect") > start).then_some(()))
        })?;
        let second = call(rig.addr, Some("opaque-made-up-2"));
        issuer.set_held(false);
        let second = second?;
        ensure(second.status() == 503, || {
            format!("a second ask from the same address: {}", second.status())
        })?;
        let first = slow.join().map_err(|_| "the slow call panicked".to_owned())??;
        ensure(first == 401, || format!("the first token, once asked about: {first}"))?;
        let asked = issuer.hits("/introspect") - start;
        ensure(asked == 1, || format!("asks made: {asked}"))?;
        // The slot is given back: the next token is asked about.
        refused(&call(rig.addr, Some("opaque-made-up-2"))?, 401, Some("invalid_token"))
    });
}

/// A CA's certificate, and a certificate it issued for 127.0.0.1 with its key (PEM).
fn pki() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer as CertIssuer, KeyPair, SanType};
    let fail = |e: rcgen::Error| -> ! { panic!("rcgen: {e}") };
    let ca_key = KeyPair::generate().unwrap_or_else(|e| fail(e));
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail(e));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap_or_else(|e| fail(e));
    let issuer = CertIssuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap_or_else(|e| fail(e));
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail(e));
    leaf.subject_alt_names.push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let cert = leaf.signed_by(&key, &issuer).unwrap_or_else(|e| fail(e));
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn keys_are_fetched_over_https_from_an_issuer_whose_ca_is_trusted() {
    let signer = Signer::new("k1");
    let (ca, cert, key) = pki();
    let issuer = Issuer::start_tls(json!({"keys": [signer.jwk()]}), cert.as_bytes(), key.as_bytes());
    assert!(issuer.url.starts_with("https://"));
    each(|shim| {
        let resource = ResourceUrl::parse(RESOURCE).unwrap_or_else(|e| panic!("{e}"));
        let protected =
            ProtectedResource::new(resource.clone(), [issuer.url.clone()]).unwrap_or_else(|e| panic!("{e}"));
        let rules = ClaimRules::new(issuer.url.clone(), resource);
        let floor = KeyPolicy::new(Duration::from_millis(300), Duration::from_secs(3600));
        let trusting = JwtVerifier::new(rules.clone())
            .key_policy(floor.clone())
            .trust_roots(ca.as_bytes())
            .map_err(|e| format!("the CA: {e}"))?;
        let rig = serve(shim, Authorization::new(protected.clone(), trusting));
        let token = signer.token(&claims(&issuer));
        let resp = call(rig.addr, Some(&token))?;
        ensure(resp.status() == 200, || format!("with the CA trusted: {} {:?}", resp.status(), resp.json()))?;
        // The same issuer, its CA not trusted: its keys cannot be had, so nothing is served.
        let doubting = JwtVerifier::new(rules).key_policy(floor);
        let rig = serve(shim, Authorization::new(protected, doubting));
        let resp = call(rig.addr, Some(&token))?;
        ensure(resp.status() == 503, || format!("with the CA not trusted: {}", resp.status()))
    });
}

/// The resource under [`RESOURCE`], taking DPoP-bound tokens (ES256, EdDSA) of `issuer`.
fn bound_resource(issuer: &Issuer) -> Authorization {
    let resource = ResourceUrl::parse(RESOURCE).unwrap_or_else(|e| panic!("{e}"));
    let protected = ProtectedResource::new(resource.clone(), [issuer.url.clone()])
        .map(|p| p.dpop(["ES256", "EdDSA"]))
        .unwrap_or_else(|e| panic!("{e}"));
    Authorization::new(protected, JwtVerifier::new(ClaimRules::new(issuer.url.clone(), resource)))
}

#[test]
fn a_dpop_proof_spent_on_one_replica_is_refused_on_another() {
    let signer = Signer::new("k1");
    let client_key = Signer::new("client");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let cluster = std::sync::Arc::new(mcp_server::InMemoryCluster::default());
        let a = serve_replica(shim, bound_resource(&issuer), Some((&cluster, "a")));
        let b = serve_replica(shim, bound_resource(&issuer), Some((&cluster, "b")));
        let mut bound = claims(&issuer);
        bound["cnf"] = json!({"jkt": client_key.thumbprint()});
        let token = signer.token(&bound);
        let proof = client_key.proof("POST", RESOURCE, &token, &json!({}));
        let resp = call_bound(a.addr, &token, Some(&proof))?;
        ensure(resp.status() == 200, || format!("on replica a: {} {:?}", resp.status(), resp.json()))?;
        refused_proof(&call_bound(b.addr, &token, Some(&proof))?, "invalid_dpop_proof")
            .map_err(|e| format!("the same proof on replica b: {e}"))?;
        let fresh = client_key.proof("POST", RESOURCE, &token, &json!({}));
        let resp = call_bound(b.addr, &token, Some(&fresh))?;
        ensure(resp.status() == 200, || format!("a fresh proof on replica b: {}", resp.status()))
    });
}

/// Replica `name` of `cluster` under `authorization`, serving on a loopback port it advertises
/// (so that the other replicas forward to it).
fn advertised(
    shim: Shim,
    authorization: Authorization,
    cluster: &std::sync::Arc<mcp_server::InMemoryCluster>,
    name: &str,
) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
    let whoami = Tool::new("whoami", "Says who calls", json!({"type": "object"}));
    let builder = Server::builder("auth", "1.0.0")
        .authorization(authorization)
        .tool(whoami, |call: ToolCall| async move {
            ToolOutput::text(json!({"identity": call.ctx.caller.identity}).to_string())
        })
        .cluster(cluster.clone() as std::sync::Arc<dyn mcp_server::Cluster>, name)
        .cluster_advertise(format!("http://{addr}/mcp"));
    let server = block_on(shim, builder.join()).unwrap_or_else(|e| panic!("the test server is valid: {e}"));
    serve_on(shim, listener, server, HttpConfig::default());
    addr
}

#[test]
fn a_dpop_bound_caller_keeps_its_legacy_session_through_another_replica() {
    const LEGACY: &str = "2025-11-25";
    let signer = Signer::new("k1");
    let client_key = Signer::new("client");
    let issuer = Issuer::start(json!({"keys": [signer.jwk()]}));
    each(|shim| {
        let cluster = std::sync::Arc::new(mcp_server::InMemoryCluster::default());
        let a = advertised(shim, bound_resource(&issuer), &cluster, "a");
        let b = advertised(shim, bound_resource(&issuer), &cluster, "b");
        let mut bound = claims(&issuer);
        bound["cnf"] = json!({"jkt": client_key.thumbprint()});
        let token = signer.token(&bound);
        let send = |addr: SocketAddr, body: Value, sid: Option<&str>, proof: &str| {
            let mut req = Req::post(body.to_string())
                .header("Authorization", &format!("DPoP {token}"))
                .header("DPoP", proof);
            if let Some(sid) = sid {
                req = req.header("MCP-Protocol-Version", LEGACY).header("Mcp-Session-Id", sid);
            }
            Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(&req)
        };
        let proof = || client_key.proof("POST", RESOURCE, &token, &json!({}));
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let resp = send(a, init, None, &proof())?;
        ensure(resp.status() == 200, || format!("initialize on a: {} {:?}", resp.status(), resp.json()))?;
        let sid = resp.header("mcp-session-id").ok_or("no session id")?.to_owned();

        // Through b, which admits the proof, claims it for the cluster and forwards to a.
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "whoami", "arguments": {}}});
        let spent = proof();
        let resp = send(b, call.clone(), Some(&sid), &spent)?;
        ensure(resp.status() == 200, || {
            format!("through b: {} {}", resp.status(), String::from_utf8_lossy(&resp.body))
        })?;
        ensure(resp.header("mcp-served-by") == Some("a"), || format!("served by: {resp:?}"))?;
        let text = String::from_utf8_lossy(&resp.body);
        ensure(text.contains(r#"\"identity\":\"ann\""#), || format!("the caller on a: {text}"))?;
        // That proof is spent on both replicas, and the forwarding header alone vouches for
        // nothing.
        for (via, addr) in [("b", b), ("a", a)] {
            refused_proof(&send(addr, call.clone(), Some(&sid), &spent)?, "invalid_dpop_proof")
                .map_err(|e| format!("the spent proof again via {via}: {e}"))?;
        }
        let forged = Req::post(call.to_string())
            .header("Authorization", &format!("DPoP {token}"))
            .header("DPoP", &spent)
            .header("MCP-Protocol-Version", LEGACY)
            .header("Mcp-Session-Id", &sid)
            .header("mcp-forwarded-by", "b")
            .header("mcp-forwarded-peer", "127.0.0.1");
        let resp = Client::connect(a).map_err(|e| format!("connect: {e}"))?.request(&forged)?;
        refused_proof(&resp, "invalid_dpop_proof").map_err(|e| format!("a forged forward: {e}"))
    });
}

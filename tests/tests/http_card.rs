//! The server card (SEP-2127) over real loopback HTTP on both runtimes: served at
//! `<endpoint>/server-card` with its media type, a strong ETag honoured by `If-None-Match`,
//! open CORS and a preflight answer, `HEAD`, `405` for other methods, the extension's JSON
//! Schema, and the protected resource's fields when authorization is on.

use mcp_proto::auth::token::ClaimRules;
use mcp_proto::auth::{ProtectedResource, ResourceUrl};
use mcp_proto::card::{ServerCard, MEDIA_TYPE};
use mcp_proto::http::HttpConfig;
use mcp_server::auth::{Authorization, JwtVerifier};
use mcp_server::{BuildError, Server, ServerBuilder};
use mcp_tests::http::{each, ensure, modern, serve, Client, Outcome, Req, Response, Shim};
use serde_json::{json, Value};

const CARD: &str = "/mcp/server-card";

fn builder() -> ServerBuilder {
    let mut b = Server::builder("weather", "1.2.0");
    b.config_mut().server_info.description = Some("Forecasts by city".into());
    b.config_mut().server_info.title = Some("Weather".into());
    b
}

fn card() -> ServerCard {
    ServerCard::new("com.example/weather").unwrap_or_else(|e| panic!("{e}"))
}

fn get(addr: std::net::SocketAddr, req: Req) -> Result<Response, String> {
    Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(&req)
}

fn body_json(resp: &Response) -> Result<Value, String> {
    resp.json()
}

fn card_get(shim: Shim) -> Outcome {
    let card = card().url("http://127.0.0.1/mcp").map_err(|e| e.to_string())?;
    let server = builder().server_card(card).build().map_err(|e| e.to_string())?;
    let addr = serve(shim, server, HttpConfig::default());
    let req =
        Req::new("GET", CARD).header("Accept", MEDIA_TYPE).header("Origin", "https://elsewhere.example");
    let resp = get(addr, req)?;
    ensure(resp.status() == 200, || format!("GET: {} {:?}", resp.status(), resp.head.headers))?;
    ensure(resp.header("content-type") == Some(MEDIA_TYPE), || format!("{:?}", resp.head.headers))?;
    ensure(resp.header("cache-control") == Some("public, max-age=3600"), || "cache-control".into())?;
    ensure(resp.header("access-control-allow-origin") == Some("*"), || "allow-origin".into())?;
    ensure(resp.header("access-control-expose-headers") == Some("ETag"), || "expose-headers".into())?;
    let etag = resp.header("etag").ok_or("no ETag")?.to_owned();
    ensure(etag.starts_with('"') && !etag.starts_with("W/"), || format!("not a strong tag: {etag}"))?;
    let doc = body_json(&resp)?;
    mcp_testkit::card::validate(&doc)?;
    ensure(doc["name"] == "com.example/weather" && doc["version"] == "1.2.0", || doc.to_string())?;
    ensure(doc["title"] == "Weather" && doc["description"] == "Forecasts by city", || doc.to_string())?;
    let remote = &doc["remotes"][0];
    ensure(remote["type"] == "streamable-http" && remote["url"] == "http://127.0.0.1/mcp", || {
        doc.to_string()
    })?;
    ensure(
        remote["supportedProtocolVersions"]
            == json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]),
        || doc.to_string(),
    )?;
    ensure(remote.get("headers").is_none(), || "no auth, no headers".into())?;

    // Revalidation: the tag itself, `*`, and a list holding its weak form.
    for value in [etag.clone(), "*".to_owned(), format!("\"stale\", W/{etag}")] {
        let resp = get(addr, Req::new("GET", CARD).header("If-None-Match", &value))?;
        ensure(resp.status() == 304, || format!("If-None-Match {value}: {}", resp.status()))?;
        ensure(resp.body.is_empty(), || "a 304 has no body".into())?;
        ensure(resp.header("etag") == Some(etag.as_str()), || "a 304 names its tag".into())?;
        ensure(resp.header("cache-control").is_some(), || "a 304 repeats Cache-Control".into())?;
    }
    let stale = get(addr, Req::new("GET", CARD).header("If-None-Match", "\"stale\""))?;
    ensure(stale.status() == 200, || format!("a stale tag: {}", stale.status()))?;
    ensure(stale.body == resp.body, || "the same card".into())?;

    // HEAD: the GET's headers and length, no body (the next request on the connection reads clean).
    let mut client = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    client.send(&Req::new("HEAD", CARD).to_bytes()).map_err(|e| format!("send: {e}"))?;
    let head = client.head()?;
    ensure(head.status == 200, || format!("HEAD: {}", head.status))?;
    let length = resp.body.len().to_string();
    ensure(head.header("content-length") == Some(length.as_str()), || format!("HEAD: {:?}", head.headers))?;
    ensure(head.header("etag") == Some(etag.as_str()), || "HEAD: etag".into())?;
    let after = client.request(&Req::new("GET", CARD).header("If-None-Match", &etag))?;
    ensure(after.status() == 304, || format!("after HEAD: {}", after.status()))?;

    // The CORS preflight a browser sends before a GET with If-None-Match.
    let pre = get(
        addr,
        Req::new("OPTIONS", CARD)
            .header("Origin", "https://elsewhere.example")
            .header("Access-Control-Request-Method", "GET")
            .header("Access-Control-Request-Headers", "if-none-match"),
    )?;
    ensure(pre.status() == 204, || format!("OPTIONS: {}", pre.status()))?;
    ensure(pre.header("access-control-allow-origin") == Some("*"), || "preflight origin".into())?;
    let allowed = pre.header("access-control-allow-headers").unwrap_or_default().to_ascii_lowercase();
    ensure(allowed.contains("if-none-match"), || format!("preflight headers: {allowed}"))?;

    for method in ["POST", "PUT", "DELETE"] {
        let resp = get(addr, Req::new(method, CARD).body(b"{}".to_vec()))?;
        ensure(resp.status() == 405, || format!("{method}: {}", resp.status()))?;
        ensure(resp.header("allow") == Some("GET, HEAD, OPTIONS"), || format!("{method}: allow"))?;
    }

    // The endpoint is unchanged beside it.
    let discover = get(addr, modern(1, "server/discover", json!({})))?;
    let found = discover.json()?;
    ensure(found["result"]["supportedVersions"] == remote["supportedProtocolVersions"], || found.to_string())
}

#[test]
fn card_is_served_with_validators_cors_and_head() {
    each(card_get);
}

fn no_card(shim: Shim) -> Outcome {
    let server = builder().build().map_err(|e| e.to_string())?;
    let addr = serve(shim, server, HttpConfig::default());
    let resp = get(addr, Req::new("GET", CARD))?;
    ensure(resp.status() == 404, || format!("no card configured: {}", resp.status()))
}

#[test]
fn without_a_card_the_path_is_not_found() {
    each(no_card);
}

const RESOURCE: &str = "https://mcp.example.com/mcp";

fn protected(shim: Shim) -> Outcome {
    let resource = ResourceUrl::parse(RESOURCE).map_err(|e| e.to_string())?;
    let metadata = ProtectedResource::new(resource.clone(), ["https://as.example.com"])
        .and_then(|p| p.scopes_supported(["mcp:tools"]))
        .map_err(|e| e.to_string())?;
    let verifier = JwtVerifier::new(ClaimRules::new("https://as.example.com", resource));
    let server = builder()
        .authorization(Authorization::new(metadata, verifier))
        .server_card(card())
        .build()
        .map_err(|e| e.to_string())?;
    let addr = serve(shim, server, HttpConfig::default());
    // No token: the card is public, as the resource's metadata is.
    let resp = get(addr, Req::new("GET", CARD))?;
    ensure(resp.status() == 200, || format!("GET without a token: {}", resp.status()))?;
    let doc = body_json(&resp)?;
    mcp_testkit::card::validate(&doc)?;
    let remote = &doc["remotes"][0];
    ensure(remote["url"] == RESOURCE, || doc.to_string())?;
    let header = &remote["headers"][0];
    ensure(
        header["name"] == "Authorization" && header["isRequired"] == true && header["isSecret"] == true,
        || doc.to_string(),
    )?;
    let text = header["description"].as_str().unwrap_or_default();
    ensure(text.contains("https://mcp.example.com/.well-known/oauth-protected-resource/mcp"), || {
        text.into()
    })?;
    // The endpoint itself still wants a token.
    let call = get(addr, modern(1, "server/discover", json!({})))?;
    ensure(call.status() == 401, || format!("the endpoint without a token: {}", call.status()))
}

#[test]
fn protected_server_card_names_its_authorization() {
    each(protected);
}

#[test]
fn card_needs_a_description() {
    let built = Server::builder("weather", "1.2.0").server_card(card()).build();
    assert!(matches!(built, Err(BuildError::Card(mcp_proto::card::CardError::NoDescription))));
}

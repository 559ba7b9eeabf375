//! The `everything` demo server, shared by the tokio and smol examples so both serve exactly the
//! same tools: `echo` and `add` (the benchmark contract), the result-only tool fixtures of the
//! MCP conformance suite, the `counter` MCP App (`apps.rs`), and `--extra-tools N` generated
//! tools for exercising pagination.

use bigdecimal::BigDecimal;
use mcp_proto::apps::Visibility;
use mcp_proto::interaction::InputRequest;
use mcp_proto::{
    Caller, Completion, Content, Gate, HandlerError, LogLevel, Prompt, PromptArgument, PromptMessage,
    PromptOutput, Resource, ResourceContents, ResourceTemplate, Tool, ToolOutput,
};
use mcp_server::{Complete, GetPrompt, ReadResource, Server, ServerBuilder, ToolCall};
use serde_json::{json, Number, Value};
use std::str::FromStr;

#[path = "apps.rs"]
mod apps;
#[path = "cluster.rs"]
mod cluster;
#[path = "skills.rs"]
mod skills;
#[path = "tasks.rs"]
mod tasks;

/// Command-line options.
pub(crate) struct Args {
    pub(crate) extra_tools: usize,
    /// Roles of the stdio caller: whoever launches the server vouches for who is on the pipe.
    pub(crate) roles: Vec<String>,
    /// Serve only the benchmark contract's tools (`echo`, `add`), the catalogue every peer of
    /// ../shared/bench serves, so `tools/list` rows compare like with like.
    pub(crate) bench: bool,
    /// Serve Streamable HTTP on this address instead of stdio (`--http 127.0.0.1:3000`).
    pub(crate) http: Option<String>,
    /// Raise the session, stream, seat and connection bounds to this (load and memory tests).
    pub(crate) capacity: Option<usize>,
    /// Expire legacy sessions idle this long (`--session-idle SECS`; the default is 15 min).
    pub(crate) session_idle: Option<std::time::Duration>,
    /// Browser origins allowed besides the server's own (`--allow-origin http://localhost:6274`).
    pub(crate) origins: Vec<String>,
    /// Runtime threads (`--threads N`; 1, the default, runs everything on one thread).
    /// Read by the tokio example; smol runs on one thread.
    #[allow(dead_code)] // the smol build ignores it
    pub(crate) threads: Option<usize>,
    /// Engines to serve HTTP with (`--shards N`; 1 by default): see `mcp_server::Shards`.
    pub(crate) shards: Option<usize>,
    /// How tools are published (`--mode compact|direct`; direct, the MCP norm, by default).
    pub(crate) mode: mcp_proto::Mode,
    /// The Redis server of the cluster this process is a replica of (`--cluster redis://HOST:PORT`).
    pub(crate) cluster: Option<String>,
    /// This replica's name in logs and in `replica_status` (`--replica NAME`; default the
    /// process id).
    pub(crate) replica: Option<String>,
    /// The URL the other replicas forward this one's sessions and running tasks to
    /// (`--advertise http://HOST:PORT/mcp`; default `http://<--http address>/mcp`).
    pub(crate) advertise: Option<String>,
    /// The authorization server whose JWT access tokens the HTTP endpoint requires
    /// (`--auth-issuer URL`); none by default: the endpoint is open (to loopback peers).
    pub(crate) auth_issuer: Option<String>,
    /// The endpoint's canonical URL, the audience its tokens must name (`--auth-resource URL`;
    /// default `http://<--http address>/mcp`).
    pub(crate) auth_resource: Option<String>,
    /// Take DPoP-bound tokens too (`--auth-dpop`).
    pub(crate) auth_dpop: bool,
    /// Check tokens at this introspection endpoint instead of as JWTs
    /// (`--auth-introspect URL --auth-client ID:SECRET`).
    pub(crate) auth_introspect: Option<(String, Option<String>)>,
    /// Serve HTTPS with this certificate chain and key, PEM files (`--tls-cert FILE --tls-key
    /// FILE`; the example built with `--features tls`).
    pub(crate) tls: Option<(String, String)>,
}

const USAGE: &str =
    "usage: everything [--extra-tools N] [--role ROLE]... [--bench] [--http ADDR] [--allow-origin ORIGIN]... [--capacity N] [--session-idle SECS] [--threads N] [--shards N] [--mode compact|direct] [--cluster redis://HOST:PORT [--replica NAME] [--advertise URL]] [--auth-issuer URL [--auth-resource URL] [--auth-dpop] [--auth-introspect URL [--auth-client ID:SECRET]]] [--tls-cert FILE --tls-key FILE]\n\
    Serves the demo MCP server on stdin/stdout, or over HTTP with --http.\n\
    --extra-tools N   also register N generated tools (extra_0000 ...), to exercise pagination\n\
    --role ROLE       give the stdio caller this role; `--role admin` reveals the gated\n\
    \x20                 admin_echo tool and test://admin-secret resource\n\
    --bench           serve only echo and add, with the bench peers' definitions\n\
    --http ADDR       serve Streamable HTTP on ADDR (e.g. 127.0.0.1:3000; port 0 picks one)\n\
    \x20                 at /mcp instead of stdio, and print `listening on http://HOST:PORT/mcp`\n\
    \x20                 to stderr once bound; --role applies to stdio only\n\
    --allow-origin O  also accept requests from the browser origin O (e.g. the MCP Inspector's\n\
    \x20                 http://localhost:6274 when it connects directly, not via its proxy)\n\
    --capacity N      allow N sessions, N held streams (all from one caller if need be) and\n\
    \x20                 N connections instead of the defaults (for load and memory tests)\n\
    --session-idle S  expire a legacy session after S seconds without a request or a stream\n\
    \x20                 (default 900; the soak test abandons sessions and shortens it)\n\
    --threads N       run on N threads (default 1: single-threaded, the fastest on small\n\
    \x20                 machines; tokio: N workers, smol: N global executor threads)\n\
    --shards N        serve HTTP with N engines, each with its own driver, connections spread\n\
    \x20                 over them (default 1; --threads then defaults to N)\n\
    --mode M          publish tools directly (direct, the default: each is a native tool) or\n\
    \x20                 compactly (compact: search_tools, get_tool_details and call_tool)\n\
    --cluster URL     run as a replica of the cluster on the Redis server at URL: list changes,\n\
    \x20                 resource updates, the cursor key ring and ended tasks are shared with the\n\
    \x20                 other replicas, and a replica_status tool is added\n\
    --replica NAME    this replica's name in logs and replica_status (default pid-<process id>)\n\
    --advertise URL   the URL at which the other replicas reach this one's MCP endpoint, to\n\
    \x20                 forward requests for its sessions and running tasks (default\n\
    \x20                 http://<--http ADDR>/mcp)\n\
    --auth-issuer URL require, over HTTP, a JWT access token from the authorization server at\n\
    \x20                 URL (its keys found by its metadata), issued for this endpoint; adds\n\
    \x20                 the whoami tool, which needs the mcp:whoami scope\n\
    --auth-resource U this endpoint's canonical URL, the audience tokens must name and the\n\
    \x20                 protected resource metadata's `resource` (default http(s)://<--http ADDR>/mcp)\n\
    --auth-dpop       also take DPoP-bound tokens (RFC 9449), each request with its proof\n\
    --auth-introspect URL  check tokens (opaque ones too) at this introspection endpoint\n\
    \x20                 instead of as JWTs; --auth-client ID:SECRET authenticates there\n\
    --tls-cert FILE   with --tls-key FILE: serve HTTPS (HTTP/2 or HTTP/1.1 by ALPN) with this\n\
    \x20                 PEM certificate chain and key (build with --features tls)";

impl Args {
    /// The stdio caller these options describe.
    pub(crate) fn caller(&self) -> Caller {
        let mut caller = Caller::identified("stdio");
        caller.roles.clone_from(&self.roles);
        caller
    }
}

/// No options, as a bare `everything` runs: every demo tool, on stdio, for a caller with no roles.
impl Default for Args {
    fn default() -> Self {
        Args {
            extra_tools: 0,
            roles: Vec::new(),
            bench: false,
            http: None,
            capacity: None,
            shards: None,
            session_idle: None,
            origins: Vec::new(),
            threads: None,
            mode: mcp_proto::Mode::Direct,
            cluster: None,
            replica: None,
            advertise: None,
            auth_issuer: None,
            auth_resource: None,
            auth_dpop: false,
            auth_introspect: None,
            tls: None,
        }
    }
}

/// Parses `std::env::args`, or returns the message to print.
pub(crate) fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let (mut cert, mut key) = (None, None);
    let (mut introspect, mut client) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bench" => args.bench = true,
            "--http" => {
                args.http = Some(it.next().ok_or_else(|| format!("--http needs an address\n{USAGE}"))?)
            }
            "--role" => args.roles.push(it.next().ok_or_else(|| format!("--role needs a name\n{USAGE}"))?),
            "--extra-tools" => {
                let n = it.next().ok_or_else(|| format!("--extra-tools needs a number\n{USAGE}"))?;
                args.extra_tools =
                    n.parse().map_err(|_| format!("--extra-tools: {n:?} is not a number\n{USAGE}"))?;
            }
            "--allow-origin" => args
                .origins
                .push(it.next().ok_or_else(|| format!("--allow-origin needs an origin\n{USAGE}"))?),
            "--session-idle" => {
                let n =
                    it.next().ok_or_else(|| format!("--session-idle needs a number of seconds\n{USAGE}"))?;
                let secs: u64 = n.parse().map_err(|_| {
                    format!("--session-idle: {n:?} is not a whole number of seconds\n{USAGE}")
                })?;
                args.session_idle = Some(std::time::Duration::from_secs(secs));
            }
            "--capacity" => {
                let n = it.next().ok_or_else(|| format!("--capacity needs a number\n{USAGE}"))?;
                args.capacity =
                    Some(n.parse().map_err(|_| format!("--capacity: {n:?} is not a number\n{USAGE}"))?);
            }
            "--threads" => {
                let n = it.next().ok_or_else(|| format!("--threads needs a number\n{USAGE}"))?;
                match n.parse() {
                    Ok(n) if n > 0 => args.threads = Some(n),
                    _ => return Err(format!("--threads: {n:?} is not a number above 0\n{USAGE}")),
                }
            }
            "--shards" => {
                let n = it.next().ok_or_else(|| format!("--shards needs a number\n{USAGE}"))?;
                match n.parse() {
                    Ok(n) if n > 0 => args.shards = Some(n),
                    _ => return Err(format!("--shards: {n:?} is not a number above 0\n{USAGE}")),
                }
            }
            "--mode" => {
                args.mode = match it.next().as_deref() {
                    Some("direct") => mcp_proto::Mode::Direct,
                    Some("compact") => mcp_proto::Mode::Compact,
                    other => {
                        let given = other.unwrap_or("nothing");
                        return Err(format!("--mode: {given:?} is neither compact nor direct\n{USAGE}"));
                    }
                }
            }
            "--cluster" => {
                args.cluster = Some(it.next().ok_or_else(|| format!("--cluster needs a URL\n{USAGE}"))?)
            }
            "--advertise" => {
                args.advertise = Some(it.next().ok_or_else(|| format!("--advertise needs a URL\n{USAGE}"))?)
            }
            "--replica" => {
                args.replica = Some(it.next().ok_or_else(|| format!("--replica needs a name\n{USAGE}"))?)
            }
            "--auth-issuer" => {
                args.auth_issuer =
                    Some(it.next().ok_or_else(|| format!("--auth-issuer needs a URL\n{USAGE}"))?)
            }
            "--auth-resource" => {
                args.auth_resource =
                    Some(it.next().ok_or_else(|| format!("--auth-resource needs a URL\n{USAGE}"))?)
            }
            "--auth-dpop" => args.auth_dpop = true,
            "--auth-introspect" => {
                introspect = Some(it.next().ok_or_else(|| format!("--auth-introspect needs a URL\n{USAGE}"))?)
            }
            "--auth-client" => {
                client = Some(it.next().ok_or_else(|| format!("--auth-client needs ID:SECRET\n{USAGE}"))?)
            }
            "--tls-cert" => {
                cert = Some(it.next().ok_or_else(|| format!("--tls-cert needs a file\n{USAGE}"))?)
            }
            "--tls-key" => key = Some(it.next().ok_or_else(|| format!("--tls-key needs a file\n{USAGE}"))?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if args.shards.is_some_and(|n| n > 1) && (args.http.is_none() || args.cluster.is_some()) {
        return Err(format!("--shards serves HTTP, and does not combine with --cluster\n{USAGE}"));
    }
    // The default advertisement is the --http address; one the other replicas cannot dial
    // would make every forwarded request fail, so it is refused here rather than discovered
    // there.
    if let (Some(_), None, Some(addr)) = (&args.cluster, &args.advertise, &args.http) {
        let undialable = addr.ends_with(":0") || addr.starts_with("0.0.0.0:") || addr.starts_with("[::]:");
        if undialable {
            return Err(format!(
                "--cluster with --http {addr}: the other replicas cannot reach that address; give --advertise http://HOST:PORT/mcp\n{USAGE}"
            ));
        }
    }
    args.tls = match (cert, key) {
        (Some(cert), Some(key)) if args.http.is_some() => Some((cert, key)),
        (None, None) => None,
        (Some(_), Some(_)) => return Err(format!("--tls-cert serves HTTPS: give --http ADDR\n{USAGE}")),
        _ => return Err(format!("--tls-cert and --tls-key go together\n{USAGE}")),
    };
    if args.tls.is_some() && !cfg!(feature = "tls") {
        return Err(format!(
            "--tls-cert: this build has no TLS; build the example with --features tls\n{USAGE}"
        ));
    }
    args.auth_introspect = match (introspect, client) {
        (Some(_), Some(c)) if !c.contains(':') => {
            return Err(format!("--auth-client {c:?}: give ID:SECRET\n{USAGE}"));
        }
        (Some(url), client) => Some((url, client)),
        (None, None) => None,
        (None, Some(_)) => return Err(format!("--auth-client goes with --auth-introspect\n{USAGE}")),
    };
    if (args.auth_dpop || args.auth_introspect.is_some()) && args.auth_issuer.is_none() {
        return Err(format!("--auth-dpop and --auth-introspect refine --auth-issuer: give it\n{USAGE}"));
    }
    if args.auth_issuer.is_some() {
        if args.http.is_none() {
            return Err(format!("--auth-issuer protects the HTTP endpoint: give --http ADDR\n{USAGE}"));
        }
        if args.auth_resource.is_none() && args.http.as_ref().is_some_and(|a| a.ends_with(":0")) {
            return Err(format!(
                "--auth-issuer with --http on port 0: the audience is not known yet; give --auth-resource URL\n{USAGE}"
            ));
        }
    }
    Ok(args)
}

/// The resource server `--auth-issuer` asks for: JWT access tokens of that issuer, for this
/// endpoint (the audience checked); every demo tool needs no scope beyond the token but
/// `whoami`, added with it, which needs `mcp:whoami`.
fn authorization(args: &Args) -> Result<Option<mcp_server::auth::Authorization>, String> {
    use mcp_proto::auth::token::ClaimRules;
    use mcp_proto::auth::{ProtectedResource, ResourceUrl};
    let Some(issuer) = &args.auth_issuer else { return Ok(None) };
    let resource = match (&args.auth_resource, &args.http) {
        (Some(url), _) => url.clone(),
        (None, Some(addr)) => format!("{}://{addr}/mcp", if args.tls.is_some() { "https" } else { "http" }),
        (None, None) => return Ok(None),
    };
    let resource = ResourceUrl::parse(&resource).map_err(|e| format!("--auth-resource {resource}: {e}"))?;
    // What a client is told to ask for: the demo's tools, and whoami's own scope on step-up.
    let protected = ProtectedResource::new(resource.clone(), [issuer.clone()])
        .and_then(|p| p.scopes_supported(["mcp:tools", "mcp:whoami"]))
        .and_then(|p| p.challenge_scopes(["mcp:tools"]))
        .map_err(|e| format!("--auth-issuer {issuer}: {e}"))?;
    let protected =
        if args.auth_dpop { protected.dpop(["ES256", "EdDSA", "RS256", "PS256"]) } else { protected };
    let rules = ClaimRules::new(issuer.clone(), resource);
    Ok(Some(match &args.auth_introspect {
        Some((url, client)) => {
            let mut verifier = mcp_server::auth::IntrospectionVerifier::new(rules, url.clone());
            if let Some((id, secret)) = client.as_deref().and_then(|c| c.split_once(':')) {
                verifier = verifier.client_credentials(id, secret);
            }
            mcp_server::auth::Authorization::new(protected, verifier)
        }
        None => mcp_server::auth::Authorization::new(protected, mcp_server::auth::JwtVerifier::new(rules)),
    }))
}

/// The HTTP endpoint policy these arguments describe (their bounds are set in [`build`]).
pub(crate) fn http_config(args: &Args) -> mcp_proto::http::HttpConfig {
    let mut http = mcp_proto::http::HttpConfig::default();
    for origin in &args.origins {
        http.allow_origin(origin.clone());
    }
    http
}

/// Tells whoever started the server where it listens, as the one line scripts and tests parse:
/// `listening on http://HOST:PORT/mcp` (`https://` with TLS) on stderr.
pub(crate) fn announce(addr: std::net::SocketAddr, args: &Args) {
    let scheme = if args.tls.is_some() { "https" } else { "http" };
    eprintln!("listening on {scheme}://{addr}/mcp");
}

/// The certificate and key `--tls-cert` and `--tls-key` name, read now (the process exits with
/// why when they cannot be used).
#[cfg(feature = "tls")]
pub(crate) fn tls_config(args: &Args) -> Option<mcp_server::tls::TlsConfig> {
    let (cert, key) = args.tls.as_ref()?;
    match mcp_server::tls::TlsConfig::from_pem_files(cert, key) {
        Ok(tls) => Some(tls),
        Err(e) => {
            eprintln!("everything: --tls-cert {cert} --tls-key {key}: {e}");
            std::process::exit(2)
        }
    }
}

/// How long calls in flight may run on after SIGINT or SIGTERM before they are cancelled, and
/// the longest the process then waits for its connections to close: the server's stdio drain
/// timeout ([`mcp_proto::Limits::drain_timeout`], 10 s by default).
pub(crate) fn shutdown_budget(server: &mcp_server::Server) -> std::time::Duration {
    server.limits().drain_time()
}

/// Reports a shutdown on a signal, on stderr; with `--bench`, also how long each shard's
/// engine was busy (`mcp_server::Status::engine_busy`) against how long it had been up, one
/// `everything: shard I engine_busy_ms=B up_ms=U` line each: bench/run.sh reads the driver's
/// share of a core from it.
pub(crate) fn stopped(shards: &mcp_server::Shards, args: &Args, cancelled: usize) {
    tracing::info!(cancelled, "stopped on a signal");
    if args.bench {
        let up = STARTED.get().map_or(0, |t| t.elapsed().as_millis());
        for (i, s) in shards.servers().iter().enumerate() {
            eprintln!(
                "everything: shard {i} engine_busy_ms={} up_ms={up}",
                s.status().engine_busy.as_millis()
            );
        }
    }
}

/// When the servers were built: the start of `up_ms` in [`stopped`].
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Logs go to stderr: stdout carries only protocol bytes.
pub(crate) fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// First addend: at most 1,000 significant digits, none beyond 10^±10,000.
    a: Number,
    /// Second addend: at most 1,000 significant digits, none beyond 10^±10,000.
    b: Number,
}

/// Significant digits an addend of `add` may have. Default 1,000; more is refused as a tool error.
const ADD_MAX_DIGITS: u64 = 1_000;
/// How far from the units any digit of an addend may be: an exponent of at most 10,000 either
/// way (1e10000 and 1e-10000 are the extremes). Past it, a tool error. An exact sum has a digit
/// for every power of ten between its addends' extremes, so this bounds a sum to ~20,000 digits;
/// unbounded, `{"a":1e9000000000,"b":1}` would ask for nine billion.
const ADD_MAX_EXPONENT: i64 = 10_000;

/// What `add` says about an addend out of bounds.
fn add_bounds() -> String {
    format!(
        "each addend may have at most {ADD_MAX_DIGITS} significant digits, none beyond 10^±{ADD_MAX_EXPONENT}"
    )
}

/// Checks an addend against [`ADD_MAX_DIGITS`] and [`ADD_MAX_EXPONENT`] from its text alone
/// (JSON number syntax, as the client wrote it), before anything is allocated for its value.
fn check_addend(n: &Number) -> Result<(), String> {
    let text = n.to_string();
    let out = || format!("{text} is out of bounds: {}", add_bounds());
    let unsigned = text.strip_prefix('-').unwrap_or(&text);
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    // An exponent that does not fit an i64 is far out of bounds anyway.
    let exponent: i64 = exponent.parse().map_err(|_| out())?;
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let written = u64::try_from(int.len().saturating_add(frac.len())).map_err(|_| out())?;
    let leading_zeros = int.bytes().chain(frac.bytes()).take_while(|&b| b == b'0').count();
    let significant = written.saturating_sub(u64::try_from(leading_zeros).map_err(|_| out())?);
    if significant > ADD_MAX_DIGITS {
        return Err(out());
    }
    // The power of ten of the last digit written, and of the first significant one. Zeros
    // count too: `0.000…0` with a million zeros is exact to a millionth decimal place.
    let last = exponent.checked_sub(i64::try_from(frac.len()).map_err(|_| out())?).ok_or_else(out)?;
    let first = last.saturating_add(i64::try_from(significant).map_err(|_| out())?.saturating_sub(1));
    if last < -ADD_MAX_EXPONENT || first > ADD_MAX_EXPONENT {
        return Err(out());
    }
    Ok(())
}

/// A 1×1 PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";
/// Eight samples of silence, 8-bit mono WAV.
const WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// Exact decimal sum: the arguments keep every digit the client sent, so no f64 rounding here.
/// Addends out of bounds ([`check_addend`]) are refused before any arithmetic.
fn add(a: &Number, b: &Number) -> Result<String, String> {
    check_addend(a)?;
    check_addend(b)?;
    let parse =
        |n: &Number| BigDecimal::from_str(&n.to_string()).map_err(|e| format!("{n} is not a number: {e}"));
    Ok((parse(a)? + parse(b)?).normalized().to_plain_string())
}

fn no_args() -> serde_json::Value {
    json!({"type": "object", "properties": {}})
}

fn text(uri: &str, mime: &str, body: &str) -> Result<Vec<ResourceContents>, HandlerError> {
    Ok(vec![ResourceContents::text(uri, mime, body)])
}

/// `test_trigger_*_change` flip a dynamic item: registered if absent, unregistered if present,
/// so every call changes the list and listening clients are told.
/// Held across a toggle's remove-then-add: two calls at once (a batch, or two clients) would
/// otherwise both find the item absent and both add it.
static TOGGLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn toggle_tool(server: &Server) -> ToolOutput {
    let _one_at_a_time = TOGGLE.lock().unwrap_or_else(|p| p.into_inner());
    if server.remove_tool("test_dynamic_tool") {
        return ToolOutput::text("Removed test_dynamic_tool; clients were told the tool list changed.");
    }
    let tool = Tool::new("test_dynamic_tool", "A tool that comes and goes", no_args());
    match server.add_tool(tool, |_| async { ToolOutput::text("dynamic tool called") }) {
        Ok(()) => ToolOutput::text("Added test_dynamic_tool; clients were told the tool list changed."),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

fn toggle_prompt(server: &Server) -> ToolOutput {
    let _one_at_a_time = TOGGLE.lock().unwrap_or_else(|p| p.into_inner());
    if server.remove_prompt("test_dynamic_prompt") {
        return ToolOutput::text("Removed test_dynamic_prompt; clients were told the prompt list changed.");
    }
    let prompt = Prompt::new("test_dynamic_prompt").description("A prompt that comes and goes");
    let added = server.add_prompt(prompt, |_| async {
        Ok(PromptOutput::messages(vec![PromptMessage::user(Content::text("dynamic prompt"))]))
    });
    match added {
        Ok(()) => ToolOutput::text("Added test_dynamic_prompt; clients were told the prompt list changed."),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

/// `echo` and `add` as the demo documents them: typed, their bounds in their descriptions.
fn demo_tools(builder: ServerBuilder) -> ServerBuilder {
    builder
        .typed_tool("echo", "Echoes back the given text", |a: EchoArgs, _: ToolCall| async move {
            ToolOutput::text(a.text)
        })
        // Arithmetic on big decimals is CPU work: it runs on the blocking pool, off the threads
        // that serve the connections. A declaration of its own links the "Exact sum" app,
        // which shows the results; the input schema is still derived from `AddArgs`.
        .blocking_typed_tool_with(
            Tool::new(
                "add",
                "Adds two numbers exactly and returns the sum as text; each number may have at most \
                 1,000 significant digits, none beyond 10^±10,000 (1e10000 and 1e-10000 are the \
                 extremes)",
                json!({"type": "object"}),
            )
            .ui(apps::SUM_URI, Visibility::ModelAndApp),
            |a: AddArgs, _: ToolCall| sum(&a),
        )
}

/// `echo` and `add` with the benchmark peers' exact definitions (names, descriptions, schemas:
/// ../shared/bench/peers/null), so every `tools/list` in a comparison carries the same bytes of
/// catalogue; the handlers are the demo's.
fn bench_tools(builder: ServerBuilder) -> ServerBuilder {
    let echo = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let add = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
    builder
        // Their schemas are declared, so they are kept as written; the arguments still arrive typed.
        .typed_tool_with(
            Tool::new("echo", "Echo the given text", echo),
            |a: EchoArgs, _: ToolCall| async move { ToolOutput::text(a.text) },
        )
        .blocking_typed_tool_with(Tool::new("add", "Add two numbers", add), |a: AddArgs, _: ToolCall| sum(&a))
}

fn sum(a: &AddArgs) -> ToolOutput {
    match add(&a.a, &a.b) {
        Ok(sum) => ToolOutput::text(sum),
        Err(e) => ToolOutput::error(e),
    }
}

/// Suggestions for `test_prompt_with_arguments` and the template's `id`: fixed words that start
/// with what was typed.
async fn complete(req: Complete) -> Result<Completion, HandlerError> {
    const WORDS: [&str; 6] = ["test", "testValue1", "testValue2", "alpha", "beta", "123"];
    let values: Vec<String> =
        WORDS.iter().filter(|w| w.starts_with(&req.value)).map(|w| (*w).to_owned()).collect();
    Ok(Completion { total: Some(values.len() as u64), values, has_more: false })
}

/// Builds the server with every demo tool: a replica of the cluster `--cluster` names, if any.
pub(crate) async fn build_replica(args: &Args) -> Server {
    match &args.cluster {
        Some(url) => {
            let replica = args.replica.clone().unwrap_or_else(|| format!("pid-{}", std::process::id()));
            let mut builder = builder(args);
            let advertise =
                args.advertise.clone().or_else(|| args.http.as_ref().map(|a| format!("http://{a}/mcp")));
            if let Some(url) = advertise {
                builder = builder.cluster_advertise(url);
            }
            cluster::join(builder, url, &replica).await
        }
        None => build(args),
    }
}

/// The server `build_replica` builds, or the shards `--shards N` asks for.
pub(crate) async fn build_shards(args: &Args) -> mcp_server::Shards {
    let _ = STARTED.set(std::time::Instant::now());
    match args.shards {
        Some(n) if n > 1 => match builder(args).build_shards(Some(n)).await {
            Ok(shards) => shards,
            Err(e) => {
                eprintln!("everything: {e}");
                std::process::exit(2)
            }
        },
        _ => mcp_server::Shards::from(build_replica(args).await),
    }
}

/// Builds the server with every demo tool.
pub(crate) fn build(args: &Args) -> Server {
    match builder(args).build() {
        Ok(server) => server,
        Err(e) => {
            eprintln!("everything: {e}");
            std::process::exit(2)
        }
    }
}

/// The server `--bench` serves with no other option given, from code that builds nothing else:
/// what the bench examples link.
// The everything examples build theirs through `build`.
#[allow(dead_code)]
pub(crate) fn bench_server() -> Server {
    match bench_tools(named()).build() {
        Ok(server) => server,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2)
        }
    }
}

/// The demo's name, version and instructions.
fn named() -> ServerBuilder {
    Server::builder("mcp-rs-everything", env!("CARGO_PKG_VERSION"))
        .instructions("Demo server of the mcp-rs workspace: echo, add and the conformance fixtures.")
}

/// Every demo tool, as `args` ask.
fn builder(args: &Args) -> ServerBuilder {
    let builder = named().mode(args.mode);
    let mut builder = if args.bench {
        bench_tools(builder)
    } else {
        skills::skills(apps::apps(tasks::task_tools(interactions(fixtures(demo_tools(builder))))))
    };
    if let Some(idle) = args.session_idle {
        builder.config_mut().limits.session_idle(idle);
    }
    if let Some(n) = args.capacity {
        let limits = &mut builder.config_mut().limits;
        limits
            .max_sessions(n)
            .max_sessions_per_caller(Some(n))
            .max_connections(n.saturating_mul(2))
            .max_streams(Some(n))
            .max_streams_per_caller(Some(n))
            .max_http_connections(n)
            .max_http_connections_per_peer(Some(n));
    }
    match authorization(args) {
        Ok(Some(auth)) => {
            // A tool a token's scopes must cover beyond the rest: what step-up is tried on.
            let whoami = Tool::new(
                "whoami",
                "Says who the verified caller is (needs the mcp:whoami scope)",
                no_args(),
            )
            .scopes(["mcp:whoami"]);
            builder = builder.authorization(auth).tool(whoami, |call: ToolCall| async move {
                let caller = &call.ctx.caller;
                let who = json!({"identity": caller.identity, "roles": caller.roles});
                ToolOutput::text(who.to_string())
            })
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("everything: {e}");
            std::process::exit(2)
        }
    }
    for i in 0..args.extra_tools {
        let name = format!("extra_{i:04}");
        let tool = Tool::new(name.clone(), format!("Generated tool number {i}"), no_args());
        builder = builder.tool(tool, move |_| {
            let name = name.clone();
            async move { ToolOutput::text(format!("{name} called")) }
        });
    }
    builder
}

/// The conformance fixtures, the trigger tools and the gated items.
fn fixtures(builder: ServerBuilder) -> ServerBuilder {
    builder
        // The fixtures log (test_tool_with_logging) and report resource changes
        // (test_trigger_resource_update), so the server advertises both.
        .logging()
        .resource_subscriptions()
        .tool(Tool::new("test_simple_text", "Returns a simple text response", no_args()), |_| async {
            ToolOutput::text("This is a simple text response for testing.")
        })
        .tool(Tool::new("test_image_content", "Returns a 1x1 PNG image", no_args()), |_| async {
            ToolOutput::content(vec![Content::image(PNG, "image/png")])
        })
        .tool(Tool::new("test_audio_content", "Returns a short WAV clip", no_args()), |_| async {
            ToolOutput::content(vec![Content::audio(WAV, "audio/wav")])
        })
        .tool(
            Tool::new("test_embedded_resource", "Returns an embedded text resource", no_args()),
            |_| async {
                ToolOutput::content(vec![Content::resource(ResourceContents::text(
                    "test://embedded-resource",
                    "text/plain",
                    "This is an embedded resource content.",
                ))])
            },
        )
        .tool(
            Tool::new("test_multiple_content_types", "Returns text, an image and a resource", no_args()),
            |_| async {
                ToolOutput::content(vec![
                    Content::text("Multiple content types test:"),
                    Content::image(PNG, "image/png"),
                    Content::resource(ResourceContents::text(
                        "test://mixed-content-resource",
                        "application/json",
                        r#"{"test":"data","value":123}"#,
                    )),
                ])
            },
        )
        .tool(
            Tool::new("test_error_handling", "Always fails, as a tool result with isError", no_args()),
            |_| async { ToolOutput::error("This tool intentionally returns an error for testing") },
        )
        .tool(
            Tool::new("test_tool_with_logging", "Sends three log messages while it runs", no_args()),
            |call: ToolCall| async move {
                for step in ["Tool execution started", "Tool processing data", "Tool execution completed"] {
                    call.ctx.log(LogLevel::Info, Some("everything"), json!(step));
                }
                ToolOutput::text("Logging tool finished")
            },
        )
        .tool(
            Tool::new(
                "test_tool_with_progress",
                "Reports progress 0, 50, 100 of 100 while it runs",
                no_args(),
            ),
            |call: ToolCall| async move {
                for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        // Just over the engine's default 100 ms progress spacing.
                        call.ctx.sleep(std::time::Duration::from_millis(110)).await;
                    }
                    call.ctx.progress(step, Some(100.0), Some(&format!("step {}", i + 1)));
                }
                ToolOutput::text("Progress tool finished")
            },
        )
        .tool(
            Tool::new(
                "test_logging_tool",
                "Logs at info; on 2026-07-28 only when the request asks",
                no_args(),
            ),
            |call: ToolCall| async move {
                call.ctx.log(LogLevel::Info, Some("everything"), json!("test_logging_tool ran"));
                ToolOutput::text("Logged once, if the client asked for logs")
            },
        )
        .tool(
            Tool::new("test_trigger_tool_change", "Adds or removes test_dynamic_tool", no_args()),
            |call: ToolCall| async move { toggle_tool(call.ctx.server()) },
        )
        .tool(
            Tool::new("test_trigger_prompt_change", "Adds or removes test_dynamic_prompt", no_args()),
            |call: ToolCall| async move { toggle_prompt(call.ctx.server()) },
        )
        .tool(
            Tool::new("test_trigger_resource_update", "Marks test://watched-resource as updated", no_args()),
            |call: ToolCall| async move {
                call.ctx.server().notify_resource_updated("test://watched-resource");
                ToolOutput::text("Subscribers of test://watched-resource were told it changed.")
            },
        )
        .tool(
            Tool::new(
                "admin_echo",
                "Echoes text; only callers with the admin role see this tool",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            )
            .gate(Gate::role("admin")),
            |call: ToolCall| async move {
                let text = call.arguments.get("text").and_then(|t| t.as_str()).unwrap_or_default().to_owned();
                ToolOutput::text(format!("admin: {text}"))
            },
        )
        .resource(
            Resource::new("test://static-text", "static-text")
                .description("A static text resource")
                .mime_type("text/plain"),
            |r: ReadResource| async move {
                text(&r.uri, "text/plain", "This is the content of the static text resource.")
            },
        )
        .resource(
            Resource::new("test://static-binary", "static-binary")
                .description("A static binary resource (a 1x1 PNG)")
                .mime_type("image/png"),
            |r: ReadResource| async move { Ok(vec![ResourceContents::blob(r.uri, "image/png", PNG)]) },
        )
        .resource(
            Resource::new("test://watched-resource", "watched-resource")
                .description("A resource to subscribe to; test_trigger_resource_update changes it")
                .mime_type("text/plain"),
            |r: ReadResource| async move { text(&r.uri, "text/plain", "Watched resource content.") },
        )
        .resource(
            Resource::new("test://admin-secret", "admin-secret")
                .description("Only callers with the admin role see this resource")
                .mime_type("text/plain")
                .gate(Gate::role("admin")),
            |r: ReadResource| async move { text(&r.uri, "text/plain", "The admin secret.") },
        )
        .template(
            ResourceTemplate::new("test://template/{id}/data", "template-data")
                .description("Data for any id")
                .mime_type("application/json"),
            |r: ReadResource| async move {
                let id = r.var("id").unwrap_or_default().to_owned();
                let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                text(&r.uri, "application/json", &body.to_string())
            },
        )
        .completion(complete)
        .prompt(
            Prompt::new("test_simple_prompt").description("A prompt without arguments"),
            |_: GetPrompt| async {
                Ok(PromptOutput::messages(vec![PromptMessage::user(Content::text(
                    "This is a simple prompt for testing.",
                ))]))
            },
        )
        .prompt(
            Prompt::new("test_prompt_with_arguments")
                .description("A prompt with two required arguments")
                .argument(PromptArgument::required("arg1", "First argument"))
                .argument(PromptArgument::required("arg2", "Second argument")),
            |p: GetPrompt| async move {
                let arg = |n: &str| p.arguments.get(n).cloned().unwrap_or_default();
                let text = format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"));
                Ok(PromptOutput::messages(vec![PromptMessage::user(Content::text(text))]))
            },
        )
        .completion(complete)
        .prompt(
            Prompt::new("test_prompt_with_embedded_resource")
                .description("A prompt that embeds a resource")
                .argument(PromptArgument::required("resourceUri", "URI of the resource to embed")),
            |p: GetPrompt| async move {
                let uri = p.arguments.get("resourceUri").cloned().unwrap_or_default();
                Ok(PromptOutput::messages(vec![
                    PromptMessage::user(Content::resource(ResourceContents::text(
                        uri,
                        "text/plain",
                        "Embedded resource content for testing.",
                    ))),
                    PromptMessage::user(Content::text("Please process the embedded resource above.")),
                ]))
            },
        )
        .prompt(
            Prompt::new("test_prompt_with_image").description("A prompt with an image"),
            |_: GetPrompt| async {
                Ok(PromptOutput::messages(vec![
                    PromptMessage::user(Content::image(PNG, "image/png")),
                    PromptMessage::user(Content::text("Please analyze the image above.")),
                ]))
            },
        )
        .tool(
            Tool::new(
                "json_schema_2020_12_tool",
                "Takes arguments described by a JSON Schema 2020-12 document with $defs",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": {
                        "address": {
                            "$anchor": "address",
                            "type": "object",
                            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                        }
                    },
                    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                    "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
                    "if": {"required": ["address"]},
                    "then": {"properties": {"name": {"minLength": 1}}},
                    "else": {"required": ["name"]},
                    "additionalProperties": false
                }),
            ),
            |call: ToolCall| async move {
                ToolOutput::text(format!("Received: {}", serde_json::Value::Object(call.arguments)))
            },
        )
}

/// An argument of a tool call, as text (`""` when absent).
fn arg(call: &ToolCall, name: &str) -> String {
    call.arguments.get(name).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The text a sampling answer carries, if any.
fn sampled_text(answer: &Value) -> &str {
    answer["content"]["text"].as_str().unwrap_or("")
}

/// A one-field text form.
fn form(field: &str, kind: &str) -> Value {
    json!({"type": "object", "properties": {field: {"type": kind}}, "required": [field]})
}

fn request(
    r: Result<InputRequest, mcp_proto::interaction::InteractionError>,
) -> Result<InputRequest, HandlerError> {
    r.map_err(HandlerError::private)
}

/// The fixtures that ask the client for input: one handler each, whatever the protocol era
/// (legacy sessions get real requests, 2026-07-28 gets `input_required` and a retry).
fn interactions(builder: ServerBuilder) -> ServerBuilder {
    let prompt_schema =
        json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]});
    let message_schema =
        json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
    builder
        .tool(
            Tool::new("test_sampling", "Asks the client's LLM to answer the prompt", prompt_schema),
            |call: ToolCall| async move {
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": arg(&call, "prompt")}}],
                    "maxTokens": 100});
                let answer = call.ctx.ask_one("sample_request", request(InputRequest::sample(params))?).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("LLM response: {}", sampled_text(&answer))))
            },
        )
        .tool(
            Tool::new("test_elicitation", "Asks the user for a username and an email", message_schema),
            |call: ToolCall| async move {
                let schema = json!({"type": "object", "properties": {
                    "username": {"type": "string", "description": "Your username"},
                    "email": {"type": "string", "description": "Your email address"}},
                    "required": ["username", "email"]});
                let answer = call.ctx.ask_one("user_info", request(InputRequest::elicit(arg(&call, "message"), schema))?).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!(
                    "User response: action={}, content={}",
                    answer["action"].as_str().unwrap_or(""),
                    answer.get("content").cloned().unwrap_or(json!({}))
                )))
            },
        )
        .tool(
            Tool::new("test_elicitation_sep1034_defaults", "Asks for a form whose every field has a default", no_args()),
            |call: ToolCall| async move {
                let schema = json!({"type": "object", "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "default": true}}});
                let req = request(InputRequest::elicit("Please review your details", schema))?;
                let answer = call.ctx.ask_one("details", req).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Elicitation completed: {answer}")))
            },
        )
        .tool(
            Tool::new("test_elicitation_sep1330_enums", "Asks for a form with every kind of choice", no_args()),
            |call: ToolCall| async move {
                let titled = |p: &str, t: &str| {
                    (1..=3).map(|i| json!({"const": format!("{p}{i}"), "title": format!("{t} {i}")})).collect::<Vec<_>>()
                };
                let schema = json!({"type": "object", "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": titled("value", "Option")},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "minItems": 1, "maxItems": 3,
                        "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "minItems": 1, "maxItems": 3,
                        "items": {"anyOf": titled("value", "Choice")}}}});
                let answer = call.ctx.ask_one("choices", request(InputRequest::elicit("Pick your options", schema))?).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Elicitation completed: {answer}")))
            },
        )
        .tool(
            Tool::new("test_reconnection", "Streams a log line, then answers after a pause", no_args()),
            |call: ToolCall| async move {
                call.ctx.log(LogLevel::Info, Some("everything"), json!("reconnection test started"));
                call.ctx.sleep(std::time::Duration::from_millis(100)).await;
                ToolOutput::text("Reconnection test completed")
            },
        )
        .tool(
            Tool::new("test_missing_capability", "Needs the client's sampling capability", no_args()),
            |call: ToolCall| async move {
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Say hello"}}],
                    "maxTokens": 20});
                let answer = call.ctx.ask_one("sample_request", request(InputRequest::sample(params))?).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Sampled: {}", sampled_text(&answer))))
            },
        )
        .tool(
            Tool::new("test_streaming_elicitation", "Reports progress, then asks for a confirmation", no_args()),
            |call: ToolCall| async move {
                call.ctx.progress(1.0, Some(2.0), Some("asking for confirmation"));
                let answer = call.ctx.ask_one("confirm", request(InputRequest::elicit("Continue?", form("ok", "boolean")))?).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Confirmation: {}", answer["action"].as_str().unwrap_or(""))))
            },
        )
        .tool(
            Tool::new("test_input_required_result_elicitation", "Asks for a name (key user_name)", no_args()),
            |call: ToolCall| async move {
                let answer = call.ctx.ask_one("user_name", request(InputRequest::elicit("What is your name?", form("name", "string")))?).await?;
                let name = answer["content"]["name"].as_str().unwrap_or("stranger");
                Ok::<_, HandlerError>(ToolOutput::text(format!("Hello, {name}!")))
            },
        )
        .tool(
            Tool::new("test_input_required_result_sampling", "Asks the client's LLM for a sample", no_args()),
            |call: ToolCall| async move {
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Write a haiku"}}],
                    "maxTokens": 100});
                let answer = call.ctx.ask_one("sample_request", request(InputRequest::sample(params))?).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Sample: {}", sampled_text(&answer))))
            },
        )
        .tool(
            Tool::new("test_input_required_result_list_roots", "Asks for the client's roots", no_args()),
            |call: ToolCall| async move {
                let answer = call.ctx.ask_one("roots_request", InputRequest::list_roots()).await?;
                let n = answer["roots"].as_array().map_or(0, Vec::len);
                Ok::<_, HandlerError>(ToolOutput::text(format!("Found {n} root(s)")))
            },
        )
        .tool(
            Tool::new("test_input_required_result_request_state", "Asks for a confirmation; the state rides along", no_args()),
            |call: ToolCall| async move {
                // What the first round learnt rides, sealed, in the requestState to the retry.
                if call.ctx.carried_state().is_none() {
                    call.ctx.carry_state("state-ok");
                }
                let answer = call.ctx.ask_one("confirm", request(InputRequest::elicit("Proceed?", form("ok", "boolean")))?).await?;
                let carried = call.ctx.carried_state().unwrap_or_else(|| "state-ok (one round)".to_owned());
                Ok::<_, HandlerError>(ToolOutput::text(format!("{carried}: confirmed={}", answer["content"]["ok"])))
            },
        )
        .tool(
            Tool::new("test_input_required_result_multiple_inputs", "Asks for a form, a sample and the roots at once", no_args()),
            |call: ToolCall| async move {
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
                    "maxTokens": 50});
                let answers = call
                    .ctx
                    .ask(vec![
                        ("user_name".into(), request(InputRequest::elicit("Your name?", form("name", "string")))?),
                        ("sample_request".into(), request(InputRequest::sample(params))?),
                        ("roots_request".into(), InputRequest::list_roots()),
                    ])
                    .await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Received {} answers", answers.len())))
            },
        )
        .tool(
            Tool::new("test_input_required_result_multi_round", "Asks two questions, one round each", no_args()),
            |call: ToolCall| async move {
                let first = call.ctx.ask_one("step1", request(InputRequest::elicit("Step 1: your name?", form("name", "string")))?).await?;
                let second = call.ctx.ask_one("step2", request(InputRequest::elicit("Step 2: your favourite colour?", form("color", "string")))?).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!(
                    "Completed: name={}, color={}",
                    first["content"]["name"], second["content"]["color"]
                )))
            },
        )
        .tool(
            Tool::new("test_input_required_result_tampered_state", "Asks for a name; its state is HMAC-sealed", no_args()),
            |call: ToolCall| async move {
                let answer = call.ctx.ask_one("user_name", request(InputRequest::elicit("What is your name?", form("name", "string")))?).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Hello, {}!", answer["content"]["name"])))
            },
        )
        .tool(
            Tool::new("test_input_required_result_capabilities", "Asks only for what the client can answer", no_args()),
            |call: ToolCall| async move {
                let elicit = request(InputRequest::elicit("Your name?", form("name", "string")))?;
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Pick a name"}}],
                    "maxTokens": 20});
                // Elicit when the client can answer a form; otherwise fall back to sampling.
                let (key, req) = if call.ctx.can_ask(&elicit) {
                    ("user_name", elicit)
                } else {
                    ("sample_request", request(InputRequest::sample(params))?)
                };
                let answer = call.ctx.ask_one(key, req).await?;
                Ok::<_, HandlerError>(ToolOutput::text(format!("Answered: {answer}")))
            },
        )
        .tool(
            Tool::new(
                "test_header_param",
                "Echoes its region, which 2026-07-28 clients mirror in the Mcp-Param-Region header",
                json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
            ),
            |call: ToolCall| async move { ToolOutput::text(format!("region: {}", arg(&call, "region"))) },
        )
        .prompt(
            Prompt::new("test_input_required_result_prompt").description("A prompt that first asks for context"),
            |p: GetPrompt| async move {
                let answer = p
                    .ctx
                    .ask_one("user_context", request(InputRequest::elicit("What is the context?", form("context", "string")))?)
                    .await?;
                let context = answer["content"]["context"].as_str().unwrap_or("").to_owned();
                Ok(PromptOutput::messages(vec![PromptMessage::user(Content::text(format!(
                    "Context: {context}"
                )))]))
            },
        )
}

#[cfg(test)]
mod tests {
    #[test]
    fn exact_sums() {
        let n = |s: &str| serde_json::Number::from_str(s).unwrap();
        use std::str::FromStr;
        assert_eq!(super::add(&n("2"), &n("3.5")).unwrap(), "5.5");
        assert_eq!(super::add(&n("1"), &n("2")).unwrap(), "3");
        assert_eq!(super::add(&n("9007199254740993"), &n("1")).unwrap(), "9007199254740994");
        assert_eq!(super::add(&n("0.1"), &n("0.2")).unwrap(), "0.3");
        assert_eq!(super::add(&n("1e10000"), &n("-1e10000")).unwrap(), "0");
        assert_eq!(super::add(&n("1e-10000"), &n("0")).unwrap(), format!("0.{}1", "0".repeat(9999)));
        let digits = "9".repeat(1000);
        assert!(super::add(&n(&digits), &n("1")).is_ok());
    }

    #[test]
    fn addends_out_of_bounds_are_refused_unread() {
        use std::str::FromStr;
        let n = |s: &str| serde_json::Number::from_str(s).unwrap();
        for bad in [
            "1e9000000000".to_owned(),
            "1e99999999999999999999".to_owned(),
            "1e10001".to_owned(),
            "1e-10001".to_owned(),
            "-12.5E10000".to_owned(),
            "1".repeat(1001),
            format!("0.{}", "0".repeat(10_001)),
            format!("0.{}1", "0".repeat(10_000)),
        ] {
            let err = super::add(&n(&bad), &n("1")).unwrap_err();
            assert!(err.contains("out of bounds") && err.contains("1000 significant digits"), "{bad}: {err}");
            assert!(super::add(&n("1"), &n(&bad)).is_err(), "{bad} as b");
        }
        // Leading zeros are not significant.
        assert!(super::add(&n(&format!("0.{}1", "0".repeat(2000))), &n("1")).is_ok());
    }
}

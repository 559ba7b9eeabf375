//! HTTPS on both runtimes (`serve_https`): curl as the client, over HTTP/1.1 and HTTP/2
//! (chosen by ALPN), the certificate reloaded while serving, and what a client that never
//! finishes its handshake can cost (its own place, for the handshake timeout).

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_proto::{Caller, Tool, ToolOutput};
use mcp_server::tls::ClientCertificates;
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{each, ensure, serve_tls, test_server, Outcome};
use mcp_tokio::TlsConfig;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

/// A CA and a certificate it issued for `localhost` and 127.0.0.1, as PEM files in a fresh
/// folder: `ca.pem`, `cert.pem`, `key.pem`.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mcp-https-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let pki = Self { dir };
        pki.issue(&pki.dir.join("ca.pem"), &pki.dir.join("cert.pem"), &pki.dir.join("key.pem"));
        pki
    }

    /// A new CA (to `ca`) and a leaf it signed (to `cert`, with its key to `key`).
    fn issue(&self, ca: &Path, cert: &Path, key: &Path) {
        let fail = |e: rcgen::Error| -> ! { panic!("rcgen: {e}") };
        let ca_key = KeyPair::generate().unwrap_or_else(|e| fail(e));
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail(e));
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "mcp test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap_or_else(|e| fail(e));
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap_or_else(|e| fail(e));
        let mut leaf = CertificateParams::new(vec!["localhost".to_owned()]).unwrap_or_else(|e| fail(e));
        leaf.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap_or_else(|e| fail(e));
        let write = |path: &Path, text: String| {
            std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        write(ca, ca_cert.pem());
        write(cert, leaf_cert.pem());
        write(key, leaf_key.serialize_pem());
        // A client certificate from the same CA, for mutual TLS.
        let client_key = KeyPair::generate().unwrap_or_else(|e| fail(e));
        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail(e));
        client.distinguished_name.push(DnType::CommonName, "alice");
        let client_cert = client.signed_by(&client_key, &issuer).unwrap_or_else(|e| fail(e));
        write(&ca.with_file_name("client.pem"), client_cert.pem());
        write(&ca.with_file_name("client-key.pem"), client_key.serialize_pem());
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn config(&self) -> TlsConfig {
        TlsConfig::from_pem_files(self.path("cert.pem"), self.path("key.pem"))
            .unwrap_or_else(|e| panic!("the test certificate: {e}"))
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What curl saw: the HTTP version, the status, the body and the session id.
struct Seen {
    version: String,
    status: u16,
    body: String,
    session: Option<String>,
}

/// An `initialize` POSTed by curl to `https://localhost:<port>/mcp` (resolved to `addr`),
/// trusting `ca`, with `--http1.1` or `--http2`.
fn curl_initialize(addr: SocketAddr, ca: &Path, version: &str) -> Result<Seen, String> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}"#;
    let url = format!("https://localhost:{}/mcp", addr.port());
    let heads = ca.with_file_name(format!("heads-{}-{}", addr.port(), version.trim_start_matches('-')));
    let out = Command::new("curl")
        .arg("-D")
        .arg(&heads)
        .args(["-sS", "--max-time", "20", version, "--cacert"])
        .arg(ca)
        .args(["--resolve", &format!("localhost:{}:127.0.0.1", addr.port())])
        .args(["-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream"])
        .args(["-d", body, "-w", "\n%{http_version} %{http_code}", &url])
        .output()
        .map_err(|e| format!("curl: {e} (is curl installed?)"))?;
    if !out.status.success() {
        return Err(format!("curl failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, tail) = text.rsplit_once('\n').ok_or_else(|| format!("curl printed {text:?}"))?;
    let (version, status) = tail.split_once(' ').ok_or_else(|| format!("curl printed {tail:?}"))?;
    let status = status.parse().map_err(|_| format!("status {status:?}"))?;
    let heads = std::fs::read_to_string(&heads).unwrap_or_default();
    let session = header_of(&heads, "mcp-session-id");
    Ok(Seen { version: version.to_owned(), status, body: body.to_owned(), session })
}

fn header_of(heads: &str, name: &str) -> Option<String> {
    heads.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

/// A `GET` of the session's SSE stream over HTTP/2, read for a second: the status line and
/// the content type curl saw.
fn curl_sse(addr: SocketAddr, ca: &Path, session: &str) -> Result<(String, Option<String>), String> {
    let url = format!("https://localhost:{}/mcp", addr.port());
    let out = Command::new("curl")
        .args(["-sS", "-N", "--max-time", "1", "--http2", "-D", "-", "-o", "/dev/null", "--cacert"])
        .arg(ca)
        .args(["--resolve", &format!("localhost:{}:127.0.0.1", addr.port())])
        .args(["-H", "accept: text/event-stream", "-H", &format!("mcp-session-id: {session}")])
        .args(["-H", "mcp-protocol-version: 2025-06-18", &url])
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    // The stream stays open: curl ends it at --max-time (exit 28), having read the head.
    let heads = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = heads.lines().next().unwrap_or_default().trim().to_owned();
    Ok((status, header_of(&heads, "content-type")))
}

fn initialized(seen: &Seen, version: &str) -> Outcome {
    ensure(seen.status == 200, || format!("status {}: {}", seen.status, seen.body))?;
    ensure(seen.version == version, || format!("HTTP version {} (wanted {version})", seen.version))?;
    ensure(seen.body.contains("\"serverInfo\""), || format!("not an initialize result: {}", seen.body))
}

#[test]
fn https_serves_http2_and_http1_by_alpn() {
    let pki = Pki::new("alpn");
    each(|shim| {
        let addr = serve_tls(shim, test_server(shim), HttpConfig::default(), pki.config());
        let h2 = curl_initialize(addr, &pki.path("ca.pem"), "--http2")?;
        initialized(&h2, "2")?;
        // The session's SSE stream over HTTP/2.
        let session = h2.session.ok_or("no session id over HTTP/2")?;
        let (status, kind) = curl_sse(addr, &pki.path("ca.pem"), &session)?;
        ensure(status == "HTTP/2 200", || format!("the SSE stream's status line: {status:?}"))?;
        ensure(kind.as_deref() == Some("text/event-stream"), || format!("the SSE stream's type: {kind:?}"))?;
        initialized(&curl_initialize(addr, &pki.path("ca.pem"), "--http1.1")?, "1.1")?;
        // HTTP/2 turned off: a client offering h2 gets HTTP/1.1.
        let addr = serve_tls(shim, test_server(shim), HttpConfig::default(), pki.config().http2(false));
        initialized(&curl_initialize(addr, &pki.path("ca.pem"), "--http2")?, "1.1")
    });
}

#[test]
fn a_reloaded_certificate_serves_the_next_handshake_and_a_bad_one_changes_nothing() {
    each(|shim| {
        let pki = Pki::new(&format!("reload-{shim:?}"));
        let tls = pki.config();
        let addr = serve_tls(shim, test_server(shim), HttpConfig::default(), tls.clone());
        initialized(&curl_initialize(addr, &pki.path("ca.pem"), "--http2")?, "2")?;
        // A renewed certificate from another CA, written over the same files.
        pki.issue(&pki.path("ca2.pem"), &pki.path("cert.pem"), &pki.path("key.pem"));
        ensure(curl_initialize(addr, &pki.path("ca2.pem"), "--http2").is_err(), || {
            "the new certificate served before the reload".to_owned()
        })?;
        tls.reload().map_err(|e| format!("reload: {e}"))?;
        initialized(&curl_initialize(addr, &pki.path("ca2.pem"), "--http2")?, "2")?;
        ensure(curl_initialize(addr, &pki.path("ca.pem"), "--http2").is_err(), || {
            "the old certificate still served after the reload".to_owned()
        })?;
        // A key file that holds no key: refused, and the certificate in use stays.
        std::fs::write(pki.path("key.pem"), "not a key").map_err(|e| e.to_string())?;
        ensure(tls.reload().is_err(), || "a reload without a key succeeded".to_owned())?;
        initialized(&curl_initialize(addr, &pki.path("ca2.pem"), "--http1.1")?, "1.1")
    });
}

/// Reads from `stream` until the server closes it (or 30 s pass): whether it was closed.
fn closed_by_server(mut stream: TcpStream) -> bool {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

#[test]
fn a_handshake_never_finished_is_closed_and_plain_http_is_refused() {
    let pki = Pki::new("handshake");
    each(|shim| {
        let tls = pki.config().handshake_timeout(Duration::from_millis(300));
        let addr = serve_tls(shim, test_server(shim), HttpConfig::default(), tls);
        let silent = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        // While it sits in its handshake, another client is served.
        initialized(&curl_initialize(addr, &pki.path("ca.pem"), "--http2")?, "2")?;
        ensure(closed_by_server(silent), || "a silent handshake was never closed".to_owned())?;
        let mut plain = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        std::io::Write::write_all(&mut plain, b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .map_err(|e| e.to_string())?;
        ensure(closed_by_server(plain), || "plain HTTP on the TLS port was not closed".to_owned())?;
        // An untrusted certificate is the client's refusal, not a server failure.
        let other = Pki::new(&format!("untrusted-{shim:?}"));
        ensure(curl_initialize(addr, &other.path("ca.pem"), "--http2").is_err(), || {
            "curl trusted a certificate of another CA".to_owned()
        })?;
        initialized(&curl_initialize(addr, &pki.path("ca.pem"), "--http1.1")?, "1.1")
    });
}

/// A server whose identify hook names the client by its certificate: alice for the one the
/// test CA issued her (`client.pem`), nobody without one; `whoami` says who called.
fn certified_server(pki: &Pki) -> Server {
    use rustls_pki_types::pem::PemObject as _;
    let pem = std::fs::read(pki.path("client.pem")).unwrap_or_else(|e| panic!("client.pem: {e}"));
    let alice = rustls_pki_types::CertificateDer::from_pem_slice(&pem).expect("alice's certificate").to_vec();
    Server::builder("mtls", "1.0.0")
        .tool(
            Tool::new("whoami", "Says who the caller is", serde_json::json!({"type": "object"})),
            |call: ToolCall| async move {
                ToolOutput::text(call.ctx.caller.identity.clone().unwrap_or_else(|| "anonymous".to_owned()))
            },
        )
        .identify(move |head| {
            let alice = alice.clone();
            async move {
                let known = head.peer_certificates().first().is_some_and(|leaf| *leaf == alice);
                Ok(known.then(|| Caller::identified("alice")))
            }
        })
        .build()
        .unwrap_or_else(|e| panic!("the mtls server: {e}"))
}

/// `whoami` as curl calls it (2026-07-28, stateless) over `version`, with `cert` (and its key)
/// as the client certificate when given: the text answered, or why curl failed.
fn curl_whoami(addr: SocketAddr, pki: &Pki, version: &str, cert: bool) -> Result<String, String> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let url = format!("https://localhost:{}/mcp", addr.port());
    let mut curl = Command::new("curl");
    curl.args(["-sS", "--max-time", "20", version, "--cacert"]).arg(pki.path("ca.pem"));
    if cert {
        curl.arg("--cert").arg(pki.path("client.pem")).arg("--key").arg(pki.path("client-key.pem"));
    }
    let out = curl
        .args(["--resolve", &format!("localhost:{}:127.0.0.1", addr.port())])
        .args(["-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream"])
        .args([
            "-H",
            "mcp-protocol-version: 2026-07-28",
            "-H",
            "mcp-method: tools/call",
            "-H",
            "mcp-name: whoami",
        ])
        .args(["-d", body, &url])
        .output()
        .map_err(|e| format!("curl: {e} (is curl installed?)"))?;
    if !out.status.success() {
        return Err(format!("curl failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out.stdout)))?;
    answer["result"]["content"][0]["text"].as_str().map(str::to_owned).ok_or_else(|| format!("{answer}"))
}

/// Mutual TLS: a client certificate the roots vouch for reaches the identify hook (over
/// HTTP/2 and HTTP/1.1), which names its holder; without one the client is anonymous when
/// certificates are optional, and cannot connect when they are required.
#[test]
fn a_client_certificate_reaches_the_identify_hook() {
    let pki = Pki::new("mtls");
    let roots = std::fs::read(pki.path("ca.pem")).unwrap_or_else(|e| panic!("ca.pem: {e}"));
    each(|shim| {
        let tls = pki.config().client_certificates(&roots, ClientCertificates::Optional);
        let tls = tls.map_err(|e| e.to_string())?;
        let addr = serve_tls(shim, certified_server(&pki), HttpConfig::default(), tls);
        for version in ["--http2", "--http1.1"] {
            let who = curl_whoami(addr, &pki, version, true)?;
            ensure(who == "alice", || format!("{version} with alice's certificate: {who}"))?;
            let who = curl_whoami(addr, &pki, version, false)?;
            ensure(who == "anonymous", || format!("{version} without a certificate: {who}"))?;
        }
        let tls = pki.config().client_certificates(&roots, ClientCertificates::Required);
        let addr =
            serve_tls(shim, certified_server(&pki), HttpConfig::default(), tls.map_err(|e| e.to_string())?);
        let who = curl_whoami(addr, &pki, "--http2", true)?;
        ensure(who == "alice", || format!("required, with alice's certificate: {who}"))?;
        let refused = curl_whoami(addr, &pki, "--http2", false);
        ensure(refused.is_err(), || format!("required, without a certificate: {refused:?}"))
    });
}

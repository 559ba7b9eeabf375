//! An authorization server played by the tests ([`Issuer`]: metadata and a key set over
//! loopback HTTP, counting what it is asked, able to go down), and the tokens it would issue
//! ([`Signer`]), made with `ring`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

/// base64url without padding, as JOSE writes it.
pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A P-256 signing key with its `kid`.
pub struct Signer {
    pair: EcdsaKeyPair,
    kid: String,
}

impl Signer {
    /// A fresh key named `kid`.
    pub fn new(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap_or_else(|e| panic!("key generation: {e}"));
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap_or_else(|e| panic!("key: {e}"));
        Self { pair, kid: kid.to_owned() }
    }

    /// The public JWK.
    pub fn jwk(&self) -> Value {
        let public = self.pair.public_key().as_ref();
        let point = public.get(1..).unwrap_or_default();
        let (x, y) = point.split_at(point.len() / 2);
        json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "x": b64(x), "y": b64(y)})
    }

    /// `claims` signed as an ES256 access token (`typ: at+jwt`) under this key's `kid`.
    pub fn token(&self, claims: &Value) -> String {
        self.sign(&json!({"alg": "ES256", "typ": "at+jwt", "kid": self.kid}), claims)
    }

    /// `claims` under `header`, signed with this key whatever the header says.
    pub fn sign(&self, header: &Value, claims: &Value) -> String {
        let input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
        let sig =
            self.pair.sign(&SystemRandom::new(), input.as_bytes()).unwrap_or_else(|e| panic!("signing: {e}"));
        format!("{input}.{}", b64(sig.as_ref()))
    }
}

impl Signer {
    /// The key's JWK thumbprint (RFC 7638): what a token bound to it carries as `cnf.jkt`.
    pub fn thumbprint(&self) -> String {
        let jwk = self.jwk();
        jwk.as_object()
            .and_then(mcp_proto::auth::dpop::thumbprint)
            .unwrap_or_else(|| panic!("the key has a thumbprint"))
    }

    /// A DPoP proof (RFC 9449 §4) by this key for `method` on `url`, bound to `token`, with
    /// `claims` added to (or replacing) the usual ones.
    pub fn proof(&self, method: &str, url: &str, token: &str, extra: &Value) -> String {
        let mut jwk = self.jwk();
        jwk.as_object_mut().map(|o| o.remove("kid"));
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk});
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let jti = format!("{:x}", u128::from_ne_bytes(rand_bytes()));
        let mut claims = json!({
            "htm": method, "htu": url, "iat": now, "jti": jti,
            "ath": mcp_proto::auth::dpop::ath(token),
        });
        if let (Some(c), Some(extra)) = (claims.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        self.sign(&header, &claims)
    }
}

fn rand_bytes() -> [u8; 16] {
    let mut out = [0; 16];
    ring::rand::SecureRandom::fill(&SystemRandom::new(), &mut out).unwrap_or_else(|e| panic!("random: {e}"));
    out
}

/// `claims` under `header` with the signature `sig` (none, or one made elsewhere).
pub fn with_signature(header: &Value, claims: &Value, sig: &[u8]) -> String {
    format!("{}.{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()), b64(sig))
}

/// An HS256 token whose HMAC key is `secret`: what an attacker makes with a public key as the
/// secret.
pub fn hs256(secret: &[u8], header: &Value, claims: &Value) -> String {
    let input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, input.as_bytes());
    format!("{input}.{}", b64(tag.as_ref()))
}

/// What the played authorization server answers.
struct Answers {
    keys: Value,
    up: bool,
    delay: Duration,
    hits: HashMap<String, usize>,
    /// Opaque tokens `/introspect` knows, with their claims (`active` added).
    active: HashMap<String, Value>,
    /// The `Authorization` value `/introspect` requires.
    client: Option<String>,
    /// While set, answers wait (up to a minute).
    held: bool,
}

/// An authorization server on a loopback port: its metadata at
/// `/.well-known/oauth-authorization-server` names `/jwks`, which serves the keys set with
/// [`Issuer::set_keys`], and `/introspect` (RFC 7662), which knows the tokens
/// [`Issuer::set_active`] gives. Each request is answered on a thread of its own, then the connection
/// is closed.
#[derive(Clone)]
pub struct Issuer {
    /// Its issuer URL, `http://127.0.0.1:<port>` (`https://` with [`Issuer::start_tls`]).
    pub url: String,
    answers: Arc<Mutex<Answers>>,
    tls: Option<Arc<rustls::ServerConfig>>,
}

impl Issuer {
    /// Starts one serving `keys` (a JWK set).
    pub fn start(keys: Value) -> Self {
        Self::start_with(keys, None)
    }

    /// [`Issuer::start`] over HTTPS, with the certificate chain and key in PEM `cert` and `key`
    /// (issued for 127.0.0.1).
    pub fn start_tls(keys: Value, cert: &[u8], key: &[u8]) -> Self {
        use rustls_pki_types::pem::PemObject as _;
        let chain = rustls_pki_types::CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("the issuer's certificate: {e}"));
        let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key)
            .unwrap_or_else(|e| panic!("the issuer's key: {e}"));
        let config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
                .unwrap_or_else(|e| panic!("the issuer's TLS: {e}"));
        Self::start_with(keys, Some(Arc::new(config)))
    }

    fn start_with(keys: Value, tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}")));
        let answers = Arc::new(Mutex::new(Answers {
            keys,
            up: true,
            delay: Duration::ZERO,
            hits: HashMap::new(),
            active: HashMap::new(),
            client: None,
            held: false,
        }));
        let issuer = Self { url, answers, tls };
        let me = issuer.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let me = me.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                    match &me.tls {
                        Some(config) => {
                            let Ok(session) = rustls::ServerConnection::new(config.clone()) else { return };
                            me.answer(rustls::StreamOwned::new(session, conn));
                        }
                        None => me.answer(conn),
                    }
                });
            }
        });
        issuer
    }

    /// Serves `keys` from now on.
    pub fn set_keys(&self, keys: Value) {
        self.lock().keys = keys;
    }

    /// Answers (`true`) or closes every connection unanswered (`false`).
    pub fn set_up(&self, up: bool) {
        self.lock().up = up;
    }

    /// Waits `delay` before each answer.
    pub fn set_delay(&self, delay: Duration) {
        self.lock().delay = delay;
    }

    /// Answers introspection of `token` as active with `claims`.
    pub fn set_active(&self, token: &str, claims: Value) {
        self.lock().active.insert(token.to_owned(), claims);
    }

    /// Requires `authorization` (a client's `Basic` credentials) of introspection requests:
    /// others get `401`.
    pub fn set_client(&self, authorization: &str) {
        self.lock().client = Some(authorization.to_owned());
    }

    /// Holds every answer back (`true`) until released (`false`), for a minute at most.
    pub fn set_held(&self, held: bool) {
        self.lock().held = held;
    }

    /// How many requests for `path` it was sent (answered or not).
    pub fn hits(&self, path: &str) -> usize {
        self.lock().hits.get(path).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn answer(&self, mut conn: impl Read + Write) {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
            match conn.read(&mut byte) {
                Ok(1) => head.extend_from_slice(&byte),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
        };
        let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut form = vec![0; length.min(64 * 1024)];
        if conn.read_exact(&mut form).is_err() {
            return;
        }
        let form = String::from_utf8_lossy(&form).into_owned();
        let (up, delay, answer) = {
            let mut a = self.lock();
            *a.hits.entry(path.clone()).or_default() += 1;
            let answer = match path.as_str() {
                "/.well-known/oauth-authorization-server" => Ok(json!({
                    "issuer": self.url,
                    "jwks_uri": format!("{}/jwks", self.url),
                    "introspection_endpoint": format!("{}/introspect", self.url),
                })),
                "/jwks" => Ok(a.keys.clone()),
                "/introspect" if a.client.is_some() && header("authorization") != a.client => {
                    Err("401 Unauthorized")
                }
                "/introspect" if form.contains("token=unsupported-") => Err("400 Bad Request"),
                "/introspect" => {
                    let token = form
                        .split('&')
                        .find_map(|kv| kv.strip_prefix("token="))
                        .map(percent_decoded)
                        .unwrap_or_default();
                    Ok(match a.active.get(&token) {
                        Some(claims) => {
                            let mut claims = claims.clone();
                            claims["active"] = json!(true);
                            claims
                        }
                        None => json!({"active": false}),
                    })
                }
                _ => Err("404 Not Found"),
            };
            (a.up, a.delay, answer)
        };
        std::thread::sleep(delay);
        for _ in 0..6000 {
            if !self.lock().held {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if !up {
            return;
        }
        let (status, body) = match answer {
            Ok(body) => ("200 OK", body.to_string()),
            Err(status) => (status, String::new()),
        };
        let resp = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = conn.write_all(resp.as_bytes());
        let _ = conn.flush();
    }
}

/// `%XX` escapes of a form value decoded (`+` is a space).
fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

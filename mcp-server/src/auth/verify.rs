//! Signatures: a JWT access token or a DPoP proof verified with `ring` against a JWK, once
//! `mcp_proto::auth` has decided which key and which algorithm. No other crypto is done here.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use mcp_proto::auth::keys::KeySet;
use mcp_proto::auth::token::{self, AccessToken, ClaimRules, KeyKind, TokenError};
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

/// Whether `sig` is a signature of `input` by the key `jwk` of `kind` with `alg`. `alg` must be
/// one `kind` signs with ([`KeyKind::signs_with`]); a key whose members do not decode never
/// verifies anything.
pub fn verifies(kind: KeyKind, alg: &str, jwk: &Map<String, Value>, input: &[u8], sig: &[u8]) -> bool {
    let member =
        |name: &str| jwk.get(name).and_then(Value::as_str).and_then(|v| URL_SAFE_NO_PAD.decode(v).ok());
    match kind {
        KeyKind::Rsa => {
            let (Some(n), Some(e)) = (member("n"), member("e")) else { return false };
            let params: &signature::RsaParameters = match alg {
                "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
                _ => return false,
            };
            RsaPublicKeyComponents { n: &n, e: &e }.verify(params, input, sig).is_ok()
        }
        KeyKind::EcP256 | KeyKind::EcP384 => {
            let (Some(x), Some(y)) = (member("x"), member("y")) else { return false };
            let (algorithm, len): (&signature::EcdsaVerificationAlgorithm, usize) = match kind {
                KeyKind::EcP256 => (&signature::ECDSA_P256_SHA256_FIXED, 32),
                _ => (&signature::ECDSA_P384_SHA384_FIXED, 48),
            };
            if x.len() != len || y.len() != len || !kind.signs_with(alg) {
                return false;
            }
            let mut point = Vec::with_capacity(1 + 2 * len);
            point.push(4);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            UnparsedPublicKey::new(algorithm, point).verify(input, sig).is_ok()
        }
        KeyKind::Ed25519 => {
            let Some(x) = member("x") else { return false };
            kind.signs_with(alg) && UnparsedPublicKey::new(&signature::ED25519, x).verify(input, sig).is_ok()
        }
    }
}

/// A JWT access token verified against `keys` and held to `rules` at `now` (Unix seconds):
/// taken apart within bounds, its key found by `kid`, its algorithm accepted for that key, its
/// signature verified, then its claims checked.
pub fn verify_jwt(
    token: &str,
    keys: &KeySet,
    rules: &ClaimRules,
    now: u64,
) -> Result<AccessToken, TokenError> {
    let jwt = token::split(token)?;
    let alg = jwt.header.get("alg").and_then(Value::as_str).ok_or(TokenError::Algorithm)?;
    let key = keys.find(jwt.kid(), alg)?;
    let alg = token::check_header(&jwt, key.kind, key.alg.as_deref())?;
    if !verifies(key.kind, alg, &key.jwk, jwt.signing_input.as_bytes(), &jwt.signature) {
        return Err(TokenError::Signature);
    }
    rules.check(jwt.claims, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_proto::auth::ResourceUrl;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair};
    use serde_json::json;

    const NOW: u64 = 1_800_000_000;

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// An ES256 signing key and its public JWK.
    fn es256(kid: &str) -> (EcdsaKeyPair, Value) {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                .unwrap();
        let public = pair.public_key().as_ref().to_vec();
        let (x, y) = public[1..].split_at(32);
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": b64(x), "y": b64(y)});
        (pair, jwk)
    }

    fn sign_es256(pair: &EcdsaKeyPair, header: &Value, claims: &Value) -> String {
        let input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
        let sig = pair.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
        format!("{input}.{}", b64(sig.as_ref()))
    }

    fn rules() -> ClaimRules {
        ClaimRules::new("https://as.example.com", ResourceUrl::parse("https://mcp.example.com/mcp").unwrap())
    }

    fn claims() -> Value {
        json!({"iss": "https://as.example.com", "aud": "https://mcp.example.com/mcp", "exp": NOW + 60, "sub": "ann"})
    }

    fn set(keys: &[&Value]) -> KeySet {
        KeySet::parse(json!({ "keys": keys }).to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_token_signed_by_the_servers_key_verifies() {
        let (pair, jwk) = es256("k1");
        let token = sign_es256(&pair, &json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"}), &claims());
        let t = verify_jwt(&token, &set(&[&jwk]), &rules(), NOW).unwrap();
        assert_eq!(t.subject.as_deref(), Some("ann"));
    }

    #[test]
    fn altered_foreign_or_algorithm_swapped_tokens_do_not() {
        let (pair, jwk) = es256("k1");
        let (other, other_jwk) = es256("k2");
        let keys = set(&[&jwk, &other_jwk]);
        let header = json!({"alg": "ES256", "kid": "k1"});
        // Signed by another key than the one it names.
        let forged = sign_es256(&other, &header, &claims());
        assert_eq!(verify_jwt(&forged, &keys, &rules(), NOW).unwrap_err(), TokenError::Signature);
        // Claims altered after signing.
        let token = sign_es256(&pair, &header, &claims());
        let mut parts: Vec<&str> = token.split('.').collect();
        let altered = b64(json!({"iss": "https://as.example.com", "aud": "https://mcp.example.com/mcp", "exp": NOW + 60, "sub": "root"}).to_string().as_bytes());
        parts[1] = &altered;
        assert_eq!(verify_jwt(&parts.join("."), &keys, &rules(), NOW).unwrap_err(), TokenError::Signature);
        // `none`, and an HMAC keyed with the public key's bytes.
        let none =
            format!("{}.{}.", b64(br#"{"alg":"none","kid":"k1"}"#), b64(claims().to_string().as_bytes()));
        assert_eq!(verify_jwt(&none, &keys, &rules(), NOW).unwrap_err(), TokenError::Algorithm);
        let input =
            format!("{}.{}", b64(br#"{"alg":"HS256","kid":"k1"}"#), b64(claims().to_string().as_bytes()));
        let mac = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, jwk.to_string().as_bytes()),
            input.as_bytes(),
        );
        let hs = format!("{input}.{}", b64(mac.as_ref()));
        assert_eq!(verify_jwt(&hs, &keys, &rules(), NOW).unwrap_err(), TokenError::Algorithm);
        // A kid the set lacks, and a good token past its time.
        let unknown = sign_es256(&pair, &json!({"alg": "ES256", "kid": "k9"}), &claims());
        assert_eq!(verify_jwt(&unknown, &keys, &rules(), NOW).unwrap_err(), TokenError::UnknownKey);
        assert_eq!(verify_jwt(&token, &keys, &rules(), NOW + 3600).unwrap_err(), TokenError::Expired);
    }

    #[test]
    fn ed25519_keys_verify_eddsa_and_nothing_else() {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let jwk = json!({"kty": "OKP", "crv": "Ed25519", "x": b64(pair.public_key().as_ref())});
        let jwk = jwk.as_object().unwrap();
        let sig = pair.sign(b"input");
        assert!(verifies(KeyKind::Ed25519, "EdDSA", jwk, b"input", sig.as_ref()));
        assert!(!verifies(KeyKind::Ed25519, "EdDSA", jwk, b"other", sig.as_ref()));
        assert!(!verifies(KeyKind::Ed25519, "ES256", jwk, b"input", sig.as_ref()));
        let short = json!({"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"});
        assert!(!verifies(KeyKind::EcP256, "ES256", short.as_object().unwrap(), b"input", sig.as_ref()));
    }
}

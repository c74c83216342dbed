//! Test keys, a fake issuer (its metadata and JWKS served from memory by a counting
//! [`Fetcher`]), and tokens minted with ring: for the verifier's tests and the HTTP
//! tests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING,
    RSA_PKCS1_SHA256,
};
use serde_json::{json, Value};

use super::{FetchFuture, Fetcher, OAuthConfig};

/// A 2048-bit RSA key (PKCS#1 DER), made with `openssl genpkey` for these tests only.
const RSA_PKCS1: &str = "MIIEowIBAAKCAQEAwxJyU4s4MroNWqmaGpOgxumrxsFauntlqIpdNfAaxTmEVd+kohrryk1Fa1EvVdbQ05IDoDqSgHzOU/pjhJ2E30nJmWcQAQDYEOJoiwi6HqyUZC58iFOziZCqTBa67upLDgh8OkZzPCTUjp/cJq2kKIAAinqdBsJbyoo38hvME1I7my2V/haWdoXlKhboEBPv0Wya7s3XWVyTuA8LfmxiSnhDTZkPKFDO6WA8y98V37t69KYWyNOZidJLcpnMJ6AIFwNC/46yj6oode/ysvhbiS5b4qrKf3LR+bwVCf8k/rHExoiJB+xppM4XpnaJsgLTCTvu5iB4HxbSwcqDZNM3kQIDAQABAoIBABVndcHy+bSfM43qJC2cWzzYMO/7EVB677mhjP65HMbdO8cMZg0fdRXaiq5u1wnNK1a7o8g2BRMyHpWaWMcZXZX+i69YXqothIe9wAjZaUqqVxHzA9kVjhKfHACDUfmbHacpiS//wO8tf2Ey6z4XOXb0LJsFPyuZsea0adUX9bl80FPFKO74ea3O6ipuCw7aV5nmRigFOrQkC/IPu4pyFgOB3mDfE6Exb4nBq19KhCMJvbkWJ2otEhmDM2vIVEijcBZx19LFFuZci67QESNmuG7M5pl0dnjuTGu/GxaVeknS/anJrQy1EpReHh/BRGVcn7cPETapc7BicgZsKTHpO30CgYEA6gCh3UWsiLgWFeFVF4/Ck4g4QgSMaVAl7YIOCMIsS9lz+Qx7gF8VeVNPyyoe2PJX/vqy4iLF2UjtZGDjJca8h2tJ1mA88LgLbbJMazUAc+Na500iF9eBLh3t+AY3FPKh/Qw8Ok/qjBztH+WsMhYMvINzIGmUBUmOM+gMbm5NQwcCgYEA1WjwBHj++y+ozmrj3cikk8cgVo4SxJomcrq7f3i69nOViteUqF92MNcQAxhWtEZJSoi164zLxjaqjnYUNFpG6GDAyLKnPqPXeXYBBEoIbeCEw9pPojHd3pjbt+vx5bU5IU4rK2zsI5ySvKlaBMf2VZ4ADFVdaI0wiAkem3UaEqcCgYAXUbbPuTjHayjwR0NWlMH8N8/7bD6d5BnTgGlroAYQDPyMrhzEnzUhoRbLlUf7sLLqOwuGk5aJ38WggjNAuXxiNmPmVDLefkjNRr5s1JxV8CtH75zdKWG7OcpUNDJbCQ7xi72YxgwGqH9M9XNijmX4h1T6vuq8WCcurwpGGwHiEwKBgF4axvQB8tYKvxI+ujpbNo9fmFfykD4Xh2rCAtoD/9WbRE8UHx5b8f85Znsm6VzXPYxbWnUDAfxmsLDfSquHP4tK1tfpR6xsjSCnM22Tw8HH5mOCyejIuoBkwUaKCYH0drvD/29HuZ0+dsowl1xSXMKGSJknr2fiEot6EgAVFCkzAoGBAOJfSFD80CmkbKWSeHZS1qrEeYccwigWIjQkzX9NhFSM0AOirQcskVVXC11OtQVpKOxiyrv8qcw47j09L4XyIho6xMLvsnezmirYvl59o9fhscmp0wfvX9kvg4L3FvmCuN4WVGcz7aOs+QIUcmpzXD0xOKNzH9nhO3sz8S81S9dt";

pub(crate) const ISSUER: &str = "https://auth.example.com";
pub(crate) const OTHER_ISSUER: &str = "https://other.example.com";
pub(crate) const AUDIENCE: &str = "https://mcp.example.com/mcp";

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A signing key and its public JWK.
pub(crate) enum Signer {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

impl Signer {
    pub(crate) fn rsa() -> Self {
        let der = base64::engine::general_purpose::STANDARD
            .decode(RSA_PKCS1)
            .unwrap();
        Self::Rsa(RsaKeyPair::from_der(&der).unwrap())
    }

    pub(crate) fn ec() -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        Self::Ec(
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                .unwrap(),
        )
    }

    pub(crate) fn ed() -> Self {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        Self::Ed(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
    }

    /// Its algorithm's name.
    pub(crate) fn alg(&self) -> &'static str {
        match self {
            Self::Rsa(_) => "RS256",
            Self::Ec(_) => "ES256",
            Self::Ed(_) => "EdDSA",
        }
    }

    /// Its public JWK, named `kid`.
    pub(crate) fn jwk(&self, kid: &str) -> Value {
        match self {
            Self::Rsa(key) => {
                let public: ring::rsa::PublicKeyComponents<Vec<u8>> = key.public().into();
                json!({"kty": "RSA", "kid": kid, "use": "sig",
                    "n": b64(&public.n), "e": b64(&public.e)})
            }
            Self::Ec(key) => {
                let point = key.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": kid,
                    "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Self::Ed(key) => json!({"kty": "OKP", "crv": "Ed25519", "kid": kid,
                "x": b64(key.public_key().as_ref())}),
        }
    }

    /// A token of `header` (its `alg` set to this key's unless given) and `claims`.
    pub(crate) fn sign(&self, header: Value, claims: &Value) -> String {
        let mut header = header;
        if header.get("alg").is_none() {
            header["alg"] = json!(self.alg());
        }
        let message = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let signature = match self {
            Self::Rsa(key) => {
                let mut sig = vec![0; key.public().modulus_len()];
                key.sign(&RSA_PKCS1_SHA256, &rng, message.as_bytes(), &mut sig)
                    .unwrap();
                sig
            }
            Self::Ec(key) => key
                .sign(&rng, message.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec(),
            Self::Ed(key) => key.sign(message.as_bytes()).as_ref().to_vec(),
        };
        format!("{message}.{}", b64(&signature))
    }
}

/// Seconds since the epoch.
pub(crate) fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// Claims valid for a minute more, from ISSUER for AUDIENCE, for `sub`.
pub(crate) fn claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now() + 60, "iat": now(),
        "scope": "mcp:tools"})
}

/// Fake issuers: URL to body, and how often each URL was fetched.
#[derive(Default)]
pub(crate) struct Issuers {
    pub(crate) bodies: Mutex<HashMap<String, Value>>,
    pub(crate) fetched: Mutex<HashMap<String, usize>>,
    pub(crate) calls: AtomicUsize,
}

impl Issuers {
    /// `issuer` publishing `keys` (its RFC 8414 metadata and its JWKS).
    pub(crate) fn publish(&self, issuer: &str, keys: Vec<Value>) {
        let mut bodies = self.bodies.lock().unwrap();
        bodies.insert(
            format!("{issuer}/.well-known/oauth-authorization-server"),
            json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")}),
        );
        bodies.insert(format!("{issuer}/jwks"), json!({ "keys": keys }));
    }

    /// How often `issuer`'s JWKS was fetched.
    pub(crate) fn jwks_fetches(&self, issuer: &str) -> usize {
        self.fetched
            .lock()
            .unwrap()
            .get(&format!("{issuer}/jwks"))
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn fetcher(self: &Arc<Self>) -> Fetcher {
        let issuers = Arc::clone(self);
        Arc::new(move |url: String, _limit: usize| -> FetchFuture {
            issuers.calls.fetch_add(1, Ordering::SeqCst);
            *issuers
                .fetched
                .lock()
                .unwrap()
                .entry(url.clone())
                .or_default() += 1;
            let body = issuers.bodies.lock().unwrap().get(&url).cloned();
            Box::pin(async move {
                body.map(|body| body.to_string().into_bytes())
                    .ok_or_else(|| "404 Not Found".to_owned())
            })
        })
    }

    /// Settings for ISSUER and OTHER_ISSUER, AUDIENCE, requiring `mcp:tools`.
    pub(crate) fn config(self: &Arc<Self>) -> OAuthConfig {
        OAuthConfig::new(
            vec![ISSUER.into(), OTHER_ISSUER.into()],
            AUDIENCE,
            self.fetcher(),
        )
        .with_scopes(vec!["mcp:tools".into()])
    }
}

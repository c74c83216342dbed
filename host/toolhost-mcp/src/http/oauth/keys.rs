//! One issuer's keys: fetched (metadata, then JWKS), kept, looked up without waiting,
//! and fetched again at most once per [`REFETCH_INTERVAL`].

use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use tracing::{info, warn};

use super::{Fetcher, FETCH_TIMEOUT, MAX_FETCH_BYTES, REFETCH_INTERVAL};

/// Whether `url` may be fetched: HTTPS, or plain HTTP to a loopback host (or any with
/// `insecure`). `Err` says why not.
pub(super) fn check_url(url: &str, insecure: bool) -> Result<(), String> {
    let uri: axum::http::Uri = url
        .parse()
        .map_err(|_| "not a URL; give https://HOST[/PATH]".to_owned())?;
    let Some(host) = uri.host() else {
        return Err("no host; give https://HOST[/PATH]".into());
    };
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if insecure || is_loopback(host) => Ok(()),
        Some("http") => Err("plain HTTP is only for a loopback address (anyone on the way could swap the keys); use https, or --oauth-insecure-issuer on a network you trust".into()),
        _ => Err("the scheme is not https".into()),
    }
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The kinds of key the allowed algorithms use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rsa,
    P256,
    Ed25519,
}

impl Kind {
    fn of(alg: Algorithm) -> Option<Self> {
        match alg {
            Algorithm::RS256 => Some(Self::Rsa),
            Algorithm::ES256 => Some(Self::P256),
            Algorithm::EdDSA => Some(Self::Ed25519),
            _ => None,
        }
    }

    fn alg(self) -> KeyAlgorithm {
        match self {
            Self::Rsa => KeyAlgorithm::RS256,
            Self::P256 => KeyAlgorithm::ES256,
            Self::Ed25519 => KeyAlgorithm::EdDSA,
        }
    }
}

/// One usable key of a JWKS.
struct Key {
    kid: Option<String>,
    kind: Kind,
    /// The JWK's `alg`, when given.
    alg: Option<KeyAlgorithm>,
    decoding: Arc<DecodingKey>,
}

impl Key {
    /// The key of `jwk`, when it is a signing key of a kind this server takes.
    fn of(jwk: &Jwk) -> Option<Self> {
        if matches!(
            jwk.common.public_key_use,
            Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
        ) {
            return None;
        }
        let kind = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Kind::Rsa,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => Kind::P256,
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                Kind::Ed25519
            }
            _ => return None,
        };
        let decoding = DecodingKey::from_jwk(jwk).ok()?;
        Some(Self {
            kid: jwk.common.key_id.clone(),
            kind,
            alg: jwk.common.key_algorithm,
            decoding: Arc::new(decoding),
        })
    }

    /// Whether it may check a signature of `alg`: its kind is the algorithm's, and
    /// its own `alg`, if any, is the same.
    fn fits(&self, alg: Algorithm) -> bool {
        Kind::of(alg)
            .is_some_and(|kind| kind == self.kind && self.alg.is_none_or(|own| own == kind.alg()))
    }
}

/// The keys held.
#[derive(Default)]
struct KeySet {
    /// Whether a fetch ever succeeded.
    loaded: bool,
    keys: Vec<Key>,
}

/// What a lookup found.
pub(super) enum Lookup {
    /// The key to check the signature with.
    Found(Arc<DecodingKey>),
    /// A key this set has, that may not check this token (what is wrong).
    Refused(String),
    /// No such key held: a fetch may bring it.
    Unknown,
}

/// The fetching side: one fetch at a time, and when the last one began.
#[derive(Default)]
struct Fetching {
    last_attempt: Option<Instant>,
    /// The JWKS URL the metadata named, once read.
    jwks_uri: Option<String>,
    /// Why the last fetch failed, while no keys are held.
    last_error: Option<String>,
}

/// One issuer: its identifier and its keys.
pub(super) struct IssuerKeys {
    pub(super) issuer: String,
    insecure: bool,
    keys: RwLock<Arc<KeySet>>,
    fetching: tokio::sync::Mutex<Fetching>,
}

impl IssuerKeys {
    pub(super) fn new(issuer: String, insecure: bool) -> Self {
        Self {
            issuer,
            insecure,
            keys: RwLock::default(),
            fetching: tokio::sync::Mutex::default(),
        }
    }

    fn held(&self) -> Arc<KeySet> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The key for a token of `alg` naming `kid`, from the keys held (no waiting).
    pub(super) fn lookup(&self, kid: Option<&str>, alg: Algorithm) -> Lookup {
        let set = self.held();
        match kid {
            Some(kid) => {
                let mut named = set
                    .keys
                    .iter()
                    .filter(|key| key.kid.as_deref() == Some(kid))
                    .peekable();
                if named.peek().is_none() {
                    return Lookup::Unknown;
                }
                let mut kinds = Vec::new();
                for key in named {
                    if key.fits(alg) {
                        return Lookup::Found(Arc::clone(&key.decoding));
                    }
                    kinds.push(format!(
                        "{:?}{}",
                        key.kind,
                        key.alg.map(|a| format!(" for {a:?}")).unwrap_or_default()
                    ));
                }
                Lookup::Refused(format!(
                    "the issuer's key {kid:?} is a {} key, which may not check {alg:?}",
                    kinds.join(", ")
                ))
            }
            None => {
                let mut fitting = set.keys.iter().filter(|key| key.fits(alg));
                match (fitting.next(), fitting.next()) {
                    (Some(key), None) => Lookup::Found(Arc::clone(&key.decoding)),
                    (Some(_), Some(_)) => Lookup::Refused(format!(
                        "the token has no `kid`, and the issuer has several keys for {alg:?}"
                    )),
                    (None, _) => Lookup::Unknown,
                }
            }
        }
    }

    /// Fetches the keys again unless a fetch began less than [`REFETCH_INTERVAL`] ago
    /// (then waits for it if it is in progress). `Err` when no keys are held and they
    /// cannot be had: what went wrong.
    pub(super) async fn refresh(&self, fetcher: &Fetcher) -> Result<(), String> {
        let mut fetching = self.fetching.lock().await;
        if fetching
            .last_attempt
            .is_some_and(|at| at.elapsed() < REFETCH_INTERVAL)
        {
            return match &fetching.last_error {
                Some(why) if !self.held().loaded => Err(why.clone()),
                _ => Ok(()),
            };
        }
        fetching.last_attempt = Some(Instant::now());
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, self.fetch(&mut fetching, fetcher))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "fetching the keys took more than {} s",
                    FETCH_TIMEOUT.as_secs()
                ))
            });
        match fetched {
            Ok(keys) => {
                info!(target: super::super::LOG_TARGET, issuer = %self.issuer, keys = keys.len(), "fetched the issuer's keys");
                fetching.last_error = None;
                *self.keys.write().unwrap_or_else(PoisonError::into_inner) =
                    Arc::new(KeySet { loaded: true, keys });
                Ok(())
            }
            Err(why) => {
                let why = format!(
                    "cannot get the signing keys of the OAuth issuer {}: {why}",
                    self.issuer
                );
                warn!(target: super::super::LOG_TARGET, "{why}");
                fetching.last_error = Some(why.clone());
                // Keys held from before stay in use.
                if self.held().loaded {
                    Ok(())
                } else {
                    Err(why)
                }
            }
        }
    }

    async fn fetch(&self, fetching: &mut Fetching, fetcher: &Fetcher) -> Result<Vec<Key>, String> {
        let jwks_uri = match &fetching.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.jwks_uri(fetcher).await?;
                fetching.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let body = match fetcher(jwks_uri.clone(), MAX_FETCH_BYTES).await {
            Ok(body) => body,
            Err(why) => {
                // The metadata is read again next time: the issuer may have moved its keys.
                fetching.jwks_uri = None;
                return Err(format!("{jwks_uri}: {why}"));
            }
        };
        let jwks: Value = serde_json::from_slice(&body)
            .map_err(|err| format!("{jwks_uri} is not JSON: {err}"))?;
        let Some(Value::Array(entries)) = jwks.get("keys") else {
            return Err(format!("{jwks_uri} is not a JWKS (no `keys` array)"));
        };
        // A key this server cannot use (another type, an encryption key) is skipped,
        // not a reason to refuse the others.
        Ok(entries
            .iter()
            .filter_map(|entry| serde_json::from_value::<Jwk>(entry.clone()).ok())
            .filter_map(|jwk| Key::of(&jwk))
            .collect())
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414's, else OpenID Connect's.
    async fn jwks_uri(&self, fetcher: &Fetcher) -> Result<String, String> {
        let issuer = self.issuer.trim_end_matches('/');
        let (origin, path) = match issuer.split_once("://") {
            Some((scheme, rest)) => {
                let at = rest.find('/').unwrap_or(rest.len());
                let (authority, path) = rest.split_at(at);
                (format!("{scheme}://{authority}"), path)
            }
            None => return Err(format!("{issuer} is not a URL")),
        };
        let urls = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut failures = Vec::new();
        for url in urls {
            check_url(&url, self.insecure)?;
            let body = match fetcher(url.clone(), MAX_FETCH_BYTES).await {
                Ok(body) => body,
                Err(why) => {
                    failures.push(format!("{url}: {why}"));
                    continue;
                }
            };
            let metadata: Value =
                serde_json::from_slice(&body).map_err(|err| format!("{url} is not JSON: {err}"))?;
            let named = metadata.get("issuer").and_then(Value::as_str);
            if named != Some(self.issuer.as_str()) {
                return Err(format!(
                    "{url} names the issuer {named:?}, not {:?} (RFC 8414 §3.3)",
                    self.issuer
                ));
            }
            let Some(jwks_uri) = metadata.get("jwks_uri").and_then(Value::as_str) else {
                return Err(format!("{url} has no jwks_uri"));
            };
            check_url(jwks_uri, self.insecure)
                .map_err(|why| format!("its jwks_uri {jwks_uri}: {why}"))?;
            return Ok(jwks_uri.to_owned());
        }
        Err(failures.join("; "))
    }
}

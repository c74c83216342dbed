//! The server as an OAuth 2.1 resource server (the MCP authorization spec, 2025-06-18
//! and 2025-11-25): it takes JWT access tokens issued by the authorization servers it
//! trusts ([`OAuthConfig`]), beside the static bearer tokens of a token file.
//!
//! # What is checked, in order (each refusal is `401` with `error="invalid_token"`)
//! 1. the token is at most [`MAX_TOKEN_BYTES`] (8 KiB), else refused unread;
//! 2. its header decodes and names RS256, ES256 or EdDSA (`none` and HMAC are refused);
//! 3. its `iss` is one of the configured issuers; the key is looked up in THAT issuer's
//!    JWKS only, by `kid` (a token without `kid`: the issuer's one key of its type);
//! 4. the key's type is the algorithm's (RSA for RS256, EC P-256 for ES256, OKP Ed25519
//!    for EdDSA) and its `alg`, when the JWK gives one, is the token's: no key confusion;
//! 5. the signature; `exp` (required) and `nbf` with [`LEEWAY_SECS`] (60 s) of leeway;
//!    `aud` (a string or an array) holds the resource URI ([`OAuthConfig::audience`]);
//! 6. its `sub` is a valid client name (`A-Za-z0-9_-`, at most 64 characters: it names
//!    the principal in paths, logs and policy) and is not a name the token file gives
//!    (a static token's client and an OAuth subject are never the same principal).
//!
//! Then every scope of [`OAuthConfig::with_scopes`] must be among the token's (`scope`,
//! space-separated, or `scp`, an array): else `403` with
//! `error="insufficient_scope", scope="..."`.
//!
//! # Keys
//! Each issuer's metadata (`/.well-known/oauth-authorization-server`, else
//! `/.well-known/openid-configuration`) and JWKS are fetched when a token of it first
//! comes, over HTTPS (plain HTTP only for a loopback issuer, or with
//! [`OAuthConfig::with_insecure_issuer`]), within [`FETCH_TIMEOUT`] (5 s) and
//! [`MAX_FETCH_BYTES`] (256 KiB), and kept. A token whose `kid` the kept set lacks makes
//! one new fetch, at most once per [`REFETCH_INTERVAL`] (30 s) per issuer however many
//! such tokens come (they wait for the one fetch in progress, or are refused at once). A
//! token whose key is known, or that is malformed, never causes a fetch. When the keys
//! cannot be had, the answer is `503` saying so.

mod keys;
mod ring_provider;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::guard::valid_client_name;
use keys::{IssuerKeys, Lookup};

/// The longest access token read: 8 KiB. A longer one is refused (`401`) undecoded.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// The most bytes read of an issuer's metadata or JWKS: 256 KiB.
pub const MAX_FETCH_BYTES: usize = 256 * 1024;

/// How long fetching an issuer's metadata or JWKS may take: 5 s.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The least time between two fetches of one issuer's keys: 30 s. A token with an
/// unknown `kid` inside it is refused without a fetch.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// The leeway on `exp` and `nbf`: 60 s of clock skew.
pub const LEEWAY_SECS: u64 = 60;

/// The path of the protected resource metadata document (RFC 9728), served by
/// [`HttpServer`](super::HttpServer) as it is and suffixed with the MCP path
/// (`/.well-known/oauth-protected-resource/mcp`).
pub const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// What a [`Fetcher`] returns: the body, or why there is none.
pub type FetchFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + Send>>;

/// GETs a URL (its first argument) and returns the body of a `200` answer, reading at
/// most its second argument's bytes (more is an error) and following no redirect; `Err`
/// with what went wrong. The server checks the scheme before calling it and bounds the
/// time it takes ([`FETCH_TIMEOUT`]). `host serve --http` passes an HTTPS client
/// (rustls on ring).
pub type Fetcher = Arc<dyn Fn(String, usize) -> FetchFuture + Send + Sync>;

/// The OAuth settings of [`HttpConfig::with_oauth`](super::HttpConfig::with_oauth).
///
/// ```
/// use std::sync::Arc;
/// use toolhost_mcp::http::{Fetcher, HttpConfig, OAuthConfig};
///
/// // The application's HTTPS client; here, one that has nothing.
/// let fetch: Fetcher = Arc::new(|url, _limit| Box::pin(async move { Err(format!("no {url}")) }));
/// let oauth = OAuthConfig::new(
///     vec!["https://auth.example.com".into()],
///     "https://mcp.example.com/mcp",
///     fetch,
/// )
/// .with_scopes(vec!["mcp:tools".into()]);
/// assert_eq!(
///     oauth.resource_metadata_url(),
///     "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
/// );
/// let config = HttpConfig::new(None).with_oauth(Some(oauth));
/// assert!(config.oauth().is_some());
/// ```
#[derive(Clone)]
pub struct OAuthConfig {
    pub(crate) issuers: Vec<String>,
    pub(crate) audience: String,
    pub(crate) scopes: Vec<String>,
    pub(crate) insecure_issuer: bool,
    pub(crate) fetcher: Fetcher,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("issuers", &self.issuers)
            .field("audience", &self.audience)
            .field("scopes", &self.scopes)
            .field("insecure_issuer", &self.insecure_issuer)
            .finish_non_exhaustive()
    }
}

impl OAuthConfig {
    /// Tokens of `issuers` (their issuer identifiers, as their `iss` says) for
    /// `audience` (this server's resource URI, e.g. `https://mcp.example.com/mcp`),
    /// keys fetched with `fetcher`. No required scope, HTTPS issuers (or loopback ones)
    /// only. Checked by [`HttpServer::bind`](super::HttpServer::bind) and
    /// [`McpService::new`](super::McpService::new) ([`HttpError::Config`](super::HttpError::Config)).
    pub fn new(issuers: Vec<String>, audience: impl Into<String>, fetcher: Fetcher) -> Self {
        Self {
            issuers,
            audience: audience.into(),
            scopes: Vec::new(),
            insecure_issuer: false,
            fetcher,
        }
    }

    /// Scopes every token must carry (`403 insufficient_scope` without); none by default.
    #[must_use]
    pub fn with_scopes(mut self, scopes: Vec<String>) -> Self {
        self.scopes = scopes;
        self
    }

    /// Fetch the metadata and keys of an issuer that is not loopback over plain HTTP
    /// (only on a network where nobody can change them on the way). Off by default.
    #[must_use]
    pub fn with_insecure_issuer(mut self, insecure: bool) -> Self {
        self.insecure_issuer = insecure;
        self
    }

    /// The issuers.
    pub fn issuers(&self) -> &[String] {
        &self.issuers
    }

    /// The resource URI tokens must name in `aud`.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The scopes every token must carry.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// Where the protected resource metadata is (RFC 9728 §3.1): the resource URI with
    /// [`RESOURCE_METADATA_PATH`] put between its authority and its path.
    pub fn resource_metadata_url(&self) -> String {
        let audience = self.audience.trim_end_matches('/');
        match audience.split_once("://") {
            Some((scheme, rest)) => {
                let (authority, path) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
                format!("{scheme}://{authority}{RESOURCE_METADATA_PATH}{path}")
            }
            None => format!("{audience}{RESOURCE_METADATA_PATH}"),
        }
    }

    /// The protected resource metadata document (RFC 9728 §2): `resource`,
    /// `authorization_servers`, `scopes_supported`, `bearer_methods_supported`.
    pub fn resource_metadata(&self) -> Value {
        serde_json::json!({
            "resource": self.audience,
            "authorization_servers": self.issuers,
            "scopes_supported": self.scopes,
            "bearer_methods_supported": ["header"],
        })
    }

    /// Whether the settings can serve: `Err` says what is wrong and what to give.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.issuers.is_empty() {
            return Err("OAuth needs at least one issuer (--oauth-issuer URL)".into());
        }
        for issuer in &self.issuers {
            keys::check_url(issuer, self.insecure_issuer)
                .map_err(|why| format!("--oauth-issuer {issuer}: {why}"))?;
        }
        let audience = self.audience.as_str();
        let valid_audience = audience
            .parse::<axum::http::Uri>()
            .is_ok_and(|uri| uri.scheme().is_some() && uri.authority().is_some());
        if !valid_audience {
            return Err(format!("--oauth-audience {audience:?} is not an absolute URI; give this server's resource URI, e.g. https://mcp.example.com/mcp"));
        }
        if let Some(bad) = self.scopes.iter().find(|scope| !valid_scope(scope)) {
            return Err(format!(
                "--oauth-scope {bad:?} is not a scope (visible ASCII but `\"` and `\\`, no space)"
            ));
        }
        Ok(())
    }
}

/// A scope token (RFC 6749 §3.3), safe in a quoted header parameter.
fn valid_scope(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
}

/// Who an accepted token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subject {
    /// Its issuer.
    pub(crate) issuer: String,
    /// Its `sub`.
    pub(crate) sub: String,
    /// The scopes it grants.
    pub(crate) scopes: Vec<String>,
}

/// Why a token was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Denial {
    /// `401 invalid_token`: what is wrong with it.
    Invalid(String),
    /// `403 insufficient_scope`: a required scope is missing.
    InsufficientScope,
    /// `503`: its issuer's keys cannot be had now.
    Unavailable(String),
}

/// Checks access tokens against [`OAuthConfig`], keeping each issuer's keys.
pub(crate) struct Verifier {
    config: OAuthConfig,
    issuers: Vec<IssuerKeys>,
    /// The names the token file gives: never an OAuth subject.
    static_names: Vec<String>,
    /// The scopes required, space-separated (the `scope` of a 403's challenge).
    pub(crate) required: String,
}

/// The claims read before the signature is checked: which issuer's keys to use.
#[derive(serde::Deserialize)]
struct Unverified {
    iss: Option<String>,
}

impl Verifier {
    /// A verifier for `config`, refusing subjects named `static_names`.
    pub(crate) fn new(config: OAuthConfig, static_names: Vec<String>) -> Self {
        ring_provider::install();
        let issuers = config
            .issuers
            .iter()
            .map(|issuer| IssuerKeys::new(issuer.clone(), config.insecure_issuer))
            .collect();
        let required = config.scopes.join(" ");
        Self {
            config,
            issuers,
            static_names,
            required,
        }
    }

    /// The settings.
    pub(crate) fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// Whom `token` speaks for, or why it is refused. Waits only for a fetch of keys
    /// the token needs and its issuer may fetch now.
    pub(crate) async fn verify(&self, token: &str) -> Result<Subject, Denial> {
        let invalid = |why: String| Err(Denial::Invalid(why));
        if token.len() > MAX_TOKEN_BYTES {
            return invalid(format!(
                "the token is {} bytes, over the {MAX_TOKEN_BYTES} this server reads",
                token.len()
            ));
        }
        let header = match jsonwebtoken::decode_header(token) {
            Ok(header) => header,
            Err(err) => return invalid(format!("the token is not a JWT ({err})")),
        };
        let alg = header.alg;
        if !matches!(alg, Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA) {
            return invalid(format!(
                "the token is signed with {alg:?}; this server takes RS256, ES256 or EdDSA"
            ));
        }
        let unverified = match jsonwebtoken::dangerous::insecure_decode::<Unverified>(token) {
            Ok(data) => data.claims,
            Err(err) => return invalid(format!("the token's claims do not decode ({err})")),
        };
        let Some(iss) = unverified.iss else {
            return invalid("the token has no `iss`".into());
        };
        let Some(issuer) = self.issuers.iter().find(|keys| keys.issuer == iss) else {
            return invalid(format!(
                "the token's issuer {iss:?} is not one this server trusts"
            ));
        };
        let kid = header.kid.as_deref();
        let key = match issuer.lookup(kid, alg) {
            Lookup::Found(key) => key,
            Lookup::Refused(why) => return invalid(why),
            Lookup::Unknown => {
                match issuer.refresh(&self.config.fetcher).await {
                    Ok(()) => {}
                    Err(why) => return Err(Denial::Unavailable(why)),
                }
                match issuer.lookup(kid, alg) {
                    Lookup::Found(key) => key,
                    Lookup::Refused(why) => return invalid(why),
                    Lookup::Unknown => {
                        return invalid(match kid {
                            Some(kid) => {
                                format!("the issuer's keys have no key {kid:?} for {alg:?}")
                            }
                            None => format!(
                            "the token has no `kid`, and the issuer has no single key for {alg:?}"
                        ),
                        })
                    }
                }
            }
        };
        let mut validation = Validation::new(alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_audience(&[&self.config.audience]);
        validation.set_issuer(&[&issuer.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = match jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation) {
            Ok(data) => data.claims,
            Err(err) => return invalid(refusal(err.kind())),
        };
        let sub = match claims.get("sub") {
            Some(Value::String(sub)) => sub.clone(),
            _ => return invalid("the token's `sub` is not a string".into()),
        };
        if !valid_client_name(&sub) {
            return invalid(format!("the token's `sub` {sub:?} is not a valid client name (A-Za-z0-9_-, at most 64 characters)"));
        }
        if self.static_names.contains(&sub) {
            return invalid(format!("the token's `sub` {sub:?} is a static token's client name; one principal cannot be both"));
        }
        let scopes = scopes(&claims);
        if !self
            .config
            .scopes
            .iter()
            .all(|needed| scopes.contains(needed))
        {
            return Err(Denial::InsufficientScope);
        }
        Ok(Subject {
            issuer: issuer.issuer.clone(),
            sub,
            scopes,
        })
    }

    /// Starts fetching every issuer's keys (at start-up: the first token need not wait).
    pub(crate) fn prefetch(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for index in 0..self.issuers.len() {
            let verifier = Arc::clone(self);
            runtime.spawn(async move {
                if let Some(issuer) = verifier.issuers.get(index) {
                    if let Err(why) = issuer.refresh(&verifier.config.fetcher).await {
                        tracing::warn!(target: super::LOG_TARGET, "{why}");
                    }
                }
            });
        }
    }
}

/// A token's scopes: `scope` (RFC 9068, space-separated) and `scp` (a string or an
/// array, as some servers give them).
fn scopes(claims: &Map<String, Value>) -> Vec<String> {
    let mut scopes: Vec<String> = Vec::new();
    let mut add = |text: &str| {
        scopes.extend(text.split_ascii_whitespace().map(str::to_owned));
    };
    if let Some(Value::String(scope)) = claims.get("scope") {
        add(scope);
    }
    match claims.get("scp") {
        Some(Value::String(scp)) => add(scp),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).for_each(add),
        _ => {}
    }
    scopes.sort();
    scopes.dedup();
    scopes
}

/// What a failed check says (never the token).
fn refusal(kind: &jsonwebtoken::errors::ErrorKind) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired (`exp`)".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (`nbf`)".into(),
        ErrorKind::InvalidAudience => "the token is not for this server (`aud`)".into(),
        ErrorKind::InvalidIssuer => "the token's issuer does not match (`iss`)".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}`"),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not match its key".into(),
        other => format!("the token is not valid ({other:?})"),
    }
}

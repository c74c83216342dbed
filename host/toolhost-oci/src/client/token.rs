//! Authorization: the registry's challenge (`GET /v2/`) and, when it names a token
//! service, the token exchange, done here rather than in oci-client so that the token
//! response is read under a cap ([`MAX_TOKEN_BYTES`]) and a deadline, like every other
//! body (oci-client reads it whole, with no limit).

use futures_util::StreamExt;

use super::errors::registry_message;
use super::{RegistryClient, MAX_TOKEN_BYTES};
use crate::error::Operation;
use crate::{Credentials, OciError};

/// What to send with our requests.
#[derive(Clone)]
pub(super) enum Authorization {
    None,
    Bearer(String),
    Basic(String, String),
}

impl Authorization {
    /// `request` with this authorization.
    pub(super) fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Authorization::None => request,
            Authorization::Bearer(token) => request.bearer_auth(token),
            Authorization::Basic(user, password) => request.basic_auth(user, Some(password)),
        }
    }
}

/// A token service's answer: `token`, or `access_token` (OAuth 2 style).
#[derive(serde::Deserialize)]
struct Token {
    token: Option<String>,
    access_token: Option<String>,
}

/// A `WWW-Authenticate: Bearer realm="...",service="..."` challenge.
#[derive(Debug, PartialEq, Eq)]
struct BearerChallenge {
    realm: String,
    service: Option<String>,
}

impl RegistryClient {
    /// The authorization for pulls: asked once, then reused.
    pub(super) async fn pull_authorization(&self) -> Result<Authorization, OciError> {
        self.authorization
            .get_or_try_init(|| self.authorize(Operation::Pull))
            .await
            .cloned()
    }

    /// Asks the registry how to authorize (`GET /v2/`): a bearer token from the token
    /// service its challenge names (fetched with the credentials, if any), else basic
    /// auth when we have credentials, else none.
    pub(super) async fn authorize(&self, operation: Operation) -> Result<Authorization, OciError> {
        let what = "the registry's API version check (/v2/)";
        let url = format!("{}/v2/", self.base_url());
        let response = tokio::time::timeout(self.options.timeout, self.http.get(&url).send())
            .await
            .map_err(|_| self.timed_out(what))?
            .map_err(|err| self.map_reqwest(err, what))?;
        // The body of this answer is never read: only its status and challenge matter.
        let challenge = response
            .headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find_map(bearer_challenge);
        drop(response);
        let Some(challenge) = challenge else {
            return Ok(match &self.options.credentials {
                Credentials::Basic { user, password } => {
                    Authorization::Basic(user.clone(), password.clone())
                }
                Credentials::Anonymous => Authorization::None,
            });
        };
        self.token(&challenge, operation).await
    }

    /// The token exchange: `GET REALM?scope=repository:REPO:pull[,push]&service=...`,
    /// its answer read up to [`MAX_TOKEN_BYTES`] within the body deadline.
    async fn token(
        &self,
        challenge: &BearerChallenge,
        operation: Operation,
    ) -> Result<Authorization, OciError> {
        let what = "the token";
        let registry = self.reference.registry().to_owned();
        let protocol = |message: String| OciError::Protocol {
            registry: registry.clone(),
            what: what.into(),
            message,
        };
        let mut realm = reqwest::Url::parse(&challenge.realm).map_err(|err| {
            protocol(format!(
                "its challenge names the token service \"{}\", not a URL ({err})",
                challenge.realm.escape_debug()
            ))
        })?;
        match realm.scheme() {
            "https" => {}
            // Credentials never go over plain HTTP to a token service of an HTTPS registry.
            "http" if self.insecure => {}
            scheme => {
                return Err(protocol(format!(
                    "its challenge names the token service {realm} ({scheme}), but this registry is spoken to over HTTPS; a token is only fetched over HTTPS from it"
                )))
            }
        }
        let scope = match operation {
            Operation::Pull => format!("repository:{}:pull", self.reference.repository()),
            Operation::Push => format!("repository:{}:pull,push", self.reference.repository()),
        };
        {
            let mut query = realm.query_pairs_mut();
            query.append_pair("scope", &scope);
            if let Some(service) = &challenge.service {
                query.append_pair("service", service);
            }
        }
        let mut request = self.http.get(realm);
        if let Credentials::Basic { user, password } = &self.options.credentials {
            request = request.basic_auth(user, Some(password));
        }
        let response = tokio::time::timeout(self.options.timeout, request.send())
            .await
            .map_err(|_| self.timed_out(what))?
            .map_err(|err| self.map_reqwest(err, what))?;
        let status = response.status();
        if !status.is_success() {
            let body = self.error_body(response).await;
            return Err(self.status_error(
                status.as_u16(),
                operation,
                what,
                registry_message(&body),
            ));
        }
        let deadline = self.deadline(MAX_TOKEN_BYTES);
        let mut body = Vec::new();
        tokio::time::timeout(deadline, async {
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|err| self.map_reqwest(err, what))?;
                if (body.len() + chunk.len()) as u64 > MAX_TOKEN_BYTES {
                    return Err(OciError::BodyTooLarge {
                        registry: registry.clone(),
                        what: "token response".into(),
                        limit: MAX_TOKEN_BYTES,
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(())
        })
        .await
        .map_err(|_| self.body_timed_out("the token response", deadline))??;
        let token: Token = serde_json::from_slice(&body)
            .map_err(|err| protocol(format!("its token response is not a token ({err})")))?;
        let token = token
            .token
            .or(token.access_token)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| protocol("its token response holds no token".into()))?;
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(protocol(
                "its token has characters an HTTP header cannot carry".into(),
            ));
        }
        Ok(Authorization::Bearer(token))
    }

    /// Reads an error answer's body for its message: at most
    /// [`MAX_ERROR_BODY_BYTES`](super::MAX_ERROR_BODY_BYTES) (the rest is dropped) within
    /// the request time limit (what came by then is used).
    pub(super) async fn error_body(&self, response: reqwest::Response) -> Vec<u8> {
        let cap = usize::try_from(super::MAX_ERROR_BODY_BYTES).unwrap_or(usize::MAX);
        let mut body = Vec::new();
        let _ = tokio::time::timeout(self.options.timeout, async {
            let mut stream = response.bytes_stream();
            while let Some(Ok(chunk)) = stream.next().await {
                let room = cap - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() >= cap {
                    break;
                }
            }
        })
        .await;
        body
    }
}

/// The bearer challenge in one `WWW-Authenticate` value, if it is one with a realm.
fn bearer_challenge(header: &str) -> Option<BearerChallenge> {
    let header = header.trim_start();
    let (scheme, rest) = header.split_once(char::is_whitespace)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut realm = None;
    let mut service = None;
    let mut rest = rest.trim_start();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let name = name.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, remainder) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((at, c)) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next().map(|(_, c)| c)),
                    '"' => {
                        end = Some(at + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &quoted[end?..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        match name.as_str() {
            "realm" => realm = Some(value),
            "service" => service = Some(value),
            _ => {}
        }
        rest = remainder.trim_start().trim_start_matches(',').trim_start();
    }
    Some(BearerChallenge {
        realm: realm?,
        service,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_parse() {
        assert_eq!(
            bearer_challenge(
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull""#
            ),
            Some(BearerChallenge {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
            })
        );
        assert_eq!(
            bearer_challenge(r#"bearer  service="s\"x" , realm=http://127.0.0.1:1/t"#),
            Some(BearerChallenge {
                realm: "http://127.0.0.1:1/t".into(),
                service: Some("s\"x".into()),
            })
        );
        assert_eq!(bearer_challenge(r#"Basic realm="registry""#), None);
        assert_eq!(bearer_challenge(r#"Bearer service="s""#), None);
        assert_eq!(bearer_challenge(r#"Bearer realm="unterminated"#), None);
    }
}

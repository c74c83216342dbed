//! `--oauth-issuer`: the OAuth settings of `host serve --http`, and the HTTPS client that
//! fetches the issuers' metadata and keys (reqwest over rustls on ring, as `host pull`).

use std::sync::Arc;

use toolhost_mcp::http::{FetchFuture, Fetcher, OAuthConfig, FETCH_TIMEOUT};

use super::args::http::HttpArgs;

/// The OAuth settings the flags give, if any issuer is.
pub(crate) fn config(http: &HttpArgs) -> Option<OAuthConfig> {
    if http.oauth_issuer.is_empty() {
        return None;
    }
    Some(
        OAuthConfig::new(
            http.oauth_issuer.clone(),
            http.oauth_audience.clone().unwrap_or_default(),
            fetcher(),
        )
        .with_scopes(http.oauth_scope.clone())
        .with_insecure_issuer(http.oauth_insecure_issuer),
    )
}

/// GET over HTTPS (or the plain HTTP the server allowed), no redirects, a `200` body
/// of at most the limit, within [`FETCH_TIMEOUT`].
fn fetcher() -> Fetcher {
    // reqwest is built without a bundled crypto provider; ring is ours. Installing
    // twice is harmless (the first one stays).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("wasm-toolhost/", env!("CARGO_PKG_VERSION")))
        .build();
    let client = Arc::new(client.map_err(|err| format!("cannot build the HTTP client: {err}")));
    Arc::new(move |url: String, limit: usize| -> FetchFuture {
        let client = Arc::clone(&client);
        Box::pin(async move {
            let client = client.as_ref().as_ref().map_err(Clone::clone)?;
            let mut response = client
                .get(&url)
                .header("accept", "application/json")
                .send()
                .await
                .map_err(|err| format!("the request failed: {err}"))?;
            if response.status() != reqwest::StatusCode::OK {
                return Err(format!("answered {}", response.status()));
            }
            if response
                .content_length()
                .is_some_and(|length| length > limit as u64)
            {
                return Err(format!("the answer is over {limit} bytes"));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|err| format!("reading the answer failed: {err}"))?
            {
                if body.len() + chunk.len() > limit {
                    return Err(format!("the answer is over {limit} bytes"));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(body)
        })
    })
}

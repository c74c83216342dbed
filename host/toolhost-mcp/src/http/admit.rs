//! Whether a request is served, before its message is read: the Host, Origin and
//! bearer-token checks, the session it names, what its `Accept` allows, the
//! `MCP-Protocol-Version` and mirrored-header checks, and the body limits. A request that
//! passes the first three marks its connection admitted (authenticated, with a token) in
//! the connection table (`conns.rs`).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tracing::{debug, warn};

use crate::convert::SUPPORTED_PROTOCOL_VERSIONS;
use crate::jsonrpc::{Params, RequestId, RpcError, HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION};
use crate::protocol::META_PROTOCOL_VERSION;
use crate::revision::Revision;
use crate::session::Session;

use super::caller::Caller;
use super::guard::{host_name, normalize_origin};
use super::oauth::Denial;
use super::sessions::Refusal;
use super::LOG_TARGET;
use super::{
    header_str, json, refuse, reject, App, HttpConnection, Rejection, BODY_TIMEOUT,
    PROTOCOL_HEADER, SESSION_HEADER,
};

impl App {
    /// The Host, Origin and token checks (static tokens, then OAuth access tokens);
    /// the caller when they pass. Waits only when an OAuth token needs its issuer's
    /// keys fetched (`oauth.rs`); a malformed token, or one whose key is held, is
    /// answered without waiting.
    pub(super) async fn admit(
        &self,
        headers: &HeaderMap,
        uri: &axum::http::Uri,
        conn: &HttpConnection,
    ) -> Result<Caller, Rejection> {
        if let Some(hosts) = &self.hosts {
            // The Host header when there is one (HTTP/1.1), else the authority (HTTP/2).
            let host = match headers.get(header::HOST) {
                Some(value) => Some(String::from_utf8_lossy(value.as_bytes()).into_owned()),
                None => uri.authority().map(|a| a.as_str().to_owned()),
            };
            let name = host.as_deref().and_then(host_name);
            if !name.is_some_and(|name| hosts.contains(&name)) {
                warn!(target: LOG_TARGET, peer = %conn.peer, host = ?host, "refused a request for a host that is not allowed (DNS rebinding?)");
                return Err(reject(
                    StatusCode::FORBIDDEN,
                    format!(
                        "Forbidden: the Host header {} is not one this server answers to; connect to it by an allowed name ({}), or start it with --allow-host NAME",
                        host.map_or_else(|| "(none)".to_owned(), |h| format!("{h:?}")),
                        hosts.join(", ")
                    ),
                ));
            }
        }
        if let (Some(origins), Some(origin)) = (&self.origins, headers.get(header::ORIGIN)) {
            let origin = origin.to_str().map(normalize_origin).unwrap_or_default();
            if !origins.contains(&origin) {
                warn!(target: LOG_TARGET, peer = %conn.peer, %origin, "refused a request from a browser origin that is not allowed");
                return Err(reject(
                    StatusCode::FORBIDDEN,
                    format!("Forbidden: requests from the origin {origin:?} are not allowed; start the server with --allow-origin {origin} if that page should use it"),
                ));
            }
        }
        if self.tokens.is_none() && self.oauth.is_none() {
            // The connection now holds a slot a flood of new ones only takes when idle.
            conn.admitted(false);
            return Ok(Caller::default());
        }
        let presented = header_str(headers, "authorization").and_then(|value| {
            let (scheme, token) = value.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        let Some(token) = presented else {
            debug!(target: LOG_TARGET, peer = %conn.peer, "refused a request without a bearer token");
            return Err(self.unauthorized(
                "Unauthorized: send the token as `Authorization: Bearer TOKEN`",
                None,
            ));
        };
        if let Some((index, client)) = self
            .tokens
            .as_ref()
            .and_then(|tokens| tokens.identify(token))
        {
            // Authenticated: no connection without a token can take its slot.
            conn.admitted(true);
            return Ok(Caller {
                client: client.name,
                token: Some(index),
                ..Caller::default()
            });
        }
        let Some(oauth) = &self.oauth else {
            warn!(target: LOG_TARGET, peer = %conn.peer, "refused a request with a wrong bearer token");
            return Err(self.unauthorized(
                "Unauthorized: the bearer token is not valid; check the token you were given",
                Some("invalid_token"),
            ));
        };
        match oauth.verify(token).await {
            Ok(subject) => {
                conn.admitted(true);
                Ok(Caller {
                    client: Some(subject.sub),
                    token: None,
                    scopes: subject.scopes,
                    issuer: Some(subject.issuer),
                })
            }
            Err(Denial::Invalid(why)) => {
                warn!(target: LOG_TARGET, peer = %conn.peer, "refused a request with a bearer token that is not valid: {why}");
                Err(self.unauthorized(
                    &format!("Unauthorized: the bearer token is not valid: {why}"),
                    Some("invalid_token"),
                ))
            }
            Err(Denial::InsufficientScope) => {
                warn!(target: LOG_TARGET, peer = %conn.peer, "refused a request whose token lacks a required scope");
                let mut response = refuse(
                    StatusCode::FORBIDDEN,
                    format!("Forbidden: the bearer token does not grant the scope this server requires ({}); ask the authorization server for a token with it", oauth.required),
                );
                let challenge = format!(
                    r#"Bearer error="insufficient_scope", scope="{}", resource_metadata="{}""#,
                    oauth.required,
                    oauth.config().resource_metadata_url()
                );
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
                Err(Box::new(response))
            }
            Err(Denial::Unavailable(why)) => {
                let mut response = refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("Service Unavailable: the bearer token cannot be checked now: {why}; retry later"),
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
                Err(Box::new(response))
            }
        }
    }

    /// `401` with `WWW-Authenticate: Bearer`, naming the `error` when there is one and,
    /// with OAuth, where the protected resource metadata is (`resource_metadata`).
    fn unauthorized(&self, message: &str, error: Option<&str>) -> Rejection {
        let mut challenge = r#"Bearer realm="wasm-toolhost""#.to_owned();
        if let Some(oauth) = &self.oauth {
            challenge.push_str(&format!(
                r#", resource_metadata="{}""#,
                oauth.config().resource_metadata_url()
            ));
        }
        if let Some(error) = error {
            challenge.push_str(&format!(r#", error="{error}""#));
        }
        let challenge =
            HeaderValue::from_str(&challenge).unwrap_or(HeaderValue::from_static("Bearer"));
        let mut response = refuse(StatusCode::UNAUTHORIZED, message);
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
        Box::new(response)
    }

    /// The session a request names: `Err` with the refusal to send.
    pub(super) async fn session_of(
        &self,
        headers: &HeaderMap,
        caller: &Caller,
    ) -> Result<(Session, String), Rejection> {
        let Some(id) = header_str(headers, SESSION_HEADER) else {
            return Err(reject(
                StatusCode::BAD_REQUEST,
                "Bad Request: no Mcp-Session-Id header; send initialize first, then the session id its answer carried with every request",
            ));
        };
        let revision = header_str(headers, PROTOCOL_HEADER)
            .and_then(|value| crate::revision::Revision::parse(value.trim()));
        match self.sessions.find(id, caller, revision).await {
            Ok(session) => Ok((session, id.to_owned())),
            Err(refusal) => Err(Box::new(session_refusal(refusal))),
        }
    }

    /// What `GET` and `DELETE` check before they act: the request admitted
    /// ([`App::admit`]), `405` on a stateless server, `checks` on its headers (the
    /// method's own), then the session it names. `Err` with the response to send instead.
    pub(super) async fn admit_session(
        &self,
        conn: &HttpConnection,
        request: Request,
        method: &str,
        checks: impl FnOnce(&HeaderMap) -> Result<(), Rejection>,
    ) -> Result<(Session, String), Response> {
        let (parts, _body) = request.into_parts();
        let headers = &parts.headers;
        let caller = self
            .admit(headers, &parts.uri, conn)
            .await
            .map_err(|response| {
                self.sessions.count_refusal(response.status());
                *response
            })?;
        if let Some(policy) = &self.policy {
            if let Err(refusal) = policy.quota_of(&caller.principal()) {
                let response = policy_refusal(&refusal);
                self.sessions.count_refusal(response.status());
                return Err(response);
            }
        }
        if !self.sessions.stateful() {
            return Err(no_sessions(method));
        }
        checks(headers).map_err(|response| *response)?;
        self.session_of(headers, &caller)
            .await
            .map_err(|response| *response)
    }
}

/// A policy's refusal: `403` for a principal it gives no profile, `503` with
/// `Retry-After` when the quota map is full.
pub(super) fn policy_refusal(refusal: &crate::policy::PolicyRefusal) -> Response {
    match refusal {
        crate::policy::PolicyRefusal::Full(_) => {
            let mut response = refuse(StatusCode::SERVICE_UNAVAILABLE, refusal.to_string());
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(crate::policy::quota::RETRY_FULL_SECS),
            );
            response
        }
        _ => refuse(StatusCode::FORBIDDEN, refusal.to_string()),
    }
}

/// The refusal of a method that needs a session by a stateless server (`405`).
fn no_sessions(method: &str) -> Response {
    let mut response = refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Method Not Allowed: {method} needs a session, and this server is stateless; send each message as a POST"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

pub(super) fn session_refusal(refusal: Refusal) -> Response {
    match refusal {
        Refusal::NotFound => refuse(
            StatusCode::NOT_FOUND,
            "Not Found: no such session (ended, or never issued to this client); send initialize to start a new one",
        ),
        Refusal::Full => {
            let mut response = refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: the server holds as many busy sessions as it may; retry shortly",
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        Refusal::Setup(err) => {
            warn!(target: LOG_TARGET, "cannot set up a session: {err}");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal Server Error: cannot set up the session: {err}"),
            )
        }
    }
}

/// What the client's `Accept` allows.
pub(super) struct Accept {
    pub(super) json: bool,
    pub(super) sse: bool,
}

pub(super) fn accept(headers: &HeaderMap) -> Accept {
    let Some(value) = headers.get(header::ACCEPT) else {
        return Accept {
            json: true,
            sse: false,
        };
    };
    let mut accept = Accept {
        json: false,
        sse: false,
    };
    for item in value.to_str().unwrap_or_default().split(',') {
        let media = item
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "*/*" => (accept.json, accept.sse) = (true, true),
            "application/json" | "application/*" => accept.json = true,
            "text/event-stream" | "text/*" => accept.sse = true,
            _ => {}
        }
    }
    accept
}

/// The protocol version a request's `_meta` names, if any.
pub(super) fn body_version(params: &Params) -> Option<String> {
    params
        .value("_meta")?
        .get(META_PROTOCOL_VERSION)?
        .as_str()
        .map(str::to_owned)
}

/// 2026-07-28 mirrors body fields into headers for intermediaries (a load balancer may
/// route on them): for a request of that era, `MCP-Protocol-Version`, `Mcp-Method` and
/// (for `tools/call`, `resources/read`, and the tasks extension's `tasks/get`,
/// `tasks/update`, `tasks/cancel`) `Mcp-Name` (the tool's name, the URI, the task's id)
/// must be there and match the body, else the request is
/// refused with `HeaderMismatch` (-32020), so no part of the path acts on a value the
/// server does not. Requests of the legacy era are not checked (they have no such
/// headers but the version).
pub(super) fn check_mirrored_headers(
    headers: &HeaderMap,
    id: &RequestId,
    method: &str,
    params: &Params,
) -> Result<(), RpcError> {
    let header_version = header_str(headers, PROTOCOL_HEADER).map(str::trim);
    let body = body_version(params);
    let modern = |version: Option<&str>| {
        version
            .and_then(Revision::parse)
            .is_some_and(Revision::is_modern)
    };
    if !modern(header_version) && !modern(body.as_deref()) {
        return Ok(());
    }
    let mismatch = |what: String| {
        RpcError::new(
            id.clone(),
            HEADER_MISMATCH,
            format!("Header mismatch: {what}"),
        )
    };
    match (header_version, body.as_deref()) {
        (None, Some(body)) => {
            return Err(mismatch(format!(
                "no MCP-Protocol-Version header; send MCP-Protocol-Version: {body}, the version the body's _meta names"
            )))
        }
        (Some(header), Some(body)) if header != body => {
            return Err(mismatch(format!(
                "MCP-Protocol-Version header value '{header}' does not match body value '{body}'"
            )))
        }
        _ => {}
    }
    match header_str(headers, "mcp-method") {
        None => {
            return Err(mismatch(format!(
                "no Mcp-Method header; send Mcp-Method: {method}"
            )))
        }
        Some(header) if header != method => {
            return Err(mismatch(format!(
                "Mcp-Method header value '{header}' does not match body value '{method}'"
            )))
        }
        Some(_) => {}
    }
    // The body member Mcp-Name mirrors, per method (2026-07-28's standard headers).
    let mirrored = match method {
        "tools/call" => Some(("name", "the tool's name")),
        "resources/read" => Some(("uri", "the resource's URI")),
        // The tasks extension (ext-tasks e434597): the task's id, so that a load
        // balancer routes a task's requests to the instance holding it.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some(("taskId", "the task's id")),
        _ => None,
    };
    if let Some((member, what)) = mirrored {
        let Some(name) = params.str(member) else {
            // The request itself is refused for its missing member.
            return Ok(());
        };
        match header_str(headers, "mcp-name").map(decode_header_value) {
            None => {
                return Err(mismatch(format!(
                    "no Mcp-Name header; send {what} in Mcp-Name (as =?base64?...?= when it is not plain ASCII)"
                )))
            }
            Some(None) => {
                return Err(mismatch(
                    "the Mcp-Name header is not valid =?base64?...?= text".to_owned(),
                ))
            }
            Some(Some(header)) if header != name => {
                return Err(mismatch(format!(
                    "Mcp-Name header value {header:?} does not match body value {name:?}"
                )))
            }
            Some(Some(_)) => {}
        }
    }
    Ok(())
}

/// A header value as 2026-07-28 encodes it: as it is, or `=?base64?{Base64}?=` for text
/// that is not plain ASCII. `None` for a Base64 form that does not decode to UTF-8.
pub(super) fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// The `MCP-Protocol-Version` check: `Err` (400) for a version this server does not speak.
pub(super) fn check_protocol(headers: &HeaderMap) -> Result<(), Rejection> {
    let Some(value) = headers.get(PROTOCOL_HEADER) else {
        return Ok(());
    };
    let version = value.to_str().unwrap_or_default().trim();
    if SUPPORTED_PROTOCOL_VERSIONS.contains(&version) {
        return Ok(());
    }
    // UnsupportedProtocolVersionError (2026-07-28), with the versions to retry with.
    let requested = String::from_utf8_lossy(value.as_bytes());
    let err = RpcError::new(
        RequestId::null(),
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Bad Request: unsupported MCP-Protocol-Version {requested:?}; this server speaks {}",
            SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        ),
    )
    .with_data(serde_json::json!({
        "supported": SUPPORTED_PROTOCOL_VERSIONS,
        "requested": requested,
    }));
    Err(Box::new(json(
        StatusCode::BAD_REQUEST,
        Bytes::from(err.encode_with(false)),
    )))
}

pub(super) async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, Rejection> {
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: the request body is over {limit} bytes, the limit for one message; send less per call"),
        )
    };
    let declared = header_str(headers, "content-length").and_then(|n| n.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Box::new(too_large()));
    }
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, limit).collect()).await {
        Err(_elapsed) => Err(reject(
            StatusCode::REQUEST_TIMEOUT,
            "Request Timeout: the request body did not arrive in time",
        )),
        Ok(Err(err)) if err.downcast_ref::<LengthLimitError>().is_some() => {
            Err(Box::new(too_large()))
        }
        Ok(Err(err)) => Err(reject(
            StatusCode::BAD_REQUEST,
            format!("Bad Request: the request body could not be read: {err}"),
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

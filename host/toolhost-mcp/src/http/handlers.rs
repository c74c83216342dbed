//! The endpoint's methods: `POST` (one message, or a batch), `GET` (the session's event
//! stream) and `DELETE` (end the session).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::jsonrpc::{
    parse_batch, parse_line, Incoming, RequestId, RpcError, INVALID_REQUEST, METHOD_NOT_FOUND,
    PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::revision::Revision;
use crate::session::{Message, Notifier, Session, Step};

use super::admit::{
    accept, body_version, check_mirrored_headers, check_protocol, policy_refusal, read_body,
    session_refusal,
};
use super::streams::{answer_one, event, event_stream, finished, sse_response, ChannelOutlet};
use super::LOG_TARGET;
use super::{
    header_str, json, refuse, reject, App, HttpConnection, Rejection, KEEP_ALIVE, PROTOCOL_HEADER,
    SERVER_ERROR, SESSION_HEADER, STREAM_QUEUE,
};

/// The answer to a call refused by a quota counted across processes: 429 with
/// `Retry-After` over the limit, 503 (`Retry-After: 1`) when the counter cannot count.
fn shared_quota_refusal(refusal: &crate::policy::SharedRefusal) -> Response {
    let (status, retry_after) = match refusal {
        crate::policy::SharedRefusal::Exceeded(exceeded) => {
            (StatusCode::TOO_MANY_REQUESTS, exceeded.retry_after_secs())
        }
        crate::policy::SharedRefusal::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, 1),
    };
    let reason = if status == StatusCode::TOO_MANY_REQUESTS {
        "Too Many Requests"
    } else {
        "Service Unavailable"
    };
    let mut response = refuse(status, format!("{reason}: {refusal}"));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    response
}

/// A batched call refused by a quota counted across processes, as its JSON-RPC error:
/// -32029 with the quota (as a session answers a call over a per-process quota), or
/// the server error (-32000) when the counter cannot count.
fn shared_refusal_error(id: RequestId, refusal: &crate::policy::SharedRefusal) -> RpcError {
    match refusal {
        crate::policy::SharedRefusal::Exceeded(exceeded) => {
            RpcError::new(id, crate::jsonrpc::QUOTA_EXCEEDED, exceeded.to_string()).with_data(
                serde_json::json!({
                    "quota": exceeded.quota.name(),
                    "limit": exceeded.limit,
                    "retryAfterSeconds": exceeded.retry_after_secs(),
                }),
            )
        }
        crate::policy::SharedRefusal::Unavailable(_) => {
            RpcError::new(id, SERVER_ERROR, format!("Service Unavailable: {refusal}"))
        }
    }
}

pub(super) async fn post_mcp(State(app): State<Arc<App>>, mut request: Request) -> Response {
    let conn = HttpConnection::of(request.extensions_mut());
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let (caller, accepts) = match admit_post(&app, &parts, &conn).await {
        Ok(admitted) => admitted,
        Err(response) => {
            app.sessions.count_refusal(response.status());
            return refused_unread(*response, body, parts.version).await;
        }
    };
    // The principal's quotas, when a policy is in force (refused: 403).
    let quota = match &app.policy {
        None => None,
        Some(policy) => match policy.quota_of(&caller.principal()) {
            Ok(quota) => Some(quota),
            Err(refusal) => {
                warn!(target: LOG_TARGET, peer = %conn.peer, client = caller.client.as_deref().unwrap_or("-"), "refused by the policy: {refusal}");
                let response = policy_refusal(&refusal);
                app.sessions.count_refusal(response.status());
                return refused_unread(response, body, parts.version).await;
            }
        },
    };
    let body = match read_body(body, headers, app.max_body_bytes).await {
        Ok(body) => body,
        Err(response) => return *response,
    };
    let text = body.trim_ascii();
    // The revision the header names: how an error whose id could not be read is given
    // before a session says, and whether a stateless server takes a batch.
    let revision = header_str(headers, PROTOCOL_HEADER).and_then(|v| Revision::parse(v.trim()));
    let null_id = revision.is_some_and(Revision::null_error_id);
    // An array is a batch, read once the session says whether its revision has them.
    let is_batch = text.first() == Some(&b'[');
    let message = parse_line(text);
    if let Err(err) = &message {
        if !is_batch && (err.code == PARSE_ERROR || err.code == INVALID_REQUEST) {
            debug!(target: LOG_TARGET, peer = %conn.peer, code = err.code, "{}", err.message);
            return json(
                StatusCode::BAD_REQUEST,
                Bytes::from(err.encode_with(null_id)),
            );
        }
    }
    if let Ok(Incoming::Request { id, method, params }) = &message {
        if let Err(err) = check_mirrored_headers(headers, id, method, params) {
            debug!(target: LOG_TARGET, peer = %conn.peer, "{}", err.message);
            return json(StatusCode::BAD_REQUEST, Bytes::from(err.encode_with(false)));
        }
    }
    let modern_method = match &message {
        Ok(Incoming::Request { params, .. }) => body_version(params)
            .as_deref()
            .and_then(Revision::parse)
            .is_some_and(Revision::is_modern),
        _ => false,
    };
    let initialize =
        matches!(&message, Ok(Incoming::Request { method, .. }) if method == "initialize");
    // A request of the modern era (2026-07-28) stands alone: it needs no session.
    let modern =
        revision.is_some_and(Revision::is_modern) && header_str(headers, SESSION_HEADER).is_none();
    let (session, new_id) = if !app.sessions.stateful() || modern {
        match app.sessions.ephemeral(&caller).await {
            Ok(session) => (session, None),
            Err(refusal) => return session_refusal(refusal),
        }
    } else if initialize {
        match app.sessions.create(&caller).await {
            Ok(session) => {
                let id = session.environment().session_id.clone();
                (session, Some(id))
            }
            Err(refusal) => return session_refusal(refusal),
        }
    } else {
        match app.session_of(headers, &caller).await {
            Ok((session, _)) => (session, None),
            Err(response) => return *response,
        }
    };
    if is_batch {
        let batches = if app.sessions.stateful() && !modern {
            session.accepts_batches()
        } else {
            revision.is_some_and(Revision::accepts_batches)
        };
        match (batches, parse_batch(text)) {
            (true, Some(Ok(members))) => {
                return post_batch(&app, &conn, &session, members, quota.as_deref()).await;
            }
            (true, Some(Err(err))) | (false, Some(Err(err))) => {
                return json(
                    StatusCode::BAD_REQUEST,
                    session.error_message(&err).to_bytes(),
                )
            }
            _ => {
                let err = message.err().unwrap_or_else(|| {
                    RpcError::new(
                        RequestId::null(),
                        INVALID_REQUEST,
                        "Invalid Request".to_owned(),
                    )
                });
                return json(
                    StatusCode::BAD_REQUEST,
                    session.error_message(&err).to_bytes(),
                );
            }
        }
    }
    // A call over its principal's quota is refused before it reaches the session: 429.
    if let (Some(quota), Ok(Incoming::Request { method, .. })) = (&quota, &message) {
        if method == "tools/call" {
            if let Err(exceeded) = quota.check_call() {
                debug!(target: LOG_TARGET, peer = %conn.peer, client = caller.client.as_deref().unwrap_or("-"), quota = exceeded.quota.name(), "refused a call over its quota");
                let mut response = refuse(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("Too Many Requests: {exceeded}"),
                );
                if let Ok(value) = HeaderValue::from_str(&exceeded.retry_after_secs().to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
                app.sessions.count_refusal(StatusCode::TOO_MANY_REQUESTS);
                return response;
            }
            // Counted across processes too (`--state`): one round trip, only for a
            // principal with the quota.
            if let Err(refusal) = quota.count_shared_call().await {
                let response = shared_quota_refusal(&refusal);
                debug!(target: LOG_TARGET, peer = %conn.peer, client = caller.client.as_deref().unwrap_or("-"), status = response.status().as_u16(), "refused a call by its shared quota: {refusal}");
                app.sessions.count_refusal(response.status());
                return response;
            }
        }
    }
    // W3C trace context of the HTTP request, strictly parsed (a malformed one is ignored).
    let trace_parent = header_str(headers, "traceparent")
        .and_then(|value| toolhost::registry::TraceParent::parse(value.trim()));
    let mut response = match session.receive_traced(message, trace_parent) {
        Step::Nothing => StatusCode::ACCEPTED.into_response(),
        // 2026-07-28: an unknown method is 404 with its JSON-RPC error, so a client tells
        // it from a server without the endpoint.
        Step::Reply(reply) if modern_method && reply.error_code() == Some(METHOD_NOT_FOUND) => {
            json(StatusCode::NOT_FOUND, reply.to_bytes())
        }
        Step::Reply(reply)
            if modern_method && reply.error_code() == Some(UNSUPPORTED_PROTOCOL_VERSION) =>
        {
            json(StatusCode::BAD_REQUEST, reply.to_bytes())
        }
        Step::Listen(listen) => {
            if !accepts.sse {
                let err = RpcError::new(
                    listen.id().clone(),
                    INVALID_REQUEST,
                    "Invalid Request: subscriptions/listen is answered as an event stream; send Accept: text/event-stream".to_owned(),
                );
                return json(
                    StatusCode::NOT_ACCEPTABLE,
                    session.error_message(&err).to_bytes(),
                );
            }
            // A subscription holds one of the connection's places as a call does, so
            // the streams one client keeps open are bounded (HTTP/2 multiplexes them).
            let Ok(request_permit) = conn.place() else {
                let err = RpcError::new(
                    listen.id().clone(),
                    SERVER_ERROR,
                    format!("Service Unavailable: {} requests are running on this connection, the most allowed; close a subscription or use another connection", app.per_connection),
                );
                return json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    session.error_message(&err).to_bytes(),
                );
            };
            // The client gone (the stream dropped): the subscription ends.
            let guard = listen.cancellation().drop_guard();
            let (sender, mut receiver) = mpsc::channel(STREAM_QUEUE);
            let notifier = Notifier::new(Arc::new(ChannelOutlet {
                sender,
                lossy: false,
            }));
            let mut task = tokio::spawn(async move {
                let _permit = request_permit;
                listen.run(notifier).await
            });
            tokio::select! {
                biased;
                Some(first) = receiver.recv() => event_stream(first, receiver, task, guard),
                joined = &mut task => {
                    drop(guard.disarm());
                    finished(&accepts, joined, &mut receiver)
                }
            }
        }
        Step::Reply(reply) => answer_one(&accepts, reply),
        Step::Call(call) => {
            let busy = |message: String, id: &RequestId| {
                let mut response = json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    Bytes::from(RpcError::new(id.clone(), SERVER_ERROR, message).encode()),
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            };
            let Ok(request_permit) = conn.place() else {
                return busy(
                    format!("Service Unavailable: {} tool calls are running on this connection, the most allowed; retry when one ends, or use another connection", app.per_connection),
                    call.id(),
                );
            };
            let slot = match app.limiter.try_acquire(call.held_bytes()) {
                Ok(slot) => slot,
                Err(err) => {
                    info!(target: LOG_TARGET, peer = %conn.peer, "refused a tool call: {err}");
                    return busy(format!("Service Unavailable: {err}"), call.id());
                }
            };
            let token = call.cancellation();
            // The client gone (this future or the stream dropped): the call stops.
            let guard = token.drop_guard();
            let (sender, mut receiver) = mpsc::channel(STREAM_QUEUE);
            let notifier = if accepts.sse {
                Notifier::new(Arc::new(ChannelOutlet {
                    sender,
                    lossy: false,
                }))
            } else {
                Notifier::none()
            };
            // Boxed: the call's whole dispatch is nested in this future by value
            // (server/queue.rs, `spawn_call`, says what that costs unboxed).
            let mut task = tokio::spawn(Box::pin(async move {
                let _permit = request_permit;
                call.run(&slot, notifier).await
            }));
            tokio::select! {
                biased;
                joined = &mut task => {
                    drop(guard.disarm());
                    finished(&accepts, joined, &mut receiver)
                }
                Some(first) = receiver.recv() => {
                    event_stream(first, receiver, task, guard)
                }
            }
        }
    };
    if let Some(id) = new_id {
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
    }
    response
}

/// A JSON-RPC batch (2025-03-26): each member served as if it came alone, the calls
/// concurrently (each taking its place among the calls in flight, or answered busy), and
/// one JSON array of the answers; `202` when there is none (notifications only).
/// Notifications about the calls are not sent: a batch is answered with JSON.
/// The checks of a `POST` that come before its body is read: who sends it, its media
/// type, what it accepts and its protocol version.
async fn admit_post(
    app: &App,
    parts: &axum::http::request::Parts,
    conn: &HttpConnection,
) -> Result<(super::caller::Caller, super::admit::Accept), Rejection> {
    let headers = &parts.headers;
    let caller = app.admit(headers, &parts.uri, conn).await?;
    let content_type = header_str(headers, "content-type").unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case("application/json") {
        return Err(reject(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Unsupported Media Type: {content_type:?}; send one JSON-RPC message with Content-Type: application/json"),
        ));
    }
    let accepts = accept(headers);
    if !accepts.json && !accepts.sse {
        return Err(reject(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: this server answers with application/json or text/event-stream; accept both",
        ));
    }
    check_protocol(headers)?;
    Ok((caller, accepts))
}

/// The most of a refused request's body that is read (and dropped) so its HTTP/1.1
/// connection can serve the client's next request.
const DRAIN_BYTES: usize = 64 * 1024;
/// How long reading a refused request's body may take.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// `response`, a refusal sent before the request's `body` was read. Over HTTP/1.x the
/// connection can only serve another request once the body is off it: a small body that
/// arrives quickly (at most [`DRAIN_BYTES`] within [`DRAIN_TIME`], as every real first
/// request is: an OAuth client's unauthenticated `initialize`, say) is read and dropped,
/// so the client's next request (with its token) goes on the same connection; any other
/// gets `Connection: close`, so the client opens a new connection instead of sending a
/// request on one the server is about to drop. HTTP/2 resets the one stream itself.
async fn refused_unread(
    mut response: Response,
    body: axum::body::Body,
    version: axum::http::Version,
) -> Response {
    if version > axum::http::Version::HTTP_11 {
        return response;
    }
    let drained = tokio::time::timeout(
        DRAIN_TIME,
        http_body_util::Limited::new(body, DRAIN_BYTES).collect(),
    )
    .await;
    if !matches!(drained, Ok(Ok(_))) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

pub(super) async fn post_batch(
    app: &App,
    conn: &HttpConnection,
    session: &Session,
    members: Vec<Result<Incoming, RpcError>>,
    quota: Option<&crate::policy::quota::PrincipalQuota>,
) -> Response {
    enum Answer {
        Ready(Message),
        Running(tokio::task::JoinHandle<Option<Message>>),
    }
    let mut answers = Vec::with_capacity(members.len());
    // Dropped with this future (the client gone): the batch's calls stop.
    let mut guards = Vec::new();
    for member in members {
        // Each call of a batch counts against a shared quota as a call alone does.
        if let (Some(quota), Ok(Incoming::Request { id, method, .. })) = (quota, &member) {
            if method == "tools/call" {
                if let Err(refusal) = quota.count_shared_call().await {
                    debug!(target: LOG_TARGET, peer = %conn.peer, "refused a batched call by its shared quota: {refusal}");
                    answers.push(Answer::Ready(
                        session.error_message(&shared_refusal_error(id.clone(), &refusal)),
                    ));
                    continue;
                }
            }
        }
        match session.receive(member) {
            Step::Nothing => {}
            Step::Reply(reply) => answers.push(Answer::Ready(reply)),
            Step::Listen(listen) => {
                let err = RpcError::new(
                    listen.id().clone(),
                    INVALID_REQUEST,
                    "Invalid Request: subscriptions/listen cannot be part of a batch; send it alone, accepting text/event-stream".to_owned(),
                );
                answers.push(Answer::Ready(session.error_message(&err)));
            }
            Step::Call(call) => {
                let busy = |message: String| {
                    Answer::Ready(Message::error(&RpcError::new(
                        call.id().clone(),
                        SERVER_ERROR,
                        format!("Service Unavailable: {message}"),
                    )))
                };
                let Ok(permit) = conn.place() else {
                    answers.push(busy(format!("{} tool calls are running on this connection, the most allowed; retry when one ends", app.per_connection)));
                    continue;
                };
                let slot = match app.limiter.try_acquire(call.held_bytes()) {
                    Ok(slot) => slot,
                    Err(err) => {
                        answers.push(busy(err.to_string()));
                        continue;
                    }
                };
                guards.push(call.cancellation().drop_guard());
                answers.push(Answer::Running(tokio::spawn(Box::pin(async move {
                    let _permit = permit;
                    call.run(&slot, Notifier::none()).await
                }))));
            }
        }
    }
    let mut gathered = Vec::with_capacity(answers.len());
    for answer in answers {
        match answer {
            Answer::Ready(reply) => gathered.push(reply),
            Answer::Running(task) => match task.await {
                Ok(Some(reply)) => gathered.push(reply),
                Ok(None) => {}
                Err(err) => {
                    warn!(target: LOG_TARGET, "a tool call task failed outside the registry: {err}");
                }
            },
        }
    }
    for guard in guards {
        drop(guard.disarm());
    }
    match Message::batch(gathered) {
        Some(reply) => json(StatusCode::OK, reply.to_bytes()),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

pub(super) async fn get_mcp(State(app): State<Arc<App>>, mut request: Request) -> Response {
    let conn = HttpConnection::of(request.extensions_mut());
    let streams = |headers: &HeaderMap| {
        if !accept(headers).sse {
            return Err(reject(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: GET opens an event stream; send Accept: text/event-stream",
            ));
        }
        check_protocol(headers)
    };
    let (session, id) = match app.admit_session(&conn, request, "GET", streams).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    if !app.sessions.set_streaming(&id, true) {
        return refuse(
            StatusCode::CONFLICT,
            "Conflict: this session already has its GET event stream open; use that one",
        );
    }
    let (sender, mut messages) = mpsc::channel(STREAM_QUEUE);
    session.set_notifier(Notifier::new(Arc::new(ChannelOutlet {
        sender,
        lossy: true,
    })));
    let (frames, receiver) = mpsc::channel::<Bytes>(STREAM_QUEUE);
    let stopping = app.stopping.clone();
    let app = Arc::clone(&app);
    debug!(target: LOG_TARGET, session_id = %id, "session event stream opened");
    // Taken now, as the stream opens: a change made before the tasks first run is announced.
    let changes = session.tool_changes();
    tokio::spawn(async move {
        // While the stream is open, a change of the tools is announced on it.
        let announcer = tokio::spawn({
            let session = session.clone();
            async move { session.announce_changes(changes).await }
        });
        let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
        keep_alive.tick().await;
        loop {
            tokio::select! {
                Some(message) = messages.recv() => {
                    if frames.send(event(&message)).await.is_err() { break }
                }
                _ = keep_alive.tick() => {
                    if frames.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() { break }
                }
                () = frames.closed() => break,
                () = stopping.cancelled() => break,
                () = session_closed(&session) => break,
            }
        }
        announcer.abort();
        session.set_notifier(Notifier::none());
        app.sessions.set_streaming(&id, false);
        debug!(target: LOG_TARGET, session_id = %id, "session event stream closed");
    });
    sse_response(receiver)
}

pub(super) async fn session_closed(session: &Session) {
    session.closed().await;
}

pub(super) async fn delete_mcp(State(app): State<Arc<App>>, mut request: Request) -> Response {
    let conn = HttpConnection::of(request.extensions_mut());
    match app
        .admit_session(&conn, request, "DELETE", |_| Ok(()))
        .await
    {
        Ok((_, id)) => {
            app.sessions.terminate(&id);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(response) => response,
    }
}

//! A catalog request (`prompts/get`, `resources/read` of a source, `completion/complete`,
//! a page of a list) run in a call's slot: bounded by the call timeout, cancelled with
//! its request, answered in the request's era's shape.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use toolhost::catalog::{PromptSource, ResourceSource};
use toolhost::registry::CallContext;

use super::{Message, Registration, Session, LOG_TARGET};
use crate::jsonrpc::{RequestId, RpcError, INVALID_PARAMS};
use crate::limits::MAX_SOURCE_CURSOR_BYTES;
use crate::prompts::{self, CompleteRequest, GetRequest};
use crate::protocol::{self, RequestMeta};
use crate::resources::catalog::{
    cut_page, read_result, source_error, SourcePosition, INTERNAL_ERROR,
};
use crate::resources::{add_cache_hints, shown, ResourceRequest};

pub(super) fn invalid(id: &RequestId, message: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        id.clone(),
        INVALID_PARAMS,
        format!("Invalid params: {message}"),
    )
}

pub(super) fn internal(id: &RequestId, message: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        id.clone(),
        INTERNAL_ERROR,
        format!("Internal error: {message}"),
    )
}

/// A catalog request to run in a call's slot.
pub(super) enum CatalogWork {
    /// `prompts/get`.
    Get(GetRequest, Arc<dyn PromptSource>),
    /// `completion/complete` of a prompt's argument.
    Complete(CompleteRequest, Arc<dyn PromptSource>),
    /// `resources/list` across the files and the sources.
    List(ListFrom),
    /// `resources/read` of a source's resource.
    Read {
        uri: String,
        namespace: String,
        source: Arc<dyn ResourceSource>,
    },
}

/// Where a `resources/list` page starts.
#[derive(Debug)]
pub(super) enum ListFrom {
    /// Among the files (their own request).
    Files(ResourceRequest),
    /// At the first source, if any (no root).
    FirstSource,
    /// Among a source's resources.
    Source(SourcePosition),
}

impl std::fmt::Debug for CatalogWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Get(request, _) => f.debug_tuple("Get").field(request).finish(),
            Self::Complete(request, _) => f.debug_tuple("Complete").field(request).finish(),
            Self::List(from) => f.debug_tuple("List").field(from).finish(),
            Self::Read { uri, .. } => f.debug_struct("Read").field("uri", uri).finish(),
        }
    }
}

impl CatalogWork {
    /// The method it answers.
    pub(super) fn method(&self) -> &'static str {
        match self {
            Self::Get(..) => "prompts/get",
            Self::Complete(..) => "completion/complete",
            Self::List(..) => "resources/list",
            Self::Read { .. } => "resources/read",
        }
    }

    /// The bytes it holds while it waits.
    pub(super) fn held_bytes(&self) -> usize {
        let map = |m: &std::collections::BTreeMap<String, String>| {
            m.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
        };
        match self {
            Self::Get(request, _) => request.name.len() + map(&request.arguments),
            Self::Complete(request, _) => {
                request.name.len()
                    + request.argument.len()
                    + request.value.len()
                    + map(&request.context)
            }
            Self::List(ListFrom::Files(request)) => request.held_bytes(),
            Self::List(ListFrom::FirstSource) => 0,
            Self::List(ListFrom::Source(position)) => {
                position.namespace.len() + position.cursor.as_ref().map_or(0, String::len)
            }
            Self::Read { uri, namespace, .. } => uri.len() + namespace.len(),
        }
    }
}

/// `future` within `timeout`, unless `cancelled` first (`None`); on a time-out `ctx_token`
/// (the source's own) is cancelled and the answer is `Err(timeout)`.
async fn bounded<T>(
    future: impl Future<Output = T>,
    cancelled: &CancellationToken,
    ctx_token: &CancellationToken,
    timeout: Duration,
) -> Option<Result<T, Duration>> {
    tokio::select! {
        out = tokio::time::timeout(timeout, future) => Some(out.map_err(|_| {
            ctx_token.cancel();
            timeout
        })),
        () = cancelled.cancelled() => None,
    }
}

fn timed_out(id: &RequestId, what: &str, timeout: Duration) -> RpcError {
    internal(
        id,
        format!(
            "{what} did not answer within {} s (the call timeout); try again later",
            timeout.as_secs_f64()
        ),
    )
}

/// Runs a catalog request: its response, or `None` when the client cancelled it (or the
/// session ended) first, which also cancels the source's call.
pub(super) async fn run_catalog(
    registration: Registration,
    id: &RequestId,
    meta: &RequestMeta,
    work: CatalogWork,
) -> Option<Message> {
    let session = registration.session.clone();
    let token = registration.token.clone();
    let registry = Arc::clone(session.registry());
    let timeout = registry.call_timeout();
    let env = session.0.env.next_turn();
    let ctx_token = token.child_token();
    let ctx = CallContext::with_timeout(timeout).with_cancellation(ctx_token.clone());
    let method = work.method();
    debug!(target: LOG_TARGET, request = %id, method, "catalog request");
    let outcome: Result<Value, RpcError> = match work {
        CatalogWork::Get(request, source) => {
            let name = request.name.clone();
            let what = format!("prompt \"{name}\"");
            match bounded(
                source.get(ctx, request.name, request.arguments, env),
                &token,
                &ctx_token,
                timeout,
            )
            .await?
            {
                Ok(Ok(result)) => prompts::get_result(&name, &result, meta.revision)
                    .map_err(|message| internal(id, message)),
                Ok(Err(err)) => Err(internal(id, format!("{what} failed: {err}"))),
                Err(timeout) => Err(timed_out(id, &what, timeout)),
            }
        }
        CatalogWork::Complete(request, source) => {
            let what = format!("completing prompt \"{}\"", request.name);
            match bounded(
                source.complete(
                    ctx,
                    request.name,
                    request.argument,
                    request.value,
                    request.context,
                    env,
                ),
                &token,
                &ctx_token,
                timeout,
            )
            .await?
            {
                Ok(Ok(values)) => Ok(prompts::complete_result(values)),
                Ok(Err(err)) => Err(internal(id, format!("{what} failed: {err}"))),
                Err(timeout) => Err(timed_out(id, &what, timeout)),
            }
        }
        CatalogWork::Read {
            uri,
            namespace,
            source,
        } => {
            let what = format!("the source of \"{}\"", shown(&uri));
            match bounded(
                source.read(ctx, uri.clone(), env),
                &token,
                &ctx_token,
                timeout,
            )
            .await?
            {
                Ok(Ok(contents)) => read_result(id, &uri, &namespace, &contents),
                Ok(Err(err)) => Err(source_error(id, Some(&uri), err)),
                Err(timeout) => Err(timed_out(id, &what, timeout)),
            }
        }
        CatalogWork::List(from) => {
            let position = match from {
                ListFrom::Files(request) => {
                    let files = session.0.catalog.resources.clone()?;
                    let listed = tokio::select! {
                        listed = files.run(id, request) => listed,
                        () = token.cancelled() => return None,
                    };
                    drop(registration);
                    return Some(finish(
                        &session,
                        id,
                        meta,
                        method,
                        listed.map(|mut result| {
                            if result.get("nextCursor").is_none() {
                                if let Some((namespace, _)) =
                                    registry.catalog().resource_sources().into_iter().next()
                                {
                                    result["nextCursor"] =
                                        json!(SourcePosition::start(namespace).encode());
                                }
                            }
                            result
                        }),
                    ));
                }
                ListFrom::FirstSource => {
                    match registry.catalog().resource_sources().into_iter().next() {
                        Some((namespace, _)) => SourcePosition::start(namespace),
                        None => {
                            drop(registration);
                            return Some(finish(
                                &session,
                                id,
                                meta,
                                method,
                                Ok(json!({ "resources": [] })),
                            ));
                        }
                    }
                }
                ListFrom::Source(position) => position,
            };
            let sources = registry.catalog().resource_sources();
            match sources.iter().position(|(namespace, _)| *namespace == position.namespace) {
                None => Err(invalid(
                    id,
                    format!(
                        "the resources changed since this cursor was given (no source owns {} now); list again from the start without a cursor",
                        shown(&position.namespace)
                    ),
                )),
                Some(at) => {
                    let source = Arc::clone(&sources[at].1);
                    let what = format!("the resource source of {}", position.namespace);
                    match bounded(
                        source.list(ctx, position.cursor.clone(), env),
                        &token,
                        &ctx_token,
                        timeout,
                    )
                    .await?
                    {
                        Err(timeout) => Err(timed_out(id, &what, timeout)),
                        Ok(Err(err)) => Err(source_error(id, None, err)),
                        Ok(Ok(page)) => {
                            let page_size = session.0.catalog.page_size;
                            let cut = cut_page(&position, &page.resources, page_size);
                            if cut.outside > 0 {
                                warn!(target: LOG_TARGET, namespace = %position.namespace, left_out = cut.outside, "a resource source listed entries outside its namespace (or too large); they were left out");
                            }
                            match &page.next_cursor {
                                Some(next) if next.len() > MAX_SOURCE_CURSOR_BYTES => Err(internal(
                                    id,
                                    format!(
                                        "{what} gave a cursor of {} bytes, over the {MAX_SOURCE_CURSOR_BYTES}-byte limit",
                                        next.len()
                                    ),
                                )),
                                _ => {
                                    let next = cut
                                        .rest
                                        .or_else(|| {
                                            page.next_cursor.clone().map(|cursor| SourcePosition {
                                                namespace: position.namespace.clone(),
                                                cursor: Some(cursor),
                                                skip: 0,
                                            })
                                        })
                                        .or_else(|| {
                                            sources.get(at + 1).map(|(namespace, _)| {
                                                SourcePosition::start(namespace.clone())
                                            })
                                        });
                                    let mut result = json!({ "resources": cut.resources });
                                    if let Some(next) = next {
                                        result["nextCursor"] = json!(next.encode());
                                    }
                                    Ok(result)
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    drop(registration);
    if token.is_cancelled() {
        return None;
    }
    Some(finish(&session, id, meta, method, outcome))
}

/// The response of a catalog or resource request, as the request's era shapes it.
pub(super) fn finish(
    session: &Session,
    id: &RequestId,
    meta: &RequestMeta,
    method: &str,
    outcome: Result<Value, RpcError>,
) -> Message {
    match outcome {
        Ok(mut result) => {
            if meta.modern {
                add_cache_hints(method, &mut result);
            }
            Message::response(
                id,
                Bytes::from(protocol::complete(meta, result).to_string()),
            )
        }
        Err(err) => {
            debug!(target: LOG_TARGET, request = %id, method, code = err.code, "{}", err.message);
            session.error_message(&err)
        }
    }
}
